"""Records around calls of ops no generated kernel covers: custom ops and
ATen fallbacks, in AOTInductor's proxy executor, the JIT cpp_wrapper's
dispatcher call, and the Python wrapper's `bufN = op(args)` lines. What
each call writes comes from the op's schema and its IR node."""

from __future__ import annotations

from contextlib import contextmanager, nullcontext
from functools import cache

from .codegen import DebugPrinterManager, variables
from .op_names import schema_name
from .provenance import Writes


@contextmanager
def fallback_call_records(wrapper, op, raw_args, output_args):
    """Records around a call of an op no C shim covers (custom ops among
    them) in the C++ wrapper: AOTInductor's proxy executor, or the JIT
    cpp_wrapper's dispatcher call. The op's tensor arguments before launch
    (and after, those it may write), its outputs (made by the call) after.

    Inductor writes these calls while it schedules, but renders generated
    kernels' calls later, and the records of every kernel are decided as
    its call renders (see inductor/provenance): so these are wrapper lines too,
    decided when rendered, in order."""
    printer = wrapper.debug_printer
    if not isinstance(printer, DebugPrinterManager):
        yield
        return
    inputs = _tensor_names(raw_args)
    returned = variables(_flatten(output_args))
    outputs = [o for o in returned if o not in inputs]
    # An in-place op also returns what it writes.
    mutated = frozenset(_declared_writes(op, raw_args)) | (frozenset(returned) & frozenset(inputs))
    writes = Writes(frozenset(outputs), mutated, frozenset(outputs))
    line = _fallback_records_line()
    call = {"op": schema_name(op), "args": [_encoded(v) for v in raw_args], "outputs": outputs}
    wrapper.writeline(
        line(printer, schema_name(op), inputs + outputs, frozenset(outputs), writes, call)
    )
    yield
    wrapper.writeline(line(printer))


def extern_alloc_records(wrapper, extern_kernel, args: list[str]):
    """Records around the Python wrapper's `bufN = op(args)` line of a custom
    op or an ATen fallback, written as that line renders: its buffer
    arguments before and after, bufN (which the call makes) after when it
    is one tensor (a tuple is unpacked by later lines). What it writes comes
    from its IR node (see inductor/provenance)."""
    from torch._inductor import ir

    printer = wrapper.debug_printer
    if not isinstance(printer, DebugPrinterManager):
        return nullcontext()
    op = getattr(extern_kernel, "op_overload", None)
    one_tensor = (
        _returns_one_tensor(op) if op is not None else isinstance(extern_kernel.layout, ir.Layout)
    )
    made = [extern_kernel.get_name()] if one_tensor else []
    kernel = schema_name(op) if op is not None else extern_kernel.get_kernel_name()
    printer.set_call(list(args) + made, kernel, made_by_call=frozenset(made))
    return printer


@cache
def _fallback_records_line():
    # Made on first use: this module is imported while Inductor's wrapper
    # module is still importing.
    from torch._inductor.codegen.wrapper import WrapperLine

    class FallbackCallRecords(WrapperLine):
        """Rendered as the before-launch records of an op's call (with
        `kernel`), or its after-launch records (without)."""

        def __init__(
            self, printer, kernel=None, args=(), made_by_call=frozenset(), writes=None, call=None
        ):
            self.printer, self.kernel, self.args = printer, kernel, list(args)
            self.made_by_call, self.writes, self.call = made_by_call, writes, call

        def codegen(self, code) -> None:
            if self.kernel is None:
                self.printer.__exit__(None, None, None)
                return
            self.printer.set_call(self.args, self.kernel, self.made_by_call, self.writes, self.call)
            self.printer.__enter__()

    return FallbackCallRecords


def _flatten(values) -> list:
    out = []
    for value in values or []:
        out += _flatten(value) if isinstance(value, (list, tuple)) else [value]
    return out


def _encoded(value):
    """An op argument for the call comment: a buffer as {"buffer": name},
    a view of one (which no record names) as {"view": null}, a literal as
    itself, anything else as {"expr": text}."""
    import torch
    from torch._inductor import ir

    if isinstance(value, (list, tuple)):
        return [_encoded(v) for v in value]
    if value is None or isinstance(value, (bool, int, float, str)):
        return value
    if isinstance(value, ir.ReinterpretView):
        return {"view": None}
    if isinstance(value, ir.IRNode):
        try:
            return {"buffer": value.get_name()}
        except (AttributeError, NotImplementedError):
            return {"expr": str(value)}
    if isinstance(value, torch.dtype):
        return {"dtype": str(value).removeprefix("torch.")}
    return {"expr": str(value)}


def _tensor_names(values, views: bool = False) -> list[str]:
    """Names of the buffers among `values`. Views are passed as temporaries
    made on the call line, which no record can name: with `views`, each
    stands as VIEW_OF_UNNAMED_BUFFER (what a kernel writes through one is
    unseen), else it is left out."""
    from torch._inductor import ir

    names: list[str] = []
    for value in values:
        if isinstance(value, (list, tuple)):
            names += _tensor_names(value, views)
        elif isinstance(value, ir.ReinterpretView):
            names += [VIEW_OF_UNNAMED_BUFFER] if views else []
        elif isinstance(value, ir.IRNode):
            try:
                names.append(value.get_name())
            except (AttributeError, NotImplementedError):
                pass
    return names


# Stands for a written argument that no record names (see _tensor_names).
VIEW_OF_UNNAMED_BUFFER = "<a view>"


def _declared_writes(op, raw_args) -> list[str]:
    """Arguments the op's schema lets it write (Tensor(a!)); raw_args follow
    the schema's order."""
    schema = getattr(op, "_schema", None)
    declared: list[str] = []
    for argument, value in zip(schema.arguments if schema else (), raw_args):
        if argument.alias_info is not None and argument.alias_info.is_write:
            declared += _tensor_names([value], views=True)
    return declared


def _returns_one_tensor(op) -> bool:
    schema = getattr(op, "_schema", None)
    return (
        schema is not None and len(schema.returns) == 1 and str(schema.returns[0].type) == "Tensor"
    )
