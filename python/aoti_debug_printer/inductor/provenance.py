"""What each tensor argument of a kernel holds: its role, and the node of
the exported program whose value it holds, or why it holds none.

`diverge` and `compare` match snapshots by that node, so a wrong tag names
a wrong kernel. A tag is therefore given only where it is exact:

- Only a kernel that stores a buffer gives it a value. The kernels of a
  scheduled node (C++, Triton, templates) store the buffers those nodes
  define, unless Inductor removed the store (a value used only inside the
  kernel); extern kernels and custom ops store their outputs and change the
  arguments they declare mutated. Which kernel a call line belongs to is
  noted when the scheduler writes the line; the records themselves are
  written when the wrapper renders that line, after scheduling, when every
  removed store is known.
- A buffer holds Inductor's FX node it was lowered from (origin_node). That
  node holds an exported node's value only if it is where that node's
  decomposition ends: the one node of it that other nodes (or the output)
  use, possibly through reshapes. Anything else is an intermediate.
- Arguments a kernel only reads hold what their writer stored.

A value no single node holds (a layer norm's mean, a softmax's sum, a
copy of a weight in another layout) is given its formula instead: the
Inductor nodes that compute it, back to values the program names (nodes
tagged as above, parameters, user inputs). `diverge` evaluates it as it
evaluates the program. A formula is JSON:

    {"name": display name,
     "steps": [[op, args, kwargs], ...],   # op: "aten.rsqrt.default", "getitem"
     "value": arg,                          # what the buffer holds
     "completes": {"node": name, "steps": [...], "value": arg}}  # optional

where an arg is a JSON scalar, a list, or one of {"step": i} (an earlier
step's value), {"node": name, "shape": [...]} (a node's value; "shape"
where it is reached through reshapes), {"param": fqn} (a parameter, buffer
or constant), {"input": k, "dtype": ..., "shape": [...]} (the k-th tensor
the user passes; None for a dynamic size), {"dtype" | "device" | "layout"
| "memory_format": name}, {"float": "inf" | "-inf" | "nan"}.

`completes` is written where a kernel computes a node's value from this
buffer without storing it (a convolution's bias added in the next kernel):
steps from {"this": true}, the buffer's value, and parameters. `diverge`
evaluates it on the compiled value, as that kernel did, so the kernel's
own error starts from what it read.
"""

from __future__ import annotations

import json
import math
import operator
import sys
import threading
from dataclasses import dataclass, field, replace

from .._native import shim
from ..records import Reason, dtype_name

# The C header's role codes, as _C exports them: generated code passes them.
_abi = shim()
ROLE_UNKNOWN, ROLE_READ = _abi.ROLE_UNKNOWN, _abi.ROLE_READ
ROLE_WRITE, ROLE_READ_WRITE = _abi.ROLE_WRITE, _abi.ROLE_READ_WRITE
ROLE_ACCUMULATE = _abi.ROLE_ACCUMULATE

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

# A formula longer than this is not written: its value is too far from any
# the program names for a comparison to say which kernel is wrong.
MAX_FORMULA_STEPS = 64
# Where a formula's ops come from: ATen's and its decompositions' (trusted
# and side-effect free where their schema says so).
_FORMULA_NAMESPACES = frozenset({"aten", "prims"})
# Ops whose values are whatever the memory held: no evaluation repeats them.
_UNDEFINED_VALUES = frozenset(
    {"empty", "empty_like", "empty_strided", "empty_permuted", "new_empty", "new_empty_strided"}
)

_pending = threading.local()
# The attribute a kernel's call line carries: what that kernel writes.
_WRITES = "_aoti_debug_printer_writes"


@dataclass(frozen=True)
class Writes:
    """The buffers a kernel defines (stores a new value in) and the ones it
    changes in place; `fresh`: those of `defined` that the call allocates
    itself (no memory anything else held)."""

    defined: frozenset[str]
    mutated: frozenset[str]
    fresh: frozenset[str] = frozenset()
    # mutated buffer -> the last IR buffer or node of this kernel that
    # changes it (its value once the kernel has run: see value_after)
    mutated_by: dict = field(default_factory=dict, compare=False)


