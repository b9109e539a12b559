"""What a package accepts as its inputs, and where that is less than the
exported program allowed.

Inductor may narrow an exported dim while it compiles: a decomposition that
slices `x[:, :64]` adds the guard `s >= 64`, a later broadcast `Eq(s, 64)`,
and the dim exported as 8..512 is compiled for 64 only. AOTInductor's
wrapper checks its inputs only under AOTI_RUNTIME_CHECK_INPUTS=1, so such a
package run at 200 reads the input as 64 and says nothing.

Two checks come from here:
- at run time, the codegen passes each input's `compiled_for` text to the
  shim (aoti_debug_printer_check_input, whose header comment is the
  grammar), which checks the input before the first kernel;
- at compile time, `narrowed` compares what the package accepts with the
  exported program's range constraints, and names the guards that did it.
"""

from __future__ import annotations

import contextlib
import contextvars
import linecache
import logging
import math
import os
import sys
import sysconfig
from dataclasses import dataclass, field
from typing import Any

from ..source_lines import SourceFrame

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Range:
    lo: int
    hi: int | None  # None: no upper bound

    def __str__(self) -> str:
        if self.lo == self.hi:
            return str(self.lo)
        return f"{self.lo}..{'' if self.hi is None else self.hi}"

    def covers(self, other: Range) -> bool:
        return self.lo <= other.lo and (
            self.hi is None or (other.hi is not None and other.hi <= self.hi)
        )


@dataclass(frozen=True)
class Dim:
    accepted: Range
    symbol: str = ""  # the run's symbol where the size is one; "" otherwise
    fixed: bool = False  # a size, not a symbol or an expression
    exported: Range | None = None  # the exported program's range, where wider


@dataclass(frozen=True)
class Accepted:
    """One model input as the package takes it."""

    arg: str  # the wrapper's name (arg0_1)
    name: str  # the exported program's (x), "" where not known
    dtype: str
    device: str
    sizes: tuple[Dim, ...]
    strides: tuple[int | None, ...]

    @property
    def compiled_for(self) -> str:
        """The shim's text (aoti_debug_printer_check_input's grammar)."""

        def dim(d: Dim) -> str:
            text = str(d.accepted.lo) if d.fixed else f"{d.symbol or '?'}:{_as_grammar(d.accepted)}"
            return text + (f"({_as_grammar(d.exported)})" if d.exported else "")

        sizes = ",".join(dim(d) for d in self.sizes)
        strides = ",".join("?" if s is None else str(s) for s in self.strides)
        return f"{self.dtype} {self.device} [{sizes}] [{strides}]"


def _as_grammar(r: Range) -> str:
    """LO..HI, as the shim reads a range (HI empty for none), even of one size."""
    return f"{r.lo}..{'' if r.hi is None else r.hi}"


@dataclass
class Exported:
    """What the compile of an exported program knows of it before Inductor
    runs: each user input's dims as exported (a size, or a symbol's range),
    and how many guards its shape environment held then."""

    names: list[str]
    dims: list[list[tuple[str, Range] | None]]  # per input, per dim: (symbol, range) or None
    program: Any = None
    shape_env: Any = None
    guards_before: int = 0
    # Set by the codegen of the program's main graph.
    accepted: list[Accepted] = field(default_factory=list)
    # The user's frame that stood on the stack where the compile made each
    # guard's location (by id; `slocs` keeps the ids taken), see _user_frames.
    user_frame_of: dict[int, SourceFrame] = field(default_factory=dict)
    slocs: list = field(default_factory=list)


_exported: contextvars.ContextVar[Exported | None] = contextvars.ContextVar(
    "aoti_debug_printer_exported", default=None
)


def exported_facts(program) -> Exported:
    """`program`'s user inputs, as Exported holds them."""
    from torch._guards import detect_fake_mode

    by_name = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    names, dims, values = [], [], []
    for name in program.graph_signature.user_inputs:
        value = by_name[name].meta.get("val") if name in by_name else None
        names.append(name)
        values.append(value)
        dims.append([_exported_dim(d, program.range_constraints) for d in _sizes_of(value)])
    fake_mode = detect_fake_mode([v for v in values if v is not None])
    shape_env = getattr(fake_mode, "shape_env", None)
    guards = len(shape_env.guards) if shape_env is not None else 0
    return Exported(names, dims, program, shape_env, guards)


def _sizes_of(value) -> list:
    import torch

    return list(value.shape) if isinstance(value, torch.Tensor) else []


def _exported_dim(size, ranges) -> tuple[str, Range] | None:
    import torch

    if not isinstance(size, torch.SymInt):
        return None
    expr = size.node.expr
    if expr not in ranges:
        return None
    return str(expr), _as_range(ranges[expr])


def _as_range(vr) -> Range:
    lo = int(vr.lower) if not _infinite(vr.lower) else 0
    hi = None if _infinite(vr.upper) else int(vr.upper)
    return Range(lo, hi)


def _infinite(bound) -> bool:
    try:
        return math.isinf(float(bound))
    except (TypeError, ValueError):
        return True


def current() -> Exported | None:
    """The facts of the exported program compiling now, if any."""
    return _exported.get()


