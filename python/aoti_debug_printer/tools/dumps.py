"""Reading what the printer wrote: a level-1 dump directory (manifest.jsonl
and its .pt files) or a JSON-lines records file (AOTI_DEBUG_PRINTER_FORMAT=
jsonl). One reader for `compare`, `report` and `diverge`."""

from __future__ import annotations

import json
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from .. import records
from .._native import wait_for_saves
from ..records import (
    CudaErrorRecord,
    EnvironmentRecord,
    GuardRecord,
    Phase,
    Role,
    Stats,
    TensorRecord,
    TrapRecord,
)

log = logging.getLogger("aoti_debug_printer")


def first_line(e: BaseException) -> str:
    """An exception in one line: the first of its message, else its type."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


@dataclass
class Record:
    """One tensor snapshot of a dump: its record, the run it belongs to in
    the dump's order, and (level 1) the file that holds it."""

    tensor: TensorRecord
    run: int  # 0, 1, ... in the order the dump's runs appear
    path: Path | None = None

    # The record's members the tools match and sort by.
    @property
    def phase(self) -> Phase:
        return self.tensor.phase

    @property
    def kernel(self) -> str:
        return self.tensor.kernel

    @property
    def arg(self) -> str:
        return self.tensor.arg

    @property
    def launch(self) -> int:
        return self.tensor.launch

    @property
    def call(self) -> int:
        return self.tensor.call

    @property
    def rank(self) -> int:
        return self.tensor.rank

    @property
    def role(self) -> Role:
        return self.tensor.role

    @property
    def key(self) -> tuple:
        """What matches records of two dumps: rank, run, phase, kernel,
        argument and call index (never the launch index, which another
        compile may number differently)."""
        t = self.tensor
        return (t.rank, self.run, t.phase, t.label, t.kernel, t.arg, t.call)

    @property
    def node(self) -> str:
        """The exported program's node whose value this snapshot holds; ""
        when it holds none (see `tensor.reason`) or the dump predates
        provenance."""
        return self.tensor.node

    @property
    def formula(self) -> dict[str, Any] | None:
        """How the value it holds is computed from the program's values,
        where it holds no single node's (see inductor/provenance); None where the
        codegen wrote none."""
        try:
            formula = json.loads(self.tensor.formula) if self.tensor.formula else None
        except ValueError:
            return None
        ok = isinstance(formula, dict) and isinstance(formula.get("steps"), list)
        return formula if ok and "value" in formula else None

    @property
    def written(self) -> bool:
        """A value its kernel wrote: an after-launch snapshot of an argument
        the kernel stored or changed."""
        return self.tensor.written

    @property
    def label(self) -> str:
        t = self.tensor
        call = f", call {t.call}" if t.call >= 0 else ""
        phase = t.label if t.phase is Phase.UPSTREAM else t.phase.value
        return f"{t.label_text} ({phase}, run {self.run}{call})"

    @property
    def stats(self) -> Stats | None:
        return self.tensor.stats

    def non_finite(self) -> int:
        return self.stats.non_finite if self.stats else 0

    def load(self):
        """The snapshot's tensor; a ValueError naming the file where it is
        missing, truncated or not a tensor."""
        import torch

        if self.path is None:
            return None
        try:
            value = torch.load(self.path, weights_only=True, map_location="cpu")
        except FileNotFoundError:
            raise ValueError(f"{self.path}: the snapshot the manifest names is missing") from None
        except Exception as e:  # noqa: BLE001 - truncated, foreign or garbage: name the file
            raise ValueError(
                f"{self.path}: not a snapshot aoti-debug-printer wrote, or a "
                f"truncated one ({first_line(e)})"
            ) from None
        if not isinstance(value, torch.Tensor):
            raise ValueError(f"{self.path}: holds a {type(value).__name__}, not a tensor")
        return value


@dataclass
class Dump:
    source: Path
    records: list[Record] = field(default_factory=list)
    # The other records, in order: launches, scalars, and the findings
    # (trap, guard, CUDA error).
    events: list[records.Record] = field(default_factory=list)
    # (rank, run) -> the environment record of that run (level 1): the
    # numerics settings it ran in.
    environments: dict[tuple[int, int], EnvironmentRecord] = field(default_factory=dict)
    # What the reader skipped and why, one line each (a torn last line).
    skipped: list[str] = field(default_factory=list)

    def environment(self, run: int = 0, rank: int | None = None):
        """The numerics Environment of one run, None where the dump does not
        record it."""
        from .numerics import Environment

        for (r, n), record in self.environments.items():
            if n == run and (rank is None or r == rank):
                return Environment.from_record(record)
        return None

    def sources(self) -> dict[str, list[str]]:
        """Where the user's code made each node of the dump's program,
        innermost frame first (its environment records; level 1, schema 5
        on); the runs of one dump share one program."""
        merged: dict[str, list[str]] = {}
        for record in self.environments.values():
            merged.update(record.sources)
        return merged

    @property
    def ranks(self) -> list[int]:
        """The ranks whose records the dump holds, in order."""
        return sorted({r.rank for r in self.records})

    def by_key(self) -> dict[tuple, Record]:
        return {r.key: r for r in self.records}

    @property
    def has_provenance(self) -> bool:
        """Whether the codegen told each record what it holds (role, node)."""
        return any(r.role is not Role.UNKNOWN for r in self.records)

    def written_values(self) -> list[Record]:
        """The values kernels wrote, in launch order: what compare and
        diverge check."""
        return [r for r in self.records if r.written]

    def findings(self) -> list[TrapRecord | GuardRecord | CudaErrorRecord]:
        """The trap, guard and CUDA error records, in order."""
        return [e for e in self.events if isinstance(e, records.FINDINGS)]


