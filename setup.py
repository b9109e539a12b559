"""Thin driver: CMakeLists.txt decides what is compiled; this runs it."""

import os
import subprocess
import sys
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

ROOT = Path(__file__).resolve().parent


class CMakeExtension(Extension):
    def __init__(self, name: str) -> None:
        super().__init__(name, sources=[])


class CMakeBuild(build_ext):
    def build_extension(self, ext: Extension) -> None:
        try:
            import torch  # noqa: F401
        except ImportError:
            sys.exit(
                "aoti-debug-printer builds against the installed torch: "
                "install torch first, then run pip install --no-build-isolation ."
            )
        build_dir = Path(self.build_temp) / "cmake"
        build_dir.mkdir(parents=True, exist_ok=True)
        # The package directory this build installs into (build/lib... or, in
        # place, the source tree).
        prefix = Path(self.get_ext_fullpath(ext.name)).resolve().parent.parent
        jobs = os.environ.get("CMAKE_BUILD_PARALLEL_LEVEL", str(os.cpu_count() or 1))
        subprocess.check_call(
            [
                "cmake", "-S", str(ROOT), "-B", str(build_dir),
                f"-DPython3_EXECUTABLE={sys.executable}",
                "-DCMAKE_BUILD_TYPE=Release",
            ]
        )
        subprocess.check_call(["cmake", "--build", str(build_dir), "-j", jobs])
        subprocess.check_call(["cmake", "--install", str(build_dir), "--prefix", str(prefix)])


setup(
    ext_modules=[CMakeExtension("aoti_debug_printer._C")],
    cmdclass={"build_ext": CMakeBuild},
)
