"""A program that its compile narrows: exported with tokens in 8..512, but
its custom op's decomposition keeps the first 64 tokens only, and the
compile specializes tokens to 64 (guards s >= 64, then s == 64). Its
package run at 200 tokens would read the input as 64 tokens and say
nothing. `--import testmodels.narrowed` registers the op for diverge."""

from __future__ import annotations

import torch
from torch._inductor.decomposition import register_decomposition

TOKENS = torch.export.Dim("tokens", min=8, max=512)


@torch.library.custom_op("adp_narrowed::mix_heads", mutates_args=())
def mix_heads(x: torch.Tensor) -> torch.Tensor:
    return x * 2.0


@mix_heads.register_fake
def _(x):
    return torch.empty_like(x)


@register_decomposition(torch.ops.adp_narrowed.mix_heads.default)
def _mix_heads_first_64_only(x):
    return x[:, :64] * 2.0  # the bug: a size from the example, not x's


class Narrowed(torch.nn.Module):
    def forward(self, x):
        return torch.ops.adp_narrowed.mix_heads(x) + x


def export(device: str = "cpu") -> torch.export.ExportedProgram:
    torch.manual_seed(0)
    return torch.export.export(
        Narrowed(), (torch.randn(4, 64, 16, device=device),), dynamic_shapes={"x": {1: TOKENS}}
    )
