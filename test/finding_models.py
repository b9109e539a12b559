"""Correct models of several architectures, each able to carry one planted
bug: `planted(x)`, a custom op that is the identity in eager and whose
Inductor lowering (registered by `wrong_lowering()`) computes 1.5x + 0.25.
No test was tuned to these models; a finding tool must stay silent on them
and name the planted op's kernel when one is planted."""

from __future__ import annotations

import contextlib

import torch
import torch.nn.functional as F


@torch.library.custom_op("adp_findings::planted", mutates_args=())
def planted(x: torch.Tensor) -> torch.Tensor:
    return x.clone()


@planted.register_fake
def _(x):
    return torch.empty_like(x)


@contextlib.contextmanager
def wrong_lowering():
    """Inductor computes planted(x) as 1.5x + 0.25 while this is active."""
    from torch._inductor import lowering

    op = torch.ops.adp_findings.planted.default
    aten = torch.ops.aten
    lowering.register_lowering(op)(
        lambda x: lowering.lowerings[aten.add.Tensor](lowering.lowerings[aten.mul.Tensor](x, 1.5),
                                                      0.25))
    try:
        yield
    finally:
        lowering.lowerings.pop(op, None)


class _Plantable(torch.nn.Module):
    def __init__(self, plant_at: int | None) -> None:
        super().__init__()
        self.plant_at = plant_at

    def maybe_plant(self, position: int, x):
        return planted(x) if position == self.plant_at else x


class PostLNResidualMLP(_Plantable):
    """x = LayerNorm(x + MLP(x)), four times."""

    def __init__(self, plant_at=None, d=32, n=4) -> None:
        super().__init__(plant_at)
        self.fc1 = torch.nn.ModuleList(torch.nn.Linear(d, 2 * d) for _ in range(n))
        self.fc2 = torch.nn.ModuleList(torch.nn.Linear(2 * d, d) for _ in range(n))
        self.ln = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))

    def forward(self, x):
        for i, (fc1, fc2, ln) in enumerate(zip(self.fc1, self.fc2, self.ln)):
            h = self.maybe_plant(i, F.gelu(fc1(x)))
            x = ln(x + fc2(h))
        return x


