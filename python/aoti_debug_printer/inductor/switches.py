"""What decides whether and how the printer goes into Inductor: the
switches the user sets (their spellings, AOTI_DEBUG_PRINTER_HOOKS, the
printer's level in Inductor's config) and the torch it goes into. Its
import loads neither torch nor the compiled library (_autoload's, at
`import torch`)."""

from __future__ import annotations

import os
import sys


class HookPointMissing(RuntimeError):
    pass


def torch_version() -> str:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", "unknown")


# A switch's spellings, any case: those of the shim's options (settings.cpp,
# flag()), which this module must not load (test_install checks they agree).
ON = frozenset({"1", "on", "true", "yes"})
OFF = frozenset({"0", "off", "false", "no"})


def printing_requested() -> bool:
    from torch._inductor import config

    return str(config.aot_inductor.debug_intermediate_value_printer) != "0"


def hooks_wanted() -> str:
    """AOTI_DEBUG_PRINTER_HOOKS: "use" Inductor's hooks where this torch has
    them (the default), "off" (0): wrap its methods as on a stock torch, so
    that both ways in can be compared on one torch, or "require": the hooks
    or nothing, every method wrap refused (a patched torch's own tests)."""
    value = os.environ.get("AOTI_DEBUG_PRINTER_HOOKS", "").strip().lower()
    return "off" if value in OFF else "require" if value == "require" else "use"


def stats_in_kernels_wanted() -> bool:
    """AOTI_DEBUG_PRINTER_STATS_IN_KERNELS: whether a level-2 AOTInductor
    compile for CUDA has its Triton kernels keep the statistics of what they
    store (stored_stats.py), "1", or leaves every record to a statistics
    launch of its own, as before (the default, until the GPU comparison of
    the two has passed whole: docs/cuda.md)."""
    return os.environ.get("AOTI_DEBUG_PRINTER_STATS_IN_KERNELS", "").strip().lower() in ON
