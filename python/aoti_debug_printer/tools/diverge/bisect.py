"""diverge --bisect: the compiler decision that makes a divergence appear.

Inductor's CompilerBisector counts the applications of each backend stage
(decompositions, joint-graph and post-grad pattern passes, lowerings) and
disables those past a number; it bisects that number against an oracle.
Its own users' oracle compares final outputs. Ours is diverge's verdict on
the node that diverged: the package is compiled at level 1 under the
bisector's state, run once, and judged against the float64 truth; the
compile is good where that node's value is within its bar. The oracle is
keyed on the exported program's node, not on kernel names: falling back to
ATen renames kernels. Where the node holds no judged value in a compile,
any divergence counts.

The stages are driven here one at a time (the bisector's own walk tries
whole backends first, and AOTInductor compiles only through Inductor):
each is first disabled as a whole, and the first whose disabling removes
the divergence is bisected by the bisector. The config's custom passes,
which torch's bisector does not count, are disabled by name
(`disabled_passes`) instead, and the bisector's config changes are tried
last. What no stage removes, on a node a user's op computes, is not the
compiler's. Nor is NaN that eager makes too (the trap's finding where
nothing diverges): falling back to ATen would make it again, so no stage
is tried and the node's op is named after the one compile."""

from __future__ import annotations

import contextlib
import inspect
import logging
import re
import tempfile
import time
from pathlib import Path

from ...source_lines import node_sources
from ..dumps import Record, load_dump
from . import same_code
from .evaluate import ProgramGraph, region_nodes
from .format import format_bisection, undecided
from .match import match_dump
from .program import program_and_inputs
from .result import Bisection, Cause, Divergence, Outcome, Progress, Stage
from .run import compile_at_level_1, run_into, with_report, with_repro

log = logging.getLogger(__name__)


# The stages the bisector counts, in the order tried: (stage, the
# bisector's backend, its subsystem).
_COUNTED = (
    (Stage.JOINT_GRAPH_PASSES, "inductor", "joint_graph_passes"),
    (Stage.POST_GRAD_PASSES, "inductor", "post_grad_passes"),
)
# The config's custom passes, by the names their GraphTransformObserver
# gives them (what `disabled_passes` matches).
CUSTOM_PASSES = (
    "joint_custom_pre_pass",
    "joint_custom_post_pass",
    "post_grad_custom_pre_pass",
    "post_grad_custom_post_pass",
)


def bisect_divergence(
    program,
    inputs=None,
    imports: tuple[str, ...] = (),
    progress: bool = False,
    repro=None,
    report=None,
) -> Bisection:
    """Compiles `program` as first_divergence_from_eager does; where a node
    diverges, finds the compiler decision that makes it diverge (see the
    module's doc). `repro`: a new directory for a one-kernel repro of the
    first divergence, from the default compile (the bad one), whose line
    says so and names the cause. `report`: an HTML file for the report of
    the default compile's dump, with this verdict and its cause."""
    steps = Progress(progress)
    program, args, kwargs = program_and_inputs(program, inputs, imports)
    start = time.monotonic()
    with tempfile.TemporaryDirectory(prefix="aoti-debug-bisect-") as tmp:
        oracle = _Oracle(program, args, kwargs, Path(tmp), steps)
        first = oracle.judge("the default compile")
        result = Bisection(first)
        written = load_dump(oracle.last_dump).written_values()
        if first.first is None:
            result.non_finite = next((r for r in written if r.node and _nan_in(r)), None)
        watched = first.first.record if first.first is not None else result.non_finite
        if watched is not None:
            result.node = oracle.node = watched.node
            frames = node_sources(program, {watched.node}).get(watched.node)
            result.source = frames[0].text if frames else ""
            oracle.non_finite = first.first is None
            held = {r.node for r in written if r.node and r is not watched}
            region, _ = region_nodes(ProgramGraph(program), watched.node, held)
            origin = _nan_origin(oracle, region) if oracle.non_finite else None
            if origin is not None:
                result.cause = _users_own(oracle, program, eager_too=True, node_name=origin)
            else:
                with _bisecting(Path(tmp) / "bisector"):
                    result.cause = _find_cause(oracle, program, region)
        result.suspects = [(what, _suspect_site(what), why) for what, why in oracle.suspects]
        if repro is not None and first.first is not None:
            with_repro(first, oracle.first_dump, oracle.first_package, repro, imports, _bad(result))
        result.compiles = oracle.compiles
        result.seconds = time.monotonic() - start
        result.steps = oracle.lines
        if report is not None:
            cause = (
                f"cause: {result.cause.text}"
                if result.cause is not None
                else undecided(result)
                if result.suspects
                else ""
            )
            with_report(report, oracle.first_dump, first, format_bisection(result), cause)
    return result


