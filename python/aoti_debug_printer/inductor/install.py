"""Installing our DebugPrinterManager into Inductor, and taking it out.

Two ways in, one per kind of torch:

- A torch built with patches/ (0002 to 0006) has Inductor's debug-printer
  hooks (torch._inductor.debug_printer_hooks): we set ours, `_Hooks`, and
  wrap nothing.
- A stock torch has none: Inductor's wrapper builds `self.debug_printer =
  DebugPrinterManager(...)` with the name that wrapper.py imported from
  debug_utils, which we replace in both modules, and the methods the hooks
  would be called from are wrapped (`_wrap_method`), each of them saying in
  one line what is lost when it has moved.

Either way modules not yet imported are handled the moment they are, by a
post-import hook, so installing never imports Inductor (which takes seconds)
and `import torch` stays cheap.
"""

from __future__ import annotations

import importlib.abc
import importlib.metadata
import inspect
import logging
import os
import re
import sys
import threading
from types import ModuleType

# PACKAGE_DIR, GENERATOR_FILES and cache_tag keep their old address here too
# (the tests').
from .._native import PACKAGE_DIR  # noqa: F401
from . import entry_points
from .cache_tag import GENERATOR_FILES, cache_tag, this_installation_tag  # noqa: F401

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
# Where Inductor's cache keys are made (see cache_tag).
_CACHE_KEY_MODULE = "torch._inductor.codecache"
# Where AOTInductor's public entry points live (entry_points wraps them).
_ENTRY_MODULE = "torch._inductor"
_TARGETS = (
    _PRINTER_MODULES
    + tuple(_SCHEDULING_MODULES)
    + (_FALLBACK_MODULE, _CACHE_KEY_MODULE, _ENTRY_MODULE)
)

# Inductor's debug-printer hooks, in a torch built with patches/.
_HOOKS_MODULE = "torch._inductor.debug_printer_hooks"

_lock = threading.RLock()
_originals: dict[str, object] = {}
_installed = False


class HookPointMissing(RuntimeError):
    pass


def _torch_version() -> str:
    torch = sys.modules.get("torch")
    return getattr(torch, "__version__", "unknown")


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


# A switch's spellings, any case: those of the shim's options (settings.cpp,
# flag()), which this module must not load (test_install checks they agree).
ON = frozenset({"1", "on", "true", "yes"})
OFF = frozenset({"0", "off", "false", "no"})


def _printing_requested() -> bool:
    from torch._inductor import config

    return str(config.aot_inductor.debug_intermediate_value_printer) != "0"


def _hooks_wanted() -> str:
    """AOTI_DEBUG_PRINTER_HOOKS: "use" Inductor's hooks where this torch has
    them (the default), "off" (0): wrap its methods as on a stock torch, so
    that both ways in can be compared on one torch, or "require": the hooks
    or nothing, every method wrap refused (a patched torch's own tests)."""
    value = os.environ.get("AOTI_DEBUG_PRINTER_HOOKS", "").strip().lower()
    return "off" if value in OFF else "require" if value == "require" else "use"


def inductor_hooks() -> ModuleType | None:
    """Inductor's debug-printer hooks module where this torch has it (built
    with patches/) and AOTI_DEBUG_PRINTER_HOOKS does not set it aside, else
    None."""
    wanted = _hooks_wanted()
    if wanted == "off":
        return None
    try:
        return importlib.import_module(_HOOKS_MODULE)
    except ImportError:
        if wanted == "require":
            raise HookPointMissing(
                f"aoti-debug-printer: AOTI_DEBUG_PRINTER_HOOKS=require, but torch "
                f"{_torch_version()} has no {_HOOKS_MODULE} (build it with patches/)"
            ) from None
        return None


