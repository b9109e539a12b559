"""The per-call ledger: what every buffer holds, in launch order, and so
what each tensor argument of a kernel holds before and after it.

Only a kernel that stores a buffer gives it a value: the kernels of a
scheduled node store the buffers those nodes define (unless Inductor
removed the store); extern kernels and custom ops store their outputs and
change the arguments they declare mutated. Arguments a kernel only reads
hold what their writer stored.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

from ..._native import shim
from ...records import Reason
from .atomics import accumulates
from .capture import Writes, writes_of_line_being_rendered
from .internals import InternalsMoved, reading
from .nodes import GraphFacts, Value

# The C header's role codes, as _C exports them: generated code passes them.
_abi = shim()
ROLE_UNKNOWN, ROLE_READ = _abi.ROLE_UNKNOWN, _abi.ROLE_READ
ROLE_WRITE, ROLE_READ_WRITE = _abi.ROLE_WRITE, _abi.ROLE_READ_WRITE
ROLE_ACCUMULATE = _abi.ROLE_ACCUMULATE


@dataclass(frozen=True)
class Held:
    """What an argument holds at one record: its role (the ABI's code), the
    exported node whose value it is ("" where none), why none (a Reason's
    `why`), and the formula of its value ("" where none is known)."""

    role: int
    node: str = ""
    why: str = ""
    formula: str = ""

    @classmethod
    def of(cls, role: int, value: Value) -> Held:
        return cls(role, value.node, value.why, value.formula)

    def read(self) -> Held:
        """Reading it: what its writer left there (the formula stays with
        the record of the write: generated code carries it once)."""
        return Held(ROLE_READ, self.node, self.why)


def _not_yet_written() -> Held:
    return Held(ROLE_WRITE, why=Reason.NOT_YET_WRITTEN.why())


class Provenance:
    """One per generated wrapper: what every buffer holds, in launch order."""

    def __init__(self) -> None:
        self._facts: GraphFacts | None = None
        # buffer -> what it holds once its writer has run
        self._held: dict[str, Held] = {}
        # Set by kernel_call: the kernel writes memory that none of its
        # arguments' names stand for (or what it writes is not known).
        self.writes_unseen = False

    def _graph_facts(self) -> GraphFacts:
        from torch._inductor.virtualized import V

        if self._facts is None or self._facts.graph is not V.graph:
            self._facts = GraphFacts(V.graph)
            self._held = {}
        return self._facts

    def source_table(self) -> str:
        """Where the user's code made each exported node of the graph being
        lowered (GraphFacts.source_table)."""
        return self._graph_facts().source_table()

    def kernel_call(
        self, kernel_name: str, names: list[str], writes: Writes | None = None
    ) -> tuple[dict[str, Held], dict[str, Held]]:
        """(before, after): what each argument name holds before and after
        the kernel. Called while the wrapper renders the kernel's call line;
        `writes` when the caller knows them, else the line's. A kernel whose
        line says nothing of its writes claims nothing."""
        facts = self._graph_facts()
        writes = writes or writes_of_line_being_rendered()
        call = _Call(self._held, facts, kernel_name, writes)
        self.writes_unseen = call.writes_unseen(names)
        before: dict[str, Held] = {}
        after: dict[str, Held] = {}
        for name in names:
            before[name], after[name] = call.argument(name)
        return before, after


class _Call:
    """One kernel call being rendered: each argument falls in one case."""

    def __init__(
        self, held: dict[str, Held], facts: GraphFacts, kernel: str, writes: Writes | None
    ) -> None:
        # The ledger's own map: each case records what it leaves there.
        self.held = held
        self.facts = facts
        self.kernel = kernel
        self.writes = writes
        graph = facts.graph
        # Buffers a kernel updates in place of one it reads (in_out_ptr):
        # defined by the kernel, but holding its input's value before launch.
        self.in_place_of = getattr(getattr(graph, "wrapper_code", None), "reuses", {}) or {}
        self.graph_inputs = set(getattr(graph, "graph_inputs", {}))
        self.inputs = self.graph_inputs | set(getattr(graph, "constants", {}))

    def writes_unseen(self, names: list[str]) -> bool:
        """Whether the kernel writes memory none of `names` stands for, or
        what it writes is not known."""
        if self.writes is None:
            return True
        graph = self.facts.graph
        unnamed = (
            (self.writes.defined | self.writes.mutated)
            - set(names)
            - self.writes.fresh
            - {self.in_place_of[n] for n in names if n in self.in_place_of}
            - set(graph.removed_buffers)
            - set(graph.inplaced_to_remove)
        )
        return any(_has_memory(graph, n) for n in unnamed)

    def argument(self, name: str) -> tuple[Held, Held]:
        """(before, after) for one argument, by its case."""
        w = self.writes
        if w is None:
            return self._writes_unknown(name)
        if name in w.defined and name not in self.held and name in self.in_place_of:
            return self._updated_in_place_of_another(name)
        if name in w.mutated:
            return self._changed_in_place(name)
        if name in w.defined and name not in self.held:
            return self._stored_fresh(name)
        held = _read(self.held.get(name), self._given(name))
        return held, held

    def _given(self, name: str) -> str:
        """Why a buffer nothing wrote holds no node: the caller gave it."""
        return (Reason.MODEL_INPUT if name in self.graph_inputs else Reason.CONSTANT).why()

    def _writes_unknown(self, name: str) -> tuple[Held, Held]:
        unknown = Held(ROLE_UNKNOWN, why=Reason.WRITES_UNKNOWN.why(self.kernel))
        before = _read(self.held.get(name), "")
        if name in self.held:
            self.held[name] = unknown
        return before, unknown

    def _updated_in_place_of_another(self, name: str) -> tuple[Held, Held]:
        # The buffer it is updated in place of, through every reuse: one
        # that nothing wrote yet, nor the caller gave, holds leftover
        # memory, which the kernel writes before it reads.
        source = self.in_place_of[name]
        seen = {name}
        while source not in self.held and source in self.in_place_of and source not in seen:
            seen.add(source)
            source = self.in_place_of[source]
        held = _read(self.held.get(source), "")
        stored = self._stored(name)
        if stored.role == ROLE_READ:
            # Fused away: the kernel reads its input there and stores
            # nothing, so the buffer keeps its input's value.
            self.held[name] = held
            return held, held
        if source not in self.held and source not in self.inputs:
            before = _not_yet_written()
        else:
            before = replace(held, role=ROLE_READ_WRITE)
        after = self.held[name] = replace(stored, role=ROLE_READ_WRITE)
        return before, after

    def _changed_in_place(self, name: str) -> tuple[Held, Held]:
        if name in self.writes.defined and name not in self.held:
            # Defined by this kernel, which fills it before it accumulates
            # into it (zeros, then index_add, fused): before launch,
            # leftover memory.
            before = _not_yet_written()
        else:
            before = _read(self.held.get(name), self._given(name))
        mutator = self.writes.mutated_by.get(name)
        value = (
            self.facts.value_after(name, mutator)
            if mutator is not None
            else Value(why=Reason.CHANGED_IN_PLACE.why())
        )
        if value.why == Reason.CHANGED_IN_PLACE.why():
            value = replace(value, why=Reason.CHANGED_IN_PLACE.why(self.kernel))
        role = ROLE_ACCUMULATE if accumulates(mutator) else ROLE_READ_WRITE
        after = self.held[name] = Held.of(role, value)
        return before, after

    def _stored_fresh(self, name: str) -> tuple[Held, Held]:
        after = self.held[name] = self._stored(name)
        return _not_yet_written(), after

    def _stored(self, name: str) -> Held:
        graph = self.facts.graph
        if name in graph.removed_buffers or name in graph.inplaced_to_remove:
            return Held(ROLE_READ, why=Reason.NEVER_STORED.why(self.kernel))
        return Held.of(ROLE_WRITE, self.facts.value_of(name))


def _has_memory(graph, name: str) -> bool:
    """False for names that hold no memory (a user Triton kernel's own node,
    with NoneLayout); True where unsure (counted and logged by `reading`)."""
    from torch._inductor import ir

    try:
        with reading("whether a buffer holds memory"):
            buffer = graph.get_buffer(name)
    except InternalsMoved:
        return True
    return buffer is None or not isinstance(getattr(buffer, "layout", None), ir.NoneLayout)


def _read(held: Held | None, why: str) -> Held:
    """Reading a buffer: what its writer left in it, else `why` none is known."""
    return held.read() if held is not None else Held(ROLE_READ, why=why)
