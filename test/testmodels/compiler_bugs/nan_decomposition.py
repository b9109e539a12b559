"""A decomposition of tanh registered for Inductor that makes NaN where its
input is negative (the square root of a negative number)."""

import torch
from torch._inductor.decomposition import register_decomposition


@register_decomposition(torch.ops.aten.tanh.default)
def tanh(x):
    return 2.0 / (1.0 + torch.exp(-2.0 * x)) - 1.0 + 0.0 * torch.sqrt(x)