def _bad(b: Bisection) -> str:
    """What a repro of the default compile says of it."""
    if b.cause is None and b.suspects:
        return f"; from the default compile, {undecided(b)}"
    if b.cause is None:
        return "; from the default compile, in which no compiler decision was found behind it"
    without = f"; without it ({b.cause.good})" if b.cause.good else ""
    return (
        f"; from the bad compile (the default one), whose cause: {b.cause.text}{without} "
        f"node {b.node} is within its bar"
    )


def _nan_in(r: Record) -> bool:
    """NaN in a value a kernel wrote. Not Inf: a model's own masks write
    -inf (attention's), and a correct model must bisect to nothing."""
    return bool(r.stats and r.stats.nan)


class _Oracle:
    """One compile, run and verdict per call: True where the watched node
    no longer diverges (the bisector's "good")."""

    def __init__(self, program, args, kwargs, tmp: Path, steps: Progress) -> None:
        self.program, self.args, self.kwargs = program, args, kwargs
        self.tmp, self.steps = tmp, steps
        self.node = ""
        # Watch the node for NaN, not for its verdict against eager.
        self.non_finite = False
        self.last_dump: Path | None = None
        # The default compile (the first): its package and dump, for a repro.
        self.first_package: str | None = None
        self.first_dump: Path | None = None
        self.compiles = 0
        self.config: dict = {}
        self.what = ""
        self.lines: list[str] = []
        # What a failed compile left undecided: (the decision, why), in order.
        self.suspects: list[tuple[str, str]] = []
        self.failures = 0
        self.why_failed = ""
        # The code each compile made (a digest), with its number, dump and
        # verdict: a decision that changes nothing in a program makes the
        # same code, and most of a bisection's steps are such.
        self.made: dict[str, tuple[int, Path, Divergence]] = {}
        self.same_as: int | None = None

    def judge(self, what: str) -> Divergence:
        import torch

        self.compiles += 1
        n = self.compiles
        self.same_as = None
        self.steps.phase(f"compile {n}: {what}")
        try:
            with (
                torch._inductor.config.patch(self.config),
                same_code.seen_before(self.made) as compiled,
            ):
                package = compile_at_level_1(self.program, self.tmp / f"{n}.pt2")
        except Exception as e:
            earlier = same_code.made_before(e)
            if earlier is None:
                raise
            # The code an earlier compile made, to the byte, with the same
            # constants: its run and verdict are this one's; no g++, no run.
            self.same_as, self.last_dump, judged = self.made[earlier]
            return judged
        self.last_dump = run_into(package, self.args, self.kwargs, self.tmp / f"dump{n}")
        if n == 1:
            self.first_package, self.first_dump = package, self.last_dump
        judged = (
            Divergence([])  # the oracle needs no verdict against eager
            if self.non_finite
            else match_dump(self.last_dump, self.program, self.args, self.kwargs)
        )
        if compiled.digest is not None:
            self.made[compiled.digest] = (n, self.last_dump, judged)
        return judged

    def __call__(self) -> bool:
        """The bisector's oracle: good or not. A failed compile reads as not
        good here; the callers that can tell use verdict()."""
        return self.verdict() is True

    def suspect(self, decision: str) -> None:
        """`decision` stays a suspect: the compile without it failed."""
        self.suspects.append((decision, self.why_failed))

    def verdict(self) -> bool | None:
        """True: good; False: the watched node still diverges; None: the
        compile (or its run) failed, which decides nothing."""
        try:
            d = self.judge(self.what)
        except Exception as e:  # noqa: BLE001 - a compile that fails decides nothing
            from ..dumps import first_line

            self.failures += 1
            self.why_failed = f"compile {self.compiles} without it failed: {first_line(e)}"
            self.lines.append(f"compile {self.compiles}: {self.what}: failed ({first_line(e)})")
            return None
        if self.non_finite:
            written = load_dump(self.last_dump).written_values()
            mine = [r for r in written if r.node == self.node]
            bad = any(_nan_in(r) for r in (mine or written))
        else:
            judged = next((m for m in d.matches if m.node == self.node), None)
            bad = judged.diverged if judged is not None else d.first is not None
        said = ("makes NaN" if self.non_finite else "diverges") if bad else "good"
        if self.same_as is not None:
            said += f" (the code of compile {self.same_as}, not built or run again)"
        self.lines.append(f"compile {self.compiles}: {self.what}: {said}")
        return not bad


