"""Which node of the exported program a buffer holds the value of, or why
none: graph facts per lowered graph, and value naming.

A buffer holds Inductor's FX node it was lowered from (origin_node). That
node holds an exported node's value only if it is where that node's
decomposition ends: the one node of it that other nodes (or the output)
use, possibly through reshapes. Anything else is an intermediate, whose
value may still have a formula (formulas.py).
"""

from __future__ import annotations

from dataclasses import dataclass

from ...records import Reason
from ..op_names import torch_ops_path
from . import formulas
from .formulas import formula_of
from .internals import InternalsMoved, reading

# Ops whose output holds the same elements, in the same row-major order, as
# their input: a value that reaches the end of a decomposition only through
# them is that node's value, reshaped.
_RESHAPES = frozenset(
    {
        "aten.view.default",
        "aten.reshape.default",
        "aten._unsafe_view.default",
        "aten.squeeze.dim",
        "aten.squeeze.dims",
        "aten.squeeze.default",
        "aten.unsqueeze.default",
    }
)
# Ops that copy their second argument into their first.
_COPIES = frozenset({"aten.copy_.default", "aten.copy.default"})
# Ops whose lowering first stores args[0] (a clone of it, for the
# functional ones: torch/_inductor/lowering.py), then changes that buffer in
# place. The in-place ones are what Inductor's reinplacing pass makes of the
# functional ones (the node keeps its name).
_COPY_THEN_CHANGE = frozenset(
    {
        "aten.index_put.default",
        "aten.index_put_.default",
        "aten._unsafe_index_put.default",
        "aten._unsafe_index_put_.default",
        "aten.scatter.src",
        "aten.scatter.value",
        "aten.scatter_.src",
        "aten.scatter_.value",
        "aten.scatter_add.default",
        "aten.scatter_add_.default",
        "aten.scatter_reduce.two",
        "aten.scatter_reduce_.two",
        "aten.as_strided_scatter.default",
    }
)


@dataclass(frozen=True)
class Value:
    """What a buffer holds: the exported node whose value it is, or why
    none (a Reason's `why`) and its formula ("" where none is known)."""

    node: str = ""
    why: str = ""
    formula: str = ""


def _root_names(fx_node) -> set[str]:
    """The exported program's nodes an Inductor FX node was made from: the
    roots of its meta["from_node"] chains. Empty when it has no chain (a
    node Inductor made up)."""
    roots: set[str] = set()
    stack = list(fx_node.meta.get("from_node") or [])
    while stack:
        source = stack.pop()
        parents = list(getattr(source, "from_node", None) or [])
        if parents:
            stack.extend(parents)
        elif getattr(source, "name", None):
            roots.add(source.name)
    return roots


