"""Thin driver: CMakeLists.txt decides what is compiled; this runs it."""

import hashlib
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import setuptools

# With --no-build-isolation pip uses whatever setuptools is installed; an
# older one fails on pyproject.toml's SPDX license with no hint of the fix.
if int(setuptools.__version__.split(".")[0]) < 77:
    sys.exit(
        f"aoti-debug-printer needs setuptools>=77 to build (this Python has "
        f"{setuptools.__version__}): python -m pip install 'setuptools>=77'"
    )

from setuptools import Extension, setup  # noqa: E402
from setuptools.command.build_ext import build_ext  # noqa: E402
from setuptools.command.egg_info import egg_info  # noqa: E402

ROOT = Path(__file__).resolve().parent


def installed_torch(distribution):
    """The torch this build compiles against, checked against the range
    pyproject.toml supports. Checked before pip resolves dependencies, so
    that pip never swaps torch for another build of it."""
    try:
        import torch
    except ImportError:
        sys.exit(
            "aoti-debug-printer builds against the installed torch: "
            "install torch first, then run pip install --no-build-isolation ."
        )
    try:
        from packaging.requirements import Requirement
    except ImportError:  # older setuptools keep packaging here
        from setuptools.extern.packaging.requirements import Requirement
    for line in distribution.install_requires:
        requirement = Requirement(line)
        version = torch.__version__.split("+")[0]
        if requirement.name == "torch" and not requirement.specifier.contains(
            version, prereleases=True
        ):
            sys.exit(
                f"aoti-debug-printer supports {requirement}; this Python has torch "
                f"{torch.__version__} ({Path(torch.__file__).parent})"
            )
    return torch


def cmake_binary():
    """pip's cmake where installed (it may not be on the PATH), else the PATH's."""
    try:
        import cmake
    except ImportError:
        return shutil.which("cmake") or "cmake"
    return str(Path(cmake.CMAKE_BIN_DIR) / "cmake")


class CheckedEggInfo(egg_info):
    def run(self):
        installed_torch(self.distribution)
        super().run()


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        torch = installed_torch(self.distribution)
        # One CMake build directory per interpreter and torch: a cache that
        # another environment configured would keep its torch.
        key = hashlib.sha256(
            f"{Path(sys.executable).resolve()}|{sys.prefix}|{torch.__file__}|{torch.__version__}".encode()
        ).hexdigest()[:12]
        build_dir = Path(self.build_temp) / f"cmake-{key}"
        build_dir.mkdir(parents=True, exist_ok=True)
        # The package directory this build installs into (build/lib... or, in
        # place, the source tree).
        prefix = Path(self.get_ext_fullpath(ext.name)).resolve().parent.parent
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        cmake = cmake_binary()
        subprocess.check_call(
            [
                cmake,
                "-S",
                str(ROOT),
                "-B",
                str(build_dir),
                f"-DPython3_EXECUTABLE={sys.executable}",
                "-DCMAKE_BUILD_TYPE=Release",
                # More settings, as scikit-build and conda-build pass them:
                # CMAKE_ARGS="-DAOTI_DEBUG_PRINTER_CUDA=OFF".
                *shlex.split(os.environ.get("CMAKE_ARGS", "")),
            ]
        )
        subprocess.check_call([cmake, "--build", str(build_dir), "-j", jobs])
        subprocess.check_call([cmake, "--install", str(build_dir), "--prefix", str(prefix)])


setup(
    ext_modules=[CMakeExtension("aoti_debug_printer._C")],
    cmdclass={"build_ext": CMakeBuild, "egg_info": CheckedEggInfo},
)