@contextlib.contextmanager
def _bisecting(state_dir: Path):
    """CompilerBisector enabled, its state in `state_dir`, its prints (it
    reports on stdout) sent to our log; left as found."""
    from torch._inductor.compiler_bisector import CompilerBisector as B

    was = B.bisection_enabled, B.in_process_cache
    B.bisection_enabled, B.in_process_cache = True, str(state_dir)
    try:
        with contextlib.redirect_stdout(_LogWriter()):
            yield
    finally:
        B.bisection_enabled, B.in_process_cache = was


class _LogWriter:
    def write(self, text: str) -> int:
        for line in text.splitlines():
            if line.strip():
                log.debug("bisector: %s", line)
        return len(text)

    def flush(self) -> None:
        pass


def _find_cause(oracle: _Oracle, program, region: list[str]) -> Cause | None:
    import torch

    if cause := _bisect_decompositions(oracle, program, region):
        return cause
    for stage, backend, subsystem in _COUNTED:
        if cause := _bisect_counted(oracle, stage, backend, subsystem):
            return cause
    if cause := _custom_pass(oracle):
        return cause
    if cause := _bisect_lowerings(oracle, program, region):
        return cause
    from torch._inductor.compiler_bisector import BACKENDS, ConfigChange

    for change in BACKENDS["inductor"]:
        if not isinstance(change, ConfigChange):
            continue
        if getattr(torch._inductor.config, change.config_field) == change.config_value:
            continue
        setting = f"torch._inductor.config.{change.config_field} = {change.config_value!r}"
        oracle.config, oracle.what = {change.config_field: change.config_value}, setting
        try:
            if said := oracle.verdict():
                return Cause(
                    stage=Stage.CONFIG,
                    decision=f"{change.config_field}={getattr(torch._inductor.config, change.config_field)!r}",
                    good=setting,
                )
            if said is None:
                oracle.suspect(f"the config {change.config_field}")
        finally:
            oracle.config = {}
    if oracle.suspects:  # a compile that failed decided nothing: no verdict
        return None
    return _users_own(oracle, program)


def _bisect_counted(oracle: _Oracle, stage: Stage, backend: str, subsystem: str):
    """Disables the stage as a whole; where that removes the divergence,
    bisects the application that brings it back."""
    from torch._inductor.compiler_bisector import CompilerBisector as B

    sub = B.get_subsystem_object(backend, subsystem)
    B.update_bisect_status(backend, subsystem)
    try:
        B.update_run_state(backend, sub, "test_disable")
        _reset_counters()
        what = stage.value.replace("_", " ")
        oracle.what = f"without {what}"
        said = oracle.verdict()
        if said is None:
            oracle.suspect(f"the {what}")
        if not said:
            return None
        B.update_run_state(backend, sub, "find_max_bounds")
        oracle.what = f"bisecting {what}"
        failures = oracle.failures
        found = B.process_subsystem(backend, sub, oracle, cli_interface=False)
        if oracle.failures != failures:  # a failed compile was read as bad
            oracle.suspect(f"the {what}")
            return None
        if not found:
            return None
        low, _ = B.get_bisect_range(backend, subsystem)
        info = _debug_info(backend, subsystem, low)
    finally:
        # No stage active: the compiles that follow disable nothing.
        B.update_bisect_status("", "")
    env = f"TORCH_BISECT_BACKEND={backend} TORCH_BISECT_SUBSYSTEM={subsystem} TORCH_BISECT_MAX="
    where = ""
    if info in CUSTOM_PASSES:  # the config's own pass, which this torch's bisector counts
        import torch

        where = _site(getattr(torch._inductor.config, info))
    return Cause(
        stage=stage,
        decision=info or "(name not recorded)",
        where=where,
        application=low,
        good=f"{env}{low - 1}",
        bad=f"{env}{low}",
    )


