"""Our DebugPrinterManager: the code Inductor's wrappers emit around kernels.

It mirrors torch/_inductor/codegen/debug_utils.py (levels, set_printer_args,
the context-manager protocol, codegen_model_inputs_value_print), so Inductor
drives it exactly as it drives upstream's, but every call it emits goes to
our shim: in the C++ wrapper through the table that `aoti_debug_printer.h`
loads, in the Python (JIT) wrapper through `aoti_debug_printer._C`.
"""

from __future__ import annotations

import logging
import re
from enum import Enum
from typing import Any

from .._native import shim
from ..records import CALL_COMMENT
from .compiled_inputs import accepted_inputs
from .emitters import CPP, OUTPUT_HANDLE, PYTHON, Emitter, label
from .filter import KernelFilter
from .kept_cpp import keep_slots_line
from .provenance import Held, Provenance, Writes, kept_by_line_being_rendered
from .stored_stats import WORKSPACE_PREFIX
from .switches import stats_in_kernels_wanted

log = logging.getLogger(__name__)

_IDENTIFIER = re.compile(r"[A-Za-z_][A-Za-z0-9_]*\Z")
_NOT_VARIABLES = frozenset({"nullptr", "true", "false", "None", "True", "False", "kernels"})

# The C header's codes, as _C exports them: the numbers generated code passes.
_abi = shim()
LEVEL_SAVE, LEVEL_PRINT = _abi.LEVEL_SAVE, _abi.LEVEL_PRINT
LEVEL_KERNEL_NAMES = _abi.LEVEL_KERNEL_NAMES
BEFORE_LAUNCH, AFTER_LAUNCH, MODEL_INPUT = _abi.BEFORE_LAUNCH, _abi.AFTER_LAUNCH, _abi.MODEL_INPUT
ANNOUNCE = _abi.ANNOUNCE
UNSELECTED, WRITES_UNSEEN = _abi.UNSELECTED, _abi.WRITES_UNSEEN
RECORDS_END, RECORDS_CONTINUE = _abi.RECORDS_END, _abi.RECORDS_CONTINUE
CONSTANTS_HOLD = _abi.CONSTANTS_HOLD
ROLE_READ = _abi.ROLE_READ

# Lines of the C++ wrapper that do no GPU work: buffers allocated, reused
# and released, the arrays of their sizes, the inputs' size checks, comments. Where only such lines
# lie between one launch event's records_end and the next launch event, the
# records of both go to the GPU together (RECORDS_CONTINUE); a released
# buffer is kept by the shim until then.
_NO_GPU_WORK = re.compile(
    r"\s*(?:$|//"
    r"|auto \w+ = std::move\(\w+\);"
    r"|static constexpr int64_t int_array_\d+\[\] = \{[-\w, ]*\};"
    r"|(?:if \(_check_aoti_runtime_check_inputs_env\(\)\) \{ )?assert_size_stride\("
    r"|AtenTensorHandle \w+_handle;"
    r"|AOTI_TORCH_ERROR_CODE_CHECK\(aoti_torch_empty_strided\("
    r"|RAIIAtenTensorHandle \w+\(\w+_handle\);"
    r"|\w+\.reset\(\);)"
)


class IntermediateValueDebuggingLevel(Enum):
    """Upstream's levels, with upstream's names and string values."""

    OFF = "0"
    SAVE_ONLY = "1"
    PRINT_ONLY = "2"
    PRINT_KERNEL_NAMES_ONLY = "3"

    @property
    def code(self) -> int | None:
        """The level as generated code passes it to every record and launch
        event (the header's AOTI_DEBUG_PRINTER_LEVEL_*); None when off. The
        shim decides from it what a record does (settings.h: action_at):
        level 3 notes the arguments before launch only, so that a CUDA
        error found after the kernel can say what it was given."""
        return _CODE_OF_LEVEL.get(self)


_CODE_OF_LEVEL = {
    IntermediateValueDebuggingLevel.SAVE_ONLY: LEVEL_SAVE,
    IntermediateValueDebuggingLevel.PRINT_ONLY: LEVEL_PRINT,
    IntermediateValueDebuggingLevel.PRINT_KERNEL_NAMES_ONLY: LEVEL_KERNEL_NAMES,
}


