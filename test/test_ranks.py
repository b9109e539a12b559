"""Ranks: processes of one torch.distributed job (gloo here, NCCL on two
GPUs), each running an AOTI-compiled model into one shared dump directory,
and `compare --ranks` on that dump: silent on replicas, and naming the rank
that leaves the others, by majority, with three.

This file is also the ranks' program:
    python test/test_ranks.py PACKAGE MODEL   (RANK, WORLD_SIZE, ... from the environment)
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import re
import shutil
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from conftest import cli
from testmodels import small

import aoti_debug_printer

pytestmark = pytest.mark.slow


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def start_ranks(
    package: Path,
    model: str,
    backend: str,
    dump: Path,
    world: int = 2,
    then: tuple[tuple, ...] = (),
    **env,
) -> list[subprocess.Popen]:
    """Starts `world` ranks of the script below, as torchrun would; `then`:
    more runs of the job, (package, model, dump, shard_of or "-") each."""
    port = str(free_port())
    more = [str(x) for run in then for x in ("--then", *run)]
    procs = []
    for rank in range(world):
        rank_env = dict(
            os.environ,
            RANK=str(rank),
            LOCAL_RANK=str(rank),
            WORLD_SIZE=str(world),
            MASTER_ADDR="127.0.0.1",
            MASTER_PORT=port,
            AOTI_DEBUG_PRINTER_DUMP_DIR=str(dump),
            **env,
        )
        procs.append(
            subprocess.Popen(
                [sys.executable, __file__, str(package), model, "--backend", backend, *more],
                env=rank_env,
                stdout=subprocess.PIPE,
                stderr=subprocess.PIPE,
                text=True,
            )
        )
    return procs


def finish(procs: list[subprocess.Popen], timeout: float = 600) -> list[tuple[int, str, str]]:
    """Each rank's exit status, stdout and stderr, waiting `timeout` seconds
    at most for each; a rank still running then is killed (a failed rank
    must not leave its peers behind)."""
    results = []
    try:
        for p in procs:
            out, err = p.communicate(timeout=timeout)
            results.append((p.returncode, out, err))
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.communicate()
    return results


def aborted_in_torchs_teardown(rank: int, code: int, out: str, err: str) -> bool:
    """A rank that finished its work (it destroyed its process group) and
    then aborted at exit, in a thread whose stack names torch's libraries
    and not this one. Gloo's teardown did so twice in suite runs (about one
    job in a few hundred), never in 70 jobs in a row run alone; the ranks print
    every thread's stack on a fatal signal (main), so this can be told
    from an abort of ours."""
    if code != -6 or f"rank {rank} finished" not in out:
        return False
    threads = err.split("SIGABRT(6), PID: ")[1:]
    aborting = [t for t in threads if re.search(r"\babort \+ ", t)]
    return len(aborting) == 1 and "aoti_debug_printer" not in aborting[0]


def run_ranks(
    package: Path, model: str, backend: str, dump: Path, world: int = 2, then=(), **env
) -> list[str]:
    """Runs start_ranks' ranks to their end, each successful; returns their
    stdout. A job in which a rank aborted in torch's teardown after its work
    (aborted_in_torchs_teardown) runs once more, into fresh dumps; any other
    failure, or that one twice, fails the test."""
    for attempt in (1, 2):
        ended = finish(start_ranks(package, model, backend, dump, world, then, **env))
        torn = [
            err
            for rank, (code, out, err) in enumerate(ended)
            if aborted_in_torchs_teardown(rank, code, out, err)
        ]
        if not torn or attempt == 2:
            break
        print(f"a rank aborted in torch's teardown after its work; the job runs again:\n{torn[0]}")
        for d in (dump, *(Path(run[2]) for run in then)):
            shutil.rmtree(d, ignore_errors=True)
    outs = []
    for code, out, err in ended:
        assert code == 0, err[-4000:]
        outs.append(out)
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
    # Replicas on the same inputs: compare --ranks finds nothing, bit for bit.
    done = cli("compare", tmp_path / "shared", "--ranks")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence across ranks 0, 1" in done.stdout
    assert "bit for bit: every value judged is identical across ranks 0, 1" in done.stdout
    verdict, cells = ranks_table(tmp_path / "shared")
    assert "no divergence across ranks 0, 1" in verdict
    assert cells and not [c for c in cells if c[3]], cells
    # Each rank on its own data: every value is rank-local, counted, not judged.
    own = tmp_path / "own"
    run_ranks(package("mlp", 1), "mlp", "gloo", own, ADP_OWN_INPUTS="1")
    done = cli("compare", own, "--ranks")
    assert done.returncode == 0, done.stdout + done.stderr
    values = int(re.search(r"ranks 0, 1: (\d+) values each", done.stdout).group(1))
    assert f"rank-local: {values} values (model inputs that differ" in done.stdout, done.stdout
    # The report: every rank's own data in grey, nothing marked as leaving.
    _, cells = ranks_table(own)
    assert cells and all(mark == "local" for _, _, k, mark in cells if k == 1), cells
    assert not [c for c in cells if c[3] == "odd"]


def ranks_table(dump: Path) -> tuple[str, list[tuple[str, str, int, str]]]:
    """What `aoti-debug report` says of the ranks of `dump`: its verdict,
    and (kernel, node, rank, mark) of every cell of its ranks table, in row
    order."""
    page = dump.parent / f"{dump.name}.html"
    done = cli("report", dump, "-o", page)
    assert done.returncode == 0, done.stdout + done.stderr
    text = page.read_text()
    assert text.count('<table id="ranks">') == 1
    table = text.split('<table id="ranks">')[1].split("</table>")[0]
    cells = []
    for row in re.findall(r"<tr[^>]*>(.*?)</tr>", table.split("<tbody>")[1], re.S):
        kernel, node = re.findall(r"<td>([^<]*)</td>", row)[2:4]
        for rank, mark in re.findall(r'<td data-rank="(\d+)"(?: class="(\w+)")?', row):
            cells.append((kernel, node, int(rank), mark))
    verdict = re.search(r'<p id="ranks-verdict"[^>]*>(.*?)</p>', text, re.S).group(1)
    return verdict, cells


def test_three_gloo_ranks_name_the_rank_that_leaves_the_others(package, tmp_path):
    """The op is wrong on rank 0 only: the majority (ranks 1 and 2) is the
    reference, so rank 0 is named, at the op, not the lowest rank's peers."""
    dump = tmp_path / "dump"
    began = time.time()
    # With the trap on, every rank watches the job's store: a job in which
    # nothing stops still ends as it would, each rank finishing.
    outs = run_ranks(
        package("rank_shift", 1),
        "rank_shift",
        "gloo",
        dump,
        3,
        ADP_WRONG_RANK="0",
        AOTI_DEBUG_PRINTER_TRAP="1",
    )
    assert [f"rank {k} finished" in out for k, out in enumerate(outs)] == [True] * 3
    done = cli("compare", dump, "--ranks")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reference: ranks 1, 2" in done.stdout
    first = re.search(r"^FIRST DIVERGENCE ACROSS RANKS: (.*)$", done.stdout, re.M)
    assert first, done.stdout
    assert first.group(1).startswith("rank 0 leaves ranks 1, 2 at node rank_shift: "), done.stdout
    assert "adp_models::rank_shift" in first.group(1)
    # Where the user's code called the op, from the ranks' own dump.
    assert re.search(
        r"^FIRST DIVERGENCE ACROSS RANKS: .*\n  at .*small\.py:\d+ in forward: ", done.stdout, re.M
    ), done.stdout
    print(f"3 gloo ranks: named {time.time() - began:.1f} s after the job's start")
    # Only the first: what reads its output differs by what it carried in.
    assert done.stdout.count("leaves") == 1, done.stdout
    found = aoti_debug_printer.compare_ranks(dump)
    assert found.reference == [1, 2] and found.first.rank == 0
    assert found.first.difference.b.kernel == "adp_models::rank_shift"
    # The report puts the ranks side by side: the one cell marked as leaving
    # the others is rank 0's, at the op; the ranks of the reference are
    # marked nowhere.
    verdict, cells = ranks_table(dump)
    assert "FIRST DIVERGENCE ACROSS RANKS: rank 0 leaves ranks 1, 2" in verdict, verdict
    assert len(cells) == 3 * found.values, cells
    odd = [c for c in cells if c[3] == "odd"]
    assert odd == [("adp_models::rank_shift", "rank_shift", 0, "odd")], cells
    assert not [c for c in cells if c[2] in (1, 2) and c[3]], cells

    # The ranks without it agree; one rank, or one the dump lacks: one line.
    done = cli("compare", dump, "--ranks", "1,2")
    assert done.returncode == 0 and "no divergence across ranks 1, 2" in done.stdout
    for args, said in (
        (["--ranks", "0"], "needs two ranks or more"),
        (["--ranks", "0,7"], "rank 7 not in the dump"),
        (["--ranks", "one"], "give ranks as 0,3"),
        ([], "two dumps, A and B, or one dump and --ranks"),
        ([dump, "--ranks"], "no B, --rtol or --atol"),
    ):
        done = cli("compare", dump, *args)
        assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert said in line, line


