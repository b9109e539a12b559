"""Compiles a package whose user Triton kernel scatters into `a` without
skipping a padding index of -1, so that -1 writes the last element of `b`,
the live buffer before `a` in the same allocation, which a later kernel
reads; captures it with torch.cuda.graph and replays it ten times, the
indices valid at every replay but `bad` (-1: none), then runs it twice
outside the graph. For test_cuda_graphs.py, with the guard switched by
AOTI_DEBUG_PRINTER_GUARD. Saves each replay's output to OUTPUTS and prints
one JSON line: what the two runs after the replays did.

    python guard_graph_replay.py PACKAGE_DIR OUTPUTS BAD
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch
import triton
import triton.language as tl

import aoti_debug_printer

N = 1024  # elements of a, and of b
M = 256  # indices


@triton.jit
def _scatter(out_ptr, idx_ptr, v_ptr, m, BLOCK: tl.constexpr):
    offs = tl.program_id(0) * BLOCK + tl.arange(0, BLOCK)
    mask = offs < m
    i = tl.load(idx_ptr + offs, mask=mask, other=0)
    v = tl.load(v_ptr + offs, mask=mask, other=0.0)
    # The bug: a padding index of -1 is stored, not skipped.
    tl.store(out_ptr + i, v, mask=mask)


@torch.library.triton_op("adp_graph_test::scatter_", mutates_args={"out"})
def _scatter_op(out: torch.Tensor, idx: torch.Tensor, v: torch.Tensor) -> None:
    m = idx.numel()
    torch.library.wrap_triton(_scatter)[((m + 255) // 256,)](out, idx, v, m, BLOCK=256)


class Scatter(torch.nn.Module):
    """Scatters v into a at idx; a kernel then reads a and b, which the
    caller passes as the two halves of one tensor, b first."""

    def forward(self, a, b, idx, v):
        torch.ops.adp_graph_test.scatter_(a, idx, v)
        return a.sum() + b.sum() * 2


def main() -> None:
    directory, outputs, bad = Path(sys.argv[1]), sys.argv[2], int(sys.argv[3])
    torch.manual_seed(0)
    base = torch.randn(2 * N, device="cuda")
    good = torch.randperm(N, device="cuda")[:M]
    padded = good.clone()
    padded[M // 2] = -1
    v = torch.randn(M, device="cuda")
    halves = base.clone()
    program = torch.export.export(Scatter(), (halves[N:], halves[:N], good.clone(), v))
    with aoti_debug_printer.enabled(level=2):
        path = torch._inductor.aoti_compile_and_package(
            program, package_path=str(directory / "scatter.pt2")
        )
    runner = torch._inductor.aoti_load_package(path, run_single_threaded=True)
    idx = good.clone()

    def run() -> torch.Tensor:
        halves.copy_(base)
        return runner(halves[N:], halves[:N], idx, v)

    run()  # warm up outside the graph
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = run()
    replayed = []
    for replay in range(10):
        idx.copy_(padded if replay == bad else good)
        graph.replay()
        replayed.append(captured.clone())
    torch.cuda.synchronize()
    torch.save([t.cpu() for t in replayed], outputs)
    idx.copy_(good)
    done = {}
    for name in ("after", "again"):
        try:
            run()
            torch.cuda.synchronize()
            done[name] = "ran"
        except RuntimeError:  # what stopped it is on stderr
            done[name] = "stopped"
    print(json.dumps(done))


if __name__ == "__main__":
    main()
