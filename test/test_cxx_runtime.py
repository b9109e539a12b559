"""A package whose C++ runtime this process cannot give is named when it is
compiled, and its load raises with the fix instead of crashing
(cxx_runtime). The mismatch is made here as it happened on the GPU machine
(a compiler whose -lstdc++ finds an archive before the shared library), and the other way (a
package that needs symbol versions newer than the loaded libstdc++ has).
Each compile and load is the real thing, in a fresh process."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from aoti_debug_printer import cxx_runtime

pytestmark = pytest.mark.skipif(
    not sys.platform.startswith("linux") or not Path("/usr/bin/g++").exists(),
    reason="needs Linux and /usr/bin/g++",
)

COMPILE = """
import sys, torch
class M(torch.nn.Module):
    def __init__(s):
        super().__init__(); s.a = torch.nn.Linear(16, 24); s.b = torch.nn.Linear(24, 4)
    def forward(s, x): return s.b(torch.relu(s.a(x)))
torch.manual_seed(0)
program = torch.export.export(M(), (torch.randn(2, 16),))
torch._inductor.aoti_compile_and_package(program, package_path=sys.argv[1])
print("compiled")
"""
LOAD = """
import sys, torch
runner = torch._inductor.aoti_load_package(sys.argv[1])
print("loaded", tuple(runner(torch.randn(2, 16)).shape))
"""


def python(code: str, *args, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code, *map(str, args)],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )


def compiler(tmp_path: Path, name: str, extra_link_args: str) -> Path:
    """Debian's g++, with `extra_link_args` added where it links a shared
    object (the compiler Inductor runs for a package)."""
    cxx = tmp_path / name
    cxx.write_text(
        "#!/bin/sh\n"
        f'case " $* " in *" -shared "*) exec /usr/bin/g++ "$@" {extra_link_args} ;; esac\n'
        'exec /usr/bin/g++ "$@"\n'
    )
    cxx.chmod(0o755)
    return cxx


def compiled_with(cxx: Path, tmp_path: Path) -> tuple[Path, subprocess.CompletedProcess]:
    package = tmp_path / f"{cxx.name}.pt2"
    # A cache of its own: a package the same source built before would be
    # taken from Inductor's cache, not linked again by this compiler.
    done = python(COMPILE, package, CXX=str(cxx), TORCHINDUCTOR_CACHE_DIR=str(tmp_path / "cache"))
    assert done.returncode == 0 and "compiled" in done.stdout, done.stderr[-3000:]
    return package, done


def test_a_package_that_carries_its_own_cxx_runtime_is_named_and_never_loaded(tmp_path):
    # As the GPU machine's /opt/gcc: a plain -lstdc++ that finds the
    # compiler's own directory first, where libstdc++.so is a dangling link
    # and libstdc++.a a real archive, so the linker takes the archive.
    archive = Path(cxx_runtime._ask("/usr/bin/g++", "-print-file-name=libstdc++.a").stdout.strip())
    if not archive.is_absolute():
        pytest.skip("Debian's g++ has no libstdc++.a here")
    own = tmp_path / "gcc-lib"
    own.mkdir()
    (own / "libstdc++.a").symlink_to(archive)
    (own / "libstdc++.so").symlink_to(own / "libstdc++.so.6")
    cxx = compiler(tmp_path, "g++-own-runtime", f"-L{own}")
    package, compiled = compiled_with(cxx, tmp_path)
    # Said once, when the package is made: the compiler's runtime, the
    # process's, and the fix.
    said = [ln for ln in compiled.stderr.splitlines() if "carries its own C++ runtime" in ln]
    assert len(said) == 1, compiled.stderr[-3000:]
    assert "libstdc++ linked in statically by GCC " in said[0]
    assert "libstdc++.so.6" in said[0] and "GLIBCXX_3.4." in said[0]
    assert said[0].endswith("Fix: compile it again with CXX=/usr/bin/g++")

    # Its load raises with that line, and nothing of the package runs.
    loaded = python(LOAD, package)
    assert loaded.returncode == 1 and "loaded" not in loaded.stdout
    last = loaded.stderr.strip().splitlines()[-1]
    assert last.startswith(
        "aoti_debug_printer.cxx_runtime.PackageRuntimeMismatch: aoti-debug-printer:"
    )
    assert "carries its own C++ runtime" in last and str(package) in last

    # Without this library the same load does not run the model: the
    # mismatch is real (here a failed constructor; a SIGSEGV on the GPU
    # machine's torch 2.11).
    stock = python(LOAD, package, AOTI_DEBUG_PRINTER_AUTOLOAD="0")
    assert stock.returncode != 0 and "loaded" not in stock.stdout, stock.stdout + stock.stderr

    # The doctor names that compiler too, with the fix, compiling nothing.
    doctor = subprocess.run(
        [sys.executable, "-m", "aoti_debug_printer._cli", "doctor"],
        capture_output=True,
        text=True,
        env={**os.environ, "CXX": str(cxx)},
        timeout=300,
    )
    assert doctor.returncode == 1, doctor.stdout + doctor.stderr
    assert "it links libstdc++ into every package it builds" in doctor.stdout
    assert "fix: CXX=/usr/bin/g++" in doctor.stdout
    assert "libstdc++.a, linked into each package" in doctor.stdout
    # The other way a compiler does it, asked the same way.
    flagged = compiler(tmp_path, "g++-static-flag", "-static-libstdc++")
    assert cxx_runtime.links_runtime_statically(str(flagged))


def test_a_package_that_needs_a_newer_cxx_runtime_is_named_before_dlopen(tmp_path):
    # A "libstdc++.so.6" that defines one symbol at GLIBCXX_3.4.99, a version
    # no libstdc++ has, and an object that calls it: linked into the package,
    # they make it need that version of the process's libstdc++.
    (tmp_path / "newer.map").write_text(
        "GLIBCXX_3.4.99 { global: adp_newer_runtime; local: *; };\n"
    )
    (tmp_path / "newer.c").write_text("int adp_newer_runtime(void) { return 1; }\n")
    (tmp_path / "user.c").write_text(
        "extern int adp_newer_runtime(void);\nint adp_uses_newer(void) { return adp_newer_runtime(); }\n"
    )
    for command in (
        "gcc -shared -fPIC -Wl,-soname,libstdc++.so.6 -Wl,--version-script=newer.map "
        "-o libnewer.so newer.c",
        "gcc -c -fPIC -o user.o user.c",
    ):
        subprocess.run(command.split(), cwd=tmp_path, check=True)
    cxx = compiler(tmp_path, "g++-newer-runtime", f"{tmp_path}/user.o {tmp_path}/libnewer.so")
    package, compiled = compiled_with(cxx, tmp_path)
    assert "needs GLIBCXX_3.4.99" in compiled.stderr

    loaded = python(LOAD, package)
    assert loaded.returncode == 1 and "loaded" not in loaded.stdout
    last = loaded.stderr.strip().splitlines()[-1]
    assert "PackageRuntimeMismatch" in last and "needs GLIBCXX_3.4.99" in last
    assert "(up to GLIBCXX_3.4." in last and "Fix: compile it again with CXX=/usr/bin/g++" in last


def test_a_package_of_the_systems_compiler_passes_and_no_file_is_a_problem(package, tmp_path):
    assert cxx_runtime.package_problem(package("mlp", 2)) is None
    # What is no package, or no ELF, is left to the loader to say.
    (tmp_path / "not.pt2").write_bytes(b"not a zip")
    assert cxx_runtime.package_problem(tmp_path / "not.pt2") is None
    assert cxx_runtime.package_problem(tmp_path / "missing.pt2") is None
    assert not cxx_runtime.links_runtime_statically("/usr/bin/g++")
