"""The small models the tests compile, with fixed inputs."""

from __future__ import annotations

import os

import torch


class MLP(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.fc1 = torch.nn.Linear(8, 16)
        self.fc2 = torch.nn.Linear(16, 4)

    def forward(self, x):
        return torch.tanh(self.fc2(torch.nn.functional.gelu(self.fc1(x))))


class Externs(torch.nn.Module):
    """ATen fallbacks between fused C++ kernels: an addmm whose bias is a
    constant, then the same extern kernel (mm) called twice."""

    def __init__(self) -> None:
        super().__init__()
        self.bias = torch.nn.Parameter(torch.randn(6))
        self.weight = torch.nn.Parameter(torch.randn(5, 6))

    def forward(self, x, w1, w2):
        h = torch.addmm(self.bias, torch.sin(x), self.weight).relu() * 3
        return torch.mm(torch.mm(h, w1).relu(), w2)


class Dynamic(torch.nn.Module):
    """Compiled with a dynamic batch: C++ kernels take SymInt arguments."""

    def forward(self, x):
        return torch.softmax(x * 2, dim=0)


class NanMaker(torch.nn.Module):
    """A finite mm, then a fused kernel whose log turns negatives into NaN."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return torch.log(torch.relu(x @ self.weight) - 1) * 2


class SqrtOfProduct(torch.nn.Module):
    """A finite mm, then a fused sqrt: with its positive weight, NaN exactly
    where an input is negative, so one input runs finite and another not."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.rand(8, 8) + 0.1)

    def forward(self, x):
        return torch.sqrt(x @ self.weight) * 2 + 1


# A custom op as users define them with torch.library.Library: AOTInductor
# calls it through its proxy executor.
_LIBRARY = torch.library.Library("adp_models", "DEF")
_LIBRARY.define("scale_rows(Tensor x, Tensor s) -> Tensor")
for _key in ("CPU", "CUDA"):
    _LIBRARY.impl("scale_rows", lambda x, s: x * s[:, None], _key)
_LIBRARY.impl("scale_rows", lambda x, s: torch.empty_like(x), "Meta")


class CustomOp(torch.nn.Module):
    """A fused kernel, the custom op, then a fused kernel that reads its output."""

    def forward(self, x, s):
        return torch.ops.adp_models.scale_rows(torch.relu(x) + 1, s).sum(1)


# Two ops with the bugs the write guard exists for: one changes an input its
# schema says it only reads; one writes rows past the output it declares.
_LIBRARY.define("scale_rows_sloppy(Tensor x, Tensor s) -> Tensor")
_LIBRARY.define("fill_rows_(Tensor(a!) out, Tensor x, int past) -> ()")


def _scale_rows_sloppy(x, s):
    out = x * s[:, None]
    x.mul_(2)  # not in its schema
    return out


def _fill_rows_(out, x, past):
    # `past` > 0: a wrong bound, as a bad mask, writes rows after its output.
    rows = out.shape[0] + past
    torch.as_strided(out, (rows, out.shape[1]), out.stride()).copy_(x[:1].expand(rows, -1))


for _key in ("CPU", "CUDA"):
    _LIBRARY.impl("scale_rows_sloppy", _scale_rows_sloppy, _key)
    _LIBRARY.impl("fill_rows_", _fill_rows_, _key)
_LIBRARY.impl("scale_rows_sloppy", lambda x, s: torch.empty_like(x), "Meta")
_LIBRARY.impl("fill_rows_", lambda out, x, past: None, "Meta")


class UndeclaredMutation(torch.nn.Module):
    """A kernel writes y, the op reads it (and changes it), a kernel reads it again."""

    def forward(self, x, s):
        y = torch.relu(x) + 1
        return (torch.ops.adp_models.scale_rows_sloppy(y, s) + y).sum(1)


class FillRows(torch.nn.Module):
    """Fills input a in place, then reads a and b; the caller passes a and b
    as two halves of one tensor, so rows past a are b's. `library`:
    adp_models (the op's kernel is Python), or adp_cpp (a C++ kernel,
    test/cpp/fill_rows_op.cpp, loaded first)."""

    def __init__(self, past: int = 0, library: str = "adp_models") -> None:
        super().__init__()
        self.past = past
        self.fill_rows_ = getattr(torch.ops, library).fill_rows_

    def forward(self, a, b, x):
        self.fill_rows_(a, torch.relu(x), self.past)
        return a.sum(0) + b.sum(0) * 2


class Steps(torch.nn.Module):
    """A buffer the program adds to in place at every run (as a KV cache or
    a step counter), and a weight it only reads."""

    def __init__(self) -> None:
        super().__init__()
        self.register_buffer("steps", torch.zeros(4))
        self.scale = torch.nn.Parameter(torch.full((4,), 2.0))

    def forward(self, x):
        self.steps.add_(1)
        return x * self.steps * self.scale


# An op that is wrong on one rank only, as a faulty GPU or a rank-dependent
# code path is: on the rank ADP_WRONG_RANK names, it adds ADP_WRONG_BY
# (1e-3 by default; "nan" makes NaN).
_LIBRARY.define("rank_shift(Tensor x) -> Tensor")


def _rank_shift(x):
    wrong = os.environ.get("ADP_WRONG_RANK") == os.environ.get("RANK", "0")
    return x + float(os.environ.get("ADP_WRONG_BY", "1e-3")) if wrong else x.clone()


for _key in ("CPU", "CUDA"):
    _LIBRARY.impl("rank_shift", _rank_shift, _key)
_LIBRARY.impl("rank_shift", lambda x: torch.empty_like(x), "Meta")


class RankShift(torch.nn.Module):
    """A fused kernel, the rank-conditional op, then kernels that read its
    output: every rank runs the same compiled code on the same inputs."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        h = torch.ops.adp_models.rank_shift(torch.relu(x @ self.weight))
        return torch.tanh(h * 2).sum(1)


class TensorParallelMLP(torch.nn.Module):
    """LayerNorm(x + fc2(relu(fc1(x))) + b) as Megatron splits it over `world`
    ranks: fc1 by its output rows (each rank holds a slice of the hidden
    values), fc2 by its input columns (each rank holds a partial sum of the
    output), and an all_reduce of torch.distributed's functional collectives
    adds the partial sums up. `rank` picks the shards of one set of weights;
    `reduce=False` plants the bug of a missing reduction. One compile serves
    every rank: each loads its own shards into the package (shards_of)."""

    def __init__(self, world: int = 1, rank: int = 0, reduce: bool = True) -> None:
        super().__init__()
        d, hidden = 8, 16
        # The same weights whatever the split, and the caller's random
        # numbers (the inputs) untouched by it.
        with torch.random.fork_rng(devices=[]):
            torch.manual_seed(0)
            full1, full2 = torch.nn.Linear(d, hidden, bias=False), torch.nn.Linear(hidden, d)
            self.fc1 = torch.nn.Linear(d, hidden // world, bias=False)
            self.fc2 = torch.nn.Linear(hidden // world, d, bias=False)
        rows = slice(rank * hidden // world, (rank + 1) * hidden // world)
        self.world, self.reduce = world, reduce
        self.bias2 = torch.nn.Parameter(full2.bias.detach().clone())
        self.norm = torch.nn.LayerNorm(d)
        with torch.no_grad():
            self.fc1.weight.copy_(full1.weight[rows])
            self.fc2.weight.copy_(full2.weight[:, rows])

    def forward(self, x):
        partial = self.fc2(torch.relu(self.fc1(x)))
        whole = partial
        if self.world > 1 and self.reduce:
            whole = torch.ops._c10d_functional.wait_tensor(
                torch.ops._c10d_functional.all_reduce(partial, "sum", "0")
            )
        # fc2's output as each rank holds it is an output too (a value of
        # the program in a buffer of its own, where the all_reduce would
        # otherwise reduce it in place): on several ranks, partial sums.
        return self.norm(x + whole + self.bias2), partial


# Tensor-parallel models: (ranks, whether the partial sums are added up).
TENSOR_PARALLEL = {"tp1_mlp": (1, True), "tp2_mlp": (2, True), "tp2_mlp_unreduced": (2, False)}


def shards_of(name: str, rank: int, device: str = "cpu") -> dict[str, torch.Tensor]:
    """The weights rank `rank` of a tensor-parallel model loads into its
    package (AOTICompiledModel.load_constants), by name: the split ones
    (the others are the same on every rank)."""
    world, reduce = TENSOR_PARALLEL[name]
    model = TensorParallelMLP(world, rank, reduce).to(device)
    return {"fc1.weight": model.fc1.weight.detach(), "fc2.weight": model.fc2.weight.detach()}


# Each model by name: what build() constructs.
MODELS = {
    "mlp": MLP,
    "externs": Externs,
    "dynamic": Dynamic,
    "nan_maker": NanMaker,
    "sqrt_of_product": SqrtOfProduct,
    "rank_shift": RankShift,
    "custom_op": CustomOp,
    "undeclared_mutation": UndeclaredMutation,
    "steps": Steps,
    "fills_rows": FillRows,
    "writes_past": lambda: FillRows(past=1),
    "cpp_fills_rows": lambda: FillRows(library="adp_cpp"),
    "cpp_writes_past": lambda: FillRows(past=1, library="adp_cpp"),
    **{
        n: (lambda world=world, reduce=reduce: TensorParallelMLP(world, 0, reduce))
        for n, (world, reduce) in TENSOR_PARALLEL.items()
    },
}


def build(name: str, device: str = "cpu"):
    torch.manual_seed(0)
    model = MODELS[name]()
    model = model.eval().to(device)
    if name in ("mlp", "nan_maker", "rank_shift", *TENSOR_PARALLEL):
        inputs = (torch.randn(3, 8),)
    elif name == "sqrt_of_product":
        inputs = (torch.rand(3, 8),)
    elif name == "dynamic":
        inputs = (torch.randn(5, 3),)
    elif name == "steps":
        inputs = (torch.randn(3, 4),)
    elif name in ("fills_rows", "writes_past", "cpp_fills_rows", "cpp_writes_past"):
        halves = torch.randn(8, 4, device=device)
        return model, (halves[:4], halves[4:], torch.randn(4, 4, device=device))
    elif name in ("custom_op", "undeclared_mutation"):
        inputs = (torch.randn(4, 8), torch.randn(4))
    else:
        inputs = (torch.randn(4, 5), torch.randn(6, 7), torch.randn(7, 3))
    return model, tuple(t.to(device) for t in inputs)
