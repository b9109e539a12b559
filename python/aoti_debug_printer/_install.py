"""Installing our DebugPrinterManager into Inductor, and taking it out.

Inductor's wrapper builds `self.debug_printer = DebugPrinterManager(...)`
with the name that torch/_inductor/codegen/wrapper.py imported from
debug_utils. We replace that name in both modules. Modules not yet imported
are patched the moment they are, by a post-import hook, so installing never
imports Inductor (which takes seconds) and `import torch` stays cheap.
"""

from __future__ import annotations

import importlib.abc
import logging
import sys
import threading
from types import ModuleType

log = logging.getLogger(__name__)

# Modules that hold the name, and the name.
_TARGETS = ("torch._inductor.codegen.debug_utils", "torch._inductor.codegen.wrapper")
_NAME = "DebugPrinterManager"

_lock = threading.RLock()
_originals: dict[str, object] = {}
_installed = False


class HookPointMissing(RuntimeError):
    pass


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", "unknown")


def _printing_requested() -> bool:
    from torch._inductor import config

    return str(config.aot_inductor.debug_intermediate_value_printer) != "0"


def _patch(module: ModuleType) -> None:
    from ._codegen import DebugPrinterManager

    current = getattr(module, _NAME, None)
    if current is None:
        raise HookPointMissing(
            f"aoti-debug-printer: {module.__name__}.{_NAME} does not exist in torch "
            f"{_torch_version()}; this torch's Inductor has no hook point we know. "
            "Supported: torch 2.11 to 2.13."
        )
    if current is not DebugPrinterManager:
        _originals.setdefault(module.__name__, current)
        setattr(module, _NAME, DebugPrinterManager)


class _PatchingLoader(importlib.abc.Loader):
    def __init__(self, loader: importlib.abc.Loader) -> None:
        self._loader = loader

    def create_module(self, spec):
        return self._loader.create_module(spec)

    def exec_module(self, module: ModuleType) -> None:
        self._loader.exec_module(module)
        with _lock:
            if not _installed:
                return
            try:
                _patch(module)
            except HookPointMissing:
                # Loud when the user asked for records; otherwise Inductor
                # must keep working exactly as without us.
                if _printing_requested():
                    raise
                log.warning("%s", sys.exc_info()[1])


class _PostImportFinder(importlib.abc.MetaPathFinder):
    """Finds nothing itself: it wraps the real loader of our targets."""

    def find_spec(self, fullname, path, target=None):
        if fullname not in _TARGETS:
            return None
        for finder in sys.meta_path:
            if finder is self or not hasattr(finder, "find_spec"):
                continue
            spec = finder.find_spec(fullname, path, target)
            if spec is not None and spec.loader is not None:
                spec.loader = _PatchingLoader(spec.loader)
                return spec
        return None


_finder = _PostImportFinder()


def install() -> None:
    """Route Inductor's debug printer to aoti-debug-printer (idempotent)."""
    global _installed
    with _lock:
        _installed = True
        if _finder not in sys.meta_path:
            sys.meta_path.insert(0, _finder)
        for name in _TARGETS:
            module = sys.modules.get(name)
            if module is not None:
                _patch(module)
    log.debug("aoti-debug-printer installed into Inductor (torch %s)", _torch_version())


def uninstall() -> None:
    """Give Inductor back its own printer."""
    global _installed
    with _lock:
        _installed = False
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        for name, original in _originals.items():
            module = sys.modules.get(name)
            if module is not None:
                setattr(module, _NAME, original)
        _originals.clear()


def is_installed() -> bool:
    return _installed
