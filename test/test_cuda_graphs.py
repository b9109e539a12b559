"""CUDA graphs: a package captured with torch.cuda.graph and replayed, and
a model compiled by torch.compile(mode="reduce-overhead"), with the printer
on. Each replay writes the records that the same inputs write outside the
graph, with the replay's index, and the NaN/Inf trap names the kernel at
the replay whose input made the NaN (test/graph_replay.py runs the package,
test/jit_graph_replay.py the compiled model; docs/cuda.md says what runs
inside a graph)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_debug_printer import records as schema

pytestmark = [pytest.mark.gpu, pytest.mark.xdist_group("graphs")]
HERE = Path(__file__).resolve().parent


def recorded(argv: list, tmp_path: Path, tag: str = "", **env: str):
    """A script of this folder run in a fresh process with its records sent
    to a JSON-lines output and a dump: its last line's result, the records
    written to the output and to the dump's manifest, and its stderr."""
    out, dump = tmp_path / f"records{tag}.jsonl", tmp_path / f"dump{tag}"
    done = subprocess.run(
        [sys.executable, *argv],
        capture_output=True,
        text=True,
        timeout=300,
        env={
            **os.environ,
            "AOTI_DEBUG_PRINTER_OUTPUT": str(out),
            "AOTI_DEBUG_PRINTER_FORMAT": "jsonl",
            "AOTI_DEBUG_PRINTER_DUMP_DIR": str(dump),
            **env,
        },
    )
    assert done.returncode == 0, done.stderr[-3000:]

    def read(path: Path) -> list:
        lines = path.read_text().splitlines() if path.exists() else []
        return [schema.parse(json.loads(line)) for line in lines]

    result = json.loads(done.stdout.splitlines()[-1])
    return result, read(out), read(dump / "manifest.jsonl"), done.stderr


def replay(path: Path | None, model: str, second: str, tmp_path: Path, **env: str):
    """graph_replay.py's (jit_graph_replay.py's without a package), as
    recorded() gives it."""
    script = [HERE / "graph_replay.py", path] if path else [HERE / "jit_graph_replay.py"]
    return recorded([*script, model, second], tmp_path, **env)


def runs(recs) -> dict[tuple[int, int], list]:
    """Records by (run, replay), environments left out."""
    by: dict[tuple[int, int], list] = {}
    for r in recs:
        if isinstance(r, schema.Where):
            by.setdefault((r.run, r.replay), []).append(r)
    return by


def key(r) -> tuple:
    """What a record says of its kernel's tensor, and where, but not which
    run or replay: min, max and the counts exactly, mean and std to the
    last bits (level 1's are the host's, a replay's the device's)."""
    stats = getattr(r, "stats", None)
    exact = (
        ()
        if stats is None
        else (stats.min, stats.max, stats.finite, stats.nan, stats.pos_inf, stats.zeros)
    )
    return (type(r).__name__, r.phase, r.kernel, r.arg, r.launch, r.call, r.role, exact)


def assert_same(replayed: list, eager: list) -> None:
    assert [key(r) for r in replayed] == [key(r) for r in eager]
    for got, want in zip(replayed, eager, strict=True):
        if getattr(want, "stats", None) is not None and want.stats.mean is not None:
            assert got.stats.mean == pytest.approx(want.stats.mean, rel=1e-6, abs=1e-12)
            assert got.stats.std == pytest.approx(want.stats.std, rel=1e-6, abs=1e-12)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_each_replay_writes_what_the_same_inputs_write_outside_the_graph(package, tmp_path, level):
    path = package("mlp", level, device="cuda")
    result, printed, saved, stderr = replay(path, "mlp", "scale", tmp_path)
    recs = printed + saved  # level 1 saves, in the graph too
    # The model's results are the same in the graph as outside it.
    assert result == {"a": True, "b": True, "after": "ran", "again": "ran"}
    by = runs(recs)
    eager = sorted(k for k in by if k[1] < 0)
    replays = sorted(k for k in by if k[1] >= 0)
    # Eager A and B, the captured run's replays 0 and 1 (its capture wrote
    # nothing), eager again twice.
    assert len(eager) == 4 and [k[1] for k in replays] == [0, 1], sorted(by)
    assert replays[0][0] == replays[1][0] == eager[1][0] + 1
    assert by[replays[0]] and all(r.replay == 0 for r in by[replays[0]])
    assert_same(by[replays[0]], by[eager[0]])
    assert_same(by[replays[1]], by[eager[1]])
    assert "captured into a CUDA graph" in stderr
    if level == 1:
        assert_saved_files(by[replays[1]], tmp_path / "dump")


