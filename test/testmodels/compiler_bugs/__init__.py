"""A model and compiler bugs planted in it, one module each: `aoti-debug
diverge --bisect --import compiler_bugs.MODULE` must name the planted
decision (test_bisect.py). Each module plants its bug when imported, the
way a user's module registers a decomposition, a lowering or a pass."""

from __future__ import annotations

import torch


class GatedBlock(torch.nn.Module):
    """LayerNorm, a Linear, a tanh gated by a sigmoid, a residual."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        h = self.fc(self.norm(x))
        gate = torch.tanh(h) * torch.sigmoid(h * 2.0)
        return x + gate


def export(path, device: str = "cpu") -> None:
    torch.manual_seed(0)
    model = GatedBlock().eval().to(device)
    ep = torch.export.export(model, (torch.randn(4, 32, device=device),))
    torch.export.save(ep, path)
