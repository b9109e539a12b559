"""Statistics inside the C++ kernels Inductor generates for the CPU
(AOTI_DEBUG_PRINTER_STATS_IN_KERNELS): stored_stats.py's work for
Inductor's C++ backend.

Where a C++ kernel stores a whole float32, float16 or bfloat16 buffer, each
thread also reduces the values it stores, as stored, into a KeptStats of its
own (aoti_debug_printer_kernel.h, spliced into the kernel's source): a
vector store its lanes (a tail loop's only its `tail_size`), a scalar store
its value. A thread's share of a parallel region ends by merging into the
buffer's slot; what the kernel's own thread stores outside any region
merges at the kernel's end. The buffer's records then take their
statistics from the slot (codegen.py asks `current_call`), as the GPU's do.

Why the kernel is given its slots by a thread-local pointer
(aoti_debug_printer::kernel_statistics) and not an argument: Inductor's
C++ kernels take no workspace argument. The wrapper sets it just before
the call, from the library's `keep_cpu_statistics`, which zeroes the
kernel's slots in this thread's CPU workspace, or gives none where the run's
records take nothing from kernels; the kernel reads it once as it starts,
before its threads do. The slots are numbered with the Triton kernels',
per graph (stored_stats.claim_slot), so that a later kernel's record of a
buffer nothing wrote since still finds its slot.

Only Inductor's scalar and vector kernels keep them: a 2-D tile's
transposed store, an atomic add or a store into an outer-loop-fused local
buffer leaves its buffer to the record's own pass, as does a buffer a
kernel stores twice.
"""

from __future__ import annotations

from functools import cache

from .._native import HEADER, KERNEL_HEADER
from .stored_stats import FIELDS, claim_slot, wanted

# The wrapper's expression for the workspace its records read.
WORKSPACE = "aoti_debug_printer::cpu_statistics(AOTI_DEBUG_PRINTER_API)"
# In the kernel: its slots (null: keep nothing), and each thread's statistics.
_SLOTS = "aoti_debug_printer_slots"
_KEPT = "aoti_kept"
_KEPT_DTYPES = ("float32", "float16", "bfloat16")


class GroupKept:
    """What one C++ kernel (an Inductor KernelGroup: one function) keeps:
    its first slot, and each stored buffer's place after it (None: stored
    twice, or by a store that keeps nothing, so no slot tells what it
    holds)."""

    def __init__(self) -> None:
        self.first: int | None = None
        self.buffers: dict[str, int | None] = {}
        self.claimed = 0  # slots taken, one after another from `first`

    def count(self) -> int:
        return self.claimed


@cache
def _kept_line_class():
    from torch._inductor.utils import DeferredLineBase

    class KeptLine(DeferredLineBase):
        """A line of the kernel written where Inductor opens a scope (the
        function, a parallel region) but known only once the whole kernel
        is: how many buffers it keeps. None (no line) where it keeps none."""

        def __init__(self, group: GroupKept, text: str, prefix: str = "") -> None:
            super().__init__(prefix + text)
            self.group, self.text, self.prefix = group, text, prefix

        def __call__(self) -> str | None:
            count = self.group.count()
            return self.prefix + self.text.format(count=count) if count else None

        def _new_line(self, line: str):
            # Inductor only re-indents these (with_prefix, lstrip).
            return KeptLine(self.group, self.text, line[: len(line) - len(line.lstrip())])

    return KeptLine


def _kept_line(group: GroupKept, text: str):
    return _kept_line_class()(group, text)


def declare(group: GroupKept, function_scope: bool) -> list:
    lines = []
    if function_scope:
        lines.append(
            # Taken, not read: a kernel whose call set none (its buffers kept
            # nothing after all) finds none, never an earlier call's slots.
            _kept_line(
                group,
                f"int64_t* const {_SLOTS} = "
                "std::exchange(aoti_debug_printer::kernel_statistics, nullptr);",
            )
        )
    lines.append(_kept_line(group, f"aoti_debug_printer::Kept<{{count}}> {_KEPT};"))
    return lines


def merge(group: GroupKept):
    return _kept_line(group, f"{_KEPT}.merge_into({_SLOTS});")


def _keeps_nothing(group: GroupKept, name: str) -> None:
    group.buffers[name] = None


def _whole(kernel, name: str, index, reduction: bool) -> bool:
    """Whether the store writes every element of `name`: an index that is
    not a constant, over loops whose sizes multiply to the buffer's (a
    reduction's result: the loops outside the reduction). Inductor's stores
    are one element per index."""
    import sympy
    from torch._inductor.utils import sympy_product
    from torch._inductor.virtualized import V

    from .provenance.internals import InternalsMoved, reading

    ranges = kernel.ranges[: kernel.reduction_depth] if reduction else kernel.ranges
    if isinstance(index, (int, sympy.Integer)) or not ranges:
        return False
    try:
        with reading("a stored buffer's size"):
            return V.graph.sizevars.statically_known_equals(
                sympy_product(ranges), V.graph.get_numel(name)
            )
    except InternalsMoved:  # counted and logged there: this store keeps nothing
        return False


