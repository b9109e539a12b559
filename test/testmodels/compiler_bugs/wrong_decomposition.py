"""A decomposition of sigmoid registered for Inductor, 2% off in its slope."""

import torch
from torch._inductor.decomposition import register_decomposition


@register_decomposition(torch.ops.aten.sigmoid.default)
def sigmoid(x):
    return 1.0 / (1.0 + torch.exp(-1.02 * x))
