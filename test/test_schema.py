"""The record schema's version: every record kind the shim writes carries
it, the one reader reads what it wrote back, refuses a newer version in one
line naming the file and line, and reads records from before versions with
a note."""

from __future__ import annotations

import json
import logging

import pytest
import torch

import aoti_debug_printer
from aoti_debug_printer import _C
from aoti_debug_printer._dumps import load_dump

KERNEL = "cpp_fused_0"


def one_run_of_every_kind(level_1: bool, trap: bool) -> None:
    """A run with a model input, a kernel's tensors and scalar, and (with
    `trap`) the trap's record: saved (level 1) or printed (level 2)."""
    action = _C.SAVE if level_1 else _C.PRINT
    announce = 0 if level_1 else _C.ANNOUNCE  # launch records, as at level 3
    _C.begin_run()
    _C.record(action, _C.MODEL_INPUT, "", "arg0_1", torch.ones(3))
    _C.launch(_C.BEFORE_LAUNCH, KERNEL, announce)
    _C.record(action, _C.BEFORE_LAUNCH, KERNEL, "in_ptr0", torch.ones(3), role=_C.ROLE_READ)
    _C.record(action, _C.BEFORE_LAUNCH, KERNEL, "ks0", 3)
    _C.launch(_C.AFTER_LAUNCH, KERNEL, announce)
    out = torch.tensor([1.0, float("nan"), 2.0]) if trap else torch.zeros(3)
    try:
        _C.record(action, _C.AFTER_LAUNCH, KERNEL, "out_ptr0", out, node="relu", role=_C.ROLE_WRITE)
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
    written = [(r.raw["phase"], r.raw["arg"]) for r in read.records]
    assert ("model_input", "arg0_1") in written and ("after_launch", "out_ptr0") in written
    assert any(e["event"] == "trap" for e in read.events)
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
