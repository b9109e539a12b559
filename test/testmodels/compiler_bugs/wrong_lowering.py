"""Inductor's lowering of tanh replaced by one whose result is 2% too large."""

import torch
from torch._inductor import lowering

_tanh = lowering.lowerings[torch.ops.aten.tanh.default]


def tanh(x):
    return lowering.lowerings[torch.ops.aten.mul.Tensor](_tanh(x), 1.02)


lowering.lowerings[torch.ops.aten.tanh.default] = tanh
