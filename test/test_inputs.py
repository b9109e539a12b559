"""A package run at a size it was not compiled for is a finding: the
compile says where it accepts fewer sizes than its exported program, the
run is stopped before its first kernel, and diverge exits 1 naming it.
A correct dynamic package stays silent at every size in its range."""

from __future__ import annotations

import logging
import os
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import cli, wrapper_source
from testmodels import narrowed
from testmodels.findings import compiled_at_level_1
from testmodels.shared import compile_key, shared

import aoti_debug_printer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("narrowed")]

TEST_DIR = Path(__file__).parent


def _compile_narrowed(level: int, directory: Path, device: str) -> None:
    """The narrowed program at `level` on `device`, and what the compile
    logged (compile.log), into `directory`."""
    records = []
    handler = logging.Handler()
    handler.emit = records.append
    logger = logging.getLogger("aoti_debug_printer")
    logger.addHandler(handler)
    try:
        with (
            aoti_debug_printer.enabled(),
            torch._inductor.config.patch(
                {"aot_inductor.debug_intermediate_value_printer": str(level)}
            ),
        ):
            torch._inductor.aoti_compile_and_package(
                narrowed.export(device), package_path=str(directory / f"narrowed-L{level}.pt2")
            )
    finally:
        logger.removeHandler(handler)
    (directory / "compile.log").write_text("\n".join(r.getMessage() for r in records))


