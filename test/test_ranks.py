"""Ranks: two processes of one torch.distributed job, each running an
AOTI-compiled model into one shared dump directory.

This file is also the ranks' program:
    python test/test_ranks.py PACKAGE MODEL   (RANK, WORLD_SIZE, ... from the environment)
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import torch

pytestmark = pytest.mark.slow
HERE = Path(__file__).resolve().parent


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run_ranks(package: Path, model: str, backend: str, dump: Path, **env) -> list[str]:
    """Starts both ranks, as torchrun would, and returns their stdout."""
    port = str(free_port())
    procs = []
    for rank in range(2):
        rank_env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE="2",
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            AOTI_DEBUG_PRINTER_DUMP_DIR=str(dump),
            **env,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, str(package), model, "--backend", backend],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    outs = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=600)
            assert p.returncode == 0, err[-4000:]
            outs.append(out)
    finally:
        for p in procs:  # a failed rank must not leave its peer behind
            if p.poll() is None:
                p.kill()
            p.communicate()
    return outs


def check_two_ranks(package: Path, tmp_path: Path, backend: str, model: str) -> None:
    shared = tmp_path / "shared"
    outs = run_ranks(package, model, backend, shared)
    manifest = [json.loads(x) for x in (shared / "manifest.jsonl").read_text().splitlines()]
    by_rank = {r: [m for m in manifest if m["rank"] == r] for r in (0, 1)}
    assert (
        by_rank[0] and len(by_rank[0]) == len(by_rank[1]) and len(manifest) == 2 * len(by_rank[0])
    )
    files = [m["file"] for m in manifest if "file" in m]
    assert len(set(files)) == len(files) == len(list(shared.glob("*.pt")))
    for m in manifest:
        if "file" in m:
            assert m["file"].startswith(f"rank{m['rank']}-")
            t = torch.load(shared / m["file"], weights_only=True)
            assert list(t.shape) == m["shape"]
    for rank, out in enumerate(outs):
        assert f"rank {rank} finished" in out

    # Only the selected rank records.
    only = tmp_path / "only1"
    run_ranks(package, model, backend, only, AOTI_DEBUG_PRINTER_RANKS="1")
    ranks = {json.loads(x)["rank"] for x in (only / "manifest.jsonl").read_text().splitlines()}
    assert ranks == {1}
    assert all(p.name.startswith("rank1-") for p in only.glob("*.pt"))


def test_two_gloo_ranks_record_and_save_apart(package, tmp_path):
    check_two_ranks(package("mlp", 1), tmp_path, backend="gloo", model="mlp")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one rank of the ranks test")
    parser.add_argument("package")
    parser.add_argument("model")
    parser.add_argument("--backend", default="gloo")
    args = parser.parse_args(argv)

    import torch.distributed as dist

    sys.path.insert(0, str(HERE))
    rank = int(os.environ["RANK"])
    dist.init_process_group(args.backend)
    if args.backend == "nccl":
        from testmodels import gpu

        torch.cuda.set_device(rank)
        _, inputs = gpu.build(args.model)
        compiled = torch._inductor.aoti_load_package(args.package, device_index=rank)
        check = torch.ones(1, device="cuda")
    else:
        from testmodels import small

        _, inputs = small.build(args.model)
        compiled = torch._inductor.aoti_load_package(args.package)
        check = torch.ones(1)
    compiled(*inputs)
    dist.all_reduce(check)
    assert check.item() == 2
    # Both ranks leave together: a rank tearing gloo down while its peer is
    # still connected can abort in gloo's threads.
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
