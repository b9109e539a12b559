"""Formulas: the value of a buffer no single node holds (a layer norm's
mean, a softmax's sum, a copy of a weight in another layout), as the
Inductor nodes that compute it, back to values the program names (nodes
tagged by nodes.GraphFacts, parameters, user inputs). `diverge` evaluates
a formula as it evaluates the program. A formula is JSON:

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

A buffer with no origin node gets the formula of the first recogniser of
RECOGNISERS that knows it.
"""

from __future__ import annotations

import json
import math
import operator
from typing import Any, Protocol

from ...records import dtype_name
from ..op_names import torch_ops_path
from .internals import Expected, InternalsMoved, reading


class FormulaFacts(Protocol):
    """What a formula needs of its lowered graph (nodes.GraphFacts gives it)."""

    graph: Any
    # exported node -> the Inductor nodes that end its decomposition
    exits: dict[str, list]
    # inputs and parameters by the name of the buffer that holds them
    named: dict[str, Any]
    # the tensors the user passes, by their position
    tensor_inputs: dict[Any, int]

    def root(self, fx_node) -> str | None: ...

    def holds(self, fx_node) -> Any: ...


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


class NoFormula(Expected):
    """A value whose formula cannot be written exactly."""


def formula_op(target) -> str:
    """An op a formula may use, by the name diverge finds it again by;
    NoFormula for another namespace, side effects, random or uninitialised
    values."""
    import torch

    if target is operator.getitem:
        return torch_ops_path(target)
    if (
        isinstance(target, torch._ops.OpOverload)
        and target.namespace in _FORMULA_NAMESPACES
        and not target._schema.is_mutable
        and target._opname not in _UNDEFINED_VALUES
        and torch.Tag.nondeterministic_seeded not in target.tags
    ):
        return torch_ops_path(target)
    raise NoFormula


def formula_of(
    facts: FormulaFacts,
    fx_node,
    then: list | None = None,
    name: str = "",
    args: dict[int, object] | None = None,
    completes: dict | None = None,
) -> str:
    """`fx_node`'s formula as JSON text; "" where it cannot be written
    exactly. `then`: steps applied after it, each to the value before it
    (its first argument); `args`: arguments of `fx_node` itself replaced,
    by position; `completes`: written as is. InternalsMoved where the
    graph does not hold what this reads."""
    steps: list = []
    index: dict = {}

    def visit(n):
        if n in index:
            return {"step": index[n]}
        if n.op == "get_attr":
            return {"param": str(n.target)}
        if n.op == "placeholder":
            if n not in facts.tensor_inputs:
                raise NoFormula
            val = n.meta["val"]
            return {
                "input": facts.tensor_inputs[n],
                "dtype": dtype_name(val.dtype),
                "shape": [d if isinstance(d, int) else None for d in val.shape],
            }
        if n.op != "call_function":
            raise NoFormula
        if n is not fx_node:
            node = facts.holds(n).node
            if node:
                held = {"node": node}
                if n is not facts.exits[node][0]:
                    held["shape"] = static_shape(n)
                return held
        if len(steps) >= MAX_FORMULA_STEPS:
            raise NoFormula
        n_args = list(n.args)
        for i, a in (args or {}).items() if n is fx_node else ():
            n_args[i] = a
        step = _step(n, n_args, visit)
        index[n] = len(steps)
        steps.append(step)
        return {"step": index[n]}

    try:
        with reading("a formula's nodes"):
            value = visit(fx_node)
            for op, then_args, kwargs in then or ():
                steps.append([op, [value, *(_encode(a, None) for a in then_args[1:])], kwargs])
                value = {"step": len(steps) - 1}
    except NoFormula:
        return ""
    root = facts.root(fx_node) if fx_node.op == "call_function" else None
    name = name or (f"{root}/{fx_node.name}" if root in facts.exits else fx_node.name)
    formula = {"name": name, "steps": steps, "value": value}
    if completes:
        formula["completes"] = completes
    return json.dumps(formula, separators=(",", ":"), allow_nan=False)


# A completion longer than this is not written: a completion adds what a
# kernel adds to the value it reads (a bias, through a view), no more.
MAX_COMPLETION_STEPS = 4