def check_a_trap_ends_the_job(package: Path, tmp_path: Path, backend: str, world: int) -> None:
    """Rank 1 makes NaN with the trap on; the others go on to the job's
    all_reduce, where they would wait for it until the collective's timeout.
    Every rank ends within seconds, its last line naming rank 1 and the op."""
    dump = tmp_path / "dump"
    procs = start_ranks(
        package,
        "rank_shift",
        backend,
        dump,
        world,
        AOTI_DEBUG_PRINTER_TRAP="1",
        ADP_WRONG_RANK="1",
        ADP_WRONG_BY="nan",
    )
    deadline = time.time() + 120
    while any(p.poll() is None for p in procs) and time.time() < deadline:
        time.sleep(0.05)
    last_exit = time.time()
    ended = finish(procs, timeout=1)
    # From the start of the last rank's run (every rank is in the job's run
    # then) to the last rank's exit: seconds, where a collective's timeout
    # is minutes.
    began = max(
        float(t) for _, out, _ in ended for t in re.findall(r"runs the model at (\S+)", out)
    )
    took = last_exit - began
    stopped = "rank 1 stopped the job: NaN/Inf trap: kernel adp_models::rank_shift (launch "
    for rank, (code, out, err) in enumerate(ended):
        last = err.strip().splitlines()[-1]
        said = stopped if rank == 1 else f"rank {rank} ends: {stopped}"
        assert code == 1 and last.startswith(f"aoti-debug-printer: {said}"), err[-3000:]
        assert f"rank {rank} finished" not in out and f"rank {rank} runs the model" in out
    # The rank that stopped wrote its trap record first.
    (trap,) = [
        r
        for r in map(json.loads, (dump / "manifest.jsonl").read_text().splitlines())
        if r["event"] == "trap"
    ]
    assert trap["rank"] == 1 and trap["kernel"] == "adp_models::rank_shift", trap
    assert took < 30, took
    print(f"{world} {backend} ranks: the job ended {took:.1f} s after its run began; last lines:")
    print("\n".join(err.strip().splitlines()[-1] for _, _, err in ended))


