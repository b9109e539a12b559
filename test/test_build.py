"""Building where users are: the torch facts CMake uses, the supported range,
and one build tree shared by two environments."""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import ROOT

spec = importlib.util.spec_from_file_location("torch_facts", ROOT / "cmake" / "torch_facts.py")
torch_facts = importlib.util.module_from_spec(spec)
spec.loader.exec_module(torch_facts)

NVCC = shutil.which("nvcc")
needs_nvcc = pytest.mark.skipif(NVCC is None, reason="no nvcc on the PATH")


def source_copy(tmp_path: Path) -> Path:
    """The checkout's tracked and new files, without its build directory."""
    listed = subprocess.run(
        ["git", "ls-files", "--cached", "--others", "--exclude-standard"],
        cwd=ROOT,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.split()
    tree = tmp_path / "src"
    for name in listed:
        if (ROOT / name).is_file():
            (tree / name).parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(ROOT / name, tree / name)
    return tree


def test_torch_facts_name_this_torch(tmp_path):
    out = tmp_path / "facts.cmake"
    subprocess.run([sys.executable, ROOT / "cmake" / "torch_facts.py", out], check=True)
    text = out.read_text()
    assert f'set(TORCH_VERSION "{torch.__version__}")' in text
    assert f'set(TORCH_LIBRARY_DIR "{Path(torch.__file__).resolve().parent / "lib"}")' in text
    if not torch.version.cuda:
        assert (
            f'set(TORCH_NO_CUDA_REASON "torch {torch.__version__} is a build without CUDA")' in text
        )


@needs_nvcc
def test_an_nvcc_wrapper_is_followed_to_its_toolkit():
    home = torch_facts.nvcc_real_home(NVCC)
    assert home is not None and (home / "bin" / "nvcc").is_file()
    assert torch_facts.why_unusable(home, f"{torch_facts.toolkit_version(home)[0]}.0") is None


@needs_nvcc
def test_a_toolkit_of_another_cuda_major_is_refused():
    home = torch_facts.nvcc_real_home(NVCC)
    major, minor = torch_facts.toolkit_version(home)
    assert torch_facts.why_unusable(home, f"{major - 1}.8") == (
        f"{home} is CUDA {major}.{minor}, torch was built with CUDA {major - 1}.8"
    )


@needs_nvcc
@pytest.mark.skipif(not torch.version.cuda, reason="a torch without CUDA builds no CUDA kernel")
def test_nvcc_compiles_host_code_with_the_cxx_compiler_whatever_cudahostcxx_says(tmp_path):
    """The GPU image sets CUDAHOSTCXX to another GCC; a plain `pip wheel .`
    that followed it built a library that crashed (SIGSEGV) on its first
    record. CMake's configure is run as setup.py runs it."""
    other_gcc = tmp_path / "other-gcc" / "g++"
    other_gcc.parent.mkdir()
    other_gcc.write_text('#!/bin/sh\nexec g++ "$@"\n')
    other_gcc.chmod(0o755)
    cxx = shutil.which(os.environ.get("CXX", "c++"))
    r = subprocess.run(
        [
            "cmake",
            "-S",
            ROOT,
            "-B",
            tmp_path / "build",
            f"-DPython3_EXECUTABLE={sys.executable}",
            f"-DCMAKE_CXX_COMPILER={cxx}",
        ],
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "CUDAHOSTCXX": str(other_gcc), "TORCH_CUDA_ARCH_LIST": "9.0"},
    )
    said = " ".join((r.stdout + r.stderr).split())
    assert r.returncode == 0, said[-3000:]
    assert f"CUDAHOSTCXX={other_gcc} is not the C++ compiler; nvcc compiles host code with" in said
    assert "CUDA statistics kernel ON (nvcc" in said
    assert f"host compiler {cxx})" in said


def test_an_explicit_cuda_home_is_the_only_candidate(tmp_path, monkeypatch):
    monkeypatch.setenv("CUDA_HOME", str(tmp_path))
    assert torch_facts.find_toolkit("13.0") == (
        None,
        f"no usable CUDA toolkit: {tmp_path} has no bin/nvcc (CUDA_HOME)",
    )


def test_torch_cuda_arch_list_is_read_as_torch_reads_it():
    assert torch_facts.arch_list_from_env("8.0;9.0+PTX") == ["80-real", "90-real", "90-virtual"]
    assert torch_facts.arch_list_from_env(" 8.6 10.0a ") == ["86-real", "100a-real"]
    with pytest.raises(SystemExit, match="cannot read 'native'"):
        torch_facts.arch_list_from_env("native")


def test_a_torch_outside_the_supported_range_is_refused_before_pip_resolves(tmp_path):
    tree = source_copy(tmp_path)
    pyproject = tree / "pyproject.toml"
    pyproject.write_text(
        pyproject.read_text().replace(
            'dependencies = ["torch>=2.11,<2.16"]', 'dependencies = ["torch>=99"]'
        )
    )
    r = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "--no-build-isolation",
            "--dry-run",
            "--no-index",
            str(tree),
        ],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert r.returncode != 0
    assert f"aoti-debug-printer supports torch>=99; this Python has torch {torch.__version__}" in (
        r.stdout + r.stderr
    )


