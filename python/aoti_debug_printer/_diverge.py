"""The first kernel where an AOT-compiled model differs from eager execution
of the same exported program, judged against a float64 truth.

The compiled side is a level-1 dump. The codegen tags a value a kernel
wrote with the exported program's node it holds only where that is exact
(see _provenance): the kernel stored it, and it is where the node's
decomposition ends. The program is evaluated node by node four times:
the truth (float64) and the benchmark (the program's dtypes, under the
compiled run's numerics settings), each once from the model inputs (the
accumulated error) and once with every node the dump holds replaced by
the compiled value (each kernel's own error, on its real inputs).
_numerics decides, from the two, whether a value is wrong. The first
divergence is the first kernel, in launch order, whose own error is
beyond the bar. What cannot be compared is counted by reason, so the
coverage is stated."""

from __future__ import annotations

import contextlib
import importlib
import logging
import re
import tempfile
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path
from typing import Any

from ._dumps import Dump, Record, first_line, load_dump
from ._numerics import Environment, Verdict, dtype_name, judge, scale_of
from ._records import Phase, Reason

log = logging.getLogger(__name__)


class ProgramError(ValueError):
    """The program or inputs given to diverge cannot be used; the message
    says what to give instead."""


class NotCompared(str, Enum):
    """Why diverge left out a value a kernel wrote that holds a node or has
    a formula. A value with neither is left out by its record's Reason."""

    NO_EAGER_TENSOR = "no_eager_tensor"
    NOT_SAVED = "not_saved"
    SIZE_DIFFERS = "size_differs"
    FORMULA_FAILED = "formula_failed"

    @property
    def text(self) -> str:
        return _NOT_COMPARED_TEXT[self]


_NOT_COMPARED_TEXT = {
    NotCompared.NO_EAGER_TENSOR: "the node has no tensor value in eager",
    NotCompared.NOT_SAVED: "no saved file: its inputs and value were not saved (compile at level 1)",
    NotCompared.SIZE_DIFFERS: "the buffer and the node's (or formula's) value differ in size",
    NotCompared.FORMULA_FAILED: "its formula cannot be evaluated",
}


@dataclass(frozen=True)
class Unmatched:
    """A value a kernel wrote that diverge did not judge: `code` is a
    NotCompared or a Reason value."""

    record: Record
    code: str
    detail: str = ""

    @property
    def text(self) -> str:
        why = NotCompared(self.code) if self.code in _NOT_COMPARED_CODES else Reason(self.code)
        return why.text


_NOT_COMPARED_CODES = frozenset(c.value for c in NotCompared)


def _left_out(r: Record) -> Unmatched:
    """A value that holds no node and has no formula, by its record's reason."""
    reason = r.tensor.reason
    code = reason.value if reason else Reason.NO_GRAPH_NODE.value
    return Unmatched(r, code, r.tensor.why.removeprefix(code).removeprefix(":"))


@dataclass
class Divergence:
    matches: list[Match]
    # Values kernels wrote that could not be held against eager, with why.
    unmatched: list[Unmatched] = field(default_factory=list)
    # The numerics settings of the compiled run the benchmark was made under.
    environment: Environment | None = None
    # The one-kernel repro written of the first divergence (`repro=`).
    repro: Any = None

    @property
    def first(self) -> Match | None:
        """The first kernel, in launch order, whose own error is beyond the bar."""
        return next((m for m in self.matches if m.own.diverged), None)

    @property
    def drift(self) -> Match | None:
        """The first value whose accumulated error is beyond the bar, where
        no kernel's own error is. Not a divergence: every kernel computed
        what its inputs allow in the run's settings; the run amplified their
        noise more than eager."""
        if self.first is not None:
            return None
        return next((m for m in self.matches if m.accumulated.diverged), None)

    def coverage(self) -> tuple[int, int, Counter]:
        """(values kernels wrote, of them compared, the rest by reason code)."""
        reasons = Counter(u.code for u in self.unmatched)
        return len(self.matches) + len(self.unmatched), len(self.matches), reasons


def load_program(program):
    """An ExportedProgram from itself or a torch.export.save file; a
    ProgramError for anything else."""
    import torch

    if not isinstance(program, (str, Path)):
        return program
    path = Path(program)
    if path.is_dir():
        raise ProgramError(
            f"{path} is a directory: give the exported program's file "
            "(torch.export.save), and a dump with --dump"
        )
    if not path.is_file():
        raise ProgramError(f"no such file: {path}")
    if not zipfile.is_zipfile(path):
        raise ProgramError(f"{path} is not an exported program (torch.export.save writes one)")
    with zipfile.ZipFile(path) as z:
        if any("/data/aotinductor/" in n for n in z.namelist()):
            raise ProgramError(
                f"{path} is an AOTInductor package (compiled code, no graph to run eagerly); "
                "give the exported program it was compiled from: "
                "torch.export.save(torch.export.export(model, inputs), 'program.pt2')"
            )
    # A program whose inputs or outputs are a library's pytree types (a
    # transformers ModelOutput) loads only where that library registered
    # them: import the modules the program names first.
    missing = _import_pytree_modules(path)
    # torch logs its reason (and a traceback) before it raises something
    # vaguer; the reason goes into our one line, the traceback nowhere. A
    # program that loads keeps torch's warnings.
    reasons = _Collect()
    export_log = logging.getLogger("torch.export")
    saved = export_log.handlers, export_log.propagate, export_log.level
    export_log.handlers, export_log.propagate = [reasons], False
    export_log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program = torch.export.load(str(path))
    except Exception as e:  # noqa: BLE001 - any failure means: not a program we can load
        # torch's own reason: the one it logged where it raised something
        # vaguer ("check the warnings above", which we kept off the screen).
        why = reasons.first_error() or f"{type(e).__name__}: {first_line(e)}"
        ops = sorted(
            {f"{ns}::{name}" for ns, name in _CUSTOM_OP.findall(why) if ns not in ("aten", "prims")}
        )
        hint = (
            f"; --import the module that registers {', '.join(missing)}"
            if missing
            else f"; --import the module that registers {', '.join(ops)}"
            if ops
            else "; if it calls custom ops, --import the module that registers them"
        )
        raise ProgramError(
            f"{path} could not be loaded as an exported program ({why}){hint}"
        ) from None
    finally:
        export_log.handlers, export_log.propagate = saved[0], saved[1]
        export_log.setLevel(saved[2])
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return program


