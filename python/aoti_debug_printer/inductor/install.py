"""Installing our DebugPrinterManager into Inductor, and taking it out.

Two ways in, one per kind of torch:

- A torch built with patches/ (0002 to 0006) has Inductor's debug-printer
  hooks (torch._inductor.debug_printer_hooks): we set ours, `_Hooks`, and
  wrap nothing.
- A stock torch has none: Inductor's wrapper builds `self.debug_printer =
  DebugPrinterManager(...)` with the name that wrapper.py imported from
  debug_utils, which we replace in both modules, and the methods the hooks
  would be called from are wrapped (wraps.py), each of them saying in one
  line what is lost when it has moved.

Either way modules not yet imported are handled the moment they are, by a
post-import hook, so installing never imports Inductor (which takes seconds)
and `import torch` stays cheap.
"""

from __future__ import annotations

import contextlib
import importlib
import importlib.abc
import logging
import sys
import threading
from types import ModuleType

# PACKAGE_DIR, GENERATOR_FILES and cache_tag keep their old address here too
# (the tests').
from .._native import (
    PACKAGE_DIR,  # noqa: F401
    supported_torch,
)
from . import entry_points
from .cache_tag import (  # noqa: F401
    GENERATOR_FILES,
    cache_tag,
    generated_code_tag,
    this_installation_tag,
)
from .switches import (
    HookPointMissing,
    hooks_wanted,
    printing_requested,
    torch_version,
)
from .wraps import (
    consults_printer_for_cpu_kernels,
    keep_cpu_statistics_in,
    keep_stored_statistics_in,
    note_kernel_nodes_in,
    note_lines_in,
    originals,
    record_fallback_calls_in,
    record_python_fallback_calls_in,
    tag_cache_keys_in,
    wrap_python_cpu_kernel_calls,
)

log = logging.getLogger(__name__)

# Modules that hold the name, and the name.
_PRINTER_MODULES = ("torch._inductor.codegen.debug_utils", "torch._inductor.codegen.wrapper")
_NAME = "DebugPrinterManager"
# Modules whose scheduling classes write the comment before a generated
# kernel's call: where the printer learns which nodes the kernel computes.
_SCHEDULING_MODULES = {
    "torch._inductor.scheduler": "BaseScheduling",
    "torch._inductor.codegen.triton": "TritonScheduling",
    "torch._inductor.codegen.cpp": "CppScheduling",
}
# The C++ wrapper's calls of ops that are in no shim (custom ops, through
# AOTInductor's proxy executor): written without consulting the printer.
_FALLBACK_MODULE = "torch._inductor.codegen.cpp_wrapper_cpu"
# Where Triton kernels store: they keep statistics of what they store
# (stored_stats), and where the C++ wrapper zeroes the run's workspace for
# them; wrapped on every torch (no hook of patches/ covers them).
_TRITON_MODULES = ("torch._inductor.codegen.triton", "torch._inductor.codegen.cpp_wrapper_gpu")
# Where C++ kernels store: they keep statistics of what they store too
# (kept_cpp), wrapped on every torch as the Triton modules are.
_CPP_MODULE = "torch._inductor.codegen.cpp"
# Where Inductor's cache keys are made (see cache_tag).
_CACHE_KEY_MODULE = "torch._inductor.codecache"
# Where AOTInductor's public entry points live (entry_points wraps them).
_ENTRY_MODULE = "torch._inductor"
_TARGETS = (
    _PRINTER_MODULES
    + tuple(_SCHEDULING_MODULES)
    + _TRITON_MODULES[1:]
    + (_FALLBACK_MODULE, _CACHE_KEY_MODULE, _ENTRY_MODULE)
)

# Inductor's debug-printer hooks, in a torch built with patches/.
_HOOKS_MODULE = "torch._inductor.debug_printer_hooks"

_lock = threading.RLock()
_installed = False


def inductor_hooks() -> ModuleType | None:
    """Inductor's debug-printer hooks module where this torch has it (built
    with patches/) and AOTI_DEBUG_PRINTER_HOOKS does not set it aside, else
    None."""
    wanted = hooks_wanted()
    if wanted == "off":
        return None
    try:
        return importlib.import_module(_HOOKS_MODULE)
    except ImportError:
        if wanted == "require":
            raise HookPointMissing(
                f"aoti-debug-printer: AOTI_DEBUG_PRINTER_HOOKS=require, but torch "
                f"{torch_version()} has no {_HOOKS_MODULE} (build it with patches/)"
            ) from None
        return None