def assert_saved_files(recs: list, dump: Path) -> None:
    """Each record with statistics names its file, which holds what the
    statistics say: the replay's own tensor, not the capture's."""
    import torch

    saved = [r for r in recs if getattr(r, "stats", None) and r.stats.min is not None]
    assert saved and all(r.file for r in saved), saved
    for r in saved:
        t = torch.load(dump / r.file, weights_only=True)
        assert list(t.shape) == list(r.shape)
        assert t.min().item() == r.stats.min and t.max().item() == r.stats.max


def test_the_trap_names_the_kernel_at_the_replay_whose_input_makes_nan(package, tmp_path):
    path = package("sqrt_of_product", 2, device="cuda")
    result, recs, saved, stderr = replay(
        path, "sqrt_of_product", "negate", tmp_path, AOTI_DEBUG_PRINTER_TRAP="1"
    )
    # Replay 0 (finite) ran as outside the graph; replay 1 made NaN, which
    # the graph could not stop: the next run outside it stops, then runs.
    assert result == {"a": True, "b": True, "after": "stopped", "again": "ran"}
    (trap,) = [r for r in recs if isinstance(r, schema.TrapRecord)]
    assert trap.replay == 1 and "sqrt" in trap.kernel and trap.nan > 0, trap
    # The finding is in the dump too, for `aoti-debug repro`, as outside graphs.
    assert [r for r in saved if isinstance(r, schema.TrapRecord)] == [trap]
    by = runs(recs)
    assert not [r for r in by[(trap.run, 0)] if getattr(r, "stats", None) and r.stats.nan]
    # Nothing of replay 1 after the trap: a run outside a graph stops there.
    assert by[(trap.run, 1)][-1] == trap
    assert f"made NaN/Inf in {trap.arg} at replay 1 of a captured CUDA graph" in stderr
    assert "stopped for an earlier replay of a captured CUDA graph" in stderr
    # The stop is worded as itself: no CUDA error happened, no kernel is blamed.
    assert "CUDA error" not in stderr and "its record is above" not in stderr


def kernel_records(recs: list) -> list:
    return [r for r in recs if r.phase is not schema.Phase.MODEL_INPUT]


@pytest.mark.parametrize("level", [1, 2, 3])
def test_reduce_overhead_replays_write_what_the_same_inputs_write_without_graphs(tmp_path, level):
    """cudagraph trees capture the graph partition's function: its records
    are captured, and each replay writes them; the call records its model
    inputs outside the graph, at every call."""
    result, printed, saved, stderr = replay(
        None, "mlp", "scale", tmp_path, AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=str(level)
    )
    assert result == {"a": True, "b": True, "after": "ran", "again": "ran"}
    by = runs(printed + saved)
    # Without graphs A and B; with them the warm-up, run eagerly; then the
    # call captured (replay 0) and each call after it, which replays.
    plain_a, plain_b, warm_up = sorted(k for k in by if k[1] < 0 and kernel_records(by[k]))
    replays = sorted(k for k in by if k[1] >= 0)
    assert [k[1] for k in replays] == [0, 1, 2, 3] and len({k[0] for k in replays}) == 1
    assert_same(by[warm_up], by[plain_a])
    assert_same(by[replays[0]], kernel_records(by[plain_a]))
    assert_same(by[replays[1]], kernel_records(by[plain_b]))
    assert_same(by[replays[2]], kernel_records(by[plain_a]))
    if level != 3:
        # Every call records its inputs, outside the graph: the calls that
        # replay too, the captured one's in the replays' run.
        inputs = sorted(k for k in by if k[1] < 0 and not kernel_records(by[k]))
        assert len(inputs) == 4 and inputs[0][0] == replays[0][0], inputs
    if level == 1:
        assert_saved_files(by[replays[1]], tmp_path / "dump")
    assert "captured into a CUDA graph" in stderr