def inductor_config_digest() -> str:
    """12 hex digits of the Inductor config this compile runs with: a run's
    environment record carries it, so two dumps say when their programs
    were compiled with different settings."""
    import hashlib
    import json

    from torch._inductor import config

    def plain(value):
        if value is None or isinstance(value, (bool, int, float, str)):
            return value
        if isinstance(value, (list, tuple)):
            return [plain(v) for v in value]
        if isinstance(value, dict):
            return {str(k): plain(v) for k, v in value.items()}
        return type(value).__name__  # callables and objects: their kind, never an address

    text = json.dumps(plain(config.get_config_copy()), sort_keys=True)
    return hashlib.sha256(text.encode()).hexdigest()[:12]


def variables(args: list[Any], keep=lambda name: True) -> list[str]:
    """Arguments that name a variable in scope; literals and expressions
    (casts, reinterpret_tensor(...), 1L) have nothing worth a record."""
    return [
        a
        for a in args
        if isinstance(a, str) and _IDENTIFIER.match(a) and a not in _NOT_VARIABLES and keep(a)
    ]


def _is_buffer_or_input(name: str) -> bool:
    from torch._inductor.virtualized import V

    graph = V.graph
    return (
        name.startswith(("buf", "arg"))
        or name in getattr(graph, "graph_inputs", {})
        or name in getattr(graph, "constants", {})
    )


def _output_handles(args: list[Any]) -> list[str]:
    """The handles (bufN_handle) of the outputs a C-shim call allocates,
    but those of buffers nothing reads (an attention's unused log-sum-exp):
    no value of the program is there to compare."""
    from torch._inductor.virtualized import V

    removed = getattr(V.graph, "removed_buffers", ())
    return [
        m.group(1)
        for a in args
        if isinstance(a, str) and (m := OUTPUT_HANDLE.match(a)) and m.group(2) not in removed
    ]


def _does_no_gpu_work(line) -> bool:
    """A rendered wrapper line that runs nothing on the GPU: one of
    _NO_GPU_WORK, or a LineContext (a marker of the nodes that the lines
    after it come from, which renders as nothing)."""
    from torch._inductor.utils import LineContext

    return isinstance(line, LineContext) or (
        isinstance(line, str) and bool(_NO_GPU_WORK.match(line))
    )


