"""Not the compiler's: a custom op whose own kernel makes NaN (the log of
the negative values it is given), in a model that calls it; and the same
block with torch.log itself. Eager makes the same NaN; `--bisect` must say
that no compiler decision does it."""

from __future__ import annotations

import torch


@torch.library.custom_op("adp_bugs::log_gate", mutates_args=())
def log_gate(x: torch.Tensor) -> torch.Tensor:
    return torch.log(x) * x


@log_gate.register_fake
def _(x):
    return torch.empty_like(x)


class LogGatedBlock(torch.nn.Module):
    """LayerNorm, a Linear, the custom op, a residual."""

    def __init__(self, d: int = 32) -> None:
        super().__init__()
        self.norm = torch.nn.LayerNorm(d)
        self.fc = torch.nn.Linear(d, d)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.ops.adp_bugs.log_gate(self.fc(self.norm(x)))


class LogBlock(LogGatedBlock):
    """The same, the log by torch's own op: the model's arithmetic."""

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return x + torch.log(self.fc(self.norm(x)))


def export(path, device: str = "cpu", builtin: bool = False) -> None:
    torch.manual_seed(0)
    model = (LogBlock if builtin else LogGatedBlock)().eval().to(device)
    ep = torch.export.export(model, (torch.randn(4, 32, device=device),))
    torch.export.save(ep, path)
