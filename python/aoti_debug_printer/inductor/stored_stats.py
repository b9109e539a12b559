"""Statistics inside the Triton kernels Inductor generates
(AOTI_DEBUG_PRINTER_STATS_IN_KERNELS).

Where a kernel stores a whole float32, float16 or bfloat16 buffer, it also
reduces the values it stores, masked as the store is and cast as the store
casts, into a slot of the run's statistics workspace: counts by atomic adds,
the extremes as keys by atomic maxima, the sums in float64 (the fields and
the keys: aoti_debug_printer.h, AOTI_DEBUG_PRINTER_STORED_*). The buffer's
record after the kernel, and before any later kernel that reads it while
nothing wrote it between, then takes its statistics from the slot: no
statistics launch of its own (codegen.py asks `stored_by_call`).

Why Inductor's own machinery carries it: the workspace is a ZERO_PER_GRAPH
workspace, as cooperative reductions' semaphores are, which the wrapper
allocates and zeroes once per run and passes to each kernel that uses it, in
the C++ and the Python wrapper and in the compile-time autotuning alike. A
kernel's first slot is an integer argument of its own (`seed_offset`, the
way Inductor lifts a constant into an argument), so that kernels with the
same code still share one compiled kernel, whatever their slots.

Only the C++ wrapper (AOTInductor) at level 2 gets them: the JIT wrapper's
autotuner runs a kernel several times on the run's own workspace while it
benchmarks configs, which would count those runs too.
"""

from __future__ import annotations

import logging
import re
import weakref

from .._native import shim
from .provenance.internals import InternalsMoved, reading
from .switches import stats_in_kernels_wanted

log = logging.getLogger(__name__)

_abi = shim()
FIELDS = _abi.STORED_SLOT
SWITCH = _abi.STORED_SWITCH
_FIELD = {
    "nan": _abi.STORED_NAN,
    "pos_inf": _abi.STORED_POS_INF,
    "neg_inf": _abi.STORED_NEG_INF,
    "zeros": _abi.STORED_ZEROS,
    "max_key": _abi.STORED_MAX_KEY,
    "min_key": _abi.STORED_MIN_KEY,
    "sum": _abi.STORED_SUM,
    "sum_of_squares": _abi.STORED_SUM_OF_SQUARES,
}
# The kernel's parameters, and the wrapper's name of the workspace (which
# codegen.py keeps out of the records).
WORKSPACE_PARAM = "aoti_stats"
SLOT_PARAM = "aoti_slot"
# "workspace": what Inductor's compile-time autotuning takes for a workspace it
# allocated itself (wrapper.py: _generate_kernel_call_helper), not a buffer.
WORKSPACE_PREFIX = "workspace_aoti_debug_printer_stats_"
# A store line as TritonKernel.store and store_reduction write it, on every
# torch we support (2.11 to 2.15); any other (block pointers, TMA, a mask
# that is an expression) keeps no statistics.
_STORE = re.compile(
    r"tl\.store\((?P<ptr>\w+) \+ \((?P<index>.*)\), (?P<value>\w+), (?P<mask>[\w &]+)\)\Z"
)


def _triton_dtypes() -> dict:
    import torch

    return {torch.float32: "tl.float32", torch.float16: "tl.float16", torch.bfloat16: "tl.bfloat16"}


# The next free slot of each graph being compiled. Slot 0 stays unused: a
# kernel's first field is then a sympy Integer the wrappers pass as an int
# (sympy's 0 and 1 are types of their own), and a multiple of 16 in every
# kernel, so that kernels of the same code are specialized alike.
_next_slot: weakref.WeakKeyDictionary = weakref.WeakKeyDictionary()
_FIRST_SLOT = 1


def claim_slot(graph, expected: int | None = None) -> int | None:
    """The next free slot of `graph`, now taken; None where `expected` (the
    slot after a kernel's last) is not the next: a kernel's slots follow
    one another."""
    slot = _next_slot.get(graph, _FIRST_SLOT)
    if expected is not None and slot != expected:
        return None
    _next_slot[graph] = slot + 1
    return slot


def wanted() -> bool:
    """Whether the kernel being generated keeps statistics: AOTInductor's C++
    wrapper (not the JIT's cpp_wrapper, whose autotuning may run at run time
    on the run's own workspace), compiled at level 2, with the switch on, in
    the program's own graph (a subgraph's slots would start again at 1 in
    the same workspace, and a loop's body would add every iteration's)."""
    from torch._inductor import config
    from torch._inductor.virtualized import V

    return (
        stats_in_kernels_wanted()
        and str(config.aot_inductor.debug_intermediate_value_printer) == "2"
        and bool(getattr(V.graph, "aot_mode", False))
        and getattr(V.graph, "parent", None) is None
    )


