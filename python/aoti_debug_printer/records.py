"""The record schema in Python: the codes records carry, and one typed class
per record kind.

The shim writes records (csrc/format.cpp, through csrc/json.h); this module
is the one place where a JSON object becomes a record again, for every tool
(tools/dumps reads files through it). Fields hold codes: a phase, a role, a
reason, a guard finding's kind. The words people read are made from them
only when formatting (`Reason.text`). docs/output.md lists the fields.
"""

from __future__ import annotations

import types
import typing
from dataclasses import MISSING, dataclass, field, fields
from enum import Enum
from functools import cache
from typing import Any, ClassVar

# The record schema this package writes and reads: the C header's
# AOTI_DEBUG_PRINTER_RECORD_SCHEMA, mirrored here so that reading a dump
# needs neither torch nor the compiled library (test_schema holds the two
# equal).
RECORD_SCHEMA = 8

# Starts the comment before each recorded call of the C++ wrapper: the
# call's arguments in order, literals included, as JSON. The codegen writes
# it; `aoti-debug repro` reads it back from the package.
CALL_COMMENT = "// aoti-debug-printer call "


def dtype_name(dtype) -> str:
    """A torch dtype as records spell it: "float32", "bfloat16"."""
    return str(dtype).removeprefix("torch.")


class Phase(str, Enum):
    """Where a record sits relative to its kernel's launch."""

    BEFORE_LAUNCH = "before_launch"
    AFTER_LAUNCH = "after_launch"
    MODEL_INPUT = "model_input"
    # Taken by upstream's entry points (aoti_torch_print_tensor_handle,
    # aoti_torch_save_tensor_handle); `label` holds their message.
    UPSTREAM = "upstream"


class Role(str, Enum):
    """What a kernel does to a tensor argument, as the code generator knows it."""

    UNKNOWN = ""
    READ = "read"
    WRITE = "write"  # stores a value nothing held before
    READ_WRITE = "read_write"  # changes a value it was given, in place
    # Adds into a value it was given in an order the hardware picks (float
    # atomics): its last bits may differ from run to run.
    ACCUMULATE = "accumulate"

    @property
    def reads(self) -> bool:
        return self in (Role.READ, Role.READ_WRITE, Role.ACCUMULATE)

    @property
    def writes(self) -> bool:
        return self in (Role.WRITE, Role.READ_WRITE, Role.ACCUMULATE)

    @property
    def nondeterministic(self) -> bool:
        """Nondeterministic by construction: two runs on the same inputs
        may differ here without a bug."""
        return self is Role.ACCUMULATE


class Reason(str, Enum):
    """Why a tensor record holds no single node of the exported program (its
    `why`, with the detail after a colon: "several_nodes:add, mul")."""

    NOT_YET_WRITTEN = "not_yet_written"
    NEVER_STORED = "never_stored"
    INTERMEDIATE = "intermediate"
    SEVERAL_VALUES = "several_values"
    SEVERAL_NODES = "several_nodes"
    NO_GRAPH_NODE = "no_graph_node"
    NO_EXPORTED_NODE = "no_exported_node"
    CHANGED_IN_PLACE = "changed_in_place"
    WRITES_UNKNOWN = "writes_unknown"
    MODEL_INPUT = "model_input"
    CONSTANT = "constant"
    INTERNALS_MOVED = "internals_moved"

    def why(self, detail: str = "") -> str:
        """The record's `why` field."""
        return f"{self.value}:{detail}" if detail else self.value

    @property
    def text(self) -> str:
        """In words, for people."""
        return _REASON_TEXT[self]

    @property
    def constant(self) -> bool:
        """The value is the same in every compile of one program (a model
        input, a weight): its difference is not a kernel's."""
        return self in (Reason.MODEL_INPUT, Reason.CONSTANT)


