"""The patch series applies, in order, to the installed torch."""

from __future__ import annotations

import subprocess

from conftest import ROOT


def test_patch_series_applies_to_installed_torch():
    r = subprocess.run(["bash", ROOT / "patches" / "check.sh"], capture_output=True, text=True)
    assert r.returncode == 0, r.stdout + r.stderr
    applied = [line.split()[1] for line in r.stdout.splitlines() if line.startswith("ok ")]
    assert applied == sorted(p.name for p in (ROOT / "patches").glob("[0-9]*.patch"))
    assert len(applied) == 3


def test_check_fails_on_a_tree_it_does_not_fit(tmp_path):
    target = tmp_path / "torch" / "_inductor" / "codegen"
    target.mkdir(parents=True)
    for name in ("debug_utils.py", "wrapper.py"):
        (target / name).write_text("# not PyTorch's file\n")
    r = subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", tmp_path], capture_output=True, text=True
    )
    assert r.returncode != 0
    assert "FAIL 0001" in r.stdout