def _local_buffer(name: str) -> bool:
    """Whether `name` is a buffer of an outer-loop-fused kernel's own, local
    to a part of its loops."""
    from torch._inductor.codegen.cpp_utils import LocalBufferContext
    from torch._inductor.virtualized import V

    context = V.local_buffer_context
    return isinstance(context, LocalBufferContext) and name in context.local_buffers


def keep_statistics(kernel, name: str, index, value, mode, vector: bool, reduction: bool) -> None:
    """After `kernel` (a sub-kernel of a C++ kernel: scalar, vector, tail)
    wrote its store of `name` (`reduction`: of a reduction's result, after
    its loop): the line that keeps the statistics of what it stores, under
    the store's DeferredLine name, so that it goes where the store goes."""
    from torch._inductor.codegen.common import DeferredLine
    from torch._inductor.codegen.cpp_utils import DTYPE_TO_CPP, cexpr_index
    from torch._inductor.virtualized import V

    group: GroupKept | None = getattr(kernel.args, "_aoti_kept", None)
    if group is None or not wanted():
        return
    if group.buffers.get(name, 0) is None:
        return
    stored_here = kernel.__dict__.setdefault("_aoti_stored_names", set())
    dtype = V.graph.get_dtype(name)
    # A vector kernel's reduction into one value per row stores a scalar.
    lanes = vector and not (reduction and kernel.tiling_idx >= kernel.reduction_depth)
    if (
        mode is not None
        or type(kernel).__name__ not in ("CppKernel", "CppVecKernel")
        # A scalar stored into every lane (a fill): its vector is another's.
        or (lanes and not reduction and not getattr(value, "is_vec", False))
        or name in stored_here
        or _local_buffer(name)
        or str(dtype).removeprefix("torch.") not in _KEPT_DTYPES
        or not _whole(kernel, name, index, reduction)
    ):
        _keeps_nothing(group, name)
        return
    stored_here.add(name)
    if name not in group.buffers:
        slot = claim_slot(V.graph, None if group.first is None else group.first + group.claimed)
        if slot is None:  # another kernel's slot between: this one keeps nothing
            _keeps_nothing(group, name)
            return
        if group.first is None:
            group.first = slot
        group.buffers[name] = group.claimed
        group.claimed += 1
    place = group.buffers[name]
    ctype = DTYPE_TO_CPP[dtype]
    if lanes:
        if reduction and str(dtype) != "torch.float32":
            # What store_reduction stores: the float result converted, by this name.
            value = f"{ctype.replace('::', '_')}_{value}"
        add = f"add_vector({value}, {cexpr_index(kernel.num_elems)})"
    else:
        add = f"add(static_cast<float>(static_cast<{ctype}>({value})))"
    lines = kernel.reduction_suffix if reduction else kernel.stores
    lines.writeline(DeferredLine(name, f"if ({_SLOTS}) {_KEPT}[{place}].{add};"))


def kept_by_group(group: GroupKept, args) -> tuple:
    """What the kernel's call keeps: the workspace expression, each buffer it
    stores whole by the wrapper's name with its slot's first field, and the
    fields the kernel's slots span (the wrapper zeroes them before the call)."""
    from torch._inductor.codegen.common import DeferredLine

    if group.first is None:
        return ("", {})
    inplaced = getattr(args, "inplace_buffers", {})
    fields = {}
    for name, place in group.buffers.items():
        # Removed as the store's DeferredLine is, and the statistics' with it.
        if place is None or DeferredLine(name, "kept")() is None:
            continue
        outer = inplaced[name].other_names[-1] if name in inplaced else name
        fields[outer] = (group.first + place) * FIELDS
    if not fields:
        return ("", {})
    return (WORKSPACE, fields, (group.first * FIELDS, group.count() * FIELDS))


def keep_slots_line(kept: tuple) -> str:
    """The wrapper's line before the call of a kernel that keeps statistics
    (kept_by_group's): its slots, zeroed, or none."""
    first, fields = kept[2]
    return (
        "aoti_debug_printer::kernel_statistics = aoti_debug_printer::keep_cpu_statistics("
        f"AOTI_DEBUG_PRINTER_API, {first}, {fields});"
    )


@cache  # read once, not per kernel
def kernel_preamble() -> str:
    return f"{HEADER.read_text()}\n{KERNEL_HEADER.read_text()}\n"