_REASON_TEXT = {
    Reason.NOT_YET_WRITTEN: "an output its kernel has not written yet",
    Reason.NEVER_STORED: "its kernel never stores it (the value stays inside the kernel)",
    Reason.INTERMEDIATE: "an intermediate value inside one node's decomposition",
    Reason.SEVERAL_VALUES: "a node whose decomposition ends in several values",
    Reason.SEVERAL_NODES: "made from several nodes",
    Reason.NO_GRAPH_NODE: "no single graph node (a buffer Inductor made, or a view)",
    Reason.NO_EXPORTED_NODE: "a graph node with no exported node",
    Reason.CHANGED_IN_PLACE: "changed in place by its kernel",
    Reason.WRITES_UNKNOWN: "a kernel whose writes the printer does not know",
    Reason.MODEL_INPUT: "a model input",
    Reason.CONSTANT: "a weight or constant no kernel the printer saw wrote",
    Reason.INTERNALS_MOVED: "not known: what the printer reads of this torch's Inductor has moved",
}


class GuardKind(str, Enum):
    READ_ONLY_ARGUMENT_CHANGED = "read_only_argument_changed"
    OVERWRITTEN_BEFORE_READ = "overwritten_before_read"


@dataclass(frozen=True, kw_only=True)
class Where:
    """Where and when a record was taken: the members every record kind but
    the environment begins with."""

    phase: Phase
    label: str = ""  # upstream's message (Phase.UPSTREAM)
    kernel: str
    arg: str
    run: int = -1  # this process's run of a model; -1 outside one
    launch: int = -1
    call: int = -1
    rank: int = -1
    node: str = ""
    role: Role = Role.UNKNOWN
    why: str = ""  # a Reason, with its detail after ":"; free text before schema 2
    formula: str = ""
    # The replay of a captured CUDA graph that wrote it, from 0; -1 outside
    # graphs (schema 7 on).
    replay: int = -1
    # Where the user's code made `node` ("model.py:42 in forward: return
    # x * 2"), innermost frame first: findings only (schema 5 on).
    source: list[str] = field(default_factory=list)
    pid: int | None = None
    process: str | None = None
    schema: int | None = None

    @property
    def run_id(self) -> tuple:
        """Which run of which process (and rank) the record belongs to: each
        replay of a captured run is a run of its own."""
        return (self.process, self.pid, self.rank, self.run, self.replay)

    @property
    def reason(self) -> Reason | None:
        """Why `node` is empty, where the record says (schema 2 on)."""
        code = self.why.partition(":")[0]
        return Reason(code) if code in _REASON_CODES else None

    @property
    def reason_detail(self) -> str:
        return self.why.partition(":")[2] if self.reason else self.why

    @property
    def reason_text(self) -> str:
        """Why `node` is empty, in words."""
        if self.reason is None:
            return self.why or "holds no single node's value"
        detail = self.reason_detail
        return self.reason.text + (f" ({detail})" if detail else "")

    @property
    def reason_kind(self) -> str:
        """Why `node` is empty, in words, without the detail: records are
        counted by it."""
        return self.reason.text if self.reason else (self.why or "holds no single node's value")

    @property
    def label_text(self) -> str:
        """ "KERNEL ARG" or "model input ARG"."""
        return f"{self.kernel} {self.arg}" if self.kernel else f"model input {self.arg}"


_REASON_CODES = frozenset(r.value for r in Reason)


@dataclass(frozen=True, kw_only=True)
class Stats:
    of: str = "value"  # or "modulus" (complex)
    min: float | None = None  # of the finite values; None where there are none
    max: float | None = None
    mean: float | None = None
    std: float | None = None
    absmax: float | None = None
    finite: int = 0
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    zeros: int = 0

    @property
    def non_finite(self) -> int:
        return self.nan + self.pos_inf + self.neg_inf


@dataclass(frozen=True, kw_only=True)
class TensorRecord(Where):
    event: ClassVar[str] = "tensor"
    shape: list[int] = field(default_factory=list)
    stride: list[int] = field(default_factory=list)
    dtype: str = ""
    device: str = ""
    layout: str = ""
    contiguous: bool = False
    numel: int = 0
    stats: Stats | None = None
    values: list[str] | None = None
    problem: str = ""  # a null handle, an undefined tensor, a dtype without statistics
    file: str | None = None  # the snapshot, in the dump directory (level 1)
    unsaved: str = ""  # why it has no snapshot: the save failed (a full disk)
    # How long the model's thread waited for the disk before this snapshot
    # (level 1's staging memory was full, or it was saved on that thread);
    # 0 where it did not wait (schema 8 on).
    save_waited_ms: float = 0.0

    @property
    def written(self) -> bool:
        """A value its kernel wrote: after launch, an argument it stores."""
        return self.phase is Phase.AFTER_LAUNCH and self.role.writes