def note_kernel_nodes(kernel_name: str | None, node_schedule) -> None:
    """Called just before a generated kernel's call line is written: the
    scheduler nodes it computes (see inductor/install, codegen_comment)."""
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


def _writes_of_line_being_rendered() -> Writes | None:
    """What the kernel whose call the wrapper is rendering now writes: its
    line (an Inductor WrapperLine) is the `self` of a codegen frame a few
    levels up. Extern kernels' lines hold their IR node; generated kernels'
    lines carry note_line's attribute. None when no such line is found."""
    from torch._inductor import ir
    from torch._inductor.codegen.wrapper import WrapperLine

    frame = sys._getframe(1)
    for _ in range(24):
        if frame is None:
            return None
        line = frame.f_locals.get("self")
        if isinstance(line, WrapperLine):
            writes = getattr(line, _WRITES, None)
            if writes is not None:
                return writes
            node = getattr(line, "node", None)
            if isinstance(node, ir.ExternKernel):
                mutated = {n for n in node.get_mutation_names()}
                # A call with several outputs defines each (MultiOutput), and
                # allocates them itself, as a call with one output does.
                outputs = {
                    o.get_name()
                    for o in getattr(node, "outputs", None) or ()
                    if isinstance(o, ir.MultiOutput)
                }
                defined = frozenset({node.get_name()} | outputs) - mutated
                fresh = defined if isinstance(node, ir.ExternKernelAlloc) else frozenset()
                return Writes(defined, frozenset(mutated), fresh, {m: node for m in mutated})
            return None
        frame = frame.f_back
    return None


@dataclass(frozen=True)
class Held:
    """What an argument holds at one record: its role (the ABI's code), the
    exported node whose value it is ("" where none), why none (a Reason's
    `why`), and the formula of its value ("" where none is known)."""

    role: int
    node: str = ""
    why: str = ""
    formula: str = ""

    def read(self) -> Held:
        """Reading it: what its writer left there (the formula stays with
        the record of the write: generated code carries it once)."""
        return Held(ROLE_READ, self.node, self.why)


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