def test_a_trap_on_one_gloo_rank_ends_the_job_within_seconds(package, tmp_path):
    check_a_trap_ends_the_job(package("rank_shift", 1), tmp_path, "gloo", 3)


def check_tensor_parallel(package, tmp_path: Path, backend: str, device: str = "cpu") -> None:
    """A tensor-parallel MLP block on two ranks (fc1 split by rows, fc2 by
    columns, an all_reduce of the partial sums) against the same block on
    one device: silent when right; a rank that loaded the other's shard is
    named at the first kernel that uses it; without the all_reduce, both
    ranks are named where the partial sums are first used as the whole."""
    single = tmp_path / "single"
    model, inputs = small.build("tp1_mlp", device)
    with aoti_debug_printer.options(dump_dir=single):
        out = torch._inductor.aoti_load_package(str(package("tp1_mlp", 1, device=device)))(*inputs)
    torch.testing.assert_close(out, model(*inputs))
    tp2 = package("tp2_mlp", 1, device=device)

    right, wrong_shard, unreduced = (
        tmp_path / "tp2",
        tmp_path / "wrong_shard",
        tmp_path / "unreduced",
    )
    # One job, three runs: right; rank 1 on rank 0's shards; no all_reduce.
    then = (
        (tp2, "tp2_mlp", wrong_shard, 0),
        (package("tp2_mlp_unreduced", 1, device=device), "tp2_mlp_unreduced", unreduced, "-"),
    )
    began = time.time()
    run_ranks(tp2, "tp2_mlp", backend, right, then=then)
    took = {"job of three runs": time.time() - began}
    began = time.time()
    done = cli("compare", single, right)
    took["compare, right"] = time.time() - began
    assert done.returncode == 0, done.stdout + done.stderr
    assert "B: " in done.stdout and "(ranks 0, 1)" in done.stdout
    counts = re.search(
        r"gathered (\d+) values of A: (\d+) replicated, (\d+) sharded .*, (\d+) partial sums",
        done.stdout,
    )
    # fc1's output and its relu sharded; fc2's output partial sums.
    assert counts and int(counts.group(3)) >= 2 and int(counts.group(4)) >= 1, done.stdout
    assert "no divergence: every rank holds what the single-device run holds" in done.stdout

    # Statistics alone (the records of level 2) cannot be gathered: one line.
    stats_only = tmp_path / "stats_only"
    stats_only.mkdir()
    (stats_only / "manifest.jsonl").write_text(
        "".join(
            json.dumps({k: v for k, v in json.loads(line).items() if k != "file"}) + "\n"
            for line in (right / "manifest.jsonl").read_text().splitlines()
        )
    )
    done = cli("compare", single, stats_only)
    assert done.returncode == 2 and "Traceback" not in done.stderr, done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.endswith("needs level-1 dumps (AOTI_DEBUG_PRINTER_LEVEL=1)"), line

    began = time.time()
    done = cli("compare", single, wrong_shard)
    took["compare, wrong shard"] = time.time() - began
    assert done.returncode == 1, done.stdout + done.stderr
    first = re.search(r"^FIRST DIVERGENCE: (.*)$", done.stdout, re.M)
    assert first and first.group(1).startswith(
        "rank 1 at node linear (sharded along dimension 1, rank 1's slice 8:16): B "
    ), done.stdout
    assert re.search(r"^FIRST DIVERGENCE: .*\n  at .*small\.py:\d+ in forward: ", done.stdout, re.M)

    found = aoti_debug_printer.compare_parallel(single, unreduced)
    assert found.first is not None and found.first.ranks == [0, 1]
    began = time.time()
    done = cli("compare", unreduced, single)  # either order
    took["compare, no all_reduce"] = time.time() - began
    assert done.returncode == 1, done.stdout + done.stderr
    first = re.search(r"^FIRST DIVERGENCE: (.*)$", done.stdout, re.M)
    kernel = found.first.differences[0].b.kernel
    assert first.group(1).startswith(
        f"ranks 0, 1 at node {found.first.gathered.a.node} (replicated): B {kernel} "
    ), done.stdout
    assert "a reduction (all_reduce) missing before this kernel" in done.stdout
    # What its kernel read (the sharded relu) is right: the error is introduced here.
    assert found.first.differences[0].inputs_rms < 1e-4
    print(done.stdout)
    print(f"{backend}, seconds: " + ", ".join(f"{k} {v:.1f}" for k, v in took.items()))


