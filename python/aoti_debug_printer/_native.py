"""The one way into the compiled part of the package: the `_C` module (the
shim's functions for Python, csrc/python.cpp), loaded on first use, and the
files installed beside it (the library compiled models load, the C header
generated code embeds). Nothing else imports `_C`: reading records needs
neither it nor torch."""

from __future__ import annotations

import atexit
import importlib
import importlib.metadata
import re
import sys
from pathlib import Path

# Where setup.py's CMake install puts _C, the library and the header.
PACKAGE_DIR = Path(__file__).resolve().parent
# The C ABI: the single definition of every code the generated calls pass.
HEADER = PACKAGE_DIR / "aoti_debug_printer.h"
# What the C++ kernels that keep statistics of their stores are given (inductor/kept_cpp.py).
KERNEL_HEADER = PACKAGE_DIR / "aoti_debug_printer_kernel.h"


def supported_torch() -> str:
    """The torch requirement in this package's metadata (pyproject.toml's
    dependencies), the one place that states the supported range."""
    try:
        requires = importlib.metadata.requires("aoti-debug-printer") or []
    except importlib.metadata.PackageNotFoundError:  # run from a source tree
        return "torch (see pyproject.toml)"
    return next(
        (r for r in requires if re.match(r"torch\b(?![-_.])", r)), "torch (see pyproject.toml)"
    )


def shim():
    """The `_C` module, loaded (with torch, which it needs first) on first use."""
    import torch  # noqa: F401  - the shim's Python module needs torch loaded first

    # The compiled extension module beside this file (csrc/python.cpp).
    native = importlib.import_module(f"{__package__}._C")
    if not getattr(native, "_saves_written_at_exit", False):
        # The library writes what is queued at exit too; from here it does
        # so before the interpreter and torch are torn down.
        atexit.register(native.wait_for_saves)
        native._saves_written_at_exit = True
    return native


def wait_for_saves() -> None:
    """Where this process loaded the shim, returns once every snapshot its
    level 1 queued is written (the saver's thread writes them, behind the
    model): a reader in this process then sees the whole dump. Loads
    nothing where the shim is not loaded, as no snapshot can be queued."""
    native = sys.modules.get(f"{__package__}._C")
    if native is not None:
        native.wait_for_saves()
