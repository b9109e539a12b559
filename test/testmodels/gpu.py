"""CUDA models for the GPU tests and benchmarks, and a child-process runner
for the ones that kill their CUDA context.

    python test/testmodels/gpu.py run PACKAGE MODEL [--far N]
"""

from __future__ import annotations

import argparse
import sys

import torch
import triton
import triton.language as tl
from torch.library import triton_op, wrap_triton


@triton.jit
def shifted_copy_kernel(x_ptr, far_ptr, out_ptr, n, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < n
    far = tl.load(far_ptr)
    # The bug under test: with far != 0 every store lands far past `out`.
    # Inductor runs kernels at compile time with zero-filled integer
    # tensors, so compiling is safe.
    tl.store(out_ptr + offs.to(tl.int64) + far, tl.load(x_ptr + offs, mask=mask) * 3, mask=mask)


@triton_op("adp_test::shifted_copy", mutates_args={})
def shifted_copy(x: torch.Tensor, far: torch.Tensor) -> torch.Tensor:
    out = torch.empty_like(x)
    n = x.numel()
    wrap_triton(shifted_copy_kernel)[(triton.cdiv(n, 256),)](x, far, out, n, BLOCK=256)
    return out


class Mixed(torch.nn.Module):
    """Triton kernels, an extern mm, a user-defined Triton kernel, and outputs
    in bfloat16, float16 and float8."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(64, 32))

    def forward(self, x, far):
        h = shifted_copy(torch.sin(x) + 1, far)
        y = torch.relu(torch.mm(h, self.weight)) * 2
        return y, y.to(torch.bfloat16), (y - 1).to(torch.float16), y.to(torch.float8_e4m3fn)


class FarWrite(torch.nn.Module):
    """A correct kernel before and after a user-defined one that, given
    far != 0, writes far out of bounds."""

    def forward(self, x, far):
        return torch.cos(shifted_copy(torch.sin(x) + 1, far)) * 2


class Deep(torch.nn.Module):
    """Many small kernels: the whole-model overhead benchmark."""

    def __init__(self, layers: int = 24, width: int = 256) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(layers))
        self.norms = torch.nn.ModuleList(torch.nn.LayerNorm(width) for _ in range(layers))

    def forward(self, x):
        for linear, norm in zip(self.layers, self.norms):
            x = x + torch.nn.functional.gelu(norm(linear(x)))
        return x


MODELS = {"mixed": Mixed, "far_write": FarWrite, "deep": Deep}


def build(name: str):
    torch.manual_seed(0)
    model = MODELS[name]().eval().cuda()
    if name == "deep":
        return model, (torch.randn(64, 256, device="cuda"),)
    x = torch.randn(8, 64, device="cuda")
    return model, (x, torch.zeros(1, dtype=torch.int64, device="cuda"))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    run = sub.add_parser("run", help="load a .pt2 and run it once")
    run.add_argument("package")
    run.add_argument("model")
    run.add_argument("--far", type=int, default=0, help="elements past the end to write to")
    args = parser.parse_args(argv)

    _, inputs = build(args.model)
    inputs = (inputs[0], torch.full_like(inputs[1], args.far))
    compiled = torch._inductor.aoti_load_package(args.package)
    out = compiled(*inputs)
    torch.cuda.synchronize()
    print(
        "run finished:",
        out[0].float().sum().item() if isinstance(out, (list, tuple)) else out.sum().item(),
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