@contextlib.contextmanager
def compiling(program):
    """While an exported program compiles: the codegen annotates each input
    with its exported range, and `narrowed` can compare afterwards. Inside
    a `compiling` of the same program (diverge's, around the entry point's),
    the facts are the outer one's."""
    current = _exported.get()
    if current is not None and current.program is program:
        yield current
        return
    try:
        facts = exported_facts(program)
    except (AttributeError, KeyError, TypeError) as e:
        # Not an ExportedProgram we can read: Inductor says what is wrong
        # with it, if anything; the package is checked without the ranges.
        log.warning("aoti-debug-printer: cannot read the exported program's inputs (%s)", e)
        facts = Exported([], [])
    token = _exported.set(facts)
    try:
        with _user_frames(facts):
            yield facts
    finally:
        _exported.reset(token)


def _not_the_users() -> tuple[str, ...]:
    """Directories whose frames are never the user's code: torch, this
    package, Python's own library, sympy (which torch's shapes call)."""
    import sympy
    import torch

    dirs = [
        os.path.dirname(torch.__file__),
        os.path.dirname(os.path.dirname(os.path.abspath(__file__))),
        sysconfig.get_paths()["stdlib"],
        os.path.dirname(sympy.__file__),
    ]
    return tuple(os.path.join(os.path.abspath(d), "") for d in dirs)


@contextlib.contextmanager
def _user_frames(facts: Exported):
    """While the program compiles: the location torch's shape environment
    gives each guard (an SLoc) names torch's own frame, as
    `_subclasses/fake_impls.py:939 in _compute_slice_index`, where the user
    needs the line of theirs that sliced (their custom op's decomposition,
    which Inductor calls). So each location made is matched with the
    innermost frame of the user's code on the stack then, deeper than the
    compile's own call (whose caller's frames are theirs too, but did not add
    the guard). A torch whose ShapeEnv has no `_get_sloc` gives torch's
    frame alone."""
    import inspect

    from torch.fx.experimental import symbolic_shapes

    original = symbolic_shapes.ShapeEnv.__dict__.get("_get_sloc")
    uninteresting = getattr(symbolic_shapes, "uninteresting_files", None)
    if (
        original is None
        or uninteresting is None
        or "framework_loc" not in inspect.signature(original).parameters
    ):
        log.info(
            "aoti-debug-printer: this torch's ShapeEnv._get_sloc is not as expected: a "
            "narrowed dim's guard names torch's frame only"
        )
        yield
        return
    outside = _depth(sys._getframe())
    skip = _not_the_users()

    def _get_sloc(self, framework_loc=None):
        caller = sys._getframe(1)
        if framework_loc is None:
            # Torch's own frame, as torch finds it from its caller: this
            # wrapper's frame must not be taken for it.
            framework_loc = _first_frame_not_in(caller, uninteresting())
        sloc = original(self, framework_loc)
        # Only this compile's thread and context: another compile's guards
        # are not this one's.
        if _exported.get() is facts:
            frame = _innermost_user_frame(caller, outside, skip)
            if frame is not None:
                facts.user_frame_of[id(sloc)] = frame
                facts.slocs.append(sloc)
        return sloc

    symbolic_shapes.ShapeEnv._get_sloc = _get_sloc
    try:
        yield
    finally:
        symbolic_shapes.ShapeEnv._get_sloc = original


def _first_frame_not_in(frame, files: set[str]):
    """ShapeEnv._get_user_frame's choice, from `frame` out, as the
    traceback.FrameSummary torch keeps in a guard's location."""
    import traceback

    while frame is not None and frame.f_code.co_filename in files:
        frame = frame.f_back
    if frame is None:
        return None
    return traceback.FrameSummary(frame.f_code.co_filename, frame.f_lineno, frame.f_code.co_name)


def _depth(frame) -> int:
    n = 0
    while frame is not None:
        n, frame = n + 1, frame.f_back
    return n


def _innermost_user_frame(frame, outside: int, skip: tuple[str, ...]) -> SourceFrame | None:
    """The innermost frame from `frame` out that is the user's, of those
    deeper than the `outside` outermost frames."""
    frames = []
    while frame is not None:
        frames.append(frame)
        frame = frame.f_back
    for f in frames[: max(len(frames) - outside, 0)]:
        file = f.f_code.co_filename
        if file.startswith("<") or os.path.abspath(file).startswith(skip):
            continue
        code = linecache.getline(file, f.f_lineno).strip()
        return SourceFrame(file=file, line=f.f_lineno, function=f.f_code.co_name, code=code)
    return None