class _GraphFacts:
    """Per lowered graph: which Inductor node ends each exported node's
    decomposition."""

    def __init__(self, graph) -> None:
        self.graph = graph
        self._root: dict = {}
        self._mutators_by_buffer: dict[str, list] | None = None
        self._arguments: dict | None = None
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
                self._arguments = self._find_argument_values()
            except Exception:  # noqa: BLE001 - internals move between torch releases: none known
                self._arguments = {}
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

    def value_after(self, buffer_name: str, mutator) -> tuple[str, str, str]:
        """What a buffer holds once `mutator` (an IR buffer standing for a
        change to it, or an extern kernel that changes it) has run: (node,
        "", "") where that is an exported node's value, ("", why, formula)
        otherwise.

        A functional node of Inductor's graph that takes the buffer's old
        value (index_put, scatter: what an index_add_, index_copy_ or
        accumulating index_put_ became) is done, in place, by its mutators.
        Once the last of them has run, the buffer holds that node's value,
        and so that of the exported node whose decomposition it ends. The
        node is the buffer's own origin (a lowering that copies its input
        first) or, where the buffer is a graph input, the mutator's origin
        whose first argument is that input."""
        try:
            origins = set(getattr(mutator, "origins", None) or ())
            changes = self._mutators().get(buffer_name, [])
            position = next((i for i, m in enumerate(changes) if m is mutator), None)
            if position is None:
                return "", Reason.CHANGED_IN_PLACE.why(), ""
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
                    o
                    for o in origins
                    if o.op == "call_function" and o.args and o.args[0] is old_value
                ]
                # Of a chain on the old value (mul(state, 0.9), then the
                # copy_ of what follows), the last: one the others don't use.
                if len(done) > 1:
                    done = [o for o in done if not origins.intersection(o.users)]
        except Exception:  # noqa: BLE001 - internals move between torch releases
            done = []
        if len(done) != 1 or done[0] is None:
            return "", Reason.CHANGED_IN_PLACE.why(), ""
        done = done[0]
        # A graph input changed by the program (a buffer's mul_, a cache's
        # update): copy_(input, new value) ends the graph; what it copies
        # is the node.
        if _target_name(done.target) in _COPIES and _is_fx_node(done.args[1]):
            done = done.args[1]
        node, why = self._holds(done)
        return (node, "", "") if node else ("", why, self.formula_of(done))

    def root(self, fx_node) -> str | None:
        if fx_node not in self._root:
            roots = _root_names(fx_node) if fx_node.op == "call_function" else set()
            self._root[fx_node] = next(iter(roots)) if len(roots) == 1 else None
        return self._root[fx_node]

    def _reaches_exit_by_reshapes(self, fx_node, root: str, exit_node) -> bool:
        node = fx_node
        while node is not exit_node:
            inside = [u for u in node.users if u.op == "call_function" and self.root(u) == root]
            if len(inside) != 1 or str(inside[0].target) not in _RESHAPES:
                return False
            node = inside[0]
        return True

    def value_of(self, buffer_name: str) -> tuple[str, str, str]:
        """(node, "", "") when the buffer, once stored, holds an exported
        node's value; ("", why, formula) otherwise, formula "" where none
        can be written."""
        try:
            buffer = self.graph.get_buffer(buffer_name)
            fx_node = buffer.get_origin_node() if buffer is not None else None
        except Exception:  # noqa: BLE001 - internals move between torch releases
            fx_node = None
        if fx_node is None:
            fx_node = self._argument_values().get(buffer_name)
            if fx_node is not None and fx_node.meta["val"].dtype != buffer.get_dtype():
                # An integral argument widened for the op (cumsum of a bool).
                widened = [["prims.convert_element_type.default", [None, buffer.get_dtype()], {}]]
                return "", Reason.NO_GRAPH_NODE.why(), self.formula_of(fx_node, then=widened)
        if fx_node is None:
            return (
                "",
                Reason.NO_GRAPH_NODE.why(),
                self._variance_sum_formula(buffer)
                or self._mean_sum_formula(buffer)
                or self._copy_formula(buffer)
                or self._before_bias_formula(buffer),
            )
        if any(
            fx_node in (getattr(m, "origins", None) or ())
            for m in self._mutators().get(buffer_name, [])
        ):
            # A lowering that copies its input and changes the copy in place
            # (index_put): the node's value is there once they have run;
            # the copy's own kernel stores the input, unchanged.
            copied = fx_node.args[0] if fx_node.args else None
            if _target_name(fx_node.target) not in _COPY_THEN_CHANGE or not _is_fx_node(copied):
                return (
                    "",
                    Reason.INTERMEDIATE.why(f"of {fx_node.name}: before its changes in place"),
                    "",
                )
            fx_node = copied
        node, why = self._holds(fx_node)
        return (node, "", "") if node else ("", why, self.formula_of(fx_node))

    def _mean_sum_formula(self, buffer) -> str:
        """The formula of the sum Inductor's mean lowering stores before it
        divides (an RMSNorm's mean of squares: the division is fused into
        the next kernel): sum(x, dims) in the dtype the buffer holds. The
        buffer must be a sum reduction of the mean's sizes whose origins
        hold no reduction but the mean: a mean lowers to exactly one. ""
        for any other buffer."""
        import torch
        from torch._inductor import ir

        try:
            data = buffer.data
            reductions = [
                o
                for o in buffer.origins
                if o.op == "call_function" and torch.Tag.reduction in getattr(o.target, "tags", ())
            ]
            if not (
                type(data) is ir.Reduction
                and data.reduction_type == "sum"
                and len(reductions) == 1
                and reductions[0].target is torch.ops.aten.mean.dim
            ):
                return ""
            mean = reductions[0]
            x = mean.args[0]
            dims, reduced = _static_reduced_sizes(x, mean.args[1])
            keepdim = mean.args[2] if len(mean.args) > 2 else mean.kwargs.get("keepdim", False)
            if not (
                list(data.ranges) == list(mean.meta["val"].shape)
                and math.prod(data.reduction_ranges) == math.prod(reduced)
            ):
                return ""
            then = []
            if x.meta["val"].dtype != data.dtype:
                then.append(["prims.convert_element_type.default", [None, data.dtype], {}])
            then.append(["aten.sum.dim_IntList", [None, dims, keepdim], {}])
        except Exception:  # noqa: BLE001 - internals move between torch releases (or _NoFormula)
            return ""
        return self.formula_of(x, then=then, name=f"{self.root(mean) or mean.name}/sum")

    def _variance_sum_formula(self, buffer) -> str:
        """The formula of the one buffer Inductor's var_mean lowering makes
        that no graph node holds: the sum of squared deviations, m2 =
        var * (n - correction), stored by the Welford reduction (its
        output 1) or by the two-pass one (a sum that reads the mean). ""
        for any other buffer."""
        import torch
        from torch._inductor import ir

        try:
            var_means = [
                o
                for o in buffer.origins
                if o.op == "call_function" and o.target is torch.ops.aten.var_mean.correction
            ]
            if len(var_means) != 1:
                return ""
            var_mean = var_means[0]
            data = buffer.data
            welford = (
                isinstance(data, ir.WelfordReduction)
                and data.output_index == 1
                and data.reduction_type == "welford_reduce"
            )
            two_pass = (
                type(data) is ir.Reduction
                and data.reduction_type == "sum"
                and any(
                    self._is_mean_of(self.graph.get_buffer(name), var_mean)
                    for name in buffer.get_read_names()
                )
            )
            if not (welford or two_pass):
                return ""
            dims = var_mean.args[1] if len(var_mean.args) > 1 else var_mean.kwargs.get("dim")
            _, reduced = _static_reduced_sizes(var_mean.args[0], dims)
            correction = var_mean.kwargs.get("correction")
            n = math.prod(reduced) - (1 if correction is None else correction)
        except Exception:  # noqa: BLE001 - internals move between torch releases (or _NoFormula)
            return ""
        return self.formula_of(
            var_mean,
            then=[["getitem", [None, 0], {}], ["aten.mul.Tensor", [None, n], {}]],
            name=f"{self.root(var_mean) or var_mean.name}/variance_sum",
        )

    def _copy_formula(self, buffer) -> str:
        """The formula of a copy of a user input or a parameter in another
        layout (a convolution's channels-last input and weight): a
        pointwise buffer whose every element loads the source's element of
        the same index, and nothing else. "" for any other buffer."""
        import sympy
        from torch._inductor import ir

        try:
            data = buffer.data
            reads = list(buffer.get_read_names())
            if not (
                isinstance(buffer, ir.ComputedBuffer)
                and type(data) is ir.Pointwise
                and len(reads) == 1
                and reads[0] in self.named
            ):
                return ""
            source_node = self.named[reads[0]]
            source = self.graph.get_buffer(reads[0])
            if list(data.ranges) != list(source.get_size()) or data.dtype != source.get_dtype():
                return ""
            # Both loaders, run on one index: the same single load, returned as is.
            index = [
                sympy.Symbol(f"copy_index{k}", integer=True, nonnegative=True)
                for k in range(len(data.ranges))
            ]
            if _loads(data.inner_fn, index) != _loads(source.make_loader(), index):
                return ""
        except Exception:  # noqa: BLE001 - internals move between torch releases (or _NoFormula)
            return ""
        name = (
            f"{source_node.target}/copy"
            if source_node.op == "get_attr"
            else f"input {self.tensor_inputs.get(source_node, '?')}/copy"
        )
        return self.formula_of(source_node, name=name)

    def _before_bias_formula(self, buffer) -> str:
        """The formula of a convolution's output before its bias: on the GPU
        Inductor calls the convolution without its bias and adds the bias in
        the next kernel. Its formula carries `completes`: how the node's
        value follows from this buffer, as the next kernel computes it. ""
        for any other buffer."""
        import torch
        from torch._inductor import ir

        try:
            convs = [
                o
                for o in buffer.origins
                if o.op == "call_function" and o.target is torch.ops.aten.convolution.default
            ]
            if len(convs) != 1 or not isinstance(buffer, ir.ExternKernel):
                return ""
            conv = convs[0]
            if (
                conv.args[2] is None
                or "convolution" not in str(buffer.python_kernel_name)
                or "bias" not in buffer.kwargs
                or buffer.kwargs["bias"] is not None
                or len(buffer.inputs) != 2
            ):
                return ""
            shape = _static_shape(conv)
            node, _ = self._holds(conv)
            completes = None
            if node and conv.args[2].op == "get_attr":
                # Inductor's lowering: add(convolution(x, w, None), view(bias, [C, 1, ...]))
                completes = {
                    "node": node,
                    "steps": [
                        [
                            "aten.view.default",
                            [
                                {"param": str(conv.args[2].target)},
                                [shape[1]] + [1] * (len(shape) - 2),
                            ],
                            {},
                        ],
                        ["aten.add.Tensor", [{"this": True}, {"step": 0}], {}],
                    ],
                    "value": {"step": 1},
                }
        except Exception:  # noqa: BLE001 - internals move between torch releases (or _NoFormula)
            return ""
        return self.formula_of(
            conv,
            args={2: None},
            completes=completes,
            name=f"{self.root(conv) or conv.name}/before_bias",
        )

    @staticmethod
    def _is_mean_of(buffer, var_mean) -> bool:
        origin = buffer.get_origin_node() if buffer is not None else None
        return (
            origin is not None
            and origin.target is operator.getitem
            and origin.args == (var_mean, 1)
        )

    def _holds(self, fx_node) -> tuple[str, str]:
        """(node, "") where `fx_node` holds that exported node's value,
        ("", why) otherwise."""
        roots = _root_names(fx_node)
        if len(roots) != 1:
            return "", (
                Reason.SEVERAL_NODES.why(", ".join(sorted(roots)))
                if roots
                else Reason.NO_EXPORTED_NODE.why(fx_node.name)
            )
        root = next(iter(roots))
        exits = self.exits.get(root, [])
        if len(exits) != 1:
            return "", Reason.SEVERAL_VALUES.why(f"{root}, {len(exits)} values")
        if fx_node is not exits[0] and not self._reaches_exit_by_reshapes(fx_node, root, exits[0]):
            return "", Reason.INTERMEDIATE.why(f"of {root}: {fx_node.name}")
        return root, ""

    def formula_of(
        self,
        fx_node,
        then: list | None = None,
        name: str = "",
        args: dict[int, object] | None = None,
        completes: dict | None = None,
    ) -> str:
        """`fx_node`'s formula (see the module's docstring) as JSON text;
        "" where it cannot be written exactly. `then`: steps applied after
        it, each to the value before it (its first argument); `args`:
        arguments of `fx_node` itself replaced, by position; `completes`:
        written as is."""
        steps: list = []
        index: dict = {}

        def visit(n):
            if n in index:
                return {"step": index[n]}
            if n.op == "get_attr":
                return {"param": str(n.target)}
            if n.op == "placeholder":
                if n not in self.tensor_inputs:
                    raise _NoFormula
                val = n.meta["val"]
                return {
                    "input": self.tensor_inputs[n],
                    "dtype": dtype_name(val.dtype),
                    "shape": [d if isinstance(d, int) else None for d in val.shape],
                }
            if n.op != "call_function":
                raise _NoFormula
            if n is not fx_node:
                node, _ = self._holds(n)
                if node:
                    held = {"node": node}
                    if n is not self.exits[node][0]:
                        held["shape"] = _static_shape(n)
                    return held
            if len(steps) >= MAX_FORMULA_STEPS:
                raise _NoFormula
            n_args = list(n.args)
            for i, a in (args or {}).items() if n is fx_node else ():
                n_args[i] = a
            step = [
                _op_name(n.target),
                [_encode(a, visit) for a in n_args],
                {k: _encode(v, visit) for k, v in n.kwargs.items()},
            ]
            index[n] = len(steps)
            steps.append(step)
            return {"step": index[n]}

        try:
            value = visit(fx_node)
        except _NoFormula:
            return ""
        except Exception:  # noqa: BLE001 - internals move between torch releases: no formula
            return ""
        try:
            for op, args, kwargs in then or ():
                steps.append([op, [value, *(_encode(a, None) for a in args[1:])], kwargs])
                value = {"step": len(steps) - 1}
        except _NoFormula:
            return ""
        root = self.root(fx_node) if fx_node.op == "call_function" else None
        name = name or (f"{root}/{fx_node.name}" if root in self.exits else fx_node.name)
        formula = {"name": name, "steps": steps, "value": value}
        if completes:
            formula["completes"] = completes
        return json.dumps(formula, separators=(",", ":"), allow_nan=False)


