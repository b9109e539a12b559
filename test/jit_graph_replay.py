"""Runs a small CUDA model compiled by torch.compile with the printer on
(AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER, as a user's unchanged
script would), for test_cuda_graphs.py. First without CUDA graphs, with
input sets A and B (B: A scaled, or negated: then A only); then with
mode="reduce-overhead": A (cudagraph trees' warm-up, run eagerly), A
(captured, then replayed: replay 0), B (replay 1), then A twice more.
Prints one JSON line: whether each replay's output is the one without
graphs, and what the two later calls did.

    python jit_graph_replay.py MODEL scale|negate
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
from graph_replay import build, outputs, replays_then_runs  # noqa: E402


@torch.no_grad()
def main() -> None:
    model_name, second = sys.argv[1:3]
    model, a, b = build(model_name, second)
    plain = torch.compile(model)
    want = {"a": outputs(plain(*a))}
    if second != "negate":  # a negated input is the trap's: it stops a run
        want["b"] = outputs(plain(*b))
    torch.cuda.synchronize()
    torch._dynamo.reset()
    graphed = torch.compile(model, mode="reduce-overhead")
    graphed(*a)  # warm-up: no graph yet
    # After the warm-up each call replays (the first captures, then replays).
    done = replays_then_runs(lambda x: outputs(graphed(*x)), lambda x: graphed(*x), want, a, b)
    print(json.dumps(done))


if __name__ == "__main__":
    main()