@dataclass(frozen=True, kw_only=True)
class ScalarRecord(Where):
    event: ClassVar[str] = "scalar"
    type: str  # int64, float64, bool, or a Python type's name
    value: str


@dataclass(frozen=True, kw_only=True)
class LaunchRecord(Where):
    event: ClassVar[str] = "launch"


@dataclass(frozen=True, kw_only=True)
class TrapRecord(Where):
    event: ClassVar[str] = "trap"
    message: str
    nan: int = 0
    pos_inf: int = 0
    neg_inf: int = 0
    inputs: list[TensorRecord] = field(default_factory=list)


@dataclass(frozen=True, kw_only=True)
class GuardRecord(Where):
    event: ClassVar[str] = "guard"
    kind: GuardKind
    message: str
    numel: int = 0
    changed: int = -1  # -1: not known (only a fingerprint differed)
    first_index: int = -1
    writer: str = ""
    between: list[str] = field(default_factory=list)
    culprit: str = ""  # "KERNEL (launch N)" where the guard saw it
    files: dict[str, str] = field(default_factory=dict)


@dataclass(frozen=True, kw_only=True)
class WatchedArg:
    """A failing kernel's tensor argument, as it was at launch."""

    arg: str
    shape: list[int] = field(default_factory=list)
    dtype: str = ""
    device: str = ""
    data_ptr: str = ""
    span_bytes: int = 0
    inside_storage: bool = True
    inside_allocation: bool | None = None
    file: str | None = None  # its host copy (replay)


@dataclass(frozen=True, kw_only=True)
class CudaErrorRecord(Where):
    event: ClassVar[str] = "cuda_error"
    error: str
    args: list[WatchedArg] = field(default_factory=list)


class InputMismatch(str, Enum):
    """What about a model input its package was not compiled for."""

    SIZE = "size"  # outside the sizes the package accepts
    RANK = "rank"  # another number of dims
    RELATION = "relation"  # differs from a dim the package takes it equal to
    STRIDE = "stride"  # laid out otherwise than the package's kernels read it
    DTYPE = "dtype"
    DEVICE = "device"


@dataclass(frozen=True, kw_only=True)
class WrongInputRecord(Where):
    """A model input that is not what its package was compiled for, found
    before the run's first kernel (`node`: the exported program's name of
    the input, `arg` the wrapper's)."""

    event: ClassVar[str] = "wrong_input"
    kind: InputMismatch
    message: str
    dim: int = -1  # -1: the tensor as a whole
    given: str = ""
    compiled_for: str = ""


@dataclass(frozen=True, kw_only=True)
class EnvironmentRecord:
    """The numerics settings one run was made in (a dump holds one per run)."""

    event: ClassVar[str] = "environment"
    run: int = -1
    rank: int = -1
    pid: int | None = None
    process: str | None = None
    torch: str = ""
    device: str = ""
    capability: str = ""
    tf32_matmul: bool | None = None
    tf32_cudnn: bool | None = None
    matmul_precision: str = ""
    bf16_reduction: bool | None = None
    fp16_reduction: bool | None = None
    deterministic: bool | None = None
    inductor_config: str = ""
    # Where the user's code made each node of the run's program, innermost
    # frame first (schema 5 on; level-1 dumps).
    sources: dict[str, list[str]] = field(default_factory=dict)
    schema: int | None = None

    @property
    def run_id(self) -> tuple:
        # A run outside graphs, as Where.run_id says it (no replay): a dump
        # holds environments of level-1 runs only, which no graph captures.
        return (self.process, self.pid, self.rank, self.run, -1)