class _KernelSlots:
    """The slots one kernel keeps: its first slot, and each stored
    buffer's place after it (None: stored twice, so no slot describes it)."""

    def __init__(self, first: int, slot_param: str) -> None:
        self.first = first
        self.slot_param = slot_param
        self.buffers: dict[str, int | None] = {}
        self.workspace = ""


def _kernel_qualifies(kernel) -> bool:
    # Exactly TritonKernel: templates store through their own path, and a
    # cooperative, combo or mixed-order kernel guards or splits its stores.
    return (
        type(kernel).__name__ == "TritonKernel"
        and not getattr(kernel, "cooperative_reduction", False)
        and not getattr(kernel, "is_combo_kernel", False)
        and not getattr(kernel, "mix_order_reduction", False)
    )


def _stores_whole(kernel, name: str, index, inside_reduction: bool) -> bool:
    """Whether the store writes every element of `name` once: a store whose
    index is not a constant, over ranges whose sizes multiply to the
    buffer's (Inductor's stores are one element per index)."""
    import sympy
    from torch._inductor.virtualized import V

    if isinstance(index, (int, sympy.Integer)):
        return False
    numel = sympy.Integer(1)
    for tree in kernel.range_trees:
        if not tree.is_reduction or inside_reduction:
            numel = numel * tree.numel
    try:
        with reading("a stored buffer's size"):
            return V.graph.sizevars.statically_known_equals(numel, V.graph.get_numel(name))
    except InternalsMoved:  # counted and logged there: this store keeps no statistics
        return False


def _slot_lines(n: int, pointer: str, value: str, index: str, mask: str, dtype: str) -> list[str]:
    """Triton lines that reduce one store's values into the slot at `pointer`.

    The values as stored (cast to the buffer's dtype), each where the store
    writes one: broadcast to the index's shape and the mask's. Programs add
    their partial sums and counts and raise the keys' maxima; an atomic
    whose operand is zero is skipped (NaN and Inf counts mostly are)."""
    v, m, f, d, k, c = (f"aoti_{x}{n}" for x in "vmfdkc")
    inf = 'float("inf")'

    def masked(cond: str) -> str:
        return f"{m} & ({cond})" if mask != "None" else cond

    lines = [
        f"{v} = ({value}).to({dtype}).to(tl.float32)",
        f"{v}, {k} = tl.broadcast({v}, {index})",
    ]
    if mask != "None":
        lines.append(f"{v}, {m} = tl.broadcast({v}, {mask})")
    lines += [
        f"{f} = {masked(f'tl.abs({v}) < {inf}')}",
        f"{d} = tl.where({f}, {v}, 0.0).to(tl.float64)",
        # The key of aoti_debug_printer.h: it orders as the floats do, never 0.
        f"{k} = {v}.to(tl.int32, bitcast=True).to(tl.int64)",
        f"{k} = tl.where({k} < 0, {k} ^ 0x7FFFFFFF, {k}) + 2147483649",
    ]

    def add(field: str, total: str, op: str = "atomic_add", to: str = "") -> list[str]:
        target = f"{pointer} + {_FIELD[field]}"
        if to:
            target = f"({target}).to(tl.pointer_type({to}), bitcast=True)"
        return [
            f"{c} = {total}",
            f"tl.{op}({target}, {c}, mask={c} != 0, sem='relaxed')",
        ]

    count = "tl.sum(({}).to(tl.int64))".format
    lines += add("nan", count(masked(f"{v} != {v}")))
    lines += add("pos_inf", count(masked(f"{v} == {inf}")))
    lines += add("neg_inf", count(masked(f"{v} == -{inf}")))
    lines += add("zeros", count(f"{f} & ({v} == 0.0)"))
    lines += add("max_key", f"tl.max(tl.where({f}, {k}, 0))", "atomic_max")
    lines += add("min_key", f"tl.max(tl.where({f}, 8589934592 - {k}, 0))", "atomic_max")
    lines += add("sum", f"tl.sum({d})", to="tl.float64")
    lines += add("sum_of_squares", f"tl.sum({d} * {d})", to="tl.float64")
    return lines