# The bisector's counters and what it noted of an application moved from
# module functions (torch 2.11: reset_counters(), call_counter_debug_info)
# to CompilerBisector's class methods (2.13).
def _reset_counters() -> None:
    from torch._inductor import compiler_bisector as cb

    (getattr(cb.CompilerBisector, "reset_counters", None) or cb.reset_counters)()


def _debug_info(backend: str, subsystem: str, application: int) -> str:
    from torch._inductor import compiler_bisector as cb

    get = getattr(cb.CompilerBisector, "get_call_counter_debug_info", None)
    if get is not None:
        return get(backend, subsystem, application) or ""
    return getattr(cb, "call_counter_debug_info", {}).get(application, "")


def _bisect_lowerings(oracle: _Oracle, program, region: list[str]) -> Cause | None:
    """The node whose lowering, falling back to ATen, removes the
    divergence, among those that compute the diverging node from values the
    dump holds (its kernel's nodes)."""
    found = _one_of(oracle, region, "lowerings", "falling back to ATen for")
    return _turned_off_cause(
        Stage.LOWERING, "lowerings", found, lambda n: _lowering_site(program, n)
    )


def _bisect_decompositions(oracle: _Oracle, program, region: list[str]) -> Cause | None:
    """The op whose decomposition, left out, removes the divergence, among
    the ops of the nodes that compute the diverging node."""
    nodes = {n.name: n for n in program.graph.nodes}
    ops = list(dict.fromkeys(str(nodes[n].target) for n in region if n in nodes))
    found = _one_of(oracle, ops, "decomposition", "without the decomposition of")
    return _turned_off_cause(Stage.DECOMPOSITION, "decomposition", found, _decomposition_site)


def _turned_off_cause(stage: Stage, subsystem: str, found: list[str] | None, site) -> Cause | None:
    """The cause _one_of found through `subsystem`'s hook: where a single
    decision, `site` says where it is defined."""
    if found is None:
        return None
    return Cause(
        stage=stage,
        decision=", ".join(found),
        where=site(found[0]) if len(found) == 1 else "",
        good=_compile_within(f"turned_off({subsystem!r}, {found!r})", subsystem),
        bad="the default compile",
    )


def _one_of(oracle: _Oracle, items: list[str], subsystem: str, doing: str):
    """The fewest of `items` (one, where one does) whose decisions, turned
    off through the bisector's hook for `subsystem`, remove the divergence:
    all first, then halves. None where turning off all does not. A set
    whose compile fails decides nothing: it is split until the one
    decision whose compile fails, which stays a suspect (oracle.suspects)."""
    if not items:
        return None

    def good_without(chosen: list[str]) -> bool | None:
        more = f" and {len(chosen) - 4} more" if len(chosen) > 4 else ""
        oracle.what = f"{doing} {', '.join(chosen[:4])}{more}"
        with turned_off(subsystem, chosen):
            return oracle.verdict()

    said = good_without(items)
    if said is None:
        if len(items) == 1:
            oracle.suspect(f"{subsystem}: {items[0]}")
            return None
        half = len(items) // 2
        before = len(oracle.suspects)
        found = _one_of(oracle, items[:half], subsystem, doing) or _one_of(
            oracle, items[half:], subsystem, doing
        )
        if found is None and len(oracle.suspects) == before:
            # Each half compiles and still diverges: it may take decisions of
            # both, which only the set's failed compile could have shown.
            oracle.suspect(f"{subsystem}: {', '.join(items)}")
        return found
    if not said:
        return None
    # Turning off `known` is known to remove it. Where the first half does
    # not, the second is taken untried (one compile fewer a step, for the
    # one decision a divergence usually has) and tried at the end; where the
    # first half's compile fails, the second is tried at once.
    known = candidates = items
    while len(candidates) > 1:
        half = len(candidates) // 2
        said = good_without(candidates[:half])
        if said:
            known = candidates = candidates[:half]
        elif said is None:
            if not good_without(candidates[half:]):
                return known
            known = candidates = candidates[half:]
        else:
            candidates = candidates[half:]
    if candidates is not known and not good_without(candidates):
        return known  # it takes decisions from both halves together
    return candidates


def _compile_within(context: str, subsystem: str = "") -> str:
    how = (
        "through the bisector's hook, a custom op's out of the decomposition table"
        if subsystem == "decomposition"
        else "through the bisector's hook"
    )
    return (
        f"compile within aoti_debug_printer.tools.diverge.bisect.{context} "
        f"(the one decision turned off {how})"
    )