class DebugPrinterManager:
    def __init__(
        self,
        debug_printer_level,
        use_array_ref: bool,
        writeline=None,
        args_to_print_or_save: list[str] | None = None,
        kernel_name: str = "",
        kernel=None,
        arg_signatures: list[type] | None = None,
        kernel_type=None,
    ):
        from torch._inductor import config

        self.debug_printer_level = IntermediateValueDebuggingLevel(str(debug_printer_level))
        self.use_array_ref = use_array_ref
        self.args_to_print_or_save = args_to_print_or_save or []
        self.kernel_name = kernel_name
        self.kernel = kernel
        self.arg_signatures = arg_signatures
        self.kernel_type = kernel_type
        self.kernel_filter = KernelFilter.parse(config.aot_inductor.filtered_kernel_names)
        self._skip_kernel = False
        self._preamble_written = False
        self._run_started = False
        self._provenance = Provenance()
        # Arguments that exist only once the kernel returns (the outputs of
        # a proxy-executor call, a C-shim call's output handles): recorded
        # after launch only.
        self._outputs_made_by_call: frozenset[str] = frozenset()
        self._handles: list[str] = []
        # What the kernel writes, where the caller knows it from the op's
        # schema; else the provenance reads it off the call line.
        self._writes_of_call: Writes | None = None
        # What each argument of the kernel being written holds, before and
        # after its launch (set on entering, see _provenance).
        self._held: tuple[dict[str, Held], dict[str, Held]] = ({}, {})
        # The kernel writes memory that none of its records name.
        self._writes_unseen = False
        # Where the last records_end was rendered, while the next launch
        # event may still take it back (_take_back_records_end).
        self._records_end_at: tuple[list, int] | None = None
        # Launch events written so far in this wrapper.
        self._events_written = 0
        # Where the last launch event's code ends in the wrapper's final
        # text, while it renders (_no_constant_named_since_last_event).
        self._event_end_at: tuple[list, int] | None = None
        # The graph whose constants' names the pattern finds (_constant_names).
        self._constants_pattern: tuple[Any, re.Pattern | None] | None = None
        # An op's call in its schema's order (fallback_call_records), for
        # the call comment; None for kernels whose argument list is the call.
        self._op_call: dict | None = None
        # What the kernel being written keeps of what it stores (the wrapper's
        # name of the statistics workspace, and each buffer's slot), and the
        # buffers whose last writer kept their statistics, while nothing has
        # written them since: their records take the slot (stored_stats.py).
        self._kept: tuple[str, dict[str, int]] = ("", {})
        self._stored_slots: dict[str, tuple[str, int]] = {}

    # -- the protocol Inductor's wrappers use --------------------------------

    def set_printer_args(
        self,
        args_to_print_or_save: list[str],
        kernel_name: str,
        arg_signatures: list[type] | None,
        kernel,
        kernel_type=None,
    ) -> None:
        from torch._inductor.codegen.multi_kernel import MultiKernel

        # Upstream turns itself off for good at the first MultiKernel; we only
        # skip that one kernel, whose argument list is not the callee's.
        self._skip_kernel = isinstance(kernel, MultiKernel)
        if self._skip_kernel:
            log.info("aoti-debug-printer: MultiKernel %s has no records", kernel_name)
        self.kernel_type = kernel_type
        self.kernel_name = str(kernel_name)
        self.arg_signatures = arg_signatures
        self.kernel = kernel
        # Kept as the caller's list and filtered at emission: the JIT wrapper
        # appends "out=buf" to it after this call, before entering.
        self.args_to_print_or_save = args_to_print_or_save
        self._handles = _output_handles(args_to_print_or_save) if kernel_type == "extern" else []
        self._outputs_made_by_call = frozenset(self._handles)
        self._writes_of_call = None
        self._op_call = None

    def set_call(
        self,
        args: list[str],
        kernel_name: str,
        made_by_call: frozenset[str] = frozenset(),
        writes: Writes | None = None,
        op_call: dict | None = None,
    ) -> None:
        """set_printer_args for an op's call (a fallback, a custom op), with
        what the caller knows of it: the arguments the call itself makes
        (recorded after it only), what it writes (from the op's schema) and
        the call in its schema's order (for the call comment)."""
        self.set_printer_args(args, kernel_name, None, None, "extern")
        self._outputs_made_by_call |= made_by_call
        self._writes_of_call = writes
        self._op_call = op_call

    def _names(self) -> list[str]:
        args = [
            a[4:] if isinstance(a, str) and a.startswith("out=") else a
            for a in self.args_to_print_or_save
        ]
        if self.kernel_type == "extern":
            # Only buffers, inputs and constants: extern argument lists also
            # carry dtypes and int arrays. An output the call allocates is
            # recorded after it through its handle (set_printer_args).
            names = variables(args, _is_buffer_or_input) + self._handles
        else:
            # The statistics workspace is the printer's own, not the model's.
            names = variables(args, lambda a: not a.startswith(WORKSPACE_PREFIX))
        if self.kernel_type == "cpp" and self.use_array_ref:
            names = [
                f"copy_arrayref_tensor_to_tensor({n})" if n.startswith(("buf", "arg")) else n
                for n in names
            ]
        return list(dict.fromkeys(names))

    def __enter__(self):
        names = self._names()
        # The call's line is rendered after scheduling: it carries what the
        # kernel keeps (stored_stats.py, provenance.capture).
        self._kept = (
            kept_by_line_being_rendered()
            if self.kernel_type != "extern"
            and self.debug_printer_level.code == LEVEL_PRINT
            and stats_in_kernels_wanted()
            else ("", {})
        )
        if self.debug_printer_level.code in (LEVEL_SAVE, LEVEL_PRINT) and not self._skip_kernel:
            self._held = self._provenance.kernel_call(
                self.kernel_name, [label(n) for n in names], self._writes_of_call
            )
            self._writes_unseen = self._provenance.writes_unseen
        else:
            self._held, self._writes_unseen = ({}, {}), False
        self._perform_debug_print_or_save_helper(
            [n for n in names if n not in self._outputs_made_by_call],
            self.kernel_name,
            before_launch=True,
            arg_signatures=self.arg_signatures,
        )
        if len(self._kept) > 2:  # a C++ kernel's slots, given to it just before its call
            self._writeline(keep_slots_line(self._kept))

    def _write_call_comment(self) -> None:
        """The call as the kernel gets it, before the records of a selected
        kernel: a generated kernel's arguments in order (names and literals),
        or an op's in its schema's order. Only in the C++ wrapper, whose
        source the package keeps; ATen's C-shim calls have none (`repro` does
        not rebuild them)."""
        import json

        if not self._emitter.keeps_call_comments:
            return
        if self._op_call is not None:
            call = {"kernel": self.kernel_name, **self._op_call}
        elif self.kernel_type != "extern":
            call = {
                "kernel": self.kernel_name,
                "args": [
                    label(a) if isinstance(a, str) else str(a) for a in self.args_to_print_or_save
                ],
            }
        else:
            return
        self._writeline(CALL_COMMENT + json.dumps(call))

    def __exit__(self, *exc_info):
        names = self._names()
        self._perform_debug_print_or_save_helper(
            names, self.kernel_name, before_launch=False, arg_signatures=self.arg_signatures
        )
        self._note_stored_slots(names)

    def _note_stored_slots(self, names: list[str]) -> None:
        """After a kernel's call: the buffers it stored and kept statistics
        of now have those slots; any other it may have written has none."""
        workspace, fields = self._kept[:2]
        if self._writes_unseen or self._skip_kernel:
            self._stored_slots.clear()
        after = self._held[1]
        for name in map(label, names):
            held = after.get(name)
            if name in fields:
                self._stored_slots[name] = (workspace, fields[name])
            elif held is None or held.role != ROLE_READ:
                self._stored_slots.pop(name, None)

    def _perform_debug_print_or_save_helper(
        self, args_to_print_or_save, kernel_name, before_launch, arg_signatures=None
    ) -> None:
        level = self.debug_printer_level.code
        if level is None or self._skip_kernel:
            return
        selected = self.kernel_filter(kernel_name)
        phase = BEFORE_LAUNCH if before_launch else AFTER_LAUNCH
        # Records whose statistics may be computed together, in one launch
        # at the records' end (where the run-time level prints them).
        batched = (
            selected
            and level in (LEVEL_SAVE, LEVEL_PRINT)
            and bool(args_to_print_or_save)
            and self._emitter.batches_records
        )
        continues = self._take_back_records_end() if batched else False
        constants_hold = before_launch and self._no_constant_named_since_last_event()
        self._records_end_at = None
        self._events_written += 1
        flags = (
            (ANNOUNCE if selected and level == LEVEL_KERNEL_NAMES else 0)
            | (0 if selected else UNSELECTED)
            | (WRITES_UNSEEN if before_launch and self._writes_unseen else 0)
            | (RECORDS_END if batched else 0)
            | (RECORDS_CONTINUE if continues else 0)
            | (CONSTANTS_HOLD if constants_hold else 0)
        )
        # Every kernel gets both events, selected or not: launch indices do
        # not depend on the filter, and the after event is where the shim
        # checks for CUDA errors when syncing.
        self._writeline(self._emitter.launch(level, phase, kernel_name, flags))
        if not selected:
            self._event_ends_here()
            return
        if before_launch:
            self._write_call_comment()
        if level == LEVEL_SAVE:
            self.codegen_intermediate_tensor_value_save(
                args_to_print_or_save, kernel_name, before_launch, arg_signatures
            )
        elif level == LEVEL_PRINT:
            self.codegen_intermediate_tensor_value_print(
                args_to_print_or_save, kernel_name, before_launch, arg_signatures
            )
        elif before_launch:
            self._codegen_records(LEVEL_KERNEL_NAMES, args_to_print_or_save, kernel_name, True)
        if batched:
            self._writeline(self._emitter.records_end())
            self._records_end_at = self._rendered_records_end()
        self._event_ends_here()

    def _event_ends_here(self) -> None:
        """The last line of a launch event's code was just written."""
        lines = self._rendered_lines()
        self._event_end_at = (lines, len(lines)) if lines is not None else None

    def _lines_since_last_event(self) -> list | None:
        """The wrapper's lines rendered since the last launch event's code
        (or the run's start), where they are known."""
        lines = self._rendered_lines()
        if lines is None or self._events_written == 0:
            return lines
        if self._event_end_at is None or self._event_end_at[0] is not lines:
            return None
        return lines[self._event_end_at[1] :]

    def _no_constant_named_since_last_event(self) -> bool:
        """Whether no line since the last launch event's code (or the run's
        start) may write a constant: each either does no GPU work or names
        none of the program's constants. What a kernel with records writes,
        its records say; a line that names a constant (a copy into a buffer
        the program mutates) may write it. Where the lines are not known,
        any may."""
        from torch._inductor.utils import LineContext

        lines = self._lines_since_last_event()
        if lines is None:
            return False
        named = self._constant_names()
        for line in lines:
            if isinstance(line, LineContext) or _does_no_gpu_work(line):
                continue
            if not isinstance(line, str) or (named is not None and named.search(line)):
                return False
        return True

    def _constant_names(self) -> re.Pattern | None:
        """A pattern that finds the program's constants' names in a line
        (None: it has none), made once per graph."""
        from torch._inductor.virtualized import V

        graph = V.graph
        if self._constants_pattern is None or self._constants_pattern[0] is not graph:
            names = [n for n in getattr(graph, "constants", {}) if _IDENTIFIER.match(n)]
            pattern = (
                re.compile(r"\b(?:" + "|".join(map(re.escape, names)) + r")\b") if names else None
            )
            self._constants_pattern = (graph, pattern)
        return self._constants_pattern[1]

    def _rendered_lines(self) -> list | None:
        """The wrapper's final text while it renders its lines (set_writeline),
        when every line written is appended to it; else None."""
        from torch._inductor.virtualized import V

        wrapper = V.graph.wrapper_code
        lines = getattr(getattr(wrapper, "wrapper_call", None), "_lines", None)
        return lines if "writeline" in vars(wrapper) and isinstance(lines, list) else None

    def _rendered_records_end(self) -> tuple[list, int] | None:
        """Where the records_end just written lies in the wrapper's final
        text, if it went there."""
        lines = self._rendered_lines()
        if not lines or not isinstance(lines[-1], str):
            return None
        return (lines, len(lines) - 1) if lines[-1].strip() == self._emitter.records_end() else None

    def _take_back_records_end(self) -> bool:
        """Whether the last records_end can be left out, because only lines
        that do no GPU work were written after it: it becomes a comment, and
        that event's records go to the GPU with the next one's. The run's
        first event continues the model inputs' records where nothing but
        such lines came before it: what they read holds for its records."""
        if self._records_end_at is None:
            if self._events_written > 0:
                return False
            lines = self._lines_since_last_event()
            return lines is not None and all(_does_no_gpu_work(ln) for ln in lines)
        lines, index = self._records_end_at
        if self._rendered_lines() is not lines:
            return False
        if not all(_does_no_gpu_work(ln) for ln in lines[index + 1 :]):
            return False
        lines[index] = lines[index].replace(
            self._emitter.records_end(), "// aoti-debug-printer: records continue below"
        )
        return True

    def codegen_model_inputs_value_print(self, input_args_to_print: list[str]) -> None:
        """Called by the C++ wrapper once, where the inputs are unpacked: the
        start of a run. Levels 1 and 2 also record the inputs themselves."""
        from torch._inductor.virtualized import V

        if self.debug_printer_level.code is None:
            return
        self._write_preamble()
        self._run_started = True
        for line in self._run_start_lines(input_args_to_print):
            V.graph.wrapper_code.prefix.writeline(line)

    # Upstream's two entry points; here they differ only in the level.
    def codegen_intermediate_tensor_value_save(
        self, args_to_save, kernel_name, before_launch=True, arg_signatures=None
    ) -> None:
        self._codegen_records(LEVEL_SAVE, args_to_save, kernel_name, before_launch)

    def codegen_intermediate_tensor_value_print(
        self, args_to_print, kernel_name, before_launch=True, arg_signatures=None
    ) -> None:
        self._codegen_records(LEVEL_PRINT, args_to_print, kernel_name, before_launch)

    def _codegen_records(self, level: int, args, kernel_name: str, before_launch: bool) -> None:
        phase = BEFORE_LAUNCH if before_launch else AFTER_LAUNCH
        held = self._held[0 if before_launch else 1]
        for arg in args:
            name = label(arg)
            slot = (
                self._slot_of(name, held.get(name), before_launch) if level == LEVEL_PRINT else None
            )
            self._writeline(
                self._emitter.record_stored(level, phase, kernel_name, arg, held.get(name), *slot)
                if slot
                else self._emitter.record(level, phase, kernel_name, arg, held.get(name))
            )

    def _slot_of(self, name: str, held: Held | None, before_launch: bool) -> tuple[str, int] | None:
        """Where a generated kernel kept the statistics of what `name` holds
        at this record: the kernel being written, after its launch; else the
        last kernel that wrote it, where nothing has written it since (nor
        may the kernel being written, after its launch)."""
        workspace, fields = self._kept[:2]
        if not before_launch:
            if name in fields:
                return workspace, fields[name]
            if held is None or held.role != ROLE_READ:
                return None
        return self._stored_slots.get(name)

    # -- emitted code ----------------------------------------------------------

    @property
    def _emitter(self) -> Emitter:
        """The emitter of the wrapper being generated: C++ (AOTInductor,
        cpp_wrapper) or Python (the JIT wrapper)."""
        from torch._inductor.virtualized import V

        return CPP if V.graph.cpp_wrapper else PYTHON

    def _run_start_lines(self, inputs: list[str]) -> list[str]:
        lines = [self._emitter.begin_run(inductor_config_digest(), self._provenance.source_table())]
        level = self.debug_printer_level.code
        if self._emitter.checks_inputs:
            # Each input against what the package was compiled for, before
            # the first kernel (and before the inputs' own records).
            lines += [self._emitter.check_input(level, a) for a in accepted_inputs()]
        if level in (LEVEL_SAVE, LEVEL_PRINT):
            lines += [self._emitter.record(level, MODEL_INPUT, "", name) for name in inputs]
        return lines

    def _write_preamble(self) -> None:
        from torch._inductor.virtualized import V

        if self._preamble_written:
            return
        self._preamble_written = True
        V.graph.wrapper_code.header.splice(self._emitter.preamble())

    def _writeline(self, line: str) -> None:
        from torch._inductor.virtualized import V

        self._write_preamble()
        wrapper = V.graph.wrapper_code
        if not self._run_started and not self._emitter.has_input_hook:
            self._start_python_run(wrapper)
        wrapper.writeline(line)

    def _start_python_run(self, wrapper) -> None:
        """The Python wrapper has no input-unpacking hook: the run starts at
        the end of its prefix, where the inputs are unpacked. (Never insert
        into wrapper.lines: Inductor may be iterating over it right now.)

        A function that CUDA graphs may capture holds a capturable part of
        the run from here on (begin_capturable): the call itself, when
        cudagraph trees capture it whole; with graph partitions
        (`graph_partition`), each partition's function, which they capture
        instead. A partition's function starts no run: its caller's printer
        starts it in the call, with the model inputs' records, once."""
        from torch._inductor import config
        from torch._inductor.virtualized import V

        self._run_started = True
        if _is_graph_partition(wrapper):
            caller = wrapper.parent_wrapper
            printer = getattr(caller, "debug_printer", None)
            if isinstance(printer, DebugPrinterManager) and not printer._run_started:
                printer._start_python_run(caller)
            wrapper.writeline(PYTHON.begin_capturable())
            return
        inputs = [n for n in getattr(V.graph, "graph_input_names", []) if _IDENTIFIER.match(n)]
        starts = self._run_start_lines(inputs)
        partitioned = getattr(config, "graph_partition", False)
        if not partitioned and not _is_subgraph(wrapper):
            starts.insert(1, PYTHON.begin_capturable())
        # The prefix's body indent, as write_launcher_fn_call_get_indent sets it.
        indent = 2 if partitioned and not _is_subgraph(wrapper) else 1
        with wrapper.prefix.indent(indent):
            for start in starts:
                wrapper.prefix.writeline(start)


def _is_subgraph(wrapper) -> bool:
    """A function of its own in the wrapper's module (a graph partition's, a
    higher-order op's subgraph): not the call."""
    return getattr(wrapper, "parent_wrapper", None) is not None


def _is_graph_partition(wrapper) -> bool:
    """A graph partition's function, which cudagraph trees capture."""
    return _is_subgraph(wrapper) and getattr(wrapper, "partition_signatures", None) is not None
