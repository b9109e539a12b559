"""Runs a CUDA package outside a CUDA graph and inside one, for
test_cuda_graphs.py: with input sets A and B (B: A scaled, or negated),
eagerly, then captured with A's buffers and replayed with A, then B, then
eagerly again, twice. Prints one JSON line: whether each replay's output is
the eager one, and what each later eager run did.

    python graph_replay.py PACKAGE MODEL scale|negate
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


def main() -> None:
    package, model, second = sys.argv[1:4]
    torch.manual_seed(0)
    _, a = small.build(model, "cuda")
    b = tuple(-t if second == "negate" else t * 2 + 0.5 for t in a)
    runner = torch._inductor.aoti_load_package(package, run_single_threaded=True)
    want = {"a": outputs(runner(*a))}
    if second != "negate":  # a negated input is the trap's: it stops an eager run
        want["b"] = outputs(runner(*b))
    static = [t.clone() for t in a]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = tree_leaves(runner(*static))
    done = {}
    for name, given in (("a", a), ("b", b)):
        for s, t in zip(static, given):
            s.copy_(t)
        graph.replay()
        torch.cuda.synchronize()
        got = [t.clone() for t in captured]
        done[name] = name not in want or all(
            torch.equal(g, w) for g, w in zip(got, want[name], strict=True)
        )
    for name in ("after", "again"):
        try:
            runner(*a)
            torch.cuda.synchronize()
            done[name] = "ran"
        except RuntimeError:  # what stopped it is on stderr
            done[name] = "stopped"
    print(json.dumps(done))


if __name__ == "__main__":
    main()