def built_library(wheel_dir: Path, unpack: Path) -> Path:
    (wheel,) = wheel_dir.glob("*.whl")
    with zipfile.ZipFile(wheel) as z:
        z.extractall(unpack)
    return unpack / "aoti_debug_printer" / "libaoti_debug_printer.so"


@pytest.mark.slow
@pytest.mark.skipif(
    not os.environ.get("AOTI_DEBUG_PRINTER_OTHER_PYTHON"),
    reason="set AOTI_DEBUG_PRINTER_OTHER_PYTHON to a Python with another torch",
)
def test_one_build_tree_two_environments(tmp_path):
    """pip builds in the source tree: a CMake cache left by another
    environment must not make this one build against that torch."""
    other = os.environ["AOTI_DEBUG_PRINTER_OTHER_PYTHON"]
    tree = source_copy(tmp_path)
    # Fewer GPU architectures, and, for a CUDA torch, no toolkit: that build
    # must go on without the CUDA kernel, saying so.
    # The library unoptimised (setup.py passes CMAKE_ARGS on): this test is
    # about which torch each build takes, and -O0 takes a third off each.
    env = {
        **os.environ,
        "TORCH_CUDA_ARCH_LIST": "9.0",
        "CUDA_HOME": str(tmp_path / "no-toolkit"),
        "CMAKE_ARGS": "-DCMAKE_CXX_FLAGS_RELEASE=-O0",
    }
    for python, wheels in ((other, "other"), (sys.executable, "this")):
        r = subprocess.run(
            [
                python,
                "-m",
                "pip",
                "wheel",
                "-v",
                "--no-build-isolation",
                "--no-deps",
                "-w",
                tmp_path / wheels,
                str(tree),
            ],
            capture_output=True,
            text=True,
            timeout=1500,
            env=env,
        )
        assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    assert len(list((tree / "build").glob("temp.*/cmake-*"))) == 2
    if torch.version.cuda:
        # CMake wraps its warnings (on stderr).
        assert "building without the CUDA statistics kernel: no usable CUDA toolkit" in " ".join(
            (r.stdout + r.stderr).split()
        )
    library = built_library(tmp_path / "this", tmp_path / "unpacked")
    dynamic = subprocess.run(
        ["readelf", "-d", library], capture_output=True, text=True, check=True
    ).stdout
    assert str(Path(torch.__file__).resolve().parent / "lib") in dynamic
    assert "cudart" not in dynamic
    # And it runs against this torch.
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, aoti_debug_printer as a; print(a.stats(torch.arange(4.))['max'])",
        ],
        capture_output=True,
        text=True,
        timeout=300,
        env={**os.environ, "PYTHONPATH": str(tmp_path / "unpacked")},
    )
    assert r.stdout.split() == ["3.0"], r.stderr[-2000:]


@pytest.mark.skipif(shutil.which("readelf") is None, reason="no readelf (binutils)")
def test_cpu_statistics_run_on_torchs_openmp_runtime():
    """Where torch's parallel_for is inline OpenMP code, the library is
    compiled with OpenMP (else its CPU statistics run on one thread), and a
    process that computed statistics holds one OpenMP runtime, torch's."""
    from torch.utils.cpp_extension import include_paths

    from aoti_debug_printer import _C

    if not torch_facts.parallel_for_is_openmp(include_paths()):
        pytest.skip("this torch's parallel_for is not OpenMP")
    dynamic = subprocess.run(
        ["readelf", "-d", _C.library_path()], capture_output=True, text=True, check=True
    ).stdout
    assert "Shared library: [libgomp.so.1]" in dynamic
    r = subprocess.run(
        [
            sys.executable,
            "-c",
            "import torch, aoti_debug_printer as a; "
            "torch.set_num_threads(2); a.stats(torch.randn(1 << 22), on='host'); "
            "print(len({l.split()[-1] for l in open('/proc/self/maps') if 'gomp' in l}))",
        ],
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert r.stdout.split() == ["1"], r.stderr[-2000:]


@pytest.mark.skipif(shutil.which("nm") is None, reason="no nm (binutils)")
def test_the_library_exports_only_its_c_abi_and_its_own_namespace():
    """The inline torch and standard-library code compiled into the library
    stays local (csrc/exports.map): it can neither clash with libtorch's own
    nor stand in for it."""
    from aoti_debug_printer import _C

    listing = subprocess.run(
        ["nm", "-D", "--defined-only", "-C", _C.library_path()],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    names = {line.split(" ", 2)[2] for line in listing.splitlines() if line.count(" ") >= 2}
    assert {
        "aoti_debug_printer_get_api",
        "aoti_torch_print_tensor_handle",
        "aoti_torch_save_tensor_handle",
    } <= names
    foreign = sorted(
        n
        for n in names
        if not n.startswith(
            (
                "aoti_debug_printer_",
                "aoti_debug_printer::",
                "aoti_torch_print_tensor_handle",
                "aoti_torch_save_tensor_handle",
            )
        )
    )
    assert foreign == []
