"""Values no single node holds (a layer norm's sum of squared deviations, a
mean's sum), judged by the formula the codegen recorded for them
(see inductor/provenance): evaluated like the program, in each of the four
evaluations."""

from __future__ import annotations

from typing import Any

from ...records import dtype_name
from ..dumps import Record, first_line
from ..numerics import Environment, judge, scale_of
from .evaluate import VAR_MEAN, Evaluation, ProgramGraph, is_convolution, region_of, terms_scale
from .result import Divergence, Match, NotCompared, Unmatched


class FormulaError(ValueError):
    """A formula this torch or this program cannot evaluate."""


class Formula:
    """How a value no single node holds is computed from values the program
    names (see inductor/provenance): evaluated like the program, in each of the
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
        terms: list[Any] = []  # per step: what terms_scale says, per output for var_mean

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
            target = formula_op(op)
            a, kw = pytree.tree_map(
                evaluation.adapt, (arg(args), {k: arg(v) for k, v in kwargs.items()})
            )
            done.append(
                evaluation.call(
                    target, tuple(a), kw, memory_format if len(done) == last_step else None
                )
            )
            if op == VAR_MEAN:
                terms.append({1: scale_of(a[0])})  # its mean
            elif op == "getitem" and isinstance(args[0], dict) and "step" in args[0]:
                of = terms[args[0]["step"]]
                terms.append(of.get(args[1]) if isinstance(of, dict) else None)
            else:
                terms.append(terms_scale(target, a))
        value = self.value
        last = terms[value["step"]] if isinstance(value, dict) and "step" in value else None
        return evaluation.adapt(arg(value)), (last if isinstance(last, tuple) else None)


def memory_format_of(r: Record):
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


def convolution_formats(graph: ProgramGraph, candidates: list[Record], formulas) -> dict[str, Any]:
    """Convolution node -> the memory format its compiled value has: that of
    the buffer that holds it, or of the one its bias is added to."""
    formats = {}
    for node, r in [(r.node, r) for r in candidates] + [
        (f.completes[0], r) for r, f in formulas if f.completes
    ]:
        if (
            node in graph.nodes
            and is_convolution(graph.nodes[node].target)
            and (fmt := memory_format_of(r)) is not None
        ):
            formats[node] = fmt
    return formats


def complete_nodes(
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


def formula_op(name: str):
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


def judge_formulas(
    result: Divergence,
    formulas,
    program,
    args,
    kwargs,
    env: Environment,
    compiled: dict[str, Any],
    evaluations,
    evaluated,
    graph: ProgramGraph,
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
                            memory_format=memory_format_of(r),
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
            n, from_inputs = region_of(graph, name, compiled)
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