# ATen ops that add into their input in an order the hardware picks on
# CUDA (torch.use_deterministic_algorithms flags them), where Inductor
# calls them rather than generating the kernel.
_ATOMIC_ON_CUDA = frozenset(
    {
        "aten.index_add_.default",
        "aten.index_add.default",
        "aten.scatter_add_.default",
        "aten.scatter_add.default",
        "aten.scatter_reduce_.two",
        "aten.scatter_reduce.two",
        "aten.index_reduce_.default",
        "aten.index_put_.default",
        "aten._index_put_impl_.default",
        "aten._unsafe_index_put.default",
        "aten.put_.default",
    }
)


def _accumulates(mutator) -> bool:
    """Whether `mutator` (an IR buffer or extern kernel changing a buffer
    in place) adds floats into it with atomics: a generated scatter in
    atomic_add mode, or a call of an ATen op that does so on CUDA (unless
    compiled under torch.use_deterministic_algorithms(True), where
    Inductor calls these ops for their deterministic kernels)."""
    import torch
    from torch._inductor import ir

    try:
        data = getattr(mutator, "data", None)
        if isinstance(data, ir.Scatter):
            return data.scatter_mode == "atomic_add" and data.dtype.is_floating_point
        op = getattr(mutator, "op_overload", None)
        if (
            op is None
            or str(op) not in _ATOMIC_ON_CUDA
            or torch.are_deterministic_algorithms_enabled()
        ):
            return False
        device = mutator.get_device()
        return device is not None and device.type == "cuda" and _accumulate_flag(mutator)
    except Exception:  # noqa: BLE001 - internals move between torch releases
        return False