class _Hooks:
    """Our side of Inductor's debug-printer hooks (see patches/DESIGN.md):
    what the wraps below do on a stock torch, called by Inductor itself."""

    def make_printer(self, debug_printer_level, use_array_ref):
        if str(debug_printer_level) == "0":
            return None  # level 0 generates stock code
        from .codegen import DebugPrinterManager

        return DebugPrinterManager(debug_printer_level, use_array_ref)

    def cache_key_tag(self) -> str:
        return this_installation_tag() if _printing_requested() else ""

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
    hooks = inductor_hooks()
    if hooks is not None:
        if hooks.get_hooks() is not _HOOKS:
            hooks.set_hooks(_HOOKS)
        # patches/0005 makes this branch consult the printer itself.
        if module.__name__ == _PRINTER_MODULES[1] and not _consults_printer_for_cpu_kernels(module):
            _wrap_python_cpu_kernel_calls(module)
        return
    # The stock way in, also where AOTI_DEBUG_PRINTER_HOOKS=0 sets ours aside.
    present = sys.modules.get(_HOOKS_MODULE)
    if present is not None and present.get_hooks() is _HOOKS:
        present.set_hooks(None)
    if module.__name__ in _SCHEDULING_MODULES:
        _note_kernel_nodes_in(module, _SCHEDULING_MODULES[module.__name__])
        return
    if module.__name__ == _FALLBACK_MODULE:
        _record_fallback_calls_in(module)
        return
    if module.__name__ == _CACHE_KEY_MODULE:
        _tag_cache_keys_in(module)
        return
    from .codegen import DebugPrinterManager

    current = getattr(module, _NAME, None)
    if current is None:
        raise HookPointMissing(
            f"aoti-debug-printer: {module.__name__}.{_NAME} does not exist in torch "
            f"{_torch_version()}; this torch's Inductor has no hook point we know. "
            f"Supported: {supported_torch()}."
        )
    if current is not DebugPrinterManager:
        # One stock class for every target: wrapper.py may have imported ours
        # from an already patched debug_utils.
        _originals.setdefault(_NAME, current)
        setattr(module, _NAME, DebugPrinterManager)
    if module.__name__ == _PRINTER_MODULES[1]:
        if not _consults_printer_for_cpu_kernels(module):
            _wrap_python_cpu_kernel_calls(module)
        _record_python_fallback_calls_in(module)
        _note_lines_in(module)


def _wrap_method(
    module: ModuleType,
    class_name: str,
    attr: str,
    make,
    lost: str,
    params: tuple[str, ...] = (),
    inherited: bool = False,
    optional: bool = False,
) -> None:
    """Replaces `class_name.attr` in `module` with make(original), once, and
    remembers the original for uninstall(). `params`: the parameters after
    self that the replacement relies on, by name and in order. Where this
    torch has no such method (unless `optional`: only some torch releases
    have it), or its parameters moved, it is left alone and one warning says
    what users lose (`lost`)."""
    if _hooks_wanted() == "require":
        raise HookPointMissing(
            f"aoti-debug-printer: AOTI_DEBUG_PRINTER_HOOKS=require, but torch "
            f"{_torch_version()} would need {class_name}.{attr} wrapped ({lost})"
        )
    cls = getattr(module, class_name, None)
    if cls is None:
        original = None
    else:
        original = getattr(cls, attr, None) if inherited else cls.__dict__.get(attr)
    if original is None:
        if not optional:
            log.warning(
                "aoti-debug-printer: torch %s has no %s.%s; %s",
                _torch_version(),
                class_name,
                attr,
                lost,
            )
        return
    if getattr(original, "_aoti_debug_printer", False):
        return
    found = _leading_parameters(original, len(params))
    if params and found != list(params):
        log.warning(
            "aoti-debug-printer: torch %s changed %s.%s (expected (%s), found (%s)); %s",
            _torch_version(),
            class_name,
            attr,
            ", ".join(params),
            ", ".join(found or ["?"]),
            lost,
        )
        return
    replacement = make(original)
    replacement._aoti_debug_printer = True
    _originals[f"{module.__name__}.{class_name}.{attr}"] = original
    setattr(cls, attr, replacement)


