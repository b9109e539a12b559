"""One process loads packages of one model compiled at levels 0 to 3 and by
PyTorch's own printer (and two that stop: the trap's, a wrong input's),
runs them interleaved from several threads and switches the level, the
trap and the guard underneath (test/stress.py). No crash, every result
unchanged; on the CPU also with the library built with AddressSanitizer
and UBSan, with no report."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, compile_package
from testmodels.shared import shared

import aoti_debug_printer

pytestmark = [pytest.mark.slow, pytest.mark.xdist_group("stress")]

HERE = Path(__file__).resolve().parent
DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def stress_packages(package, device: str) -> list[str]:
    """NAME=PATH for stress.py: ours at levels 0 to 3, the built-in's, and
    the two that stop."""
    ours = [f"mlp:{level}={package('mlp', level, device=device)}" for level in range(4)]

    def builtin(directory: Path) -> None:
        aoti_debug_printer.uninstall()
        try:
            compile_package("mlp", 2, directory / "mlp.pt2", device=device)
        finally:
            aoti_debug_printer.install()

    stock = shared(f"pt2-mlp-builtin-2-{device}", builtin) / "mlp.pt2"
    return [
        *ours,
        f"mlp:builtin={stock}",
        f"nan_maker={package('nan_maker', 2, device=device)}",
        f"dynamic={package('dynamic', 2, device=device)}",
    ]


def run_stress(packages: list[str], device: str, dump: Path, env: dict | None = None, **kw):
    done = subprocess.run(
        [sys.executable, HERE / "stress.py", device, dump, *packages, *kw.get("args", [])],
        stdout=subprocess.DEVNULL,  # the built-in printer writes to it
        stderr=subprocess.PIPE,
        text=True,
        env={**os.environ, **(env or {})},
        timeout=600,
    )
    # Kept beside the dump: what a failure said, in full.
    (dump.parent / "stress.stderr").write_text(done.stderr)
    return done


def what_stopped(stderr: str) -> str:
    """The lines of a failed stress that say why: stress.py's own, and
    every error the AOTInductor runner printed that is not a finding of ours
    (torch 2.11's exception keeps only the runner's own message)."""
    lines = stderr.splitlines()
    foreign = [ln for ln in lines if ln.startswith("Error:") and "aoti-debug-printer" not in ln]
    ours = [ln for ln in lines if ln.startswith("stress:")]
    return "\n".join([*dict.fromkeys(foreign), *ours])


@pytest.mark.parametrize("device", DEVICES)
def test_many_packages_many_threads_switches_flipped(package, tmp_path, device):
    done = run_stress(stress_packages(package, device), device, tmp_path / "dump")
    assert done.returncode == 0, what_stopped(done.stderr)
    assert "every other result unchanged" in done.stderr


LIBRARY = "aoti_debug_printer"  # CMake's target, lib<it>.so beside _C


@pytest.fixture(scope="session")
def sanitized_package() -> Path:
    """This package with its library built with AddressSanitizer and UBSan
    (no CUDA kernel), once per test run: a directory to put first on
    PYTHONPATH. _C stays the installed one: it finds the library beside it
    ($ORIGIN), so every call it makes lands in the sanitized library, and
    its pybind11 glue, the build's slowest unit, is not compiled again."""

    def make(directory: Path) -> None:
        build, site = directory / "build", directory / "site"
        installed = Path(aoti_debug_printer.__file__).parent
        shutil.copytree(installed, site / "aoti_debug_printer")
        configure = [
            "cmake", "-S", ROOT, "-B", build, f"-DPython3_EXECUTABLE={sys.executable}",
            "-DCMAKE_BUILD_TYPE=RelWithDebInfo", "-DAOTI_DEBUG_PRINTER_SANITIZE=ON",
            "-DAOTI_DEBUG_PRINTER_CUDA=OFF",
            # Unoptimized, as the sanitizers see every access then: it
            # compiles in a third of -O2's time (the suite's slowest set-up),
            # and NDEBUG stays, as torch's own build has it.
            "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O0 -g -DNDEBUG",
        ]  # fmt: skip
        for step in (
            configure,
            ["cmake", "--build", build, "-j", str(os.cpu_count() or 1), "--target", LIBRARY],
        ):
            result = subprocess.run(step, capture_output=True, text=True)
            assert result.returncode == 0, result.stdout[-4000:] + result.stderr[-4000:]
        shutil.copy2(build / f"lib{LIBRARY}.so", site / "aoti_debug_printer")

    return shared("sanitized-build", make) / "site"


def test_the_same_under_address_and_undefined_behaviour_sanitizers(
    package, sanitized_package, tmp_path
):
    library = sanitized_package / "aoti_debug_printer" / "libaoti_debug_printer.so"
    # libasan first; libstdc++ with it, which the interpreter does not link:
    # ASan finds the __cxa_throw it intercepts at start-up or never.
    preload = [
        subprocess.run(
            ["g++", f"-print-file-name={name}"], capture_output=True, text=True, check=True
        ).stdout.strip()
        for name in ("libasan.so", "libstdc++.so")
    ]
    env = {
        "PYTHONPATH": os.pathsep.join([str(sanitized_package), str(HERE)]),
        # The packages find the sanitized library, not the installed one.
        "AOTI_DEBUG_PRINTER_LIBRARY": str(library),
        "LD_PRELOAD": os.pathsep.join(preload),
        # Python and torch keep memory to exit: leaks are not what this finds.
        "ASAN_OPTIONS": "detect_leaks=0:abort_on_error=1:halt_on_error=1",
        "UBSAN_OPTIONS": "print_stacktrace=1:halt_on_error=1",
    }
    done = run_stress(
        stress_packages(package, "cpu"), "cpu", tmp_path / "dump", env,
        args=["--threads", "4", "--runs", "25"],
    )  # fmt: skip
    # The report, from its first line.
    report = done.stderr[max(0, done.stderr.find("==ERROR")) :]
    assert done.returncode == 0, report[:8000]
    assert "ERROR: AddressSanitizer" not in done.stderr
    assert "runtime error:" not in done.stderr
    assert f"every other result unchanged (library {library})" in done.stderr


FRESH_THREAD = """
import sys, threading, torch
import aoti_debug_printer
run = torch._inductor.aoti_load_package(sys.argv[1])
x = torch.randn(5, 3, device="cuda")
expected = run(x)  # this thread's context is current: every kernel is loaded
same = []
def work(level):
    aoti_debug_printer.set_option("level", level)
    same.append(torch.equal(run(x), expected))
for level in ("0", "2"):  # the printer switched off at run time, and on
    thread = threading.Thread(target=work, args=(level,))
    thread.start()
    thread.join()
print(same)
"""


@pytest.mark.gpu
def test_a_fresh_thread_runs_a_package_of_triton_kernels_only(package, tmp_path):
    """A thread that never called the CUDA runtime has no current context,
    and a package whose run calls only the driver (Triton kernels, cached
    allocations) fails there with 'invalid device context', with the printer
    or without: each run binds the primary context, and says so once."""
    done = subprocess.run(
        [sys.executable, "-c", FRESH_THREAD, package("dynamic", 2, device="cuda")],
        capture_output=True,
        text=True,
        env={**os.environ, "AOTI_DEBUG_PRINTER_OUTPUT": str(tmp_path / "records.txt")},
        timeout=300,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    assert done.stdout.strip() == "[True, True]"
    assert done.stderr.count("no current CUDA context") == 1, done.stderr
    assert "made device 0's primary context current" in done.stderr
