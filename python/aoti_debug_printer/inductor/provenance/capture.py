"""What the scheduler and the wrapper are rendering: the one room of this
wing that touches scheduler nodes and wrapper lines.

A kernel's call line is written while the scheduler stands on the nodes
the kernel computes, but its records are rendered later, with the whole
wrapper, when that is no longer known. So the line carries what its kernel
writes (`note_line`), and the records read it back off the line being
rendered (`writes_of_line_being_rendered`).
"""

from __future__ import annotations

import contextlib
import sys
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

_pending = threading.local()
# The attribute a kernel's call line carries: what that kernel writes.
_WRITES = "_aoti_debug_printer_writes"
# What a generated kernel's call keeps of what it stores (stored_stats.py).
_KEPT = "_aoti_debug_printer_kept"


@dataclass(frozen=True)
class Writes:
    """The buffers a kernel defines (stores a new value in) and the ones it
    changes in place; `fresh`: those of `defined` that the call allocates
    itself (no memory anything else held)."""

    defined: frozenset[str]
    mutated: frozenset[str]
    fresh: frozenset[str] = frozenset()
    # mutated buffer -> the last IR buffer or node of this kernel that
    # changes it (its value once the kernel has run: see GraphFacts.value_after)
    mutated_by: dict = field(default_factory=dict, compare=False)


def note_kernel_nodes(kernel_name: str | None, node_schedule) -> None:
    """Called just before a generated kernel's call line is written: the
    scheduler nodes it computes (see inductor/wraps, codegen_comment)."""
    nodes = [n for n in node_schedule if hasattr(n, "get_buffer_names")]
    _pending.kernel = (kernel_name, nodes)


def _take_kernel_nodes(kernel_name: str):
    pending = getattr(_pending, "kernel", None)
    if pending is None or pending[0] != kernel_name:
        return None
    _pending.kernel = None
    return pending[1]


def note_line(line) -> None:
    """Called as the wrapper takes a line, while the scheduler still stands
    on the node it belongs to. Kernel call lines are rendered later, when
    the wrapper is generated and that is no longer known: they carry what
    their kernel writes."""
    kernel_name = getattr(line, "kernel_name", None)
    if kernel_name is None or not hasattr(line, "call_args"):
        return
    from torch._inductor.virtualized import V

    nodes = _take_kernel_nodes(kernel_name)
    if nodes is None:
        # User-defined Triton kernels are written from their extern node.
        current = getattr(getattr(V.graph, "scheduler", None), "current_node", None)
        if current is not None and current.is_extern():
            nodes = [current]
    if nodes is not None:
        object.__setattr__(line, _WRITES, _writes_of_nodes(nodes))
    from ..stored_stats import current_call

    kept = current_call()
    if kept[1]:
        object.__setattr__(line, _KEPT, kept)


def _writes_of_nodes(nodes) -> Writes:
    from torch._inductor.virtualized import V

    real = getattr(getattr(V.graph, "scheduler", None), "mutation_real_name", {}) or {}
    defined: set[str] = set()
    mutated_by: dict = {}
    for node in nodes:
        for b in node.get_buffer_names():
            if real.get(b, b) != b:
                # a buffer that stands for a change to another
                mutated_by[real[b]] = V.graph.get_buffer(b)
            else:
                defined.add(b)
        ir_node = getattr(node, "node", None)
        for m in ir_node.get_mutation_names() if ir_node is not None else ():
            mutated_by[real.get(m, m)] = ir_node
    return Writes(frozenset(defined), frozenset(mutated_by), mutated_by=mutated_by)


def _line_from_frames():
    """The WrapperLine whose call is being rendered: the `self` of a codegen
    frame a few levels up. Stock Inductor says it nowhere else (see
    docs/internals.md, "Inductor's private names")."""
    from torch._inductor.codegen.wrapper import WrapperLine

    # From the caller of writes_of_line_being_rendered up.
    frame = sys._getframe(2)
    for _ in range(24):
        if frame is None:
            return None
        line = frame.f_locals.get("self")
        if isinstance(line, WrapperLine):
            return line
        frame = frame.f_back
    return None


# The line the wrapper renders now, where it says so: the rendering_line
# hook of patches/0006 sets it around each WrapperLine's codegen.
_rendering = threading.local()


@contextlib.contextmanager
def rendering(line):
    """The wrapper renders `line` within (patches/0006's hook)."""
    was = getattr(_rendering, "line", None)
    _rendering.line = line
    try:
        yield
    finally:
        _rendering.line = was


def _line_being_rendered():
    """The line the wrapper said it renders, else the frame walk (a stock
    torch, or one patched before 0006)."""
    line = getattr(_rendering, "line", None)
    return line if line is not None else _line_from_frames()


# Where the line being rendered comes from: the one function the rest of
# the wing asks.
line_source: Callable[[], object | None] = _line_being_rendered


def kept_by_line_being_rendered() -> tuple[str, dict[str, int]]:
    """What the kernel whose call the wrapper is rendering now keeps of what
    it stores (stored_stats.current_call, as the call was written): ("", {})
    where it keeps nothing."""
    line = line_source()
    return getattr(line, _KEPT, ("", {})) if line is not None else ("", {})


def writes_of_line_being_rendered() -> Writes | None:
    """What the kernel whose call the wrapper is rendering now writes.
    Extern kernels' lines hold their IR node; generated kernels' lines
    carry note_line's attribute. None when no such line is found."""
    from torch._inductor import ir

    line = line_source()
    if line is None:
        return None
    writes = getattr(line, _WRITES, None)
    if writes is not None:
        return writes
    node = getattr(line, "node", None)
    if not isinstance(node, ir.ExternKernel):
        return None
    mutated = set(node.get_mutation_names())
    # A call with several outputs defines each (MultiOutput), and allocates
    # them itself, as a call with one output does.
    outputs = {
        o.get_name() for o in getattr(node, "outputs", None) or () if isinstance(o, ir.MultiOutput)
    }
    defined = frozenset({node.get_name()} | outputs) - mutated
    fresh = defined if isinstance(node, ir.ExternKernelAlloc) else frozenset()
    return Writes(defined, frozenset(mutated), fresh, {m: node for m in mutated})