def _accumulate_flag(kernel) -> bool:
    """index_put_ and put_ accumulate only when asked (their `accumulate`
    argument); the other ops always do."""
    name = str(kernel.op_overload)
    if "index_put" not in name and "put_" not in name:
        return True
    schema = kernel.op_overload._schema
    names = [a.name for a in schema.arguments]
    position = names.index("accumulate") if "accumulate" in names else None
    constants = list(getattr(kernel, "constant_args", ()) or ())
    value = (getattr(kernel, "kwargs", {}) or {}).get("accumulate")
    if value is None and position is not None:
        # Tensor arguments are inputs; what follows them are the constants.
        tensors = len(getattr(kernel, "inputs", ()) or ())
        k = position - tensors
        value = constants[k] if 0 <= k < len(constants) else None
    return bool(value)


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


def _target_name(target) -> str:
    """An op's name, side effects or not (copy_ is mutable)."""
    try:
        return _op_name(target)
    except _NoFormula:
        return str(target)


def _is_fx_node(value) -> bool:
    import torch.fx

    return isinstance(value, torch.fx.Node)


class _NoFormula(Exception):
    """A value whose formula cannot be written exactly."""


def _loads(loader, index) -> tuple:
    """(buffer, index) of the one load `loader` makes at `index`, where the
    value it returns is that load's, untouched; raises _NoFormula where it
    does anything else."""
    from torch._inductor.virtualized import OpsValue, V

    loaded = object()
    loads = []

    class LoadsOnly:
        def load(self, name, at):
            loads.append((name, at))
            return loaded

        def __getattr__(self, op):
            raise _NoFormula

    with V.set_ops_handler(LoadsOnly()):
        value = loader(index)
    if isinstance(value, OpsValue):
        value = value.value
    if value is not loaded or len(loads) != 1:
        raise _NoFormula
    return loads[0]


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


