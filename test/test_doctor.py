"""`aoti-debug doctor`: this machine as the printer sees it, and a C++
runtime mismatch (a compiler whose libstdc++ is newer than the process's)
named with its fix. Each run is the real command in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def doctor(**env: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-m", "aoti_debug_printer._cli", "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=300,
    )


def test_this_machine_is_well_and_every_part_is_shown():
    done = doctor()
    assert done.returncode == 0, done.stdout + done.stderr
    out = done.stdout
    for name in ("torch", "CUDA", "C++ compiler", "its libstdc++", "libstdc++ loaded", "nvcc"):
        assert f"\n{name} " in "\n" + out, out
    assert "GLIBCXX_3.4." in out and out.endswith("all is well\n"), out
    assert "CUDA statistics" in out


def fake_compiler(tmp_path: Path, newest: int) -> Path:
    """A "compiler" whose libstdc++ provides up to GLIBCXX_3.4.`newest`."""
    runtime = tmp_path / "libstdc++.so.6"
    runtime.write_bytes(b"\0GLIBCXX_3.4\0GLIBCXX_3.4.21\0" + f"GLIBCXX_3.4.{newest}\0".encode())
    cxx = tmp_path / "g++-new"
    cxx.write_text(
        "#!/bin/sh\n"
        'case "$1" in\n'
        f"  -print-file-name=libstdc++.so.6) echo {runtime} ;;\n"
        '  *) echo "g++-new (fake) 99.1.0" ;;\n'
        "esac\n"
    )
    cxx.chmod(0o755)
    return cxx


def test_a_compiler_whose_runtime_the_process_lacks_is_a_problem_with_its_fix(tmp_path):
    done = doctor(CXX=str(fake_compiler(tmp_path, 99)), AOTI_DEBUG_PRINTER_LEVEL="2")
    assert done.returncode == 1, done.stdout + done.stderr
    out = done.stdout
    assert "g++-new (fake) 99.1.0" in out
    assert "up to GLIBCXX_3.4.99" in out
    assert "problem: packages built by" in out and "may need GLIBCXX_3.4.99" in out
    assert "fix: CXX=/usr/bin/g++" in out
    assert "AOTI_DEBUG_PRINTER_LEVEL=2" in out  # the switches that are set
    assert out.endswith("1 problem(s)\n")
    # An older runtime than the process's is no problem.
    assert doctor(CXX=str(fake_compiler(tmp_path, 1))).returncode == 0


def test_no_compiler_at_all_is_a_problem(tmp_path):
    done = doctor(CXX=str(tmp_path / "no-such-compiler"))
    assert done.returncode == 1, done.stdout + done.stderr
    assert "C++ compiler" in done.stdout and "none found" in done.stdout
    assert "Traceback" not in done.stderr