_CUSTOM_OP = re.compile(r"torch\.ops\.(\w+)\.(\w+)")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def first_error(self) -> str:
        """The exception torch logged: its record's, or the last line of a
        message that holds a formatted traceback."""
        for r in self.records:
            if r.exc_info and r.exc_info[1] is not None:
                return f"{type(r.exc_info[1]).__name__}: {first_line(r.exc_info[1])}"
            lines = [line.strip() for line in r.getMessage().splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return ""


# A serialized treespec names each node type: "type": "package.module.Class"
# (inside a JSON string, so its quotes may be escaped).
_PYTREE_TYPE = re.compile(r'\\?"type\\?"\s*:\s*\\?"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\\?"')


def _import_pytree_modules(path: Path) -> list[str]:
    """Imports the module of every pytree type the program's specs name that
    this process has not registered; returns those that stay unregistered."""
    from torch.utils import _pytree as pytree

    names: set[str] = set()
    with zipfile.ZipFile(path) as z:
        for member in z.namelist():
            if member.endswith(".json") and z.getinfo(member).file_size < 64 << 20:
                names.update(_PYTREE_TYPE.findall(z.read(member).decode("utf-8", "replace")))
    registered = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE
    for name in sorted(names - set(registered)):
        module = name.rsplit(".", 1)[0]
        while module:
            try:
                importlib.import_module(module)
                break
            except ImportError:
                module = module.rpartition(".")[0]
            except Exception:  # noqa: BLE001 - their module failed to import: said below
                break
    return sorted(
        n
        for n in names
        if n not in registered
        and "." in n
        and not n.startswith(("torch.", "builtins.", "collections."))
    )


def load_inputs(path) -> tuple[tuple, dict]:
    """A torch.save'd tuple (or list) of positional inputs, or an
    (args, kwargs) pair."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ProgramError(f"no such inputs file: {path}")
    try:
        # Where they were saved from, where that device is here.
        where = None if torch.cuda.is_available() else "cpu"
        value = torch.load(path, weights_only=True, map_location=where)
    except Exception as e:  # noqa: BLE001
        raise ProgramError(f"{path} is not a torch.save'd inputs file: {first_line(e)}") from None
    return _split_inputs(value, str(path))


def _split_inputs(value, what: str) -> tuple[tuple, dict]:
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], dict)
    ):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    raise ProgramError(
        f"{what}: inputs must be a tuple of positional inputs or an "
        f"(args, kwargs) pair, not {type(value).__name__}"
    )


# Ops evaluated where their implementation is trusted: ATen's and its
# decompositions'. Any other op (a custom op) runs its benchmark on the CPU
# where it has a CPU kernel: its device kernel is under test as much as
# the compiled code that calls it.
TRUSTED_NAMESPACES = frozenset({"aten", "prims", "_operator", "_c10d_functional", "higher_order"})


def _namespace(target) -> str:
    return getattr(target, "namespace", "") or ""


# Ops that add up terms: a value one of them returns (var_mean: its mean,
# output 1) is judged with a floor relative to the terms (see judge).
_SUMS = frozenset(
    {
        "aten.sum.default",
        "aten.sum.dim_IntList",
        "aten.mean.default",
        "aten.mean.dim",
        "prims.sum.default",
    }
)
_VAR_MEAN = "aten.var_mean.correction"


def _terms_scale(target, args) -> tuple[float, float] | None:
    """The scale of the terms a sum or mean adds up: its first argument."""
    import torch

    if str(target) in _SUMS and args and isinstance(args[0], torch.Tensor):
        return scale_of(args[0])
    return None


class Evaluation:
    """Runs an exported program node by node, as the truth (float64, on the
    CPU) or as the benchmark (the program's own dtypes, on `device`),
    keeping the values of the nodes in `keep`. With `substitutes` (node ->
    the value the compiled run wrote), every later node reads the compiled
    value: a node's value is then computed from the compiled run's own
    inputs, so its error is the error of the kernel alone."""

    def __init__(
        self,
        program,
        truth: bool,
        device: str | None = None,
        memory_formats: dict[str, Any] | None = None,
    ) -> None:
        import torch

        self.truth = truth
        self.device = torch.device("cpu" if truth or device is None else device)
        # Convolution nodes the compiled run computed in another memory
        # format (channels-last): the benchmark runs them in it too, since
        # the numerics differ (cuDNN applies TF32 to channels-last only).
        self.memory_formats = {} if truth else dict(memory_formats or {})
        # Kept nodes that are sums or means: the scale of their terms.
        self.terms: dict[str, tuple[float, float]] = {}
        # Parameters reach the graph through get_attr nodes, adapted there:
        # converting the module would convert the program's own tensors.
        self.module = program.module()
        # Buffers and inputs the program changes in place (a KV cache's
        # index_copy_, a running statistic's mul_): each evaluation starts
        # from a copy, or it would start from the last one's result.
        self.mutated = _changed_in_place(self.module.graph)

    def adapt(self, x):
        """A value as this evaluation holds it: for the truth, tensors on
        the CPU in double (complex double), dtype and device arguments to
        match; the benchmark keeps what it is given, on its device."""
        import torch

        if isinstance(x, torch.Tensor):
            if not self.truth:
                return x.to(self.device)
            x = x.detach().to("cpu")
            if x.is_floating_point():
                return x.to(torch.float64)
            return x.to(torch.complex128) if x.is_complex() else x
        if self.truth and isinstance(x, torch.dtype):
            return torch.float64 if x.is_floating_point else torch.complex128 if x.is_complex else x
        if self.truth and isinstance(x, torch.device):
            return torch.device("cpu")
        return x

    def substitute(self, compiled, like):
        """The compiled run's value of a node, held as this evaluation holds
        `like` (its own value of that node): what a later node reads."""
        return self.adapt(compiled).reshape(like.shape).to(like.dtype).clone()

    def run(
        self, args: tuple, kwargs: dict, keep: set[str], substitutes: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        import torch
        from torch.utils import _pytree as pytree

        values: dict[str, Any] = {}
        # The unlifted module takes the user's inputs flattened, in the
        # order the program's input spec gives.
        flat, _ = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
        flat = [self.adapt(x) for x in flat]
        with torch.no_grad():
            self.interpreter(self.module, keep, substitutes or {}, values).run(*flat)
        return values

    def interpreter(
        self, module, keep: set[str], substitutes: dict[str, Any], values: dict[str, Any]
    ):
        """An FX interpreter of `module` that adapts every value to this
        evaluation, keeps `keep` and puts `substitutes` in place."""
        import torch
        import torch.fx
        from torch.utils import _pytree as pytree

        evaluation = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, n):
                if n.op == "call_function":
                    a, kw = self.fetch_args_kwargs_from_env(n)
                    a, kw = pytree.tree_map(evaluation.adapt, (a, kw))
                    result = evaluation.call(n.target, a, kw, evaluation.memory_formats.get(n.name))
                    if n.name in keep and (terms := _terms_scale(n.target, a)) is not None:
                        evaluation.terms[n.name] = terms
                else:
                    result = super().run_node(n)
                    if n.op in ("placeholder", "get_attr"):
                        result = pytree.tree_map(evaluation.adapt, result)
                        if n.name in evaluation.mutated and isinstance(result, torch.Tensor):
                            result = result.clone()
                if n.name in keep and isinstance(result, torch.Tensor):
                    # A copy: a later in-place op (add_, relu_) would change it.
                    values[n.name] = result.detach().clone()
                sub = substitutes.get(n.name)
                if sub is not None and isinstance(result, torch.Tensor):
                    result = evaluation.substitute(sub, result)
                return result

        return Interpreter(module)

    def _subgraph(self, module):
        """A submodule a higher-order op calls (a region under set_grad_enabled
        or autocast), run by an interpreter of this evaluation: its dtype and
        device arguments adapted too. Its values are not kept: its node names
        are its own."""

        def run(*args):
            return self.interpreter(module, set(), {}, {}).run(*args)

        return run

    def call(self, target, args, kwargs, memory_format=None):
        import torch
        import torch.fx
        from torch.utils import _pytree as pytree

        if memory_format is not None and not self.truth and _is_convolution(target):
            args = (
                args[0].contiguous(memory_format=memory_format),
                args[1].contiguous(memory_format=memory_format),
                *args[2:],
            )

        if isinstance(target, torch._ops.HigherOrderOperator):
            args = tuple(
                self._subgraph(a) if isinstance(a, torch.fx.GraphModule) else a for a in args
            )
            if self.truth and target.__name__ == "wrap_with_autocast":
                # The truth is computed in double: no autocast region lowers it.
                body = next(i for i, a in enumerate(args) if callable(a))
                return args[body](*args[body + 1 :])
            return target(*args, **kwargs)

        if (
            self.truth
            or self.device.type == "cpu"
            or _namespace(target) in TRUSTED_NAMESPACES
            or not isinstance(target, torch._ops.OpOverload)
        ):
            return target(*args, **kwargs)
        to_cpu = pytree.tree_map_only(torch.Tensor, lambda t: t.to("cpu"), (args, kwargs))
        try:
            result = target(*to_cpu[0], **to_cpu[1])
        except Exception:  # noqa: BLE001 - no CPU kernel: the device's is all there is
            return target(*args, **kwargs)
        return pytree.tree_map_only(torch.Tensor, lambda t: t.to(self.device), result)


def _changed_in_place(graph) -> set[str]:
    """The placeholder and get_attr nodes an op of `graph` writes to: an
    argument its schema marks written (index_copy_'s self, out=)."""
    import torch

    written: set[str] = set()
    for n in graph.nodes:
        schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
        if schema is None or not schema.is_mutable:
            continue
        for i, a in enumerate(schema.arguments):
            if a.alias_info is None or not a.alias_info.is_write:
                continue
            value = n.args[i] if i < len(n.args) else n.kwargs.get(a.name)
            for v in value if isinstance(value, (list, tuple)) else [value]:
                # Through views of it (cache[:, pos].copy_(k)) to what owns the memory.
                while isinstance(v, torch.fx.Node) and _is_view(v):
                    v = v.args[0]
                if isinstance(v, torch.fx.Node) and v.op in ("placeholder", "get_attr"):
                    written.add(v.name)
    return written


def _is_view(n) -> bool:
    schema = getattr(n.target, "_schema", None) if n.op == "call_function" else None
    return bool(
        schema is not None
        and n.args
        and schema.arguments
        and schema.arguments[0].alias_info is not None
        and not schema.arguments[0].alias_info.is_write
    )


def eager_values(
    program, args: tuple, kwargs: dict | None = None, float64: bool = False
) -> dict[str, Any]:
    """Every node's value from running `program` node by node: the truth
    (float64 on the CPU) with `float64`, else in its own dtypes where its
    inputs are."""
    import torch
    from torch.utils import _pytree as pytree

    flat = [
        t
        for t in pytree.tree_leaves((tuple(args), dict(kwargs or {})))
        if isinstance(t, torch.Tensor)
    ]
    device = str(flat[0].device) if flat else "cpu"
    names = {n.name for n in program.graph.nodes}
    return Evaluation(program, truth=float64, device=device).run(args, kwargs or {}, names)


@dataclass
class Match:
    """One value a kernel wrote, judged twice: its own error (the node, or
    the nodes its kernel fuses, evaluated on the compiled run's own inputs)
    and the error accumulated from the model inputs."""

    record: Record
    node: str
    own: Verdict
    accumulated: Verdict
    # The nodes evaluated for the own error: this one and those between it
    # and the values the dump holds (the nodes its kernel fuses, or more
    # where the values before it were not saved).
    region: int = 1
    # Whether that region reaches back to the model inputs: no value before
    # it was saved, so its own error is its accumulated one.
    from_model_inputs: bool = False
    # Where its own error is beyond the bar: the float64 truth it was judged
    # by (on the compiled run's own inputs), for a repro's expected value.
    expected: Any = None

    @property
    def diverged(self) -> bool:
        return self.own.diverged


def match_dump(
    dump_source,
    program,
    args: tuple,
    kwargs: dict,
    environment: Environment | None = None,
    progress=None,
) -> Divergence:
    """Judges every value a level-1 dump holds of `program`'s nodes against
    the float64 truth, beside the benchmark in the run's dtypes under the
    run's numerics settings (the dump's, else `environment`)."""
    import torch

    progress = progress or _Progress()
    dump = dump_source if isinstance(dump_source, Dump) else load_dump(dump_source)
    if not dump.has_provenance:
        raise ProgramError(
            f"{dump.source} does not say what its buffers hold: compile the model "
            "with this version of aoti-debug-printer at level 1"
        )
    result = Divergence([])
    first_run = [r for r in dump.written_values() if r.run == 0]
    if not first_run:
        raise ProgramError(f"{dump.source} holds no value a kernel wrote (is it a level-1 dump?)")
    result.environment = dump.environment(0) or environment
    nodes = {n.name for n in program.graph.nodes}
    candidates: list[Record] = []
    formulas: list[tuple[Record, Formula]] = []
    compiled: dict[str, Any] = {}
    first_of: dict[str, Record] = {}
    for r in first_run:
        formula = None if r.node else r.formula
        if formula is not None and r.path is not None:
            formulas.append((r, Formula(formula)))
        elif not r.node:
            result.unmatched.append(_left_out(r))
        elif r.node not in nodes:
            result.unmatched.append(Unmatched(r, NotCompared.NO_EAGER_TENSOR.value, r.node))
        elif r.path is None:
            result.unmatched.append(Unmatched(r, NotCompared.NOT_SAVED.value))
        else:
            candidates.append(r)
            if r.node not in compiled:
                compiled[r.node] = r.load()
                first_of[r.node] = r
    device = next((r.tensor.device for r in first_run if r.tensor.device), "cpu")
    env = result.environment or Environment.current(device)
    graph = _Graph(program)
    formats = _convolution_formats(graph, candidates, formulas)
    bench_evaluation = Evaluation(program, truth=False, device=device, memory_formats=formats)
    _complete(formulas, compiled, bench_evaluation, program, env)
    keep = set(compiled).union(*(f.nodes for _, f in formulas))
    progress.phase("the float64 truth, from the model inputs")
    truth_evaluation = Evaluation(program, truth=True)
    truth = truth_evaluation.run(args, kwargs, keep)
    progress.phase("the float64 truth of each kernel, on the compiled run's own inputs")
    own_truth_evaluation = Evaluation(program, truth=True)
    own_truth = own_truth_evaluation.run(args, kwargs, keep, compiled)
    with env.applied():
        progress.phase(f"the benchmark in the run's dtypes on {device}, from the model inputs")
        bench = bench_evaluation.run(args, kwargs, keep)
        progress.phase(
            f"the benchmark of each kernel on {device}, on the compiled run's own inputs"
        )
        own_bench = Evaluation(program, truth=False, device=device, memory_formats=formats).run(
            args, kwargs, keep, compiled
        )
    progress.phase(f"judging {len(candidates)} values")
    for r in candidates:
        t = truth.get(r.node)
        if not isinstance(t, torch.Tensor):
            result.unmatched.append(Unmatched(r, NotCompared.NO_EAGER_TENSOR.value, r.node))
            continue
        value = compiled[r.node] if first_of.get(r.node) is r else r.load()
        if value.numel() != t.numel():
            result.unmatched.append(Unmatched(r, NotCompared.SIZE_DIFFERS.value, r.node))
            continue
        # The node's value, kept in a buffer of another shape (reached
        # through a reshape): the same elements in the same order.
        value = value.reshape(t.shape)
        region, from_inputs = _region(graph, r.node, compiled)
        own = judge(
            value, own_bench[r.node], own_truth[r.node], own_truth_evaluation.terms.get(r.node)
        )
        result.matches.append(
            Match(
                r,
                r.node,
                own,
                judge(value, bench[r.node], t, truth_evaluation.terms.get(r.node)),
                region,
                from_inputs,
                own_truth[r.node] if own.diverged else None,
            )
        )
    if formulas:
        progress.phase(f"judging {len(formulas)} values by their formulas")
        _judge_formulas(
            result,
            formulas,
            program,
            args,
            kwargs,
            env,
            compiled,
            (truth_evaluation, bench_evaluation),
            (truth, own_truth, bench, own_bench),
            graph,
        )
        order = {id(r): i for i, r in enumerate(first_run)}
        result.matches.sort(key=lambda m: order[id(m.record)])
    return result


class FormulaError(ValueError):
    """A formula this torch or this program cannot evaluate."""


class Formula:
    """How a value no single node holds is computed from values the program
    names (see _provenance): evaluated like the program, in each of the
    four evaluations, from that evaluation's values."""

    def __init__(self, formula: dict[str, Any]) -> None:
        self.name = str(formula.get("name") or "?")
        self.steps = formula["steps"]
        self.value = formula["value"]
        self.nodes: set[str] = set()
        self.reads_user_inputs = False
        self._collect(self.steps, self.value)
        # (node, its formula from this buffer's value) where a kernel
        # computes that node's value from this buffer without storing it.
        completes = formula.get("completes")
        self.completes = None
        if (
            isinstance(completes, dict)
            and isinstance(completes.get("node"), str)
            and isinstance(completes.get("steps"), list)
            and "value" in completes
        ):
            self.completes = (completes["node"], Formula({**completes, "name": completes["node"]}))

    def _collect(self, *parts) -> None:
        for part in parts:
            if isinstance(part, list):
                self._collect(*part)
            elif isinstance(part, dict):
                if isinstance(part.get("node"), str):
                    self.nodes.add(part["node"])
                elif "input" in part:
                    self.reads_user_inputs = True
                else:
                    self._collect(*part.values())

    def evaluate(
        self,
        evaluation: Evaluation,
        node_value,
        program,
        user_inputs: list,
        this=None,
        memory_format=None,
    ):
        """(the formula's value in `evaluation`, the scale of its terms where
        it is a sum or a mean, else None); `node_value(name)`: a node's
        value there; `this`: the buffer's value, for a completion;
        `memory_format`: the compiled value's, for the step that is the
        value."""
        import torch
        from torch.utils import _pytree as pytree

        done: list[Any] = []
        terms: list[Any] = []  # per step: what _terms_scale says, per output for var_mean

        def arg(a):
            if isinstance(a, list):
                return [arg(x) for x in a]
            if not isinstance(a, dict):
                return a
            if "step" in a:
                return done[a["step"]]
            if "this" in a:
                if this is None:
                    raise FormulaError("a formula reads the value it defines")
                return this
            if "node" in a:
                v = node_value(a["node"])
                return v.reshape(a["shape"]) if "shape" in a else v
            if "param" in a:
                fqn = a["param"]
                if fqn in program.state_dict:
                    return program.state_dict[fqn]
                if fqn in program.constants:
                    return program.constants[fqn]
                raise FormulaError(f"the program has no parameter, buffer or constant {fqn}")
            if "input" in a:
                k = a["input"]
                if not 0 <= k < len(user_inputs):
                    raise FormulaError(f"the program has no tensor input {k}")
                t = user_inputs[k]
                shape = [s if s is not None else n for s, n in zip(a["shape"], t.shape)]
                if dtype_name(t.dtype) != a["dtype"] or list(t.shape) != shape:
                    raise FormulaError(f"tensor input {k} is not the one the compile saw")
                return t
            for kind in ("dtype", "layout", "memory_format"):
                if kind in a:
                    return getattr(torch, a[kind])
            if "device" in a:
                return torch.device(a["device"])
            if "float" in a:
                return float(a["float"])
            raise FormulaError(f"an argument no formula holds: {a}")

        last_step = self.value.get("step") if isinstance(self.value, dict) else None
        for op, args, kwargs in self.steps:
            target = _formula_op(op)
            a, kw = pytree.tree_map(
                evaluation.adapt, (arg(args), {k: arg(v) for k, v in kwargs.items()})
            )
            done.append(
                evaluation.call(
                    target, tuple(a), kw, memory_format if len(done) == last_step else None
                )
            )
            if op == _VAR_MEAN:
                terms.append({1: scale_of(a[0])})  # its mean
            elif op == "getitem" and isinstance(args[0], dict) and "step" in args[0]:
                of = terms[args[0]["step"]]
                terms.append(of.get(args[1]) if isinstance(of, dict) else None)
            else:
                terms.append(_terms_scale(target, a))
        value = self.value
        last = terms[value["step"]] if isinstance(value, dict) and "step" in value else None
        return evaluation.adapt(arg(value)), (last if isinstance(last, tuple) else None)


def _memory_format(r: Record):
    """torch.channels_last(_3d) where the record's value has that layout
    (and not also the contiguous one), else None."""
    import torch

    shape, stride = r.tensor.shape, r.tensor.stride
    if not (
        isinstance(shape, list)
        and isinstance(stride, list)
        and len(shape) in (4, 5)
        and len(stride) == len(shape)
    ):
        return None
    try:
        t = torch.empty_strided(shape, stride, device="meta")
    except Exception:  # noqa: BLE001 - a record with sizes no tensor has
        return None
    fmt = torch.channels_last if len(shape) == 4 else torch.channels_last_3d
    return fmt if t.is_contiguous(memory_format=fmt) and not t.is_contiguous() else None


def _convolution_formats(graph: _Graph, candidates: list[Record], formulas) -> dict[str, Any]:
    """Convolution node -> the memory format its compiled value has: that of
    the buffer that holds it, or of the one its bias is added to."""
    formats = {}
    for node, r in [(r.node, r) for r in candidates] + [
        (f.completes[0], r) for r, f in formulas if f.completes
    ]:
        if (
            node in graph.nodes
            and _is_convolution(graph.nodes[node].target)
            and (fmt := _memory_format(r)) is not None
        ):
            formats[node] = fmt
    return formats


def _is_convolution(target) -> bool:
    """An ATen convolution, whose first two arguments are its input and weight."""
    import torch

    aten = torch.ops.aten
    return getattr(target, "overloadpacket", None) in (
        aten.convolution,
        aten._convolution,
        aten.conv1d,
        aten.conv2d,
        aten.conv3d,
    )


def _complete(
    formulas, compiled: dict[str, Any], evaluation: Evaluation, program, env: Environment
) -> None:
    """Adds to `compiled` the value of every node that a kernel computed
    from a saved buffer without storing it (its formula's `completes`),
    computed from that buffer as the kernel did: in the run's dtypes on its
    device. A kernel after it then reads what that kernel read, and its
    own error starts there."""
    import torch

    def no_node(name: str):
        raise FormulaError(f"a completion reads node {name}")

    for r, f in formulas:
        if f.completes is None or f.completes[0] in compiled:
            continue
        node, completion = f.completes
        try:
            with torch.no_grad(), env.applied():
                compiled[node], _ = completion.evaluate(
                    evaluation, no_node, program, [], this=r.load()
                )
        except Exception:  # noqa: BLE001 - no completion: the node is evaluated as before
            continue


def _formula_op(name: str):
    import operator

    import torch

    if name == "getitem":
        return operator.getitem
    parts = name.split(".")
    if len(parts) != 3 or parts[0] not in ("aten", "prims"):
        raise FormulaError(f"a formula with an op it may not hold: {name}")
    try:
        return getattr(getattr(getattr(torch.ops, parts[0]), parts[1]), parts[2])
    except AttributeError:
        raise FormulaError(f"this torch has no {name}") from None


def _judge_formulas(
    result: Divergence,
    formulas,
    program,
    args,
    kwargs,
    env: Environment,
    compiled: dict[str, Any],
    evaluations,
    evaluated,
    graph: _Graph,
) -> None:
    """Adds a Match for every value judged by its formula, from the four
    evaluations' values (truth, own truth, benchmark, own benchmark), with
    the truth's and the benchmark's way of holding and calling."""
    import torch
    from torch.utils import _pytree as pytree

    truth, own_truth, bench, own_bench = evaluated
    user_inputs = [
        t
        for t in pytree.tree_leaves((tuple(args), dict(kwargs or {})))
        if isinstance(t, torch.Tensor)
    ]

    def values_of(evaluation: Evaluation, values: dict[str, Any], own: bool):
        def node_value(name: str):
            v = values[name]
            if own and name in compiled:  # what the kernel read: the compiled value
                return evaluation.substitute(compiled[name], v)
            return v

        return node_value

    for r, f in formulas:
        try:
            with torch.no_grad():
                (t, terms), (ot, own_terms) = (
                    f.evaluate(
                        evaluations[0], values_of(evaluations[0], v, own), program, user_inputs
                    )
                    for v, own in ((truth, False), (own_truth, True))
                )
                with env.applied():
                    (b, _), (ob, _) = (
                        f.evaluate(
                            evaluations[1],
                            values_of(evaluations[1], v, own),
                            program,
                            user_inputs,
                            memory_format=_memory_format(r),
                        )
                        for v, own in ((bench, False), (own_bench, True))
                    )
        except FormulaError as e:
            result.unmatched.append(Unmatched(r, NotCompared.FORMULA_FAILED.value, str(e)))
            continue
        except Exception as e:  # noqa: BLE001 - an op refused the formula's arguments
            result.unmatched.append(Unmatched(r, NotCompared.FORMULA_FAILED.value, first_line(e)))
            continue
        value = r.load()
        if not isinstance(t, torch.Tensor) or value.numel() != t.numel():
            result.unmatched.append(Unmatched(r, NotCompared.SIZE_DIFFERS.value, f.name))
            continue
        value = value.reshape(t.shape)
        # Its own region: its steps, and the nodes before them back to the
        # values the dump holds.
        region, reaches = len(f.steps), f.reads_user_inputs
        for name in f.nodes - set(compiled):
            n, from_inputs = _region(graph, name, compiled)
            region, reaches = region + n, reaches or from_inputs
        result.matches.append(
            Match(
                r,
                f.name,
                judge(value, ob, ot, own_terms),
                judge(value, b, t, terms),
                region,
                reaches,
            )
        )


class _Graph:
    """The program's nodes by name and its user inputs, looked up once."""

    def __init__(self, program) -> None:
        self.nodes = {n.name: n for n in program.graph.nodes}
        self.user_inputs = set(program.graph_signature.user_inputs)


def _region(graph: _Graph, name: str, held: dict[str, Any]) -> tuple[int, bool]:
    """(nodes evaluated for `name`'s own error, whether they reach a user
    input): its ancestors back to the values `held` (the dump's)."""
    nodes, user_inputs = graph.nodes, graph.user_inputs
    seen, stack, reaches = set(), [nodes[name]], False
    while stack:
        n = stack.pop()
        if n.name in seen:
            continue
        seen.add(n.name)
        if n.op == "placeholder":
            reaches = reaches or n.name in user_inputs
            continue
        for a in n.all_input_nodes:
            if a.name not in held:
                stack.append(a)
    return sum(1 for x in seen if nodes[x].op == "call_function"), reaches


class _Progress:
    """One line on stderr per long phase, with the seconds since the start:
    diverge runs for minutes on a large model."""

    def __init__(self, enabled: bool = False) -> None:
        import time

        self.enabled = enabled
        self.start = time.monotonic()

    def phase(self, what: str) -> None:
        import time

        if self.enabled:
            log.info("diverge: [%6.1fs] %s", time.monotonic() - self.start, what)


@contextlib.contextmanager
def _installed_for_the_compile():
    """Our printer installed for one compile, then left as it was found."""
    from ._install import install, is_installed, uninstall

    was = is_installed()
    install()
    try:
        yield
    finally:
        if not was:
            uninstall()


def first_divergence_from_eager(
    program,
    inputs=None,
    dump=None,
    imports: tuple[str, ...] = (),
    progress: bool = False,
    repro=None,
    package=None,
) -> Divergence:
    """Compiles `program` (an ExportedProgram or a torch.export.save file)
    with AOTInductor at level 1, runs it once on `inputs` (a tuple, or an
    (args, kwargs) pair; default: the program's example inputs), and judges
    the values its kernels wrote against the float64 truth. With `dump`,
    uses that level-1 dump of one run on the same inputs instead of
    compiling. `imports`: modules to import first (custom ops,
    decompositions). `progress`: a line on stderr per long phase. `repro`:
    a new directory to write a one-kernel repro of the first divergence to
    (with `dump`, `package` is the .pt2 its run loaded)."""
    steps = _Progress(progress)
    program, args, kwargs = _program_and_inputs(program, inputs, imports)
    if dump is not None:
        dump = load_dump(dump)
        args, kwargs = _inputs_of_the_run(dump, args, kwargs, given=inputs is not None)
        result = match_dump(dump, program, args, kwargs, progress=steps)
        return _with_repro(result, dump, package, repro, imports)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-diverge-") as tmp:
        steps.phase("compiling with AOTInductor at level 1")
        package = _compile_at_level_1(program, Path(tmp) / "model.pt2")
        steps.phase("running the compiled model once, saving what its kernels write")
        _run_into(package, args, kwargs, Path(tmp) / "dump")
        result = match_dump(Path(tmp) / "dump", program, args, kwargs, progress=steps)
        return _with_repro(result, Path(tmp) / "dump", package, repro, imports)


@dataclass
class RunsCheck:
    """Runs of one compile on the same inputs, each compared with the first
    bit for bit (see _compare)."""

    comparisons: list  # of _compare.Comparison: run 0 against run k

    @property
    def first(self):
        """The first value that differs between run 0 and a later run, as
        a _compare.Difference; None when every run gave the same bits."""
        return next(
            (c.first_different for c in self.comparisons if c.first_different is not None), None
        )

    @property
    def nondeterministic_kernel(self) -> bool:
        """A kernel that should be deterministic gave other bits."""
        first = self.first
        return first is not None and not first.nondeterministic_by_construction


def first_difference_between_runs(
    program, inputs=None, runs: int = 2, imports: tuple[str, ...] = (), progress: bool = False
) -> RunsCheck:
    """Compiles `program` at level 1 once, runs it `runs` times on the same
    inputs (as for first_divergence_from_eager), and compares every run's
    values with the first run's bit for bit: the first kernel whose values
    differ is the first that was not deterministic."""
    from ._compare import compare

    if runs < 2:
        raise ProgramError(f"--runs {runs}: a comparison of runs needs at least 2")
    steps = _Progress(progress)
    program, args, kwargs = _program_and_inputs(program, inputs, imports)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-runs-") as tmp:
        steps.phase("compiling with AOTInductor at level 1")
        package = _compile_at_level_1(program, Path(tmp) / "model.pt2")
        dumps = []
        for k in range(runs):
            steps.phase(f"run {k + 1} of {runs}, saving what its kernels write")
            dumps.append(_run_into(package, args, kwargs, Path(tmp) / f"run{k}"))
        return RunsCheck([compare(dumps[0], d) for d in dumps[1:]])


def format_runs_check(check: RunsCheck) -> str:
    from ._compare import _what, determinism_verdict

    runs = len(check.comparisons) + 1
    compared = len(check.comparisons[0].compared) if check.comparisons else 0
    first = check.first
    if first is None:
        return (
            f"{runs} runs on the same inputs: all {compared} values kernels wrote are "
            "identical bit for bit\n"
        )
    which = next(c for c in check.comparisons if c.first_different is first)
    differ = sum(1 for d in which.compared if d.identical is False)
    lines = [
        f"{runs} runs on the same inputs: {differ} of {compared} values differ bit for bit",
        f"first: {_what(first, True)}",
    ]
    lines.append(determinism_verdict(first))
    lines.append(
        f"  largest difference {first.max_abs:.6g}, relative RMS {first.rel_rms:.3g}, "
        f"in {first.a.tensor.dtype} {first.a.tensor.shape}"
    )
    return "\n".join(lines) + "\n"


def _program_and_inputs(program, inputs, imports) -> tuple[Any, tuple, dict]:
    """The program (loaded, after `imports`) and the inputs to run it on:
    the given ones, checked against what the program takes and moved to
    the device its example inputs live on, else its example inputs."""
    for name in imports:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - the user's module: say which and why
            raise ProgramError(f"--import {name}: {type(e).__name__}: {e}") from None
    program = load_program(program)
    if inputs is None:
        if program.example_inputs is None:
            raise ProgramError("the program has no example inputs; pass inputs")
        args, kwargs = program.example_inputs
        return program, tuple(args), dict(kwargs or {})
    args, kwargs = _split_inputs(inputs, "inputs")
    args, kwargs = _fit_inputs(program, args, kwargs)
    return program, args, kwargs


def _fit_inputs(program, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The given inputs, checked against the program's user inputs (count,
    dtype, rank: a ProgramError naming the argument), each tensor moved to
    the device of the program's own input there, with one note."""
    import torch
    from torch.utils import _pytree as pytree

    names = list(program.graph_signature.user_inputs)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    expected = [placeholders[n].meta.get("val") for n in names if n in placeholders]
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    if len(flat) != len(expected):
        raise ProgramError(
            f"inputs: {len(flat)} given, the program takes {len(expected)} " f"({', '.join(names)})"
        )
    moved: set[tuple[str, str]] = set()
    for i, (given, want) in enumerate(zip(flat, expected)):
        name = names[i]
        if not isinstance(want, torch.Tensor):
            continue
        if not isinstance(given, torch.Tensor):
            raise ProgramError(
                f"inputs: {name} (input {i}) is a {type(given).__name__}, the program takes "
                f"a {dtype_name(want.dtype)} tensor of rank {want.dim()}"
            )
        if given.dtype != want.dtype or given.dim() != want.dim():
            raise ProgramError(
                f"inputs: {name} (input {i}) is {dtype_name(given.dtype)} of rank "
                f"{given.dim()}, the program takes {dtype_name(want.dtype)} of rank {want.dim()}"
            )
        if given.device != want.device:
            moved.add((str(given.device), str(want.device)))
            flat[i] = given.to(want.device)
    for source, target in sorted(moved):
        log.info(
            "diverge: inputs moved from %s to %s, where the program's inputs and weights live",
            source,
            target,
        )
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return tuple(args), dict(kwargs)


def _compile_at_level_1(program, package_path: Path) -> str:
    """An AOTInductor package of `program` with our printer at level 1,
    every kernel selected."""
    import torch

    patch = {
        "aot_inductor.debug_intermediate_value_printer": "1",
        "aot_inductor.filtered_kernel_names": None,
    }
    with _installed_for_the_compile(), torch._inductor.config.patch(patch):
        return torch._inductor.aoti_compile_and_package(program, package_path=str(package_path))


def _run_into(package, args: tuple, kwargs: dict, dump: Path) -> Path:
    """Runs the package once, saving what its kernels write into `dump`."""
    import torch

    from ._options import options

    with options(dump_dir=dump, level=-1, trap=0, kernels=""):
        torch._inductor.aoti_load_package(package)(*args, **kwargs)
    return dump


def _with_repro(result: Divergence, dump, package, repro, imports) -> Divergence:
    """Writes the repro of the first divergence, where asked and found:
    its kernel's launch, checked against the truth by the verdict's bar."""
    from ._repro import CLOSE, FINITE, IN_BOUNDS, UNCHANGED, Finding, write_repro

    first = result.first
    if repro is None or first is None:
        return result
    r = first.record
    checks = [FINITE, UNCHANGED, IN_BOUNDS] + ([CLOSE] if first.expected is not None else [])
    finding = Finding(
        kernel=r.kernel,
        launch=r.launch,
        call=r.call,
        what=f"diverge: buffer {r.arg} = node {first.node} differs from eager beyond the bar "
        f"({_relative(first.own)} times it)",
        checks=checks,
        arg=r.arg,
        run_id=r.tensor.run_id,
        expected=first.expected,
        bar={"rms": first.own.bar_rms, "max": first.own.bar_max, "bad": first.own.benchmark.bad},
    )
    result.repro = write_repro(dump, package, repro, finding, imports=imports)
    return result


def _inputs_of_the_run(dump: Dump, args: tuple, kwargs: dict, given: bool) -> tuple[tuple, dict]:
    """The inputs diverge evaluates eagerly, where the dump saved its first
    run's model inputs (level 1): those, in place of the program's example
    inputs; inputs the user gave must be them. Judging a run by other
    inputs than its own would name kernels that did nothing wrong."""
    import torch
    from torch.utils import _pytree as pytree

    first = [r for r in dump.records if r.run == 0 and r.phase is Phase.MODEL_INPUT]
    saved = [r for r in first if r.rank == first[0].rank] if first else []
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    tensors = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    if not saved or any(r.path is None for r in saved) or len(saved) != len(tensors):
        return args, kwargs  # not saved, or not one per tensor input: as given
    for k, (i, r) in enumerate(zip(tensors, saved)):
        value = r.load()
        if value.dtype != flat[i].dtype:
            return args, kwargs  # not the program's inputs in order: as given
        value = value.to(flat[i].device)
        if given and (
            value.shape != flat[i].shape
            or not torch.equal(value.nan_to_num(), flat[i].nan_to_num())
        ):
            raise ProgramError(
                f"the inputs given differ from those the dump's run had (tensor input {k}, "
                f"{r.arg}): leave --inputs out to judge the run on its own inputs"
            )
        flat[i] = value
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return tuple(args), kwargs


def _relative(v: Verdict) -> str:
    """An error as a multiple of its bar: above 1 is beyond it."""
    r = v.ratio
    return "inf" if r == float("inf") else f"{r:.3g}"


def format_divergence(d: Divergence) -> str:
    written, compared, reasons = d.coverage()
    env = d.environment
    lines = [
        f"compared {compared} of {written} values kernels wrote against a float64 truth "
        f"({100 * compared / max(1, written):.0f}%)"
    ]
    if env is not None:
        lines.append(
            "benchmark made under the compiled run's settings: "
            + ", ".join(f"{k} {v}" for k, v in env.rows() if v != "-")
        )
    first, drift = d.first, d.drift
    if first is None and drift is None:
        lines.append("no divergence from eager: every value's error is within the benchmark's bar")
    elif first is not None:
        r = first.record
        lines.append(
            f"FIRST DIVERGENCE FROM EAGER: kernel {r.kernel} (launch {r.launch}), "
            f"buffer {r.arg} = node {first.node}"
        )
        lines.extend(_explain(first))
        if d.repro is not None:
            from ._repro import format_repro

            lines.append(format_repro(d.repro).rstrip("\n"))
        else:
            lines.append(
                "  a one-kernel repro of it, on its real inputs: the same command with "
                "--repro DIR"
            )
    else:
        r = drift.record
        lines.append(
            "no divergence from eager: every kernel's own error is within the benchmark's bar"
        )
        lines.append(
            f"note: the error accumulated from the model inputs is beyond it, first at "
            f"kernel {r.kernel} (launch {r.launch}), buffer {r.arg} = node "
            f"{drift.node}: the noise the run's settings allow, amplified more than in "
            "eager (docs/accuracy.md)"
        )
        lines.extend(_explain(drift))
    lines.append(
        f"  {'launch':>6} {'kernel':<44} {'buffer':<8} {'node':<22} "
        f"{'own/bar':>9} {'accum/bar':>9}  verdict"
    )
    for m in d.matches:
        mark = "DIVERGES" if m.own.diverged else "drift" if m.accumulated.diverged else "ok"
        r = m.record
        lines.append(
            f"  {r.launch:>6} {r.kernel[:44]:<44} {r.arg[:8]:<8} "
            f"{m.node[:22]:<22} {_relative(m.own):>9} {_relative(m.accumulated):>9}  {mark}"
        )
    first_of = {}
    for u in d.unmatched:
        first_of.setdefault(u.code, u)
    for code, n in reasons.most_common():
        u = first_of[code]
        detail = f" (the first: {u.detail})" if u.detail else ""
        lines.append(f"  not compared ({n}) {code}: {u.text}{detail}")
    return "\n".join(lines) + "\n"


def _explain(m: Match) -> list[str]:
    region = (
        f"{m.region} nodes evaluated back to the values the dump holds"
        if not m.from_model_inputs
        else f"{m.region} nodes back to the model inputs: no value before it was saved, so its "
        "own error is its accumulated one"
    )
    out = []
    for what, v in (
        (f"its own error (on the compiled run's inputs; {region})", m.own),
        ("accumulated from the model inputs", m.accumulated),
    ):
        if v.value.problem:
            out.append(f"  {what}: {v.value.problem}")
            continue
        out.append(
            f"  {what}: RMSE {v.value.rms:.3g} (bar {v.bar_rms:.3g}, benchmark "
            f"{v.benchmark.rms:.3g}); largest {v.value.max:.3g} (bar {v.bar_max:.3g}, "
            f"benchmark {v.benchmark.max:.3g})"
            + (f"; {v.value.bad} non-finite where the truth is finite" if v.value.bad else "")
        )
    return out
