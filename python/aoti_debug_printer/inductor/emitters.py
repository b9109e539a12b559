"""The code of each call to the shim, one emitter per wrapper language:
AOTInductor's and cpp_wrapper's C++ (through the table that the header,
spliced into the wrapper, loads) and the JIT wrapper's Python (through
aoti_debug_printer._C). codegen.py decides what to record; this says it."""

from __future__ import annotations

import re
from functools import cache

from .._native import HEADER, shim
from .compiled_inputs import Accepted
from .provenance import Held

# A C-shim call's output that the call allocates, passed as `&bufN_handle`:
# a handle that holds bufN once the call returns.
OUTPUT_HANDLE = re.compile(r"&((buf[0-9]+)_handle)\Z")
# How the Python wrapper refers to our module.
_PY_MODULE = "_aoti_debug_printer"
# The local that holds a capturable part of the run (begin_capturable).
_CAPTURABLE = "_aoti_debug_printer_capturable"


@cache
def _cpp_preamble() -> str:
    # The installed header is the single definition of the ABI; the generated
    # wrapper gets its text, so no include path has to reach this package.
    header = HEADER.read_text()
    _C = shim()

    return (
        "\n// aoti-debug-printer: records around every kernel (see README).\n"
        f"{header}\n"
        "#ifndef AOTI_DEBUG_PRINTER_API\n"
        f"#define AOTI_DEBUG_PRINTER_API aoti_debug_printer::load_api({c_string(_C.library_path())})\n"
        "#endif\n"
    )


def c_string(s: str) -> str:
    """`s` as a C string literal: quotes and backslashes escaped, anything
    but printable ASCII as octal bytes (hostile kernel and input names)."""
    out = []
    for ch in s:
        if ch in '"\\':
            out.append("\\" + ch)
        elif " " <= ch <= "~":
            out.append(ch)
        else:
            out.append("".join(f"\\{b:03o}" for b in ch.encode()))
    return '"' + "".join(out) + '"'


def label(arg: str) -> str:
    """The recorded name: the C++ wrapper's copy_arrayref_tensor_to_tensor(x)
    is x, and an output handle bufN_handle is bufN."""
    if OUTPUT_HANDLE.match("&" + arg):
        return arg[: -len("_handle")]
    return re.sub(r"^copy_arrayref_tensor_to_tensor\((.*)\)$", r"\1", arg)


class Emitter:
    """The code of each call to the shim, in one wrapper language."""

    # The wrapper calls codegen_model_inputs_value_print where its inputs
    # are unpacked (the C++ wrapper); else the run starts at the end of the
    # prefix (_start_python_run).
    has_input_hook: bool
    # The package keeps the wrapper's source, and with it the call comments
    # `aoti-debug repro` reads.
    keeps_call_comments: bool
    # A launch event's records may wait for records_end, to have their
    # statistics computed in one launch (runs that end: the C++ wrapper's).
    batches_records: bool
    # Its inputs may be what the program was not compiled for: an
    # AOTInductor package's (the JIT wrapper runs behind Dynamo's guards).
    checks_inputs: bool

    def preamble(self) -> str:
        raise NotImplementedError

    def begin_run(self, inductor_config: str, sources: str = "") -> str:
        """The run's start; `sources`: where its nodes came from
        (source_lines.table)."""
        raise NotImplementedError

    def launch(self, level: int, phase: int, kernel: str, flags: int) -> str:
        raise NotImplementedError

    def record(
        self, level: int, phase: int, kernel: str, arg: str, held: Held | None = None
    ) -> str:
        """One record's line; `held`: what the argument holds (see inductor/provenance)."""
        raise NotImplementedError

    def record_stored(
        self,
        level: int,
        phase: int,
        kernel: str,
        arg: str,
        held: Held | None,
        workspace: str,
        field: int,
    ) -> str:
        """A record whose statistics a generated kernel kept in the slot at
        `field` of `workspace` (stored_stats.py); only the C++ wrapper's."""
        raise NotImplementedError

    def records_end(self) -> str:
        """The line that ends a launch event's records; only where batches_records."""
        raise NotImplementedError

    def check_input(self, level: int, accepted: Accepted) -> str:
        """The line that checks one model input; only where checks_inputs."""
        raise NotImplementedError