class PreLNTransformer(_Plantable):
    """Two pre-LN blocks: attention through scaled_dot_product_attention,
    then an MLP; heads split and merged by views and transposes."""

    def __init__(self, plant_at=None, d=32, heads=4, n=2) -> None:
        super().__init__(plant_at)
        self.heads = heads
        self.ln1 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))
        self.qkv = torch.nn.ModuleList(torch.nn.Linear(d, 3 * d) for _ in range(n))
        self.proj = torch.nn.ModuleList(torch.nn.Linear(d, d) for _ in range(n))
        self.ln2 = torch.nn.ModuleList(torch.nn.LayerNorm(d) for _ in range(n))
        self.mlp = torch.nn.ModuleList(
            torch.nn.Sequential(torch.nn.Linear(d, 2 * d), torch.nn.GELU(), torch.nn.Linear(2 * d, d))
            for _ in range(n))

    def forward(self, x):
        b, t, d = x.shape
        for i in range(len(self.qkv)):
            q, k, v = self.qkv[i](self.ln1[i](x)).split(d, dim=-1)
            q, k, v = (z.view(b, t, self.heads, d // self.heads).transpose(1, 2) for z in (q, k, v))
            a = F.scaled_dot_product_attention(q, k, v, is_causal=True)
            a = self.maybe_plant(2 * i, a.transpose(1, 2).reshape(b, t, d))
            x = x + self.proj[i](a)
            x = x + self.maybe_plant(2 * i + 1, self.mlp[i](self.ln2[i](x)))
        return x


class ConvBNResidual(_Plantable):
    """conv-BN-ReLU residual blocks in eval mode, running statistics that are
    not the identity, then pooling and a linear head."""

    def __init__(self, plant_at=None, c=8, n=2) -> None:
        super().__init__(plant_at)
        self.stem = torch.nn.Conv2d(3, c, 3, padding=1)
        self.conv = torch.nn.ModuleList(torch.nn.Conv2d(c, c, 3, padding=1) for _ in range(2 * n))
        self.bn = torch.nn.ModuleList(torch.nn.BatchNorm2d(c) for _ in range(2 * n))
        for bn in self.bn:
            bn.running_mean.uniform_(-0.5, 0.5)
            bn.running_var.uniform_(0.5, 2.0)
            bn.weight.data.uniform_(0.5, 1.5)
            bn.bias.data.uniform_(-0.2, 0.2)
        self.head = torch.nn.Linear(c, 5)

    def forward(self, x):
        x = self.stem(x)
        for i in range(0, len(self.conv), 2):
            h = F.relu(self.bn[i](self.conv[i](x)))
            h = self.maybe_plant(i // 2, h)
            x = F.relu(x + self.bn[i + 1](self.conv[i + 1](h)))
        return self.head(x.mean(dim=(2, 3)))


class InPlaceAndViews(_Plantable):
    """In-place ops (add_, relu_, mul_), and reshapes and transposes between
    kernels."""

    def __init__(self, plant_at=None, d=24) -> None:
        super().__init__(plant_at)
        self.a = torch.nn.Linear(d, d)
        self.b = torch.nn.Linear(d, d)

    def forward(self, x):
        h = self.a(x)
        h.add_(1.0).relu_()
        h = self.maybe_plant(0, h)
        h = h.reshape(h.shape[0], 4, -1).transpose(1, 2).contiguous()
        h = h.reshape(h.shape[0], -1)
        h.mul_(torch.sigmoid(h))
        return self.b(h) + x.transpose(0, 1).transpose(0, 1)


class ReuseChain(torch.nn.Module):
    """A long chain of same-shaped temporaries: the memory planner reuses
    buffers throughout."""

    def __init__(self, d=16, n=8) -> None:
        super().__init__()
        self.w = torch.nn.ParameterList(torch.nn.Parameter(torch.randn(d, d) / d ** 0.5)
                                        for _ in range(n))

    def forward(self, x):
        for w in self.w:
            x = torch.tanh(x @ w) + 0.5 * x
            x = x * torch.sigmoid(x.sum(dim=-1, keepdim=True))
        return x


def build(name: str, plant_at: int | None = None, device: str = "cpu"):
    """(model, example inputs, dynamic_shapes) with fixed weights."""
    torch.manual_seed(0)
    dynamic = None
    if name == "post_ln_mlp":
        model, inputs = PostLNResidualMLP(plant_at), (torch.randn(6, 32),)
    elif name == "pre_ln_transformer":
        model, inputs = PreLNTransformer(plant_at), (torch.randn(2, 8, 32),)
    elif name == "conv_bn":
        model, inputs = ConvBNResidual(plant_at), (torch.randn(2, 3, 8, 8),)
    elif name == "dynamic_batch":
        model, inputs = PostLNResidualMLP(plant_at, n=2), (torch.randn(5, 32),)
        dynamic = {"x": {0: torch.export.Dim("batch", min=2, max=64)}}
    elif name == "inplace_views":
        model, inputs = InPlaceAndViews(plant_at), (torch.randn(5, 24),)
    elif name == "reuse_chain":
        model, inputs = ReuseChain(), (torch.randn(7, 16),)
    else:
        raise KeyError(name)
    return model.eval().to(device), tuple(t.to(device) for t in inputs), dynamic


CORRECT = ("post_ln_mlp", "pre_ln_transformer", "conv_bn", "dynamic_batch", "inplace_views",
           "reuse_chain")
# (model, position): the planted op at several places in several models.
PLANTED = (("post_ln_mlp", 0), ("post_ln_mlp", 3), ("pre_ln_transformer", 1),
           ("conv_bn", 1), ("inplace_views", 0))
