"""The exported program evaluated node by node, as the float64 truth or as
the benchmark in its own dtypes, from the model inputs or with the compiled
run's values put in place; and the facts of its graph those evaluations
need."""

from __future__ import annotations

from typing import Any

import torch
import torch.fx

from ..numerics import scale_of

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
VAR_MEAN = "aten.var_mean.correction"


def terms_scale(target, args) -> tuple[float, float] | None:
    """The scale of the terms a sum or mean adds up: its first argument."""

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
        from torch.utils import _pytree as pytree

        evaluation = self

        class Interpreter(torch.fx.Interpreter):
            def run_node(self, n):
                if n.op == "call_function":
                    a, kw = self.fetch_args_kwargs_from_env(n)
                    a, kw = pytree.tree_map(evaluation.adapt, (a, kw))
                    result = evaluation.call(n.target, a, kw, evaluation.memory_formats.get(n.name))
                    if n.name in keep and (terms := terms_scale(n.target, a)) is not None:
                        evaluation.terms[n.name] = terms
                else:
                    result = super().run_node(n)
                    # A parameter is adapted where an op reads it (above):
                    # the unlifted module fetches them all first, and as the
                    # truth's float64 copies they would all be held at once
                    # (8 bytes a parameter: 64 GB for an 8B model).
                    eager = n.op == "placeholder" or n.name in keep or n.name in substitutes
                    if eager or n.name in evaluation.mutated:
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
        from torch.utils import _pytree as pytree

        if memory_format is not None and not self.truth and is_convolution(target):
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
    program,
    args: tuple,
    kwargs: dict | None = None,
    float64: bool = False,
    keep: set[str] | None = None,
) -> dict[str, Any]:
    """Every node's value (those in `keep`, where given) from running
    `program` node by node: the truth (float64 on the CPU) with `float64`,
    else in its own dtypes where its inputs are."""
    from torch.utils import _pytree as pytree

    flat = [
        t
        for t in pytree.tree_leaves((tuple(args), dict(kwargs or {})))
        if isinstance(t, torch.Tensor)
    ]
    device = str(flat[0].device) if flat else "cpu"
    names = {n.name for n in program.graph.nodes} if keep is None else set(keep)
    return Evaluation(program, truth=float64, device=device).run(args, kwargs or {}, names)


def is_convolution(target) -> bool:
    """An ATen convolution, whose first two arguments are its input and weight."""

    aten = torch.ops.aten
    return getattr(target, "overloadpacket", None) in (
        aten.convolution,
        aten._convolution,
        aten.conv1d,
        aten.conv2d,
        aten.conv3d,
    )


class ProgramGraph:
    """The program's nodes by name and its user inputs, looked up once."""

    def __init__(self, program) -> None:
        self.nodes = {n.name: n for n in program.graph.nodes}
        self.user_inputs = set(program.graph_signature.user_inputs)


def region_of(graph: ProgramGraph, name: str, held) -> tuple[int, bool]:
    """(nodes evaluated for `name`'s own error, whether they reach a user
    input): its ancestors back to the values `held` (the dump's)."""
    names, reaches = region_nodes(graph, name, held)
    return len(names), reaches


def region_nodes(graph: ProgramGraph, name: str, held) -> tuple[list[str], bool]:
    """The nodes that compute `name` from the values `held` (the dump's),
    `name` included, in the program's order, and whether they reach a user
    input."""
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
    order = {n: i for i, n in enumerate(nodes)}
    names = sorted((x for x in seen if nodes[x].op == "call_function"), key=order.__getitem__)
    return names, reaches
