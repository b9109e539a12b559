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
from torch.utils._pytree import tree_leaves

sys.path.insert(0, str(Path(__file__).resolve().parent))
from testmodels import small  # noqa: E402


def outputs(result) -> list[torch.Tensor]:
    return [t.clone() for t in tree_leaves(result)]


@torch.no_grad()
def main() -> None:
    model_name, second = sys.argv[1:3]
    torch.manual_seed(0)
    model, a = small.build(model_name, "cuda")
    b = tuple(-t if second == "negate" else t * 2 + 0.5 for t in a)
    plain = torch.compile(model)
    want = {"a": outputs(plain(*a))}
    if second != "negate":  # a negated input is the trap's: it stops a run
        want["b"] = outputs(plain(*b))
    torch.cuda.synchronize()
    torch._dynamo.reset()
    graphed = torch.compile(model, mode="reduce-overhead")
    graphed(*a)  # warm-up: no graph yet
    done = {}
    for name, given in (("a", a), ("b", b)):
        got = outputs(graphed(*given))
        torch.cuda.synchronize()
        done[name] = name not in want or all(
            torch.equal(g, w) for g, w in zip(got, want[name], strict=True)
        )
    for name in ("after", "again"):
        try:
            graphed(*a)
            torch.cuda.synchronize()
            done[name] = "ran"
        except RuntimeError:  # what stopped it is on stderr
            done[name] = "stopped"
    print(json.dumps(done))


if __name__ == "__main__":
    main()
