"""The two public functions of AOTInductor we wrap, on every torch, patched
or not: no hook of Inductor's sees what they know (docs/internals.md).

- `aoti_compile_and_package` holds the exported program, the one place its
  range constraints still are: the codegen annotates each input with its
  exported range while it compiles, and a line says where the package then
  accepts fewer sizes (compiled_inputs).
- `aoti_load_package` holds the package's path, which a finding's repro
  line names (the library is told).

Both check the package's C++ runtime against this process's
(cxx_runtime): a package that would crash at load is said in one line
when it is compiled, and its load raises with that line instead of
crashing.
"""

from __future__ import annotations

import functools
import logging
import os
import sys
from collections.abc import Callable
from types import ModuleType

from .. import cxx_runtime
from . import compiled_inputs

log = logging.getLogger(__name__)

COMPILE = "aoti_compile_and_package"
LOAD = "aoti_load_package"

# "module.function" -> the original, for unwrap().
_originals: dict[str, object] = {}


def wrap(module: ModuleType, installed: Callable[[], bool]) -> None:
    """Wraps both in `module` (torch._inductor), once; each does only
    what the original does while `installed()` says no."""
    _wrap(module, COMPILE, lambda original: _compiling(original, installed))
    _wrap(module, LOAD, lambda original: _loading(original, installed))


def unwrap() -> None:
    for name, original in _originals.items():
        module_name, attr = name.rsplit(".", 1)
        if module_name in sys.modules:
            setattr(sys.modules[module_name], attr, original)
    _originals.clear()


def _wrap(module: ModuleType, name: str, make) -> None:
    original = getattr(module, name, None)
    if original is None or getattr(original, "_aoti_debug_printer", False):
        return
    replacement = functools.wraps(original)(make(original))
    replacement._aoti_debug_printer = True
    _originals[f"{module.__name__}.{name}"] = original
    setattr(module, name, replacement)


def _compiling(original, installed):
    def aoti_compile_and_package(exported_program, *args, **kwargs):
        if not installed():
            return original(exported_program, *args, **kwargs)
        outer = compiled_inputs.current()
        with compiled_inputs.compiling(exported_program) as facts:
            path = original(exported_program, *args, **kwargs)
        # A caller that set up the facts (diverge) says what they hold itself.
        if facts is not outer:
            compiled_inputs.say_narrowed(facts)
        if isinstance(path, (str, os.PathLike)) and (problem := cxx_runtime.package_problem(path)):
            log.warning("aoti-debug-printer: %s", problem)
        return path

    return aoti_compile_and_package


def _loading(original, installed):
    def aoti_load_package(path, *args, **kwargs):
        if installed() and isinstance(path, (str, os.PathLike)):
            # Before the loader's dlopen, which may not come back.
            if problem := cxx_runtime.package_problem(path):
                raise cxx_runtime.PackageRuntimeMismatch(f"aoti-debug-printer: {problem}")
            from .._native import shim

            shim().package_loaded(os.path.abspath(os.fspath(path)))
        return original(path, *args, **kwargs)

    return aoti_load_package