def _is_tensor(value) -> bool:
    import torch

    return isinstance(value, torch.Tensor)


def _static_reduced_sizes(fx_node, dims) -> tuple[list[int], list[int]]:
    """(dims, sizes) of a reduction of `fx_node` over `dims` (None: all),
    dims made non-negative. Only these sizes need be static (a layer norm
    over a dynamic batch); _NoFormula where one is symbolic."""
    shape = fx_node.meta["val"].shape
    dims = list(range(len(shape))) if dims is None else [d % len(shape) for d in dims]
    sizes = [shape[d] for d in dims]
    if not all(isinstance(n, int) for n in sizes):
        raise _NoFormula
    return dims, sizes


def _static_shape(fx_node) -> list[int]:
    shape = list(getattr(fx_node.meta.get("val"), "shape", None) or [None])
    if not all(isinstance(d, int) for d in shape):
        raise _NoFormula
    return shape


def _op_name(target) -> str:
    """An op a formula may use, by the name diverge finds it again by."""
    import torch

    if target is operator.getitem:
        return "getitem"
    if (
        isinstance(target, torch._ops.OpOverload)
        and target.namespace in _FORMULA_NAMESPACES
        and not target._schema.is_mutable
        and target._opname not in _UNDEFINED_VALUES
        and torch.Tag.nondeterministic_seeded not in target.tags
    ):
        return str(target)
    raise _NoFormula  # another namespace, side effects, random or uninitialised values