def _leading_parameters(function, count: int) -> list[str]:
    """The names of `function`'s first `count` parameters after self."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # a builtin: no signature to read
        return []
    return names[1 : 1 + count]


def _note_lines_in(module: ModuleType) -> None:
    """Kernel call lines are rendered after scheduling, when the scheduler
    no longer says which nodes they belong to: note that as each line is
    written (see _provenance.note_line)."""

    def make(original):
        def writeline(self, line):
            from .provenance import note_line

            note_line(line)
            return original(self, line)

        return writeline

    _wrap_method(
        module,
        "PythonWrapperCodegen",
        "writeline",
        make,
        "kernels get no provenance (diverge and compare find no node to match)",
        params=("line",),
    )


def _note_kernel_nodes_in(module: ModuleType, class_name: str) -> None:
    """Every backend writes codegen_comment(node_schedule, kernel_name) just
    before it writes the kernel's call: wrap it, where the class defines
    it, to tell the printer which scheduler nodes that kernel computes.
    Without it the printer claims no provenance for those kernels."""

    def make(original):
        def codegen_comment(self, node_schedule, kernel_name=None, *args, **kwargs):
            from .provenance import note_kernel_nodes

            note_kernel_nodes(kernel_name, node_schedule)
            return original(self, node_schedule, kernel_name, *args, **kwargs)

        return codegen_comment

    # Backends that inherit it are covered by the base class's.
    _wrap_method(
        module,
        class_name,
        "codegen_comment",
        make,
        "kernels get no provenance (diverge and compare find no node to match)",
        params=("node_schedule", "kernel_name"),
        optional=class_name != "BaseScheduling",
    )


def _record_fallback_calls_in(module: ModuleType) -> None:
    """The C++ wrapper calls ops that no C shim covers (custom ops among
    them) in lines the printer is never asked about: AOTInductor through its
    proxy executor, the JIT cpp_wrapper through the dispatcher or Python.
    Give those calls records like every other kernel's."""

    def make_aot(original):
        def generate_fallback_kernel_with_runtime_lookup_aot(
            self, op_overload, raw_args, output_args, *args, **kwargs
        ):
            from .op_calls import fallback_call_records

            with fallback_call_records(self, op_overload, raw_args, output_args):
                return original(self, op_overload, raw_args, output_args, *args, **kwargs)

        return generate_fallback_kernel_with_runtime_lookup_aot

    # The JIT cpp_wrapper's call is written by one of several methods (the
    # dispatcher, boxed, or through Python; which exist depends on the
    # torch), each given the call's output names but not its IR arguments:
    # the method that picks one keeps those for it.
    def make_lookup(original):
        def generate_fallback_kernel_with_runtime_lookup(
            self, buf_name, python_kernel_name, get_args, op_overload, raw_args, *args, **kwargs
        ):
            self._aoti_debug_printer_call = (op_overload, raw_args)
            try:
                return original(
                    self,
                    buf_name,
                    python_kernel_name,
                    get_args,
                    op_overload,
                    raw_args,
                    *args,
                    **kwargs,
                )
            finally:
                self._aoti_debug_printer_call = None

        return generate_fallback_kernel_with_runtime_lookup

    def make_jit(output_args_at: int):
        def make(original):
            def write_call(self, *args, **kwargs):
                from .op_calls import fallback_call_records

                call = getattr(self, "_aoti_debug_printer_call", None)
                if call is None:
                    return original(self, *args, **kwargs)
                output_args = (
                    kwargs["output_args"] if "output_args" in kwargs else args[output_args_at]
                )
                with fallback_call_records(self, *call, output_args):
                    return original(self, *args, **kwargs)

            return write_call

        return make

    _wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_aot",
        make_aot,
        "ops called through the proxy executor get no records",
        params=("op_overload", "raw_args", "output_args"),
    )
    lost = "ops the JIT cpp_wrapper calls without a C shim get no records"
    _wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup",
        make_lookup,
        lost,
        params=("buf_name", "python_kernel_name", "get_args", "op_overload", "raw_args"),
    )
    _wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_nopython",
        make_jit(2),
        lost,
        params=("get_args", "op_overload", "output_args"),
    )
    # torch 2.13 and later
    _wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_boxed",
        make_jit(2),
        lost,
        params=("op_overload", "raw_args", "output_args"),
        optional=True,
    )
    _wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_python",
        make_jit(4),
        lost,
        params=("buf_name", "python_kernel_name", "op_overload", "raw_args", "output_args"),
    )