def accepted_inputs() -> list[Accepted]:
    """The inputs of the graph being generated (V.graph), as its package
    takes them; noted for `narrowed` when an exported program compiles."""
    import sympy
    from torch._inductor.virtualized import V
    from torch.utils._sympy.value_ranges import bound_sympy

    graph = V.graph
    var_ranges = graph.sizevars.shape_env.var_to_range
    tensors = [(n, t) for n, t in graph.graph_inputs.items() if not isinstance(t, sympy.Expr)]
    facts = _exported.get()
    # The program's user inputs are the graph's inputs, in order, where
    # their number agrees (weights are constants in AOTInductor).
    known = facts is not None and len(facts.names) == len(graph.graph_inputs)
    position = {n: i for i, n in enumerate(graph.graph_inputs)}
    accepted = []
    for arg, t in tensors:
        i = position[arg]
        exported = facts.dims[i] if known else []
        sizes = []
        for j, d in enumerate(t.get_size()):
            was = exported[j] if j < len(exported) else None
            if isinstance(d, (int, sympy.Integer)):
                dim = Dim(Range(int(d), int(d)), fixed=True)
            else:
                r = _as_range(bound_sympy(d, var_ranges))
                if r.lo == 2 and (was is None or was[1].lo < 2):
                    # Inductor's symbols start at 2 lest 0 and 1 specialize;
                    # the code serves 0 and 1 too (check_lowerbound says so).
                    r = Range(was[1].lo if was else 0, r.hi)
                dim = Dim(r, symbol=str(d) if isinstance(d, sympy.Symbol) else "")
            if was is not None and not dim.accepted.covers(was[1]):
                dim = Dim(dim.accepted, dim.symbol, dim.fixed, exported=was[1])
            sizes.append(dim)
        strides = tuple(
            int(s) if isinstance(s, (int, sympy.Integer)) else None for s in t.get_stride()
        )
        device = t.get_device()
        accepted.append(
            Accepted(
                arg=arg,
                name=facts.names[i] if known else "",
                dtype=str(t.get_dtype()).removeprefix("torch."),
                device=device.type if device is not None else "cpu",
                sizes=tuple(sizes),
                strides=strides,
            )
        )
    if facts is not None and not getattr(graph, "is_const_graph", False):
        facts.accepted = accepted
    return accepted


@dataclass(frozen=True)
class Narrowing:
    """One exported dim the package accepts fewer sizes of."""

    input: str
    dim: int
    exported: Range
    accepted: Range
    why: tuple[str, ...]  # the guards that narrowed it, with where each was added
    equal_to: str = ""  # "input y dim 0": a relation the compile added

    def __str__(self) -> str:
        if self.equal_to:
            what = f"compiled equal to {self.equal_to}"
        elif self.accepted.lo == self.accepted.hi:
            what = f"compiled for {self.accepted} only"
        else:
            what = f"compiled for {self.accepted}"
        why = f" (by {'; '.join(self.why)})" if self.why else ""
        return f"input {self.input} dim {self.dim}: exported as {self.exported}, {what}{why}"


def narrowed(facts: Exported) -> list[Narrowing]:
    """Where the compiled package accepts fewer sizes than `facts` (its
    exported program) allowed: a dim specialized, a range narrowed, two
    dims made equal."""
    found = []
    first_of_symbol: dict[str, str] = {}
    exported_symbol_of: dict[str, str] = {}
    for acc in facts.accepted:
        i = facts.names.index(acc.name) if acc.name in facts.names else -1
        if i < 0:
            continue
        for j, dim in enumerate(acc.sizes):
            was = facts.dims[i][j] if j < len(facts.dims[i]) else None
            if was is None:
                continue
            symbol, exported = was
            here = f"input {acc.name} dim {j}"
            if not dim.accepted.covers(exported):
                found.append(
                    Narrowing(acc.name, j, exported, dim.accepted, _guards_on(facts, symbol))
                )
            elif dim.symbol:
                # Two exported symbols compiled as one: a relation added.
                if dim.symbol in first_of_symbol and exported_symbol_of[dim.symbol] != symbol:
                    found.append(
                        Narrowing(
                            acc.name,
                            j,
                            exported,
                            dim.accepted,
                            _guards_on(facts, symbol),
                            equal_to=first_of_symbol[dim.symbol],
                        )
                    )
                first_of_symbol.setdefault(dim.symbol, here)
                exported_symbol_of.setdefault(dim.symbol, symbol)
    return found


def _guards_on(facts: Exported, symbol: str) -> tuple[str, ...]:
    """The guards the compile added on `symbol`, each with where it was added
    (Inductor's shape environment keeps both)."""
    env = facts.shape_env
    if env is None:
        return ()
    said = []
    for guard in env.guards[facts.guards_before :]:
        expr = getattr(guard, "expr", None)
        if expr is None or symbol not in {str(s) for s in expr.free_symbols}:
            continue
        sloc = getattr(guard, "sloc", None)
        where = str(sloc or "").strip().removeprefix("(").removesuffix(")")
        user = facts.user_frame_of.get(id(sloc)) if sloc is not None else None
        if user is not None:
            # The user's line, then torch's frame that added the guard.
            where = user.text + (f" (in torch: {where})" if where else "")
        said.append(f"guard {expr}" + (f" at {where}" if where else ""))
    return tuple(dict.fromkeys(said))[:3]


def say_narrowed(facts: Exported) -> list[Narrowing]:
    """`narrowed`, each said in one line on the log (a warning: a package
    that rejects sizes its program was exported for is worth one)."""
    found = narrowed(facts)
    for n in found:
        log.warning("aoti-debug-printer: this package accepts fewer sizes than its program: %s", n)
    return found