@contextlib.contextmanager
def turned_off(subsystem: str, names):
    """The bisector's hook for `subsystem` (lowerings: a node's lowering
    falls back to ATen; decomposition: an op's decomposition is left out)
    says "disable" for the decisions whose debug info, through `key`, is
    one of `names`, and for nothing else. The bisector's own count disables
    every application past a number, early ones too: where one of those
    cannot be turned off (AOTInductor's proxy executor fails on some ATen
    fallbacks on CPU; native_layer_norm has a fallback and a decomposition),
    its compiles fail for a reason that is not the divergence."""
    from unittest import mock

    from torch._inductor.compiler_bisector import CompilerBisector as B

    names = frozenset(names)
    key = _op_of_repr if subsystem == "decomposition" else str

    def disable_subsystem(cls, backend, sub, debug_info=None) -> bool:
        return sub == subsystem and debug_info is not None and key(debug_info()) in names

    with contextlib.ExitStack() as stack:
        if subsystem == "decomposition":
            stack.enter_context(_custom_decompositions_out(names))
        stack.enter_context(
            mock.patch.object(B, "disable_subsystem", classmethod(disable_subsystem))
        )
        yield


@contextlib.contextmanager
def _custom_decompositions_out(names):
    """The decompositions of the custom ops among `names` (qualified
    names, aten.gelu.default style), out of Inductor's decomposition tables
    for the compile, then put back. The bisector's hook (proxy_tensor's
    maybe_handle_decomp) leaves the op in the graph but its decomposition
    in the table, and a custom op has no lowering: Inductor's implicit
    fallback (graph.py, call_function) then fails make_fallback's check
    (lowering.py) "both a fallback and a decomp for same op". Out of the
    table, the op is traced as it is and falls back to its own kernel."""
    import torch
    from torch._inductor import decomposition as d

    ops = [op for name in names if (op := _resolve_op(name)) is not None]
    ops = [op for op in ops if not torch._library.utils.is_builtin(op)]
    # select_decomp_table: `decompositions`, or a cached copy with more.
    tables = [d.decompositions, d.fast_random_decomps()]
    taken = [(t, op, t.pop(op)) for t in tables for op in ops if op in t]
    try:
        yield
    finally:
        for table, op, fn in taken:
            table[op] = fn


def _custom_pass(oracle: _Oracle) -> Cause | None:
    """The config's custom passes that are set, disabled together, then one
    by one."""
    import torch

    config = torch._inductor.config
    set_ = [name for name in CUSTOM_PASSES if getattr(config, name, None) is not None]
    if not set_:
        return None
    candidates = [set_] + ([[name] for name in set_] if len(set_) > 1 else [])
    found = None
    for names in candidates:
        disabled = ",".join(names)
        oracle.config, oracle.what = {"disabled_passes": disabled}, f"without {disabled}"
        try:
            said = oracle.verdict()
            if said is None:
                oracle.suspect(f"the custom pass(es) {disabled}")
            if said:
                found = names
                if len(names) == 1:
                    break
            elif found is None:
                return None
        finally:
            oracle.config = {}
    if found is None or len(found) != 1:
        return None
    (name,) = found
    return Cause(
        stage=Stage.CUSTOM_PASS,
        decision=f"torch._inductor.config.{name}",
        where=_site(getattr(config, name)),
        good=f"TORCHINDUCTOR_DISABLED_PASSES={name}",
        bad="the default compile",
    )


def _nan_origin(oracle: _Oracle, region: list[str]) -> str | None:
    """Where eager makes the watched node's NaN too: of the nodes that
    compute it within its kernel, the first whose value eager makes NaN from
    values without NaN (where the NaN is made, not where it is carried; the
    watched node where none is). None where eager's value of the watched
    node holds no NaN (a node diverge did not judge): the compile made it,
    and the stages are bisected."""
    import torch

    from .evaluate import eager_values

    nodes = {n.name: n for n in oracle.program.graph.nodes}
    read = {a.name for name in region for a in nodes[name].all_input_nodes}
    values = eager_values(
        oracle.program, oracle.args, oracle.kwargs, keep={oracle.node, *region, *read}
    )

    def nan(v) -> bool:
        return isinstance(v, torch.Tensor) and v.is_floating_point() and bool(v.isnan().any())

    if not nan(values.get(oracle.node)):
        return None
    for name in region:
        if nan(values.get(name)) and not any(
            nan(values.get(a.name)) for a in nodes[name].all_input_nodes
        ):
            return name
    return oracle.node


