"""The patch series applies, in order, to the installed torch."""

from __future__ import annotations

import importlib.util
import itertools
import shutil
import subprocess

import pytest
import torch
from conftest import ROOT, SITE_PACKAGES, torch_has_the_hooks
from test_shim import FILTER_CONFORMANCE


def test_patch_series_applies_to_installed_torch():
    """On a stock torch each patch applies, in order; on a torch built with
    the series, each one comes back out, last first."""
    # This Python's torch, whichever `python` is on the PATH.
    r = subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", SITE_PACKAGES], capture_output=True, text=True
    )
    assert r.returncode == 0, r.stdout + r.stderr
    lines = [line for line in r.stdout.splitlines() if line.startswith("ok ")]
    applied = [line.split()[1] for line in lines]
    series = sorted(p.name for p in (ROOT / "patches").glob("[0-9]*.patch"))
    assert applied == (series[::-1] if torch_has_the_hooks() else series)
    assert len(applied) == 6
    assert all(("applied in this tree" in line) == torch_has_the_hooks() for line in lines)


def test_check_fails_on_a_tree_it_does_not_fit(tmp_path):
    # The files the series changes, not those it adds (a later patch may
    # change one an earlier one adds): a stock tree's.
    pairs = [
        (before, line.split()[1][len("b/") :])
        for patch in (ROOT / "patches").glob("[0-9]*.patch")
        for before, line in itertools.pairwise(patch.read_text().splitlines())
        if line.startswith("+++ b/")
    ]
    added = {name for before, name in pairs if before.startswith("--- /dev/null")}
    changed = {name for _, name in pairs} - added
    for name in changed:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text("# not PyTorch's file\n")
    r = subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", tmp_path], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert "FAIL 0001" in r.stdout


@pytest.mark.parametrize(("spec", "kernel", "selected"), FILTER_CONFORMANCE)
def test_the_patched_filter_follows_the_one_grammar(patched_debug_utils, spec, kernel, selected):
    """Upstream's DebugPrinterManager with 0001 applied selects what the
    package's filter selects (test_shim's conformance table)."""
    with torch._inductor.config.patch({"aot_inductor.filtered_kernel_names": spec or None}):
        printer = patched_debug_utils.DebugPrinterManager(
            debug_printer_level="2", use_array_ref=False
        )
    assert printer._kernel_selected(kernel) is selected


@pytest.fixture(scope="module")
def patched_debug_utils(tmp_path_factory):
    """The installed torch's debug_utils.py with 0001 applied (already, on a
    torch built with the series), loaded from a scratch copy as a module of
    torch._inductor.codegen: torch is untouched, and the copy's manager is
    upstream's whichever the installed module's name holds now."""
    import torch._inductor.codegen.debug_utils as installed

    scratch = tmp_path_factory.mktemp("patched")
    target = scratch / "torch" / "_inductor" / "codegen" / "debug_utils.py"
    target.parent.mkdir(parents=True)
    shutil.copy(installed.__file__, target)
    patch = next((ROOT / "patches").glob("0001-*.patch"))
    if not torch_has_the_hooks():
        subprocess.run(
            ["patch", "-p1", "-d", scratch, "--forward", "--batch", "-F0", "-i", patch],
            check=True,
            capture_output=True,
        )
    name = "torch._inductor.codegen.patched_debug_utils"
    spec = importlib.util.spec_from_file_location(name, target)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_check_names_a_file_the_tree_lacks(tmp_path):
    r = subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", tmp_path], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert r.stdout.startswith(f"FAIL {tmp_path} has no torch/_inductor/"), r.stdout
