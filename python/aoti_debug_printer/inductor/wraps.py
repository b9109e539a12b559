"""The stock torch's way in: Inductor's methods wrapped at the places where
a torch built with patches/ calls its debug-printer hooks (install.py sets
those instead). Each wrap is made once, its original kept for uninstall,
and a method that has moved is left alone with one warning line saying
what users lose."""

from __future__ import annotations

import inspect
import logging
from types import ModuleType

from .cache_tag import generated_code_tag
from .switches import HookPointMissing, hooks_wanted, torch_version

log = logging.getLogger(__name__)

# "module.Class.method" -> the method before it was wrapped.
originals: dict[str, object] = {}


def wrap_method(
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
    if hooks_wanted() == "require":
        raise HookPointMissing(
            f"aoti-debug-printer: AOTI_DEBUG_PRINTER_HOOKS=require, but torch "
            f"{torch_version()} would need {class_name}.{attr} wrapped ({lost})"
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
                torch_version(),
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
            torch_version(),
            class_name,
            attr,
            ", ".join(params),
            ", ".join(found or ["?"]),
            lost,
        )
        return
    replacement = make(original)
    replacement._aoti_debug_printer = True
    originals[f"{module.__name__}.{class_name}.{attr}"] = original
    setattr(cls, attr, replacement)


def _leading_parameters(function, count: int) -> list[str]:
    """The names of `function`'s first `count` parameters after self."""
    try:
        names = list(inspect.signature(function).parameters)
    except (TypeError, ValueError):  # a builtin: no signature to read
        return []
    return names[1 : 1 + count]


def note_lines_in(module: ModuleType) -> None:
    """Kernel call lines are rendered after scheduling, when the scheduler
    no longer says which nodes they belong to: note that as each line is
    written (see _provenance.note_line)."""

    def make(original):
        def writeline(self, line):
            from .provenance import note_line

            note_line(line)
            return original(self, line)

        return writeline

    wrap_method(
        module,
        "PythonWrapperCodegen",
        "writeline",
        make,
        "kernels get no provenance (diverge and compare find no node to match)",
        params=("line",),
    )


def note_kernel_nodes_in(module: ModuleType, class_name: str) -> None:
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
    wrap_method(
        module,
        class_name,
        "codegen_comment",
        make,
        "kernels get no provenance (diverge and compare find no node to match)",
        params=("node_schedule", "kernel_name"),
        optional=class_name != "BaseScheduling",
    )


def record_fallback_calls_in(module: ModuleType) -> None:
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

    wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_aot",
        make_aot,
        "ops called through the proxy executor get no records",
        params=("op_overload", "raw_args", "output_args"),
    )
    lost = "ops the JIT cpp_wrapper calls without a C shim get no records"
    wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup",
        make_lookup,
        lost,
        params=("buf_name", "python_kernel_name", "get_args", "op_overload", "raw_args"),
    )
    wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_nopython",
        make_jit(2),
        lost,
        params=("get_args", "op_overload", "output_args"),
    )
    # torch 2.13 and later
    wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_boxed",
        make_jit(2),
        lost,
        params=("op_overload", "raw_args", "output_args"),
        optional=True,
    )
    wrap_method(
        module,
        "CppWrapperCpu",
        "generate_fallback_kernel_with_runtime_lookup_python",
        make_jit(4),
        lost,
        params=("buf_name", "python_kernel_name", "op_overload", "raw_args", "output_args"),
    )


def record_python_fallback_calls_in(module: ModuleType) -> None:
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

    wrap_method(
        module,
        "PythonWrapperCodegen",
        "_generate_extern_kernel_alloc_helper",
        make,
        "calls of custom ops and ATen fallbacks in the JIT Python wrapper get no records",
        params=("extern_kernel", "args"),
    )


def wrap_python_cpu_kernel_calls(module: ModuleType) -> None:
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

    wrap_method(
        module,
        "PythonWrapperCodegen",
        "_generate_kernel_call_helper",
        make,
        "C++ kernels in the JIT Python wrapper get no records",
        params=("kernel_name", "call_args", "device", "triton"),
        inherited=True,
    )