def load_dump(source: str | Path) -> Dump:
    """A dump directory (its manifest.jsonl) or a records file (.jsonl).
    Raises FileNotFoundError or ValueError with what is wrong, naming the
    file and line. A manifest's last line, cut off by a killed run or a
    full disk, is skipped and said (Dump.skipped); any other line that is
    not a record is an error. Lines end at "\\n" only: a name may hold any
    other line separator."""
    source = Path(source)
    # Snapshots this process took may still be on their way to the disk.
    wait_for_saves()
    if source.is_file() and not _looks_like_text(source):
        raise ValueError(
            f"{source} is not a dump: give a level-1 dump directory or a JSON-lines "
            "records file (AOTI_DEBUG_PRINTER_FORMAT=jsonl)"
        )
    if source.is_dir():
        manifest = source / "manifest.jsonl"
        if not manifest.exists():
            raise FileNotFoundError(f"{source} has no manifest.jsonl (is it a level-1 dump?)")
        text, base, strict = manifest, source, True
    elif source.exists():
        # A records file may hold other output between records (text
        # records, a program's prints): only JSON objects are read.
        text, base, strict = source, source.parent, False
    else:
        raise FileNotFoundError(f"no such dump: {source}")
    data = text.read_bytes()
    lines = data.split(b"\n")
    torn_tail = bool(lines[-1])  # the last line has no newline: its write was cut off
    if not torn_tail:
        lines.pop()
    dump = Dump(source)
    unversioned = 0
    runs: dict[tuple, int] = {}
    per_rank: dict[int, int] = {}
    for n, raw_line in enumerate(lines, 1):
        where = f"{text}:{n}"
        try:
            record = _record(raw_line, where, strict)
        except ValueError:
            if torn_tail and n == len(lines):
                dump.skipped.append(
                    f"{where}: a torn last line (the run was killed or the disk "
                    "filled while writing it), skipped"
                )
                log.warning("%s", dump.skipped[-1])
                break
            raise
        if record is None:
            continue
        unversioned += record.schema is None
        if not isinstance(record, (TensorRecord, EnvironmentRecord)):
            dump.events.append(record)
            continue
        # Runs numbered per process and rank in order of appearance, so the
        # first run of one dump meets the first of the other. pid alone is
        # not unique: two containers' processes may both be 1.
        if record.run_id not in runs:
            runs[record.run_id] = per_rank.get(record.rank, 0)
            per_rank[record.rank] = runs[record.run_id] + 1
        run = runs[record.run_id]
        if isinstance(record, EnvironmentRecord):
            dump.environments.setdefault((record.rank, run), record)
            continue
        file = record.file
        if file is not None and not _is_plain_file_name(file):
            raise ValueError(f"{where}: names a file outside the dump ({file!r}); refused")
        dump.records.append(Record(record, run, base / file if file is not None else None))
    if unversioned:
        log.warning(
            "%s: %d record(s) written before records carried a schema version, read as "
            "version %d",
            source,
            unversioned,
            records.RECORD_SCHEMA,
        )
    if not dump.records and not dump.events:
        raise ValueError(f"{source} holds no record of aoti-debug-printer")
    if strict:
        listed = {r.path.name for r in dump.records if r.path is not None}
        orphans = sorted(p.name for p in source.glob("*.pt") if p.name not in listed)
        if orphans:
            dump.skipped.append(
                f"{source}: {len(orphans)} snapshot(s) no manifest line lists (a run killed "
                f"between saving and listing them), not read: {', '.join(orphans[:3])}"
                + (", ..." if len(orphans) > 3 else "")
            )
            log.warning("%s", dump.skipped[-1])
    return dump


def _record(line: bytes, where: str, strict: bool) -> records.Record | None:
    """One line's record; None for a line a records file may hold besides
    records; a ValueError naming `where` for anything else, a newer schema
    among it."""
    try:
        text = line.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ValueError(f"{where}: not UTF-8 ({e.reason} at byte {e.start})") from None
    if not text.strip() or (not strict and not text.lstrip().startswith("{")):
        return None
    try:
        raw = json.loads(text)
    except json.JSONDecodeError as e:
        raise ValueError(f"{where}: not a JSON record ({e})") from None
    try:
        return records.parse(raw)
    except ValueError as e:
        raise ValueError(f"{where}: {e}") from None


def _is_plain_file_name(name) -> bool:
    """A file directly in the dump directory: no separator, no "..", nothing
    absolute."""
    return (
        isinstance(name, str)
        and name not in ("", ".", "..")
        and "/" not in name
        and "\\" not in name
        and "\0" not in name
    )


def _looks_like_text(path: Path) -> bool:
    # Archives (.pt2, .pt, zip) hold NUL bytes in their first block; records never do.
    with open(path, "rb") as f:
        return b"\0" not in f.read(4096)
