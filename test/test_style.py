"""The tree keeps one style: ruff lints and formats the Python (its rules in
pyproject.toml), clang-format the C++ (.clang-format). scripts/setup.sh
installs the pinned ruff and Debian's clang-format, so CI checks both."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
# The whole tree (setup.py too); pyproject.toml excludes the build outputs.
PYTHON = ["."]
CPP = sorted(
    str(p.relative_to(ROOT))
    for pattern in (
        "csrc/*.h",
        "csrc/include/*.h",
        "csrc/*.cpp",
        "csrc/*.cu",
        "csrc/cuda/*.cu",
        "csrc/cuda/*.cuh",
        "test/cpp/*.cpp",
    )
    for p in ROOT.glob(pattern)
)


def run(*command: str) -> subprocess.CompletedProcess:
    return subprocess.run(command, cwd=ROOT, capture_output=True, text=True, timeout=300)


@pytest.mark.parametrize("check", [["check"], ["format", "--check"]], ids=["lint", "format"])
def test_python_follows_ruff(check):
    done = run(sys.executable, "-m", "ruff", *check, *PYTHON)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]


@pytest.mark.skipif(
    shutil.which("clang-format") is None, reason="no clang-format (setup.sh installs it)"
)
def test_cpp_follows_clang_format():
    assert CPP
    done = run("clang-format", "--style=file", "--dry-run", "-Werror", *CPP)
    assert done.returncode == 0, done.stderr[-4000:]
