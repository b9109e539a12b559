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


def build(model: str, second: str) -> tuple[torch.nn.Module, tuple, tuple]:
    """A small CUDA model and its input sets A and B: B is A scaled, or negated."""
    torch.manual_seed(0)
    module, a = small.build(model, "cuda")
    return module, a, tuple(-t if second == "negate" else t * 2 + 0.5 for t in a)


def replays_then_runs(replay, run, want: dict, a: tuple, b: tuple) -> dict:
    """What the JSON line says: whether replay(A) and replay(B) (the
    outputs of a replay with those inputs) are `want`'s, where it has
    them; then whether run(A), twice more, ran or was stopped."""
    done = {}
    for name, given in (("a", a), ("b", b)):
        got = replay(given)
        torch.cuda.synchronize()
        done[name] = name not in want or all(
            torch.equal(g, w) for g, w in zip(got, want[name], strict=True)
        )
    for name in ("after", "again"):
        try:
            run(a)
            torch.cuda.synchronize()
            done[name] = "ran"
        except RuntimeError:  # what stopped it is on stderr
            done[name] = "stopped"
    return done


def main() -> None:
    package, model, second = sys.argv[1:4]
    _, a, b = build(model, second)
    runner = torch._inductor.aoti_load_package(package, run_single_threaded=True)
    want = {"a": outputs(runner(*a))}
    if second != "negate":  # a negated input is the trap's: it stops an eager run
        want["b"] = outputs(runner(*b))
    static = [t.clone() for t in a]
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        captured = tree_leaves(runner(*static))

    def replay(given: tuple) -> list[torch.Tensor]:
        for s, t in zip(static, given):
            s.copy_(t)
        graph.replay()
        return [t.clone() for t in captured]

    print(json.dumps(replays_then_runs(replay, lambda x: runner(*x), want, a, b)))


if __name__ == "__main__":
    main()