def completion(facts: FormulaFacts, fx_node) -> dict | None:
    """How the exported node `fx_node` is a part of follows from `fx_node`'s
    value and parameters alone, as a formula's `completes`, where it does:
    on the GPU, Inductor's post-grad pass unfuse_bias_add_to_pointwise
    makes a linear's addmm an mm and an add, and the add goes into the next
    pointwise kernel. Completed from the mm's saved buffer, that kernel's
    own error starts at what it read, not at the matmul's (a TF32 matmul's
    noise would hide a wrong activation). None where it does not."""
    root = facts.root(fx_node)
    exits = facts.exits.get(root, []) if root else []
    if len(exits) != 1 or exits[0] is fx_node or facts.holds(exits[0]).node != root:
        return None
    steps: list = []
    index: dict = {}
    reads_this = False

    def visit(n):
        nonlocal reads_this
        if n is fx_node:
            reads_this = True
            return {"this": True}
        if n in index:
            return {"step": index[n]}
        if n.op == "get_attr":
            return {"param": str(n.target)}
        if n.op != "call_function" or facts.root(n) != root:
            raise NoFormula
        if len(steps) >= MAX_COMPLETION_STEPS:
            raise NoFormula
        step = _step(n, n.args, visit)
        index[n] = len(steps)
        steps.append(step)
        return {"step": index[n]}

    try:
        with reading("a completion's nodes"):
            value = visit(exits[0])
    except (NoFormula, InternalsMoved):  # InternalsMoved: counted and logged by reading
        return None
    return {"node": root, "steps": steps, "value": value} if reads_this else None


def variance_sum(facts: FormulaFacts, buffer) -> str:
    """The one buffer Inductor's var_mean lowering makes that no graph node
    holds: the sum of squared deviations, m2 = var * (n - correction),
    stored by the Welford reduction (its output 1) or by the two-pass one
    (a sum that reads the mean)."""
    import torch
    from torch._inductor import ir

    var_means = [
        o
        for o in buffer.origins
        if o.op == "call_function" and o.target is torch.ops.aten.var_mean.correction
    ]
    if len(var_means) != 1:
        return ""
    var_mean = var_means[0]
    data = getattr(buffer, "data", None)  # none where the buffer is an extern kernel's
    welford = (
        isinstance(data, ir.WelfordReduction)
        and data.output_index == 1
        and data.reduction_type == "welford_reduce"
    )
    two_pass = (
        type(data) is ir.Reduction
        and data.reduction_type == "sum"
        and any(
            _is_mean_of(facts.graph.get_buffer(name), var_mean) for name in buffer.get_read_names()
        )
    )
    if not (welford or two_pass):
        return ""
    dims = var_mean.args[1] if len(var_mean.args) > 1 else var_mean.kwargs.get("dim")
    _, reduced = static_reduced_sizes(var_mean.args[0], dims)
    correction = var_mean.kwargs.get("correction")
    n = math.prod(reduced) - (1 if correction is None else correction)
    return formula_of(
        facts,
        var_mean,
        then=[["getitem", [None, 0], {}], ["aten.mul.Tensor", [None, n], {}]],
        name=f"{facts.root(var_mean) or var_mean.name}/variance_sum",
    )


def mean_sum(facts: FormulaFacts, buffer) -> str:
    """The sum Inductor's mean lowering stores before it divides (an
    RMSNorm's mean of squares: the division is fused into the next kernel):
    sum(x, dims) in the dtype the buffer holds. The buffer must be a sum
    reduction of the mean's sizes whose origins hold no reduction but the
    mean: a mean lowers to exactly one."""
    import torch
    from torch._inductor import ir

    data = getattr(buffer, "data", None)  # none where the buffer is an extern kernel's
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
    dims, reduced = static_reduced_sizes(x, mean.args[1])
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
    return formula_of(facts, x, then=then, name=f"{facts.root(mean) or mean.name}/sum")


def copy(facts: FormulaFacts, buffer) -> str:
    """A copy of a user input or a parameter in another layout (a
    convolution's channels-last input and weight): a pointwise buffer whose
    every element loads the source's element of the same index, and
    nothing else."""
    import sympy
    from torch._inductor import ir

    if not (isinstance(buffer, ir.ComputedBuffer) and type(buffer.data) is ir.Pointwise):
        return ""
    data = buffer.data
    reads = list(buffer.get_read_names())
    if not (len(reads) == 1 and reads[0] in facts.named):
        return ""
    source_node = facts.named[reads[0]]
    source = facts.graph.get_buffer(reads[0])
    if list(data.ranges) != list(source.get_size()) or data.dtype != source.get_dtype():
        return ""
    # Both loaders, run on one index: the same single load, returned as is.
    index = [
        sympy.Symbol(f"copy_index{k}", integer=True, nonnegative=True)
        for k in range(len(data.ranges))
    ]
    if _loads(data.inner_fn, index) != _loads(source.make_loader(), index):
        return ""
    name = (
        f"{source_node.target}/copy"
        if source_node.op == "get_attr"
        else f"input {facts.tensor_inputs.get(source_node, '?')}/copy"
    )
    return formula_of(facts, source_node, name=name)


