"""The record schema: every record kind the shim writes carries its version,
the one reader reads each back into its typed record (codes, not words),
refuses a newer version or a mistyped field in one line naming the file and
line, and reads records of schema 1 and from before versions, with a
note."""

from __future__ import annotations

import json
import logging
import subprocess
import sys

import pytest
import torch

import aoti_debug_printer
from aoti_debug_printer import _C, load_dump
from aoti_debug_printer.records import (
    RECORD_SCHEMA,
    EnvironmentRecord,
    GuardKind,
    GuardRecord,
    LaunchRecord,
    Phase,
    Reason,
    Role,
    ScalarRecord,
    TensorRecord,
    TrapRecord,
    parse,
)

KERNEL = "cpp_fused_0"


def one_run_of_every_kind(level_1: bool, trap: bool) -> None:
    """A run with a model input, a kernel's tensors and scalar, and (with
    `trap`) the trap's record: saved (level 1) or printed (level 2)."""
    level = _C.LEVEL_SAVE if level_1 else _C.LEVEL_PRINT
    announce = 0 if level_1 else _C.ANNOUNCE  # launch records, as at level 3
    _C.begin_run()
    _C.record(level, _C.MODEL_INPUT, "", "arg0_1", torch.ones(3), why=Reason.MODEL_INPUT.why())
    _C.launch(level, _C.BEFORE_LAUNCH, KERNEL, announce)
    _C.record(level, _C.BEFORE_LAUNCH, KERNEL, "in_ptr0", torch.ones(3), role=_C.ROLE_READ)
    _C.record(level, _C.BEFORE_LAUNCH, KERNEL, "ks0", 3)
    _C.launch(level, _C.AFTER_LAUNCH, KERNEL, announce)
    out = torch.tensor([1.0, float("nan"), 2.0]) if trap else torch.zeros(3)
    try:
        _C.record(level, _C.AFTER_LAUNCH, KERNEL, "out_ptr0", out, node="relu", role=_C.ROLE_WRITE)
    except RuntimeError:
        assert trap
    _C.end_run()


@pytest.fixture
def records_file(tmp_path):
    path = tmp_path / "records.jsonl"
    with aoti_debug_printer.options(
        format="jsonl", output=path, dump_dir=tmp_path / "dump", trap=1
    ):
        one_run_of_every_kind(level_1=False, trap=True)
    return path


@pytest.fixture
def dump(tmp_path):
    with aoti_debug_printer.options(dump_dir=tmp_path / "dump", trap=1):
        one_run_of_every_kind(level_1=True, trap=True)
    return tmp_path / "dump"


def test_reading_a_dump_needs_neither_torch_nor_the_library(dump):
    """The reader's schema is the header's, and a tool that reads records
    (a report, a comparison's first pass) starts without loading torch."""
    assert RECORD_SCHEMA == _C.RECORD_SCHEMA
    code = (
        "import sys, json, aoti_debug_printer.records as records; "
        "from aoti_debug_printer import load_dump; "
        f"d = load_dump({str(dump)!r}); assert d.records; "
        f"lines = open({str(dump / 'manifest.jsonl')!r}).read().splitlines(); "
        "assert all(records.parse(json.loads(line)) for line in lines); "
        "print(sorted(m for m in ('torch', 'aoti_debug_printer._C') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "[]"


def test_every_record_kind_states_the_schema(records_file, dump):
    kinds = {}
    for path in (records_file, dump / "manifest.jsonl"):
        for line in path.read_text().splitlines():
            record = json.loads(line)
            kinds[record["event"]] = record
            assert record["schema"] == _C.RECORD_SCHEMA, record
            for nested in record.get("inputs", []):  # the trap's inputs
                assert nested["schema"] == _C.RECORD_SCHEMA
    assert set(kinds) >= {"environment", "tensor", "scalar", "launch", "trap"}, set(kinds)


@pytest.mark.parametrize("source", ["records_file", "dump"])
def test_the_reader_reads_back_what_was_written(source, request):
    read = load_dump(request.getfixturevalue(source))
    written = [(r.phase, r.arg) for r in read.records]
    assert ("model_input", "arg0_1") in written and ("after_launch", "out_ptr0") in written
    assert any(isinstance(e, TrapRecord) for e in read.events)
    assert not read.skipped


def test_a_newer_schema_is_refused_in_one_line_naming_file_and_line(dump):
    manifest = dump / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    newer = json.loads(lines[2])
    newer["schema"] = _C.RECORD_SCHEMA + 1
    lines[2] = json.dumps(newer)
    manifest.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as refused:
        load_dump(dump)
    message = str(refused.value)
    assert message.startswith(f"{manifest}:3: record schema {_C.RECORD_SCHEMA + 1}")
    assert "\n" not in message


def test_records_from_before_versions_are_read_with_a_note(dump, caplog):
    manifest = dump / "manifest.jsonl"
    lines = [json.loads(line) for line in manifest.read_text().splitlines()]
    for record in lines:
        record.pop("schema")
    manifest.write_text("".join(json.dumps(r) + "\n" for r in lines))
    with caplog.at_level(logging.WARNING, logger="aoti_debug_printer"):
        read = load_dump(dump)
    assert read.records
    assert f"{len(lines)} record(s) written before records carried a schema version" in caplog.text


@pytest.mark.parametrize("source", ["records_file", "dump"])
def test_every_record_kind_reads_back_typed(source, request):
    read = load_dump(request.getfixturevalue(source))
    by_arg = {}  # each argument's own record (the trap saves copies of the inputs after it)
    for r in read.records:
        by_arg.setdefault(r.arg, r.tensor)
    assert by_arg["arg0_1"].phase is Phase.MODEL_INPUT
    assert by_arg["arg0_1"].reason is Reason.MODEL_INPUT and by_arg["arg0_1"].reason.constant
    assert by_arg["in_ptr0"].role is Role.READ and by_arg["in_ptr0"].stats.finite == 3
    out = by_arg["out_ptr0"]
    assert (out.phase, out.role, out.node, out.stats.nan) == (
        Phase.AFTER_LAUNCH,
        Role.WRITE,
        "relu",
        1,
    )
    (scalar,) = [e for e in read.events if isinstance(e, ScalarRecord)]
    assert (scalar.arg, scalar.type, scalar.value) == ("ks0", "int64", "3")
    (trap,) = read.findings()
    assert isinstance(trap, TrapRecord) and trap.kernel == KERNEL and trap.nan == 1
    assert [i.arg for i in trap.inputs] == ["in_ptr0"]
    assert isinstance(trap.inputs[0], TensorRecord) and trap.inputs[0].stats.finite == 3
    if source == "records_file":
        assert sum(isinstance(e, LaunchRecord) for e in read.events) == 2
    else:
        (environment,) = read.environments.values()
        assert isinstance(environment, EnvironmentRecord) and environment.device == "cpu"


def test_a_guard_record_reads_back_typed(tmp_path):
    """The write guard's finding, as the shim writes it, with its kind a code."""
    t = torch.ones(4)
    with aoti_debug_printer.options(dump_dir=tmp_path, guard=1):
        _C.begin_run()
        _C.launch(_C.LEVEL_SAVE, _C.BEFORE_LAUNCH, KERNEL, 0)
        _C.record(_C.LEVEL_SAVE, _C.BEFORE_LAUNCH, KERNEL, "in_ptr0", t, role=_C.ROLE_READ)
        _C.launch(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, KERNEL, 0)
        t[2] = 5.0  # the kernel wrote an argument it only reads
        with pytest.raises(RuntimeError, match="changed in_ptr0"):
            _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, KERNEL, "in_ptr0", t, role=_C.ROLE_READ)
        _C.end_run()
    (guard,) = load_dump(tmp_path).findings()
    assert isinstance(guard, GuardRecord)
    assert guard.kind is GuardKind.READ_ONLY_ARGUMENT_CHANGED
    assert (guard.arg, guard.changed, guard.first_index) == ("in_ptr0", 1, 2)
    assert set(guard.files) == {"before launch", "after launch"}