class GraphFacts:
    """Per lowered graph: which Inductor node ends each exported node's
    decomposition, and so what each buffer holds."""

    def __init__(self, graph) -> None:
        self.graph = graph
        self._root: dict = {}
        self._mutators_by_buffer: dict[str, list] | None = None
        self._arguments: dict | None = None
        # Why the argument values could not be read, where they could not.
        self._arguments_moved: InternalsMoved | None = None
        # exported node -> Inductor nodes of it that something outside uses
        self.exits: dict[str, list] = {}
        fx_graph = getattr(graph, "graph", None)
        # Inputs and parameters by the name of the buffer that holds them.
        self.named = {
            n.name: n for n in getattr(fx_graph, "nodes", ()) if n.op in ("placeholder", "get_attr")
        }
        # The tensors the user passes, by their position (a formula's inputs).
        self.tensor_inputs = {
            n: k
            for k, n in enumerate(
                n
                for n in getattr(fx_graph, "nodes", ())
                if n.op == "placeholder" and _is_tensor(n.meta.get("val"))
            )
        }
        for n in getattr(fx_graph, "nodes", ()):
            if n.op != "call_function":
                continue
            root = self.root(n)
            if root is None:
                continue
            if any(u.op == "output" or self.root(u) != root for u in n.users):
                self.exits.setdefault(root, []).append(n)

    def source_table(self) -> str:
        """Where the user's code made each exported node, as the C library
        takes it (source_lines.table): from the stack trace each node of
        the lowered graph keeps of the exported node it came from."""
        from ...source_lines import table, torch_dirs, user_frames

        skip = torch_dirs()
        frames: dict = {}
        for n in getattr(getattr(self.graph, "graph", None), "nodes", ()):
            if n.op != "call_function":
                continue
            root = self.root(n)
            if root is None or root in frames:
                continue
            found = user_frames(n.meta.get("stack_trace"), skip)
            if found:
                frames[root] = found
        return table(frames)

    def root(self, fx_node) -> str | None:
        if fx_node not in self._root:
            roots = _root_names(fx_node) if fx_node.op == "call_function" else set()
            self._root[fx_node] = next(iter(roots)) if len(roots) == 1 else None
        return self._root[fx_node]

    def holds(self, fx_node) -> Value:
        """The exported node whose value `fx_node` holds, or why none (no
        formula: the caller decides whether to look for one)."""
        roots = _root_names(fx_node)
        if len(roots) != 1:
            return Value(
                why=Reason.SEVERAL_NODES.why(", ".join(sorted(roots)))
                if roots
                else Reason.NO_EXPORTED_NODE.why(fx_node.name)
            )
        root = next(iter(roots))
        exits = self.exits.get(root, [])
        if len(exits) != 1:
            return Value(why=Reason.SEVERAL_VALUES.why(f"{root}, {len(exits)} values"))
        if fx_node is not exits[0] and not self._reaches_exit_by_reshapes(fx_node, root, exits[0]):
            return Value(why=Reason.INTERMEDIATE.why(f"of {root}: {fx_node.name}"))
        return Value(node=root)

    def value_of(self, buffer_name: str) -> Value:
        """What the buffer holds once stored."""
        try:
            return self._value_of(buffer_name)
        except InternalsMoved as e:
            return Value(why=e.why())

    def value_after(self, buffer_name: str, mutator) -> Value:
        """What a buffer holds once `mutator` (an IR buffer standing for a
        change to it, or an extern kernel that changes it) has run.

        A functional node of Inductor's graph that takes the buffer's old
        value (index_put, scatter: what an index_add_, index_copy_ or
        accumulating index_put_ became) is done, in place, by its mutators.
        Once the last of them has run, the buffer holds that node's value,
        and so that of the exported node whose decomposition it ends. The
        node is the buffer's own origin (a lowering that copies its input
        first) or, where the buffer is a graph input, the mutator's origin
        whose first argument is that input."""
        try:
            with reading("what a change in place completes"):
                done = self._completed_by(buffer_name, mutator)
            if done is None:
                return Value(why=Reason.CHANGED_IN_PLACE.why())
            # A graph input changed by the program (a buffer's mul_, a
            # cache's update): copy_(input, new value) ends the graph; what
            # it copies is the node.
            if torch_ops_path(done.target) in _COPIES and _is_fx_node(done.args[1]):
                done = done.args[1]
            return self._named_or_formula(done)
        except InternalsMoved as e:
            return Value(why=e.why())

    def _completed_by(self, buffer_name: str, mutator):
        """The one graph node whose value the buffer holds once `mutator`
        has run; None where there is not exactly one."""
        origins = set(getattr(mutator, "origins", None) or ())
        changes = self._mutators().get(buffer_name, [])
        position = next((i for i, m in enumerate(changes) if m is mutator), None)
        if position is None:
            return None
        # A node a later mutator also works on is not done yet.
        for later in changes[position + 1 :]:
            origins -= set(getattr(later, "origins", None) or ())
        buffer = self.graph.get_buffer(buffer_name)
        own = buffer.get_origin_node() if buffer is not None else None
        old_value = own if own is not None else self.named.get(buffer_name)
        if own is not None and own in origins:
            done = [own]
        else:
            done = [
                o for o in origins if o.op == "call_function" and o.args and o.args[0] is old_value
            ]
            # Of a chain on the old value (mul(state, 0.9), then the copy_
            # of what follows), the last: one the others don't use.
            if len(done) > 1:
                done = [o for o in done if not origins.intersection(o.users)]
        return done[0] if len(done) == 1 else None

    def _value_of(self, buffer_name: str) -> Value:
        with reading("a buffer's origin node"):
            buffer = self.graph.get_buffer(buffer_name)
            fx_node = buffer.get_origin_node() if buffer is not None else None
        if fx_node is None:
            fx_node = self._argument_values().get(buffer_name)
            if fx_node is not None and fx_node.meta["val"].dtype != buffer.get_dtype():
                # An integral argument widened for the op (cumsum of a bool).
                widened = [["prims.convert_element_type.default", [None, buffer.get_dtype()], {}]]
                return Value(
                    why=Reason.NO_GRAPH_NODE.why(),
                    formula=formula_of(self, fx_node, then=widened),
                )
        if fx_node is None and buffer is None:
            return Value(why=Reason.NO_GRAPH_NODE.why())
        if fx_node is None:
            formula = formulas.formula_of_unnamed(self, buffer)
            if not formula and self._arguments_moved is not None:
                # It may have been an argument of its kernel's node.
                raise self._arguments_moved
            return Value(why=Reason.NO_GRAPH_NODE.why(), formula=formula)
        if any(
            fx_node in (getattr(m, "origins", None) or ())
            for m in self._mutators().get(buffer_name, [])
        ):
            # A lowering that copies its input and changes the copy in place
            # (index_put): the node's value is there once they have run;
            # the copy's own kernel stores the input, unchanged.
            copied = fx_node.args[0] if fx_node.args else None
            if torch_ops_path(fx_node.target) not in _COPY_THEN_CHANGE or not _is_fx_node(copied):
                return Value(
                    why=Reason.INTERMEDIATE.why(f"of {fx_node.name}: before its changes in place")
                )
            fx_node = copied
        return self._named_or_formula(fx_node)

    def _named_or_formula(self, fx_node) -> Value:
        held = self.holds(fx_node)
        if held.node:
            return held
        return Value(
            why=held.why,
            formula=formula_of(self, fx_node, completes=formulas.completion(self, fx_node)),
        )

    def _reaches_exit_by_reshapes(self, fx_node, root: str, exit_node) -> bool:
        node = fx_node
        while node is not exit_node:
            inside = [u for u in node.users if u.op == "call_function" and self.root(u) == root]
            if len(inside) != 1 or str(inside[0].target) not in _RESHAPES:
                return False
            node = inside[0]
        return True

    def _mutators(self) -> dict[str, list]:
        """Mutated buffer -> the IR buffers and nodes that change it, in
        schedule order."""
        if self._mutators_by_buffer is None:
            scheduler = getattr(self.graph, "scheduler", None)
            real = getattr(scheduler, "mutation_real_name", {}) or {}
            by_buffer: dict[str, list] = {}
            for outer in getattr(scheduler, "nodes", ()):
                for node in outer.get_nodes() if hasattr(outer, "get_nodes") else [outer]:
                    for b in node.get_buffer_names():
                        if real.get(b, b) != b:
                            by_buffer.setdefault(real[b], []).append(self.graph.get_buffer(b))
                    ir_node = getattr(node, "node", None)
                    for m in ir_node.get_mutation_names() if ir_node is not None else ():
                        changes = by_buffer.setdefault(real.get(m, m), [])
                        if not changes or changes[-1] is not ir_node:
                            changes.append(ir_node)
            self._mutators_by_buffer = by_buffer
        return self._mutators_by_buffer

    def _argument_values(self) -> dict:
        """Buffer -> the graph node whose value it is, for buffers with no
        origin node that a kernel of one graph node takes as a tensor
        argument: an extern kernel's input realized in the layout it needs
        (the query, key, value and mask of an attention), a piece of a
        concatenation. Such a kernel's tensor inputs are its node's tensor
        arguments, in order; the buffer must be the input itself (or what
        it views from its start: a broadcast mask), of the argument's size and
        dtype (or an integral one widened to int64)."""
        if self._arguments is None:
            try:
                with reading("the arguments of extern kernels"):
                    self._arguments = self._find_argument_values()
            except InternalsMoved as e:
                self._arguments, self._arguments_moved = {}, e
        return self._arguments

    def _find_argument_values(self) -> dict:
        import torch
        from torch._inductor import ir
        from torch.utils import _pytree as pytree

        found: dict[str, set] = {}
        operations = getattr(self.graph, "operations", None) or getattr(self.graph, "buffers", ())
        for op in operations:
            if not isinstance(op, ir.InputsKernel):
                continue
            fx_node = op.get_origin_node()
            if fx_node is None:
                # A kernel of several outputs (an attention) has none: the
                # origin that calls its op.
                calls = [o for o in op.origins if o.target is getattr(op, "op_overload", None)]
                fx_node = calls[0] if len(calls) == 1 else None
            if fx_node is None or fx_node.op != "call_function":
                continue
            arguments = [
                a
                for a in pytree.tree_leaves((fx_node.args, fx_node.kwargs))
                if _is_fx_node(a) and isinstance(a.meta.get("val"), torch.Tensor)
            ]
            inputs = list(op.inputs)
            if len(inputs) != len(arguments):
                continue
            for given, argument in zip(inputs, arguments):
                buffer = _whole_buffer(given)
                if (
                    buffer is not None
                    and argument.target is torch.ops.aten.expand.default
                    and list(buffer.get_size()) != list(argument.meta["val"].shape)
                ):
                    # The kernel reads it broadcast (CUDA's efficient
                    # attention, its mask): the buffer holds what is expanded.
                    argument = argument.args[0]
                value = argument.meta["val"]
                if (
                    buffer is not None
                    and buffer.get_origin_node() is None
                    and list(buffer.get_size()) == list(value.shape)
                    and (
                        buffer.get_dtype() == value.dtype
                        or (
                            buffer.get_dtype() is torch.int64
                            and not (value.is_floating_point() or value.is_complex())
                        )
                    )
                ):
                    found.setdefault(buffer.get_name(), set()).add(argument)
        return {name: next(iter(nodes)) for name, nodes in found.items() if len(nodes) == 1}


def _is_fx_node(value) -> bool:
    import torch.fx

    return isinstance(value, torch.fx.Node)


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _whole_buffer(node):
    """The buffer an IR input is, or views from its start (the mask an
    attention reads broadcast); None for anything else. The caller holds
    its size to the argument's."""
    from torch._inductor import ir

    if isinstance(node, ir.ReinterpretView):
        if node.layout.offset != 0:
            return None
        node = node.data
    while isinstance(node, (ir.TensorBox, ir.StorageBox)):
        node = node.data
    return node if isinstance(node, ir.Buffer) and not isinstance(node, ir.InputsKernel) else None
