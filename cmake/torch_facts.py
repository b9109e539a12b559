"""What CMakeLists.txt needs to know about the torch it builds against.

CMake runs this with the Python that runs the build and includes the file it
writes. It asks torch itself, as torch.utils.cpp_extension does, instead of
going through TorchConfig.cmake: for a CUDA build of torch, TorchConfig
insists on a complete CUDA toolkit (cuBLAS, cuFFT, cuRAND, NVRTC...), which a
machine without a GPU seldom has, while this package needs only nvcc and the
CUDA runtime, and needs neither to build its CPU-only library.

    python torch_facts.py OUTPUT.cmake
"""

from __future__ import annotations

import logging
import os
import re
import shutil
import subprocess
import sys
import sysconfig
import warnings
from pathlib import Path


def cmake_string(value: object) -> str:
    text = ";".join(map(str, value)) if isinstance(value, (list, tuple)) else str(value)
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"') + '"'


# --- The CUDA toolkit -------------------------------------------------------


def toolkit_version(home: Path) -> tuple[int, int] | None:
    header = home / "include" / "cuda_runtime_api.h"
    try:
        match = re.search(r"#define\s+CUDART_VERSION\s+(\d+)", header.read_text(errors="replace"))
    except OSError:
        return None
    return (int(match[1]) // 1000, int(match[1]) % 1000 // 10) if match else None


def why_unusable(home: Path, torch_cuda: str) -> str | None:
    """None when `home` holds what this build needs: nvcc, the runtime's
    headers and library, of torch's CUDA major version."""
    if not os.access(home / "bin" / "nvcc", os.X_OK):
        return f"{home} has no bin/nvcc"
    version = toolkit_version(home)
    if version is None:
        return f"{home} has no include/cuda_runtime_api.h"
    if not any((home / lib).glob("libcudart.so*") for lib in ("lib64", "lib")):
        return f"{home} has no libcudart.so"
    if str(version[0]) != torch_cuda.split(".")[0]:
        return f"{home} is CUDA {version[0]}.{version[1]}, torch was built with CUDA {torch_cuda}"
    return None


def nvcc_real_home(nvcc: str) -> Path | None:
    """Where the nvcc on the PATH really lives. It is often a wrapper script
    (`exec /usr/local/cuda-13.0/bin/nvcc "$@"`) whose own directory holds no
    toolkit; nvcc's dry run names its real one."""
    try:
        out = subprocess.run(
            [nvcc, "--dryrun", "-x", "cu", "-c", os.devnull, "-o", os.devnull],
            capture_output=True,
            text=True,
            timeout=60,
        ).stderr
    except (OSError, subprocess.SubprocessError):
        return None
    match = re.search(r"^#\$ TOP=(.+)$", out, re.M)
    return Path(match[1].strip()).resolve() if match else None


def toolkit_candidates(torch_cuda: str) -> list[tuple[str, Path]]:
    """(where it came from, directory), in the order torch's extension builder
    looks, then the places it misses. An explicit CUDA_HOME or CUDA_PATH is
    the only candidate: a user who names a toolkit gets that one or none."""
    for name in ("CUDA_HOME", "CUDA_PATH"):
        if os.environ.get(name):
            return [(name, Path(os.environ[name]))]
    found: list[tuple[str, Path]] = []
    # torch.utils.cpp_extension's own guess: nvcc's directory, or /usr/local/cuda.
    from torch.utils.cpp_extension import CUDA_HOME

    if CUDA_HOME:
        found.append(("torch.utils.cpp_extension.CUDA_HOME", Path(CUDA_HOME)))
    nvcc = shutil.which("nvcc")
    if nvcc and (home := nvcc_real_home(nvcc)):
        found.append((f"nvcc on the PATH ({nvcc})", home))
    found.append(("the default location", Path("/usr/local/cuda")))
    # The toolkit that pip installs beside a CUDA build of torch (nvidia-*
    # and cuda-* wheels): complete only once nvcc's wheel is installed too.
    purelib = Path(sysconfig.get_paths()["purelib"])
    major = torch_cuda.split(".")[0]
    for sub in (f"nvidia/cu{major}", "nvidia/cuda_nvcc"):
        found.append((f"pip's CUDA wheels ({sub})", purelib / sub))
    return found


def find_toolkit(torch_cuda: str) -> tuple[Path | None, str]:
    """(toolkit, "") or (None, why none is usable)."""
    tried = []
    seen = set()
    for origin, home in toolkit_candidates(torch_cuda):
        if home in seen:
            continue
        seen.add(home)
        why = why_unusable(home, torch_cuda)
        if why is None:
            return home, ""
        tried.append(f"{why} ({origin})" if origin != "the default location" else why)
    return None, "no usable CUDA toolkit: " + "; ".join(tried)


# --- GPU architectures ------------------------------------------------------


def arch_list_from_env(spec: str) -> list[str]:
    """TORCH_CUDA_ARCH_LIST ("8.0;9.0+PTX", "8.0 9.0a") as CMake architectures."""
    archs = []
    for item in re.split(r"[;\s]+", spec.strip()):
        match = re.fullmatch(r"(\d+)\.(\d+)([af]?)(\+PTX)?", item)
        if not match:
            raise SystemExit(f"TORCH_CUDA_ARCH_LIST: cannot read {item!r} (use e.g. '8.0;9.0+PTX')")
        arch = f"{match[1]}{match[2]}{match[3]}"
        archs.append(f"{arch}-real")
        if match[4]:
            archs.append(f"{arch}-virtual")
    return archs


def cuda_architectures(torch, home: Path) -> tuple[list[str], str]:
    """The architectures to compile for, and where they came from. Never
    "native": a build machine often has no GPU, or not the users' GPU."""
    if os.environ.get("TORCH_CUDA_ARCH_LIST"):
        return arch_list_from_env(os.environ["TORCH_CUDA_ARCH_LIST"]), "TORCH_CUDA_ARCH_LIST"
    if torch.cuda.is_available():
        caps = sorted(
            {torch.cuda.get_device_capability(i) for i in range(torch.cuda.device_count())}
        )
        return [f"{major}{minor}-real" for major, minor in caps], "the GPUs of this machine"
    archs = []
    for item in torch.cuda.get_arch_list():
        kind, _, arch = item.partition("_")
        archs.append(f"{arch}-real" if kind == "sm" else f"{arch}-virtual")
    # Only those this nvcc can compile for (torch may know newer GPUs).
    try:
        known = subprocess.run(
            [str(home / "bin" / "nvcc"), "--list-gpu-arch"],
            capture_output=True,
            text=True,
            timeout=60,
        ).stdout.split()
    except (OSError, subprocess.SubprocessError):
        known = []
    if known:
        archs = [a for a in archs if "compute_" + a.split("-")[0] in known]
    return archs, f"torch {torch.__version__}'s own list"


# --- ATen's parallel_for ----------------------------------------------------


def parallel_for_is_openmp(include_dirs: list[str]) -> bool:
    """Whether ATen's parallel_for is inline OpenMP code (ATen/Config.h says
    so for torch's own builds): the code calling it must then be compiled with
    OpenMP, or its parallel_for quietly runs on one thread."""
    for directory in include_dirs:
        config = Path(directory) / "ATen" / "Config.h"
        if config.is_file():
            return re.search(r"#define\s+AT_PARALLEL_OPENMP\s+1\b", config.read_text()) is not None
    return False


# --- All of it --------------------------------------------------------------


def facts() -> dict[str, object]:
    # Quiet on machines without a GPU or NumPy: these are not the build's news.
    logging.getLogger("torch.utils.cpp_extension").setLevel(logging.ERROR)
    warnings.filterwarnings("ignore", "Failed to initialize NumPy")
    import torch
    from torch.utils.cpp_extension import include_paths

    lib = Path(torch.__file__).resolve().parent / "lib"
    out: dict[str, object] = {
        "TORCH_VERSION": torch.__version__,
        "TORCH_CUDA_VERSION": torch.version.cuda or "",
        "TORCH_INCLUDE_DIRS": include_paths(),
        "TORCH_LIBRARY_DIR": lib,
        "TORCH_CXX11_ABI": int(torch._C._GLIBCXX_USE_CXX11_ABI),
        "TORCH_PARALLEL_OPENMP": int(parallel_for_is_openmp(include_paths())),
        "TORCH_CUDA_HOME": "",
        "TORCH_CUDA_ARCHITECTURES": "",
        "TORCH_CUDA_ARCHITECTURES_FROM": "",
        "TORCH_NO_CUDA_REASON": "",
    }
    if not torch.version.cuda:
        out["TORCH_NO_CUDA_REASON"] = f"torch {torch.__version__} is a build without CUDA"
        return out
    home, why = find_toolkit(torch.version.cuda)
    if home is None:
        out["TORCH_NO_CUDA_REASON"] = why
        return out
    archs, source = cuda_architectures(torch, home)
    out.update(
        TORCH_CUDA_HOME=home, TORCH_CUDA_ARCHITECTURES=archs, TORCH_CUDA_ARCHITECTURES_FROM=source
    )
    return out


def main() -> None:
    lines = [f"set({key} {cmake_string(value)})\n" for key, value in facts().items()]
    Path(sys.argv[1]).write_text("".join(lines))


if __name__ == "__main__":
    main()