def _users_own(
    oracle: _Oracle, program, eager_too: bool = False, node_name: str = ""
) -> Cause | None:
    """Not the compiler's: where no compiler stage removes the divergence
    and the node is computed by the user's own op (a custom op, a user
    Triton kernel); or, `eager_too`, where eager makes the same NaN, any
    node (a builtin op: the model's own arithmetic on these inputs).
    `node_name`: the node to name, the watched one by default."""
    import torch

    node_name = node_name or oracle.node
    node = next((n for n in program.graph.nodes if n.name == node_name), None)
    if node is None or node.op != "call_function":
        return None
    why = (
        "as eager does on these inputs, so no compiler decision is behind it"
        if eager_too
        else "with every decomposition, pass and lowering the bisector can disable disabled"
    )
    target = node.target
    if isinstance(target, torch._ops.OpOverload) and not torch._library.utils.is_builtin(target):
        return Cause(
            stage=Stage.NOT_THE_COMPILER,
            decision=f"the custom op {target.name()} {_wrongly(oracle)} node {node.name} "
            f"{why}; look at its kernel",
            where=_custom_op_site(target.name()),
        )
    if "triton_kernel_wrapper" in getattr(target, "__name__", str(target)):
        kernel = node.kwargs.get("kernel_idx")
        return Cause(
            stage=Stage.NOT_THE_COMPILER,
            decision=f"the user Triton kernel {kernel} {_wrongly(oracle)} node {node.name} {why}",
        )
    if eager_too:
        return Cause(
            stage=Stage.NOT_THE_COMPILER,
            decision=f"{_op_of_repr(str(target))} {_wrongly(oracle)} node {node.name} {why}; "
            "look at the values it reads",
        )
    return None


def _custom_op_site(qualname: str) -> str:
    """file:line of a torch.library.custom_op's function; "" for ops defined
    otherwise (torch.library.Library, C++)."""
    try:
        from torch._library.custom_ops import _maybe_get_opdef
    except ImportError:  # a torch that keeps its custom op definitions elsewhere
        return ""
    opdef = _maybe_get_opdef(qualname)
    fn = getattr(opdef, "_init_fn", None)
    return _site(fn) if fn is not None else ""


def _wrongly(oracle: _Oracle) -> str:
    return "makes NaN in" if oracle.non_finite else "computes wrongly"


_OP_REPR = re.compile(r"op='(?P<op>[\w.]+)', overload='(?P<overload>\w+)'")


def _op_of_repr(text: str) -> str:
    """aten.gelu.default from an OpOverload's repr (or itself, where it is
    that already)."""
    m = _OP_REPR.search(text)
    return f"{m['op']}.{m['overload']}" if m else text


def _resolve_op(name: str):
    import torch

    ns, _, rest = name.partition(".")
    packet, _, overload = rest.rpartition(".")
    try:
        return getattr(getattr(getattr(torch.ops, ns), packet), overload)
    except AttributeError:
        return None


def _decomposition_site(op_name: str) -> str:
    from torch._inductor.decomposition import select_decomp_table

    op = _resolve_op(op_name) if op_name else None
    fn = select_decomp_table().get(op) if op is not None else None
    return _site(fn) if fn is not None else ""


def _suspect_site(what: str) -> str:
    """file:line of a suspect a failed compile left: a decomposition's."""
    if what.startswith("decomposition: "):
        return _decomposition_site(what.removeprefix("decomposition: "))
    return ""


def _lowering_site(program, node_name: str) -> str:
    from torch._inductor.lowering import lowerings

    node = next((n for n in program.graph.nodes if n.name == node_name), None)
    fn = lowerings.get(node.target) if node is not None else None
    return _site(fn) if fn is not None else ""


def _site(fn) -> str:
    """file:line where a function (or a callable object's class) is defined."""
    target = inspect.unwrap(fn) if callable(fn) else fn
    if not (inspect.isfunction(target) or inspect.ismethod(target) or inspect.isclass(target)):
        target = type(target)
    try:
        file = inspect.getsourcefile(target)
        _, line = inspect.getsourcelines(target)
    except (OSError, TypeError):
        return ""
    return f"{file}:{line}" if file else ""


__all__ = ["Bisection", "Cause", "Outcome", "Stage", "bisect_divergence"]