def test_a_tensor_parallel_run_against_the_single_device_run(package, tmp_path):
    check_tensor_parallel(package, tmp_path, "gloo")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description="one rank of the ranks test")
    parser.add_argument("package")
    parser.add_argument("model")
    parser.add_argument("--backend", default="gloo")
    parser.add_argument(
        "--then",
        nargs=4,
        action="append",
        default=[],
        metavar=("PACKAGE", "MODEL", "DUMP", "SHARD_OF"),
        help="after the first run, another in the same job, into DUMP; SHARD_OF: the "
        "rank whose shards rank 1 loads (a tensor-parallel model; - for its own)",
    )
    args = parser.parse_args(argv)

    import torch.distributed as dist

    rank = int(os.environ["RANK"])
    # Every thread's stack on a fatal signal: run_ranks tells an abort in
    # torch's teardown from one of this library's by the aborting thread's.
    torch._C._set_print_stack_traces_on_fatal_signal(True)
    dist.init_process_group(args.backend)
    device = "cuda" if args.backend == "nccl" else "cpu"
    if device == "cuda":
        torch.cuda.set_device(rank)
    runs = [(args.package, args.model, None, None)]
    runs += [(p, m, d, None if s == "-" else s) for p, m, d, s in args.then]
    for package, model, dump, shard_of in runs:
        if device == "cuda" and model not in small.MODELS:
            from testmodels import gpu  # Triton's models: CUDA only

            _, inputs = gpu.build(model)
        else:
            _, inputs = small.build(model, device)
        if os.environ.get("ADP_OWN_INPUTS"):  # data parallel: each rank its own batch
            inputs = tuple(t + rank for t in inputs)
        compiled = torch._inductor.aoti_load_package(
            package, device_index=rank if device == "cuda" else -1
        )
        if model in small.TENSOR_PARALLEL:  # one package, each rank its own shards
            # shard_of plants a rank 1 that loads another rank's shards.
            shard = int(shard_of) if rank == 1 and shard_of is not None else rank
            compiled.load_constants(small.shards_of(model, shard, device), check_full_update=True)
        print(f"rank {rank} runs the model at {time.time()}", flush=True)
        # The first run writes where the environment says, the others into their DUMP.
        with aoti_debug_printer.options(dump_dir=dump) if dump else contextlib.nullcontext():
            compiled(*inputs)
    check = torch.ones(1, device=device)
    dist.all_reduce(check)
    assert check.item() == dist.get_world_size()
    # Both ranks leave together: a rank tearing gloo down while its peer is
    # still connected can abort in gloo's threads.
    dist.barrier()
    dist.destroy_process_group()
    print(f"rank {rank} finished")
    return 0


if __name__ == "__main__":
    sys.exit(main())