class _CppEmitter(Emitter):
    """AOTInductor's and cpp_wrapper's C++: calls through the table that the
    header (spliced into the wrapper) loads."""

    has_input_hook = True
    keeps_call_comments = True
    batches_records = True
    checks_inputs = True

    def preamble(self) -> str:
        return _cpp_preamble()

    def begin_run(self, inductor_config: str, sources: str = "") -> str:
        # Declared in the run's own scope: the run ends where it returns or
        # throws, and every record is written by then.
        return (
            "aoti_debug_printer::Run aoti_debug_printer_run_(AOTI_DEBUG_PRINTER_API, "
            f"{c_string(inductor_config)}, {c_string(sources)});"
        )

    def launch(self, level: int, phase: int, kernel: str, flags: int) -> str:
        # The header's helper throws on a CUDA error, ending the run.
        return (
            f"aoti_debug_printer::launch(AOTI_DEBUG_PRINTER_API, {level}, {phase}, "
            f"{c_string(kernel)}, {flags});"
        )

    def records_end(self) -> str:
        return "aoti_debug_printer::records_end(AOTI_DEBUG_PRINTER_API);"

    def statistics_workspace(self, workspace: str) -> str:
        """After the wrapper zeroes the run's statistics workspace: the line
        that lets the kernels keep their statistics (stored_stats.py)."""
        return f"aoti_debug_printer::statistics_workspace(AOTI_DEBUG_PRINTER_API, {workspace});"

    def check_input(self, level: int, accepted: Accepted) -> str:
        return (
            f"aoti_debug_printer::check_input(AOTI_DEBUG_PRINTER_API, {level}, "
            f"{c_string(accepted.arg)}, {c_string(accepted.name)}, "
            f"{c_string(accepted.compiled_for)}, {accepted.arg});"
        )

    def record(self, level, phase, kernel, arg, held=None) -> str:
        return (
            f"aoti_debug_printer::value(AOTI_DEBUG_PRINTER_API, {level}, {phase}, "
            f"{c_string(kernel)}, {c_string(label(arg))}, {arg}{_held_cpp(held)});"
        )

    def record_stored(self, level, phase, kernel, arg, held, workspace, field) -> str:
        return (
            f"aoti_debug_printer::value_stored(AOTI_DEBUG_PRINTER_API, {level}, {phase}, "
            f"{c_string(kernel)}, {c_string(label(arg))}, {arg}, {workspace}, {field}"
            f"{_held_cpp(held)});"
        )


def _held_cpp(held: Held | None) -> str:
    """The C++ helpers' trailing arguments for what the codegen knows of a
    tensor argument."""
    if not held:
        return ""
    return f", {c_string(held.node)}, {c_string(held.why)}, {held.role}" + (
        f", {c_string(held.formula)}" if held.formula else ""
    )


class _PythonEmitter(Emitter):
    """The JIT wrapper's Python: calls of aoti_debug_printer._C."""

    has_input_hook = False
    keeps_call_comments = False
    # Its runs never end (begin_run without end): every record is taken at once.
    batches_records = False
    checks_inputs = False

    def preamble(self) -> str:
        return f"import aoti_debug_printer._C as {_PY_MODULE}"

    def begin_run(self, inductor_config: str, sources: str = "") -> str:
        return f"{_PY_MODULE}.begin_run(inductor_config={inductor_config!r}, sources={sources!r})"

    def launch(self, level: int, phase: int, kernel: str, flags: int) -> str:
        return f"{_PY_MODULE}.launch({level}, {phase}, {kernel!r}, {flags})"

    def begin_capturable(self) -> str:
        """The line that begins a part of the run a CUDA graph may capture:
        the local it sets ends the part as the function returns."""
        return f"{_CAPTURABLE} = {_PY_MODULE}.begin_capturable()"

    def record(self, level, phase, kernel, arg, held=None) -> str:
        extra = (
            f", {held.node!r}, {held.why!r}, {held.role}"
            + (f", formula={held.formula!r}" if held.formula else "")
            if held
            else ""
        )
        return f"{_PY_MODULE}.record({level}, {phase}, {kernel!r}, {label(arg)!r}, {arg}{extra})"


CPP, PYTHON = _CppEmitter(), _PythonEmitter()