def consults_printer_for_cpu_kernels(module: ModuleType) -> bool:
    """Whether the JIT Python wrapper's C++ kernel calls go through the
    debug printer already: patches/0005 says so in a class attribute."""
    wrapper = getattr(module, "PythonWrapperCodegen", None)
    return getattr(wrapper, "debug_printer_records_cpp_kernels", False) is True


def tag_cache_keys_in(module: ModuleType, active) -> None:
    """Adds the tag to the key of a compile whose code this package writes
    (levels 1 to 3), and only there: at level 0 the code is stock
    PyTorch's, and so is its cache entry, shared with a torch without this
    package. `active()`: whether that is so now (installed, a level asked)."""

    def make(original):
        def __init__(self, *args, **kwargs):
            original(self, *args, **kwargs)
            if active():
                tags = [t for t in str(getattr(self, "cache_key_tag", "")).split("+") if t]
                self.cache_key_tag = "+".join(tags + [generated_code_tag()])

        return __init__

    wrap_method(
        module,
        "FxGraphHashDetails",
        "__init__",
        make,
        "a compile at levels 1 to 3 may be served code cached by another version of "
        "aoti-debug-printer (or by stock PyTorch): clear Inductor's cache after an upgrade",
    )


def keep_stored_statistics_in(module: ModuleType) -> None:
    """TritonKernel's stores and its call (stored_stats.py): where a kernel
    stores a whole buffer it also keeps the statistics of what it stores,
    and its call tells the printer which records can take them. No hook of
    patches/ covers this: these are wrapped on every torch."""

    def make_store(original):
        def store(self, name, index, value, mode=None, *args, **kwargs):
            from .stored_stats import keep_statistics

            result = original(self, name, index, value, mode, *args, **kwargs)
            if mode is None:
                keep_statistics(self, self.stores, name, index, self.inside_reduction)
            return result

        return store

    def make_store_reduction(original):
        def store_reduction(self, name, index, value, *args, **kwargs):
            from .stored_stats import keep_statistics

            result = original(self, name, index, value, *args, **kwargs)
            keep_statistics(self, self.post_loop_store, name, index, False)
            return result

        return store_reduction

    def make_call_kernel(original):
        def call_kernel(self, name, node=None, *args, **kwargs):
            from .stored_stats import call_of

            with call_of(self):
                return original(self, name, node, *args, **kwargs)

        return call_kernel

    lost = "records of Triton kernels' outputs each take a statistics launch"
    if module.__name__.endswith("cpp_wrapper_gpu"):

        def make_zero_buffer(original):
            def make_zero_buffer(self, name):
                from .emitters import CPP
                from .stored_stats import WORKSPACE_PREFIX

                line = original(self, name)
                if str(name).startswith(WORKSPACE_PREFIX):
                    line += "\n" + CPP.statistics_workspace(name)
                return line

            return make_zero_buffer

        wrap_method(module, "CppWrapperGpu", "make_zero_buffer", make_zero_buffer, lost, ("name",))
        return
    wrap_method(
        module, "TritonKernel", "store", make_store, lost, params=("name", "index", "value", "mode")
    )
    wrap_method(
        module,
        "TritonKernel",
        "store_reduction",
        make_store_reduction,
        lost,
        params=("name", "index", "value"),
    )
    wrap_method(
        module, "TritonKernel", "call_kernel", make_call_kernel, lost, params=("name", "node")
    )