def keep_statistics(kernel, buffer, name: str, index, inside_reduction: bool) -> None:
    """After `kernel` wrote its store of `name` into `buffer` (an
    IndentedBuffer), where the store writes the whole buffer: the lines that
    keep its statistics, under the store's DeferredLine name, so that they
    go where the store goes."""
    import torch
    from torch._inductor.codegen.common import DeferredLine, WorkspaceArg, WorkspaceZeroMode
    from torch._inductor.virtualized import V

    if not wanted() or not _kernel_qualifies(kernel):
        return
    dtype = _triton_dtypes().get(V.graph.get_dtype(name))
    if dtype is None or not _stores_whole(kernel, name, index, inside_reduction):
        return
    written = getattr(buffer, "_lines", None)
    last = written[-1] if written else None
    match = (
        _STORE.match(str(last.line).strip())
        if isinstance(last, DeferredLine) and last.name == name
        else None
    )
    if match is None:
        return
    graph = V.graph
    try:
        device = graph.get_current_device_or_throw()
    except RuntimeError:  # a kernel generated outside the codegen's loop: no slot
        return
    slots: _KernelSlots | None = getattr(kernel, "_aoti_stored", None)
    if name in (slots.buffers if slots else {}):
        slots.buffers[name] = None  # stored twice: no slot tells what it holds
        return
    place = len(slots.buffers) if slots else 0
    # A kernel's slots follow one another: taken in the order it stores.
    slot = claim_slot(graph, slots.first + place if slots else None)
    if slot is None:
        return
    if slots is None:
        slots = _KernelSlots(slot, kernel.args.seed_offset(SLOT_PARAM, slot * FIELDS))
        kernel._aoti_stored = slots
    slots.buffers[name] = place
    workspace = WorkspaceArg(
        count=(slots.first + place + 1) * FIELDS,
        zero_mode=WorkspaceZeroMode.ZERO_PER_GRAPH,
        device=device,
        outer_name=f"{WORKSPACE_PREFIX}{device.type}_{device.index}",
        inner_name=WORKSPACE_PARAM,
        dtype=torch.int64,
    )
    slots.workspace = workspace.outer_name
    kernel.args.workspace_args[:] = [
        a for a in kernel.args.workspace_args if a.inner_name != WORKSPACE_PARAM
    ] + [workspace]
    pointer = f"aoti_p{place}"
    lines = [
        f"{pointer} = {WORKSPACE_PARAM} + ({slots.slot_param} + {place * FIELDS})",
        *_slot_lines(place, pointer, match["value"], match["index"], match["mask"].strip(), dtype),
    ]
    # Only where the run switched them on (the workspace's first field): never
    # while Inductor's autotuning at compile time times the kernel's configs.
    buffer.writeline(DeferredLine(name, f"if tl.load({WORKSPACE_PARAM} + {SWITCH}) != 0:"))
    with buffer.indent():
        for line in lines:
            buffer.writeline(DeferredLine(name, line))


def stored_by_call(kernel) -> tuple[str, dict[str, int]]:
    """What `kernel`'s call keeps: the wrapper's name of the workspace, and
    for each buffer it stores whole, the wrapper's name of it and the first
    field of its slot. Empty where it keeps none."""
    from torch._inductor.virtualized import V

    slots: _KernelSlots | None = getattr(kernel, "_aoti_stored", None)
    if slots is None:
        return "", {}
    # As is_buffer_removed decides which DeferredLines (the store's, and so
    # the statistics') are dropped.
    removed = {
        name
        for owner in (V.graph, kernel)
        for names in ("removed_buffers", "inplaced_to_remove")
        for name in getattr(owner, names, ())
    }
    inplaced = getattr(kernel.args, "inplace_buffers", {})
    fields = {}
    for name, place in slots.buffers.items():
        if place is None or name in removed:
            continue
        outer = inplaced[name].other_names[-1] if name in inplaced else name
        fields[outer] = (slots.first + place) * FIELDS
    return slots.workspace, fields


# The calls being written, innermost last: what each keeps (stored_by_call,
# or kept_cpp.kept_by_group: a C++ kernel's adds the fields its slots span).
_calls: list[tuple] = []


def current_call() -> tuple:
    """What the kernel whose call is being written keeps ("", {}: nothing)."""
    return _calls[-1] if _calls else ("", {})


class call_of_kept:
    """While the call of a kernel that keeps `kept` is written."""

    def __init__(self, kept: tuple) -> None:
        self._kept = kept

    def __enter__(self):
        _calls.append(self._kept)

    def __exit__(self, *exc_info):
        _calls.pop()


def call_of(kernel) -> call_of_kept:
    """While a Triton kernel's call is written (TritonKernel.call_kernel)."""
    return call_of_kept(stored_by_call(kernel))