def _encode(value, visit):
    """A node's argument in a formula's JSON; Nodes through `visit`."""
    import torch
    import torch.fx

    if isinstance(value, torch.fx.Node):
        return visit(value)
    if value is None or isinstance(value, (bool, int, str)):
        return value
    if isinstance(value, float):
        return value if math.isfinite(value) else {"float": str(value)}
    if isinstance(value, (list, tuple)):
        return [_encode(v, visit) for v in value]
    for kind, cls in (
        ("dtype", torch.dtype),
        ("device", torch.device),
        ("layout", torch.layout),
        ("memory_format", torch.memory_format),
    ):
        if isinstance(value, cls):
            return {kind: dtype_name(value)}
    raise _NoFormula  # symbolic sizes, and anything else


class Provenance:
    """One per generated wrapper: what every buffer holds, in launch order."""

    def __init__(self) -> None:
        self._facts: _GraphFacts | None = None
        # buffer -> what it holds once its writer has run
        self._held: dict[str, Held] = {}
        # Set by kernel_call: the kernel writes memory that none of its
        # arguments' names stand for (or what it writes is not known).
        self.writes_unseen = False

    def _graph_facts(self):
        from torch._inductor.virtualized import V

        if self._facts is None or self._facts.graph is not V.graph:
            self._facts = _GraphFacts(V.graph)
            self._held = {}
        return self._facts

    def kernel_call(
        self, kernel_name: str, names: list[str], writes: Writes | None = None
    ) -> tuple[dict, dict]:
        """(before, after): what each argument name holds before and after
        the kernel. Called while the wrapper renders the kernel's call line;
        `writes` when the caller knows them, else the line's. A kernel whose
        line says nothing of its writes claims nothing."""
        facts = self._graph_facts()
        writes = writes or _writes_of_line_being_rendered()
        before: dict[str, Held] = {}
        after: dict[str, Held] = {}
        graph = facts.graph
        # Buffers a kernel updates in place of one it reads (in_out_ptr):
        # defined by the kernel, but holding its input's value before launch.
        in_place_of = getattr(getattr(graph, "wrapper_code", None), "reuses", {}) or {}
        unnamed = (
            (
                (writes.defined | writes.mutated)
                - set(names)
                - writes.fresh
                - {in_place_of[n] for n in names if n in in_place_of}
                - set(graph.removed_buffers)
                - set(graph.inplaced_to_remove)
            )
            if writes
            else set()
        )
        self.writes_unseen = writes is None or any(_has_memory(graph, n) for n in unnamed)
        if writes is None:
            unknown = Held(ROLE_UNKNOWN, why=Reason.WRITES_UNKNOWN.why(kernel_name))
            for name in names:
                before[name] = _read(self._held.get(name), "")
                after[name] = unknown
                if name in self._held:
                    self._held[name] = unknown
            return before, after

        graph_inputs = set(getattr(graph, "graph_inputs", {}))
        inputs = graph_inputs | set(getattr(graph, "constants", {}))

        def given(name: str) -> str:
            return (Reason.MODEL_INPUT if name in graph_inputs else Reason.CONSTANT).why()

        for name in names:
            if name in writes.defined and name not in self._held and name in in_place_of:
                # The buffer it is updated in place of, through every reuse:
                # one that nothing wrote yet, nor the caller gave, holds
                # leftover memory, which the kernel writes before it reads.
                source = in_place_of[name]
                seen = {name}
                while source not in self._held and source in in_place_of and source not in seen:
                    seen.add(source)
                    source = in_place_of[source]
                held = _read(self._held.get(source), "")
                stored = self._stored(facts, name, kernel_name)
                if stored.role == ROLE_READ:
                    # Fused away: the kernel reads its input there and
                    # stores nothing, so the buffer keeps its input's value.
                    before[name] = after[name] = self._held[name] = held
                    continue
                if source not in self._held and source not in inputs:
                    before[name] = Held(ROLE_WRITE, why=Reason.NOT_YET_WRITTEN.why())
                else:
                    before[name] = replace(held, role=ROLE_READ_WRITE)
                after[name] = self._held[name] = replace(stored, role=ROLE_READ_WRITE)
            elif name in writes.mutated:
                if name in writes.defined and name not in self._held:
                    # Defined by this kernel, which fills it before it
                    # accumulates into it (zeros, then index_add, fused):
                    # before launch, leftover memory.
                    before[name] = Held(ROLE_WRITE, why=Reason.NOT_YET_WRITTEN.why())
                else:
                    before[name] = _read(self._held.get(name), given(name))
                mutator = writes.mutated_by.get(name)
                node, why, formula = (
                    facts.value_after(name, mutator)
                    if mutator is not None
                    else ("", Reason.CHANGED_IN_PLACE.why(), "")
                )
                if why == Reason.CHANGED_IN_PLACE.why():
                    why = Reason.CHANGED_IN_PLACE.why(kernel_name)
                role = ROLE_ACCUMULATE if _accumulates(mutator) else ROLE_READ_WRITE
                after[name] = self._held[name] = Held(role, node, why, formula)
            elif name in writes.defined and name not in self._held:
                before[name] = Held(ROLE_WRITE, why=Reason.NOT_YET_WRITTEN.why())
                after[name] = self._held[name] = self._stored(facts, name, kernel_name)
            else:
                before[name] = after[name] = _read(self._held.get(name), given(name))
        return before, after

    @staticmethod
    def _stored(facts: _GraphFacts, name: str, kernel_name: str) -> Held:
        graph = facts.graph
        if name in graph.removed_buffers or name in graph.inplaced_to_remove:
            return Held(ROLE_READ, why=Reason.NEVER_STORED.why(kernel_name))
        return Held(ROLE_WRITE, *facts.value_of(name))


def _has_memory(graph, name: str) -> bool:
    """False for names that hold no memory (a user Triton kernel's own node,
    with NoneLayout); True where unsure."""
    from torch._inductor import ir

    try:
        buffer = graph.get_buffer(name)
    except Exception:  # noqa: BLE001 - internals move between torch releases
        return True
    return buffer is None or not isinstance(getattr(buffer, "layout", None), ir.NoneLayout)


def _read(held: Held | None, why: str) -> Held:
    """Reading a buffer: what its writer left in it, else `why` none is known."""
    return held.read() if held is not None else Held(ROLE_READ, why=why)
