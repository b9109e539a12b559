"""The C++ side: the Catch2 suite, and a plain C++ program loading a .pt2."""

from __future__ import annotations

import json
import os
import re
import subprocess

import pytest
import torch
from testmodels import small

# One worker builds the C++ programs (conftest: cpp_build) and runs what needs them.
pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("cpp_build")]


def test_catch2_suite(cpp_build):
    if not (cpp_build / "shim_tests").exists() and os.environ.get("ADP_NO_CATCH2"):
        pytest.skip("this machine has no Catch2 (ADP_NO_CATCH2 is set)")
    r = subprocess.run([cpp_build / "shim_tests"], capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stdout[-6000:]
    assert re.search(r"All tests passed \(\d+ assertions in \d+ test cases\)", r.stdout)


def load_in_cpp(cpp_build, package_path, tmp_path, threads=1, **env):
    # No LD_PRELOAD or LD_LIBRARY_PATH: the model must find our library itself.
    scrubbed = {k: v for k, v in os.environ.items() if k not in ("LD_PRELOAD", "LD_LIBRARY_PATH")}
    _, inputs = small.build("mlp")
    torch.save(list(inputs), tmp_path / "inputs.pt")
    r = subprocess.run(
        [
            cpp_build / "load_package",
            package_path,
            tmp_path / "inputs.pt",
            tmp_path / "out.pt",
            str(threads),
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**scrubbed, **env},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    return r, torch.load(tmp_path / "out.pt", weights_only=True)[0]


def test_plain_cpp_program_runs_our_printer(cpp_build, package, tmp_path):
    # No Python in that process: the model loads our library by itself, and
    # only our printer writes these lines.
    r, out = load_in_cpp(cpp_build, package("mlp", 2), tmp_path)
    heads = re.findall(
        r"^\[aoti-debug-printer\] (after_launch) (\S+) (\S+) \(run 0, launch (\d+)", r.stdout, re.M
    )
    assert len(heads) >= 4
    assert re.search(r"^    finite=\d+ nan=0 \+inf=0 -inf=0 zeros=\d+$", r.stdout, re.M)
    _, inputs = small.build("mlp")
    python_out = torch._inductor.aoti_load_package(str(package("mlp", 0)))(*inputs)
    assert torch.equal(out, python_out)


def test_threads_in_cpp_produce_whole_records(cpp_build, package, tmp_path):
    log = tmp_path / "records.jsonl"
    _, single = load_in_cpp(
        cpp_build,
        package("mlp", 2),
        tmp_path,
        AOTI_DEBUG_PRINTER_OUTPUT=str(log),
        AOTI_DEBUG_PRINTER_FORMAT="jsonl",
    )
    per_run = len(log.read_text().splitlines())
    log.unlink()
    load_in_cpp(
        cpp_build,
        package("mlp", 2),
        tmp_path,
        threads=4,
        AOTI_DEBUG_PRINTER_OUTPUT=str(log),
        AOTI_DEBUG_PRINTER_FORMAT="jsonl",
    )
    recs = [json.loads(line) for line in log.read_text().splitlines()]
    runs: dict[int, list] = {}
    for r in recs:
        runs.setdefault(r["run"], []).append(r)
    assert len(runs) == 4
    assert all(len(rs) == per_run for rs in runs.values())
    for rs in runs.values():
        launched = [r["launch"] for r in rs if r["launch"] >= 0]
        assert launched == sorted(launched)