@pytest.fixture(scope="module", params=["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def narrowed_package(request):
    """(device, the narrowed program compiled at level 2 on it, the lines
    its compile logged), once per test run."""
    device = request.param
    directory = shared(
        f"narrowed-L2-{compile_key(narrowed.export(device))}",
        lambda d: _compile_narrowed(2, d, device),
    )
    return device, directory / "narrowed-L2.pt2", (directory / "compile.log").read_text()


def test_the_compile_says_where_the_package_accepts_fewer_sizes(narrowed_package):
    device, path, log = narrowed_package
    lines = [line for line in log.splitlines() if "accepts fewer sizes" in line]
    assert len(lines) == 1, log
    # The input, the dim, the exported range, what the package accepts, and
    # the guard that narrowed it with where Inductor added it.
    assert "input x dim 1: exported as 8..512, compiled for 64 only" in lines[0]
    assert "guard s" in lines[0] and ">= 64 at " in lines[0]
    # Where: the user's line that sliced (their op's decomposition), then
    # torch's frame that added the guard.
    user = "testmodels/narrowed.py:27 in _mix_heads_first_64_only: return x[:, :64] * 2.0"
    assert user in lines[0], lines[0]
    assert "(in torch: " in lines[0].partition(user)[2], lines[0]
    assert "aoti_debug_printer" not in lines[0], lines[0]  # torch's frame, not ours
    # The wrapper carries the check with the exported range beside it.
    expected = f'"x", "float32 {device} [4,64(8..512),16] [1024,16,1]", arg0_1);'
    assert expected in wrapper_source(path)


def test_the_package_is_silent_at_its_size_and_stops_at_another(narrowed_package, records):
    device, path, _ = narrowed_package
    model = torch._inductor.aoti_load_package(str(path))
    x = torch.randn(4, 64, 16, device=device)
    torch.testing.assert_close(model(x), narrowed.Narrowed()(x))
    assert not [r for r in records() if r["event"] == "wrong_input"]

    # (torch 2.11's runner keeps none of the wrapper's message: the record says it.)
    with pytest.raises(RuntimeError):
        model(torch.randn(4, 200, 16, device=device))
    (wrong,) = [r for r in records() if r["event"] == "wrong_input"]
    assert (wrong["arg"], wrong["node"], wrong["kind"], wrong["dim"]) == ("arg0_1", "x", "size", 1)
    assert (wrong["given"], wrong["compiled_for"]) == ("200", "64")
    assert "the exported program allows 8..512" in wrong["message"]
    # Before the first kernel: the run has no other record after the input check.
    after = records()[records().index(wrong) + 1 :]
    assert not [r for r in after if r["event"] == "tensor" and r["run"] == wrong["run"]]

    # Told to go on, the finding stays and the run goes on (as the package
    # reads it: 64 tokens); switched off, nothing.
    with aoti_debug_printer.options(input_check="continue"):
        assert model(torch.randn(4, 200, 16, device=device)).shape == (4, 64, 16)
    assert len([r for r in records() if r["event"] == "wrong_input"]) == 2
    with aoti_debug_printer.options(input_check="off"):
        model(torch.randn(4, 200, 16, device=device))
    assert len([r for r in records() if r["event"] == "wrong_input"]) == 2


def test_other_inputs_than_compiled_for_are_named(narrowed_package, records):
    """A transposed layout, another dtype, another device."""
    device, path, _ = narrowed_package
    model = torch._inductor.aoti_load_package(str(path))
    other = "cpu" if device == "cuda" else None
    for given, kind in (
        (torch.randn(4, 16, 64, device=device).transpose(1, 2), "stride"),
        (torch.randn(4, 64, 16, dtype=torch.float64, device=device), "dtype"),
        *([(torch.randn(4, 64, 16, device=other), "device")] if other else []),
    ):
        with pytest.raises(RuntimeError):
            model(given)
        assert records()[-1]["event"] == "wrong_input" and records()[-1]["kind"] == kind


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
@pytest.mark.parametrize("batch", [2, 5, 33])
def test_a_correct_dynamic_package_is_silent_in_its_range(package, records, batch, device):
    """Compiled with batch >= 2 (example 5): any batch in range runs, with no finding."""
    model = torch._inductor.aoti_load_package(str(package("dynamic", 2, device=device)))
    x = torch.randn(batch, 3, device=device)
    torch.testing.assert_close(model(x), torch.softmax(x * 2, dim=0))
    assert not [r for r in records() if r["event"] == "wrong_input"]
    assert [r for r in records() if r["event"] == "tensor" and r["phase"] == "model_input"]


def test_diverge_at_a_size_the_package_was_not_compiled_for(tmp_path):
    """diverge --inputs at 200 tokens: the finding and exit 1, no traceback."""
    torch.export.save(narrowed.export(), tmp_path / "program.pt2")
    torch.save((torch.randn(4, 200, 16),), tmp_path / "bad.pt")
    done = cli(
        "diverge", tmp_path / "program.pt2", "--import", "testmodels.narrowed",
        "--inputs", tmp_path / "bad.pt", "--quiet",
    )  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    assert "Traceback" not in done.stdout + done.stderr
    assert (
        "WRONG INPUT: model input x dim 1 is 200 (shape [4, 200, 16]), but this package "
        "was compiled for 64 only" in done.stdout
    )
    assert "Compile it for this size" in done.stdout


@pytest.mark.compiles_afresh
def test_diverge_says_where_its_own_compile_narrowed_the_program(tmp_path):
    """diverge's own compile (not the run's shared one): the line, in its output."""
    torch.export.save(narrowed.export(), tmp_path / "program.pt2")
    done = subprocess.run(
        [sys.executable, "-m", "aoti_debug_printer._cli", "diverge", str(tmp_path / "program.pt2"),
         "--import", "testmodels.narrowed", "--quiet"],
        capture_output=True, text=True,
        env={**os.environ, "PYTHONPATH": str(TEST_DIR)},
    )  # fmt: skip
    assert "Traceback" not in done.stderr, done.stderr
    # At its example's size the package computes what eager does.
    assert done.returncode == 0, done.stdout + done.stderr
    assert (
        "the compiled package accepts fewer sizes than the program: input x dim 1: exported "
        "as 8..512, compiled for 64 only (by guard" in done.stdout
    ), done.stdout + done.stderr
    # Said once, by diverge: not again on the log.
    assert "accepts fewer sizes" not in done.stderr


def test_the_level_1_dump_holds_the_finding(tmp_path):
    program = narrowed.export()
    package = compiled_at_level_1(program, tmp_path / "narrowed-L1.pt2")
    model = torch._inductor.aoti_load_package(str(package))
    with aoti_debug_printer.options(dump_dir=tmp_path / "dump"), pytest.raises(RuntimeError):
        model(torch.randn(4, 100, 16))
    manifest = (tmp_path / "dump" / "manifest.jsonl").read_text()
    assert '"event": "wrong_input"' in manifest and '"given": "100"' in manifest
