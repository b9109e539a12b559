"""A custom op whose own kernel is right (exact GELU), with a decomposition
registered for Inductor that is wrong (the tanh approximation): the
decomposition, not the op, is the cause."""

from __future__ import annotations

import math

import torch
from torch._inductor.decomposition import register_decomposition


@torch.library.custom_op("adp_bugs::gelu_exact", mutates_args=())
def gelu_exact(x: torch.Tensor) -> torch.Tensor:
    return 0.5 * x * (1.0 + torch.erf(x / math.sqrt(2.0)))


@gelu_exact.register_fake
def _(x):
    return torch.empty_like(x)


@register_decomposition(torch.ops.adp_bugs.gelu_exact.default)
def gelu_tanh(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x**3)))


class GeluBlock(torch.nn.Module):
    """LayerNorm, a Linear, the custom op, a Linear."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, d)
        self.out = torch.nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.out(torch.ops.adp_bugs.gelu_exact(self.fc(self.norm(x)) * 3.0))


def export(path, device: str = "cpu") -> None:
    torch.manual_seed(0)
    model = GeluBlock().eval().to(device)
    ep = torch.export.export(model, (torch.randn(4, 32, device=device),))
    torch.export.save(ep, path)