def keep_cpu_statistics_in(module: ModuleType) -> None:
    """Inductor's C++ kernels (codegen/cpp.py; kept_cpp.py): their stores,
    the scopes of their functions and parallel regions, and their calls,
    so that they keep the statistics of what they store. No hook of
    patches/ covers this: these are wrapped on every torch."""
    # kept_cpp loads the library: imported as Inductor calls these, not here.
    lost = "records of C++ kernels' outputs each take a statistics pass"

    def make_store(vector: bool):
        def make(original):
            def store(self, name, index, value, mode=None, *args, **kwargs):
                from . import kept_cpp

                result = original(self, name, index, value, mode, *args, **kwargs)
                kept_cpp.keep_statistics(self, name, index, value, mode, vector, reduction=False)
                return result

            return store

        return make

    def make_store_reduction(vector: bool):
        def make(original):
            def store_reduction(self, name, index, value, *args, **kwargs):
                from . import kept_cpp

                result = original(self, name, index, value, *args, **kwargs)
                kept_cpp.keep_statistics(self, name, index, value, None, vector, reduction=True)
                return result

            return store_reduction

        return make

    def make_group_init(original):
        def __init__(self, *args, **kwargs):
            from . import kept_cpp, stored_stats

            original(self, *args, **kwargs)
            if stored_stats.wanted():
                group = kept_cpp.GroupKept()
                self.args._aoti_kept = group
                self.ws._aoti_kept = group
                self.loops_code.writelines(kept_cpp.declare(group, function_scope=True))

        return __init__

    def make_codegen_group(original):
        def codegen_group(self, *args, **kwargs):
            from . import kept_cpp

            group = getattr(self.args, "_aoti_kept", None)
            if group is None:
                return original(self, *args, **kwargs)
            self.stack.close()  # every parallel region merged and closed first
            self.loops_code.writeline(kept_cpp.merge(group))
            code = original(self, *args, **kwargs)
            return kept_cpp.kernel_preamble() + code if code and group.count() else code

        return codegen_group

    def make_call_kernel(original):
        def call_kernel(self, wrapper, kernel_name, *args, **kwargs):
            from . import kept_cpp, stored_stats

            group = getattr(self.args, "_aoti_kept", None)
            if group is None:
                return original(self, wrapper, kernel_name, *args, **kwargs)
            with stored_stats.call_of_kept(kept_cpp.kept_by_group(group, self.args)):
                return original(self, wrapper, kernel_name, *args, **kwargs)

        return call_kernel

    def make_parallel(original):
        def parallel(self, threads, *args, **kwargs):
            from . import kept_cpp

            was_open = self.in_parallel and self.num_threads == threads
            result = original(self, threads, *args, **kwargs)
            group = getattr(self, "_aoti_kept", None)
            if group is not None and self.in_parallel and not was_open:
                # This thread's own, in the region.
                self.code.writelines(kept_cpp.declare(group, function_scope=False))
            return result

        return parallel

    def make_closing(original):
        def closing(self, *args, **kwargs):
            from . import kept_cpp

            group = getattr(self, "_aoti_kept", None)
            if group is not None and self.in_parallel:
                self.code.writeline(kept_cpp.merge(group))
            return original(self, *args, **kwargs)

        return closing

    # Every class of C++ kernel that stores: a proxy makes several for one
    # loop nest and emits some, so a buffer that any of them stores in a
    # way that keeps nothing (a tile's transposed store) keeps nothing.
    for cls, vector in (("CppKernel", False), ("CppVecKernel", True), ("CppTile2DKernel", True)):
        wrap_method(
            module, cls, "store", make_store(vector), lost, ("name", "index", "value", "mode")
        )
    for cls, vector in (("CppKernel", False), ("CppVecKernel", True)):
        wrap_method(
            module,
            cls,
            "store_reduction",
            make_store_reduction(vector),
            lost,
            ("name", "index", "value"),
        )
    wrap_method(module, "KernelGroup", "__init__", make_group_init, lost)
    wrap_method(module, "KernelGroup", "codegen_group", make_codegen_group, lost)
    wrap_method(
        module, "KernelGroup", "call_kernel", make_call_kernel, lost, ("wrapper", "kernel_name")
    )
    wrap_method(module, "WorkSharing", "parallel", make_parallel, lost, ("threads",))
    wrap_method(module, "WorkSharing", "close", make_closing, lost)
    wrap_method(module, "WorkSharing", "__exit__", make_closing, lost)