def _record_python_fallback_calls_in(module: ModuleType) -> None:
    """The Python (JIT) wrapper writes calls of ops without a generated
    kernel, `bufN = op(...)` (custom ops and ATen fallbacks), without
    consulting the printer. The C++ wrapper overrides this method, so only
    the Python wrapper's calls are wrapped."""

    def make(original):
        def _generate_extern_kernel_alloc_helper(self, extern_kernel, args, *rest, **kwargs):
            from .op_calls import extern_alloc_records

            with extern_alloc_records(self, extern_kernel, args):
                return original(self, extern_kernel, args, *rest, **kwargs)

        return _generate_extern_kernel_alloc_helper

    _wrap_method(
        module,
        "PythonWrapperCodegen",
        "_generate_extern_kernel_alloc_helper",
        make,
        "calls of custom ops and ATen fallbacks in the JIT Python wrapper get no records",
        params=("extern_kernel", "args"),
    )


def _wrap_python_cpu_kernel_calls(module: ModuleType) -> None:
    """Upstream's Python wrapper writes C++ kernel calls (CPU, JIT) without
    consulting the printer; wrap that one branch so JIT on CPU has records."""

    def make(original):
        def generate_kernel_call_helper(self, kernel_name, call_args, *args, **kwargs):
            from torch._inductor.virtualized import V

            device = kwargs.get("device") or V.graph.get_current_device_or_throw()
            if kwargs.get("triton", True) or device.type != "cpu" or V.graph.cpp_wrapper:
                return original(self, kernel_name, call_args, *args, **kwargs)
            printer = self.debug_printer
            printer.set_printer_args(list(call_args), kernel_name, None, None, "cpp")
            with printer:
                return original(self, kernel_name, call_args, *args, **kwargs)

        return generate_kernel_call_helper

    _wrap_method(
        module,
        "PythonWrapperCodegen",
        "_generate_kernel_call_helper",
        make,
        "C++ kernels in the JIT Python wrapper get no records",
        params=("kernel_name", "call_args", "device", "triton"),
        inherited=True,
    )


def _consults_printer_for_cpu_kernels(module: ModuleType) -> bool:
    """Whether the JIT Python wrapper's C++ kernel calls go through the
    debug printer already: patches/0005 says so in a class attribute."""
    wrapper = getattr(module, "PythonWrapperCodegen", None)
    return getattr(wrapper, "debug_printer_records_cpp_kernels", False) is True


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
                if _printing_requested() or _hooks_wanted() == "require":
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


def _tag_cache_keys_in(module: ModuleType) -> None:
    """Adds the tag to the key of a compile whose code this package writes
    (levels 1 to 3), and only there: at level 0 the code is stock
    PyTorch's, and so is its cache entry, shared with a torch without this
    package."""

    def make(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if _installed and _printing_requested():
                tags = [t for t in str(getattr(self, "cache_key_tag", "")).split("+") if t]
                self.cache_key_tag = "+".join(tags + [this_installation_tag()])

        return __init__

    _wrap_method(
        module,
        "FxGraphHashDetails",
        "__init__",
        make,
        "a compile at levels 1 to 3 may be served code cached by another version of "
        "aoti-debug-printer (or by stock PyTorch): clear Inductor's cache after an upgrade",
    )


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
        hooks = sys.modules.get(_HOOKS_MODULE)
        if hooks is not None and hooks.get_hooks() is _HOOKS:
            hooks.set_hooks(None)
        for name, original in _originals.items():
            if name == _NAME:
                for target in _PRINTER_MODULES:
                    if target in sys.modules:
                        setattr(sys.modules[target], _NAME, original)
            else:
                module_name, cls_name, attr = name.rsplit(".", 2)
                cls = getattr(sys.modules.get(module_name), cls_name, None)
                if cls is not None:
                    setattr(cls, attr, original)
        _originals.clear()
        entry_points.unwrap()


def is_installed() -> bool:
    return _installed