def test_reduce_overhead_trap_names_the_kernel_and_stops_the_next_call(tmp_path):
    result, recs, saved, stderr = replay(
        None,
        "sqrt_of_product",
        "negate",
        tmp_path,
        AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER="2",
        AOTI_DEBUG_PRINTER_TRAP="1",
    )
    # Replay 1 made NaN, which the graph could not stop: the next call
    # stops before its graph replays; the one after it runs.
    assert result == {"a": True, "b": True, "after": "stopped", "again": "ran"}
    (trap,) = [r for r in recs if isinstance(r, schema.TrapRecord)]
    assert trap.replay == 1 and "sqrt" in trap.kernel and trap.nan > 0, trap
    assert [r for r in saved if isinstance(r, schema.TrapRecord)] == [trap]
    by = runs(recs)
    assert by[(trap.run, 1)][-1] == trap
    assert (trap.run, 2) not in by and (trap.run, 3) not in by
    assert f"made NaN/Inf in {trap.arg} at replay 1 of a captured CUDA graph" in stderr
    assert "stopped for an earlier replay of a captured CUDA graph" in stderr
    # The stop is worded as itself: no CUDA error happened, no kernel is blamed.
    assert "CUDA error" not in stderr and "its record is above" not in stderr


def guarded_replays(tmp_path: Path, guard: int, bad: int):
    """guard_graph_replay.py's result, each replay's output, the records
    written to the output and to the dump's manifest, and its stderr."""
    outputs = tmp_path / f"outputs{guard}.pt"
    result, recs, saved, stderr = recorded(
        [HERE / "guard_graph_replay.py", tmp_path, outputs, str(bad)],
        tmp_path,
        str(guard),
        AOTI_DEBUG_PRINTER_GUARD=str(guard),
        AOTI_DEBUG_PRINTER_MAX_VALUES="0",
    )
    import torch

    return result, torch.load(outputs, weights_only=True), recs, saved, stderr


def guard_records(recs: list) -> list:
    return [r for r in recs if isinstance(r, schema.GuardRecord)]


def test_the_guard_names_the_scatter_at_the_replay_whose_padding_index_writes_its_neighbour(
    tmp_path,
):
    """A scatter with a padding index of -1 at replay 6 of 10 writes the last
    element of b, the live buffer before its output, which a later kernel
    reads. The graph cannot stop: replay 6 ends with the guard's record,
    the later replays write nothing, and the next run outside the graph
    stops."""
    result, _, recs, saved, stderr = guarded_replays(tmp_path, 1, 6)
    assert result == {"after": "stopped", "again": "ran"}
    (found,) = guard_records(recs)
    assert found.replay == 6 and found.kind == "overwritten_before_read", found
    assert found.phase is schema.Phase.BEFORE_LAUNCH
    assert found.writer.startswith("the caller (model input "), found
    assert any("scatter" in k for k in found.between), found
    # What a replay cannot tell is not said: no counts, no saved copies.
    assert found.changed == -1 and not found.files, found
    assert guard_records(saved) == [found]
    by = runs(recs)
    assert sorted(k[1] for k in by if k[0] == found.run and k[1] >= 0) == list(range(7))
    assert by[(found.run, 6)][-1] == found
    assert "write guard at replay 6 of a captured CUDA graph" in stderr
    assert "stopped for an earlier replay of a captured CUDA graph" in stderr
    # The stop is worded as itself: no CUDA error happened, no kernel is blamed.
    assert "CUDA error" not in stderr and "its record is above" not in stderr


def test_the_guard_finds_nothing_in_correct_replays_and_changes_no_output(tmp_path):
    """Valid indices at every replay: ten replays, every record written,
    no finding, and the outputs bit for bit those of the guard off."""
    by_guard = {}
    for guard in (0, 1):
        result, replayed, recs, saved, _ = guarded_replays(tmp_path, guard, -1)
        assert result == {"after": "ran", "again": "ran"}
        assert guard_records(recs) == [] and guard_records(saved) == []
        replays = sorted(k[1] for k in runs(recs) if k[1] >= 0)
        assert replays == list(range(10)), replays
        by_guard[guard] = replayed
    assert all(a.equal(b) for a, b in zip(by_guard[0], by_guard[1], strict=True))