def before_bias(facts: FormulaFacts, buffer) -> str:
    """A convolution's output before its bias: on the GPU Inductor calls
    the convolution without its bias and adds the bias in the next kernel.
    The formula carries `completes`: how the node's value follows from this
    buffer, as the next kernel computes it."""
    import torch
    from torch._inductor import ir

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
    shape = static_shape(conv)
    node = facts.holds(conv).node
    completes = None
    if node and conv.args[2].op == "get_attr":
        # Inductor's lowering: add(convolution(x, w, None), view(bias, [C, 1, ...]))
        bias = {"param": str(conv.args[2].target)}
        completes = {
            "node": node,
            "steps": [
                ["aten.view.default", [bias, [shape[1]] + [1] * (len(shape) - 2)], {}],
                ["aten.add.Tensor", [{"this": True}, {"step": 0}], {}],
            ],
            "value": {"step": 1},
        }
    return formula_of(
        facts,
        conv,
        args={2: None},
        completes=completes,
        name=f"{facts.root(conv) or conv.name}/before_bias",
    )


# What a buffer with no origin node may be, in the order they are tried:
# each gives its formula, or "" for a buffer it does not know.
RECOGNISERS = (
    ("a variance's sum of squares", variance_sum),
    ("a mean's sum", mean_sum),
    ("a copy in another layout", copy),
    ("a convolution before its bias", before_bias),
)


def formula_of_unnamed(facts: FormulaFacts, buffer) -> str:
    """The formula of a buffer no graph node holds: the first recogniser's
    that knows it; "" where none does. Where one could not read the buffer
    and no later one knows it, the first such InternalsMoved."""
    moved: InternalsMoved | None = None
    for what, recognise in RECOGNISERS:
        try:
            with reading(f"the formula of {what}"):
                formula = recognise(facts, buffer)
        except NoFormula:
            formula = ""
        except InternalsMoved as e:
            moved, formula = moved or e, ""
        if formula:
            return formula
    if moved is not None:
        raise moved
    return ""


def _is_mean_of(buffer, var_mean) -> bool:
    origin = buffer.get_origin_node() if buffer is not None else None
    return origin is not None and origin.target is operator.getitem and origin.args == (var_mean, 1)


def _loads(loader, index) -> tuple:
    """(buffer, index) of the one load `loader` makes at `index`, where the
    value it returns is that load's, untouched; NoFormula where it does
    anything else."""
    from torch._inductor.virtualized import OpsValue, V

    loaded = object()
    loads = []

    class LoadsOnly:
        def load(self, name, at):
            loads.append((name, at))
            return loaded

        def __getattr__(self, op):
            raise NoFormula

    with V.set_ops_handler(LoadsOnly()):
        value = loader(index)
    if isinstance(value, OpsValue):
        value = value.value
    if value is not loaded or len(loads) != 1:
        raise NoFormula
    return loads[0]


def static_reduced_sizes(fx_node, dims) -> tuple[list[int], list[int]]:
    """(dims, sizes) of a reduction of `fx_node` over `dims` (None: all),
    dims made non-negative. Only these sizes need be static (a layer norm
    over a dynamic batch); NoFormula where one is symbolic."""
    shape = fx_node.meta["val"].shape
    dims = list(range(len(shape))) if dims is None else [d % len(shape) for d in dims]
    sizes = [shape[d] for d in dims]
    if not all(isinstance(n, int) for n in sizes):
        raise NoFormula
    return dims, sizes


def static_shape(fx_node) -> list[int]:
    shape = list(getattr(fx_node.meta.get("val"), "shape", None) or [None])
    if not all(isinstance(d, int) for d in shape):
        raise NoFormula
    return shape


def _step(n, args, visit) -> list:
    """A formula's step for the FX node `n` called on `args` (its own, or
    some replaced): [op, args, kwargs], nodes among them through `visit`."""
    return [
        formula_op(n.target),
        [_encode(a, visit) for a in args],
        {k: _encode(v, visit) for k, v in n.kwargs.items()},
    ]


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
    raise NoFormula  # symbolic sizes, and anything else