class _Hooks:
    """Our side of Inductor's debug-printer hooks (see patches/DESIGN.md):
    what wraps.py's wraps do on a stock torch, called by Inductor itself."""

    def make_printer(self, debug_printer_level, use_array_ref):
        if str(debug_printer_level) == "0":
            return None  # level 0 generates stock code
        from .codegen import DebugPrinterManager

        return DebugPrinterManager(debug_printer_level, use_array_ref)

    def cache_key_tag(self) -> str:
        return generated_code_tag() if printing_requested() else ""

    def kernel_nodes(self, kernel_name, node_schedule) -> None:
        from .provenance import note_kernel_nodes

        note_kernel_nodes(kernel_name, node_schedule)

    def wrapper_line(self, wrapper, line) -> None:
        from .provenance import note_line

        note_line(line)

    def op_call(self, wrapper, op_overload, raw_args, output_args):
        from .op_calls import fallback_call_records

        return fallback_call_records(wrapper, op_overload, raw_args, output_args)

    def extern_alloc(self, wrapper, extern_kernel, args):
        from .op_calls import extern_alloc_records

        return extern_alloc_records(wrapper, extern_kernel, args)

    def rendering_line(self, wrapper, line):
        from .provenance.capture import rendering

        return rendering(line)


_HOOKS = _Hooks()


def uses_inductor_hooks() -> bool:
    """Whether this process reaches Inductor through its hooks (patched
    torch) rather than by wrapping its methods."""
    hooks = sys.modules.get(_HOOKS_MODULE)
    return hooks is not None and hooks.get_hooks() is _HOOKS


def _patch(module: ModuleType) -> None:
    if module.__name__ == _ENTRY_MODULE:
        entry_points.wrap(module, is_installed)
        return
    if module.__name__ in _TRITON_MODULES and hooks_wanted() != "require":
        keep_stored_statistics_in(module)
    if module.__name__ == _CPP_MODULE and hooks_wanted() != "require":
        keep_cpu_statistics_in(module)
    if module.__name__ == _TRITON_MODULES[1]:
        return  # nothing else of ours is there
    hooks = inductor_hooks()
    if hooks is not None:
        if hooks.get_hooks() is not _HOOKS:
            hooks.set_hooks(_HOOKS)
        # patches/0005 makes this branch consult the printer itself.
        if module.__name__ == _PRINTER_MODULES[1] and not consults_printer_for_cpu_kernels(module):
            wrap_python_cpu_kernel_calls(module)
        return
    # The stock way in, also where AOTI_DEBUG_PRINTER_HOOKS=0 sets ours aside.
    present = sys.modules.get(_HOOKS_MODULE)
    if present is not None and present.get_hooks() is _HOOKS:
        present.set_hooks(None)
    if module.__name__ in _SCHEDULING_MODULES:
        note_kernel_nodes_in(module, _SCHEDULING_MODULES[module.__name__])
        return
    if module.__name__ == _FALLBACK_MODULE:
        record_fallback_calls_in(module)
        return
    if module.__name__ == _CACHE_KEY_MODULE:
        tag_cache_keys_in(module, lambda: _installed and printing_requested())
        return
    from .codegen import DebugPrinterManager

    current = getattr(module, _NAME, None)
    if current is None:
        raise HookPointMissing(
            f"aoti-debug-printer: {module.__name__}.{_NAME} does not exist in torch "
            f"{torch_version()}; this torch's Inductor has no hook point we know. "
            f"Supported: {supported_torch()}."
        )
    if current is not DebugPrinterManager:
        # One stock class for every target: wrapper.py may have imported ours
        # from an already patched debug_utils.
        originals.setdefault(_NAME, current)
        setattr(module, _NAME, DebugPrinterManager)
    if module.__name__ == _PRINTER_MODULES[1]:
        if not consults_printer_for_cpu_kernels(module):
            wrap_python_cpu_kernel_calls(module)
        record_python_fallback_calls_in(module)
        note_lines_in(module)


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
                # Loud when the user asked for records, or for the hooks;
                # otherwise Inductor must keep working exactly as without us.
                if printing_requested() or hooks_wanted() == "require":
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
    log.debug("aoti-debug-printer installed into Inductor (torch %s)", torch_version())


def uninstall() -> None:
    """Give Inductor back its own printer."""
    global _installed
    with _lock:
        _installed = False
        if _finder in sys.meta_path:
            sys.meta_path.remove(_finder)
        hooks = sys.modules.get(_HOOKS_MODULE)
        if hooks is not None and hooks.get_hooks() is _HOOKS:
            hooks.set_hooks(None)
        for name, original in originals.items():
            if name == _NAME:
                for target in _PRINTER_MODULES:
                    if target in sys.modules:
                        setattr(sys.modules[target], _NAME, original)
            else:
                module_name, cls_name, attr = name.rsplit(".", 2)
                cls = getattr(sys.modules.get(module_name), cls_name, None)
                if cls is not None:
                    setattr(cls, attr, original)
        originals.clear()
        entry_points.unwrap()


def is_installed() -> bool:
    return _installed


@contextlib.contextmanager
def compiling(program):
    """The tools wing's one door into this one (diverge's own compile):
    our printer installed for the compile of `program`, then left as it was
    found. Yields a list that, once the compile is done, says as text where
    the package accepts fewer sizes than the exported program allowed
    (compiled_inputs.narrowed)."""
    from .compiled_inputs import compiling as ranges_of
    from .compiled_inputs import narrowed

    was = is_installed()
    install()
    found: list[str] = []
    try:
        with ranges_of(program) as facts:
            yield found
        found.extend(str(n) for n in narrowed(facts))
    finally:
        if not was:
            uninstall()
