"""Run-time switches and the NaN/Inf trap, on models compiled once with the
printer on: no recompiling."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import torch
from test_aoti import run

import aoti_debug_printer

pytestmark = pytest.mark.slow


@pytest.fixture
def switch():
    """set_option for the test's duration; every option is put back after."""
    with aoti_debug_printer.options():
        yield aoti_debug_printer.set_option


def tensors(recs):
    return [r for r in recs if r["event"] == "tensor"]


def test_level_filter_and_dump_dir_switch_at_run_time(package, records, switch, tmp_path):
    path = package("mlp", 2)
    reference = run(package("mlp", 0), "mlp")
    compiled = torch._inductor.aoti_load_package(str(path))
    x = torch.randn(3, 8)

    switch("level", 0)
    assert torch.equal(run(path, "mlp"), reference)
    compiled(x)
    assert records() == []

    switch("level", 1)
    for name in ("a", "b"):
        with aoti_debug_printer.options(dump_dir=tmp_path / name):
            compiled(x)
    assert records() == []
    for name in ("a", "b"):
        manifest = (tmp_path / name / "manifest.jsonl").read_text().splitlines()
        assert len(list((tmp_path / name).glob("*.pt"))) == sum('"file"' in m for m in manifest) > 4

    switch("level", 3)
    compiled(x)
    recs = records()
    assert recs and {r["event"] for r in recs} == {"launch"}

    switch("level", -1)
    switch("kernels", "CPP_FUSED_*")
    compiled(x)
    kernels = {r["kernel"] for r in tensors(records()[len(recs) :]) if r["kernel"]}
    assert kernels and all(k.startswith("cpp_fused_") for k in kernels)


def test_level_is_read_from_the_environment_when_the_model_loads(package):
    code = (
        "import sys, torch; m = torch._inductor.aoti_load_package(sys.argv[1]); "
        "m(torch.randn(3, 8)); print('done')"
    )
    env = dict(os.environ, AOTI_DEBUG_PRINTER_LEVEL="0")
    off = subprocess.run(
        [sys.executable, "-c", code, str(package("mlp", 2))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert off.stdout.strip() == "done"
    env["AOTI_DEBUG_PRINTER_LEVEL"] = "3"
    names = subprocess.run(
        [sys.executable, "-c", code, str(package("mlp", 2))],
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert "before_launch cpp_fused_" in names.stdout and "min=" not in names.stdout


def test_nan_trap_names_the_kernel_that_made_nan(package, records, dump_dir, switch):
    path = package("nan_maker", 2)
    switch("trap", 1)
    with pytest.raises(RuntimeError):
        run(path, "nan_maker")
    recs = records()
    (trap,) = [r for r in recs if r["event"] == "trap"]
    assert trap["kernel"].startswith("cpp_fused_") and trap["nan"] > 0
    # Where the user's code made the value: the model's line first.
    assert trap["source"][0].endswith(
        "in forward: return torch.log(torch.relu(x @ self.weight) - 1) * 2"
    ), trap
    assert "testmodels/small.py:" in trap["source"][0]
    # The mm before it was finite and is not blamed; nothing ran after it.
    # (Its output before launch has no statistics: leftover memory.)
    mm = [r for r in tensors(recs) if "mm" in r["kernel"] and r["stats"] is not None]
    assert mm and all(r["stats"]["nan"] == 0 for r in mm)
    assert recs[-1] is not None and recs.index(trap) == len(recs) - 1
    # Its inputs (the buffer it updates in place among them, never an
    # output's leftover memory): statistics in the record, files in the dump
    # directory.
    assert trap["inputs"] and all(i["stats"]["nan"] == 0 for i in trap["inputs"])
    assert "write" not in {i["role"] for i in trap["inputs"]}
    for i in trap["inputs"]:
        t = torch.load(dump_dir / i["file"], weights_only=True)
        assert list(t.shape) == i["shape"]


def test_nan_trap_reports_model_inputs_that_hold_nan(package, records, switch):
    switch("trap", 1)
    compiled = torch._inductor.aoti_load_package(str(package("mlp", 2)))
    x = torch.randn(3, 8)
    x[1, 2] = float("nan")
    with pytest.raises(RuntimeError):
        compiled(x)
    (trap,) = [r for r in records() if r["event"] == "trap"]
    assert trap["phase"] == "model_input" and trap["kernel"] == ""
    assert "already holds NaN/Inf" in trap["message"]
    # No kernel was blamed, and no kernel ran.
    assert not [r for r in records() if r["event"] == "tensor" and r["phase"] != "model_input"]


def test_trap_off_by_default_and_model_results_unchanged(package, records):
    out = run(package("nan_maker", 2), "nan_maker")
    assert torch.isnan(out).any()
    assert not [r for r in records() if r["event"] == "trap"]
    assert json.dumps(records())