Record = (
    TensorRecord
    | ScalarRecord
    | LaunchRecord
    | TrapRecord
    | GuardRecord
    | CudaErrorRecord
    | WrongInputRecord
    | EnvironmentRecord
)
KINDS: dict[str, type] = {
    k.event: k
    for k in (
        TensorRecord,
        ScalarRecord,
        LaunchRecord,
        TrapRecord,
        GuardRecord,
        CudaErrorRecord,
        WrongInputRecord,
        EnvironmentRecord,
    )
}
FINDINGS = (TrapRecord, GuardRecord, CudaErrorRecord, WrongInputRecord)


def parse(raw: Any) -> Record:
    """The record a JSON object holds; a ValueError saying what is wrong
    with it (the caller adds the file and line). A record of schema 1 (the
    first versioned one) is read too: its phase for upstream's records was
    their message, and its `why` free text."""
    if not isinstance(raw, dict) or "event" not in raw:
        raise ValueError("not a record of aoti-debug-printer")
    kind = KINDS.get(raw["event"]) if isinstance(raw["event"], str) else None
    if kind is None:
        raise ValueError(f"a record of unknown kind {raw['event']!r}")
    # Records from before versions were written as schema 1 is.
    version = raw.get("schema", 1)
    if type(version) is not int or version > RECORD_SCHEMA:
        raise ValueError(
            f"record schema {version!r}, newer than this aoti-debug-printer reads "
            f"({RECORD_SCHEMA}): read it with the release that wrote it, or a newer one"
        )
    raw = dict(raw)
    if issubclass(kind, Where) and version < 2:
        if raw.get("phase") not in _PHASES and isinstance(raw.get("phase"), str):
            raw["label"], raw["phase"] = raw["phase"], Phase.UPSTREAM.value
        why = raw.get("why")
        raw["why"] = _SCHEMA_1_WHY[why].why() if why in _SCHEMA_1_WHY else why
    return _build(kind, raw, kind.event)


# Schema 1's words for the reasons whose value every compile shares.
_SCHEMA_1_WHY = {
    "model input": Reason.MODEL_INPUT,
    "not written by a kernel the printer saw": Reason.CONSTANT,
    "output, not yet written": Reason.NOT_YET_WRITTEN,
}


_PHASES = frozenset(p.value for p in Phase)


def _build(kind: type, raw: dict, what: str):
    hints = _hints(kind)
    values = {}
    for f in fields(kind):
        if f.name not in raw:
            if f.default is MISSING and f.default_factory is MISSING:
                raise ValueError(f"a {what} record without {f.name!r}")
            continue
        values[f.name] = _convert(hints[f.name], raw[f.name], f"{what} record's {f.name!r}")
    return kind(**values)


@cache
def _hints(kind: type) -> dict[str, Any]:
    return typing.get_type_hints(kind)


def _convert(hint, value, what: str):
    """`value` as `hint` says, or a ValueError naming the field."""
    origin, args = typing.get_origin(hint), typing.get_args(hint)
    if origin in (typing.Union, types.UnionType):
        if value is None and type(None) in args:
            return None
        (hint,) = [a for a in args if a is not type(None)]
        return _convert(hint, value, what)
    if origin is list:
        if not isinstance(value, list):
            raise ValueError(f"a {what} that is not a list")
        return [_convert(args[0], v, what) for v in value]
    if origin is dict:
        if not isinstance(value, dict):
            raise ValueError(f"a {what} that is not an object")
        return {str(k): _convert(args[1], v, what) for k, v in value.items()}
    if isinstance(hint, type) and issubclass(hint, Enum):
        try:
            return hint(value)
        except ValueError:
            raise ValueError(f"a {what} of {value!r}, not a known code") from None
    if isinstance(hint, type) and (issubclass(hint, Where) or hint in (Stats, WatchedArg)):
        if not isinstance(value, dict):
            raise ValueError(f"a {what} that is not an object")
        if issubclass(hint, Where):
            return parse({"event": hint.event, **value})
        return _build(hint, value, what)
    if hint is float:  # a statistic: of a bool tensor, a bool
        if not isinstance(value, (int, float)):
            raise ValueError(f"a {what} that is not a number")
        return value
    if hint is int or hint is bool or hint is str:
        if type(value) is not hint:
            raise ValueError(f"a {what} that is not {hint.__name__}")
        return value
    return value
