"""The one way into the compiled part of the package: the `_C` module (the
shim's functions for Python, csrc/python.cpp), loaded on first use, and the
files installed beside it (the library compiled models load, the C header
generated code embeds). Nothing else imports `_C`: reading records needs
neither it nor torch."""

from __future__ import annotations

import importlib
from pathlib import Path

# Where setup.py's CMake install puts _C, the library and the header.
PACKAGE_DIR = Path(__file__).resolve().parent
# The C ABI: the single definition of every code the generated calls pass.
HEADER = PACKAGE_DIR / "aoti_debug_printer.h"


def shim():
    """The `_C` module, loaded (with torch, which it needs first) on first use."""
    import torch  # noqa: F401  - the shim's Python module needs torch loaded first

    # The compiled extension module beside this file (csrc/python.cpp).
    return importlib.import_module(f"{__package__}._C")