def test_schema_1_upstream_records_and_reasons_read_as_codes():
    """Schema 1 wrote upstream's message as the phase and reasons as words."""
    upstream = parse(
        {
            "event": "tensor",
            "schema": 1,
            "phase": "before_launch - k",
            "kernel": "k",
            "arg": "buf0",
            "why": "model input",
        }
    )
    assert upstream.phase is Phase.UPSTREAM and upstream.label == "before_launch - k"
    assert upstream.reason is Reason.MODEL_INPUT
    worded = parse(
        {
            "event": "tensor",
            "schema": 1,
            "phase": "after_launch",
            "kernel": "k",
            "arg": "buf1",
            "why": "an intermediate value of node mul (mul_1)",
        }
    )
    assert worded.reason is None and worded.reason_text.startswith("an intermediate value")


@pytest.mark.parametrize(
    ("change", "said"),
    [
        ({"launch": "7"}, "'launch' that is not int"),
        ({"phase": "sideways"}, "'phase' of 'sideways', not a known code"),
        ({"role": "reads"}, "'role' of 'reads', not a known code"),
        ({"stats": [1, 2]}, "'stats' that is not an object"),
        ({"event": "sparkle"}, "a record of unknown kind 'sparkle'"),
        ({"event": ["tensor"]}, "a record of unknown kind ['tensor']"),
        ({"shape": "2x3"}, "'shape' that is not a list"),
    ],
)
def test_a_mistyped_field_is_refused_in_one_line_naming_file_and_line(dump, change, said):
    manifest = dump / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    n = next(i for i, line in enumerate(lines) if json.loads(line)["event"] == "tensor")
    lines[n] = json.dumps({**json.loads(lines[n]), **change})
    manifest.write_text("\n".join(lines) + "\n")
    with pytest.raises(ValueError) as refused:
        load_dump(dump)
    message = str(refused.value)
    assert message.startswith(f"{manifest}:{n + 1}: ") and said in message, message
    assert "\n" not in message


def test_each_replay_of_a_captured_graph_reads_back_as_a_run_of_its_own():
    """Schema 7: a record that a replay of a captured CUDA graph wrote
    carries "replay" (test_cuda_graphs.py writes them on the GPU); each
    replay is a run of its own, and a record without one is outside graphs."""
    base = {
        "event": "tensor",
        "phase": "after_launch",
        "kernel": "triton_poi_fused_sqrt_0",
        "arg": "out_ptr0",
        "run": 2,
        "launch": 1,
        "call": 0,
        "pid": 7,
        "process": "0123456789abcdef",
        "schema": 7,
    }
    first, second = (parse({**base, "replay": n}) for n in (0, 1))
    outside = parse(base)
    assert (first.replay, second.replay, outside.replay) == (0, 1, -1)
    assert len({first.run_id, second.run_id, outside.run_id}) == 3
