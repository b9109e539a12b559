"""The shim through its Python bindings: statistics, saving, bad input."""

from __future__ import annotations

import json
import math
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch

import aoti_debug_printer
from aoti_debug_printer import _C, load_dump
from aoti_debug_printer.records import Reason

ROOT = Path(__file__).resolve().parents[1]

FLOAT8 = [
    getattr(torch, n)
    for n in ("float8_e4m3fn", "float8_e5m2", "float8_e4m3fnuz", "float8_e5m2fnuz")
    if hasattr(torch, n)
]
DTYPES = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.float16,
    torch.bfloat16,
    torch.float32,
    torch.float64,
    *FLOAT8,
]


def reference(t: torch.Tensor) -> dict:
    """What the statistics must be, from plain torch ops in float64."""
    x = t.to(torch.float64) if not t.is_complex() else t.abs().to(torch.float64)
    finite = x[torch.isfinite(x)]
    return {
        "numel": t.numel(),
        "finite": finite.numel(),
        "nan": int(torch.isnan(x).sum()),
        "pos_inf": int((x == math.inf).sum()),
        "neg_inf": int((x == -math.inf).sum()),
        "zeros": int((finite == 0).sum()),
        "min": finite.min().item() if finite.numel() else None,
        "max": finite.max().item() if finite.numel() else None,
        "mean": finite.mean().item() if finite.numel() else math.nan,
        "std": finite.std().item() if finite.numel() > 1 else math.nan,
    }


def check(t: torch.Tensor) -> None:
    got, want = aoti_debug_printer.stats(t), reference(t)
    for key, value in want.items():
        if isinstance(value, float) and math.isnan(value):
            assert math.isnan(got[key]), key
        elif isinstance(value, float):
            assert got[key] == pytest.approx(value, rel=1e-9, abs=1e-12), key
        else:
            assert got[key] == value, key


@pytest.mark.parametrize("dtype", DTYPES, ids=str)
def test_stats_every_dtype(dtype):
    torch.manual_seed(0)
    t = (torch.randn(37, 11) * 8).to(dtype)
    check(t)
    check(t.t())  # non-contiguous
    check(t[::3, 1:])


@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32, torch.float64])
def test_stats_nonfinite(dtype):
    t = torch.tensor([1.0, math.nan, math.inf, -math.inf, 0.0, -2.5], dtype=dtype)
    check(t)
    check(torch.full((5,), math.nan, dtype=dtype))
    # Large enough for the vectorized blocks, with non-finite values in some.
    big = torch.randn(300_007, dtype=torch.float64)
    big[::1009], big[5::7919], big[7::50021] = math.nan, math.inf, -math.inf
    big[:20] = math.nan  # the shift is taken after these
    check(big.to(dtype))
    check(big.to(dtype)[1::3])  # strided: the scalar path, same answers
    # Blocks of finite values beside one that holds a NaN and an Inf: each
    # block is summed by its own loop (docs/internals.md), one answer.
    mixed = torch.randn(100_000, dtype=torch.float64)
    mixed[40_000], mixed[40_001] = math.nan, -math.inf
    check(mixed.to(dtype))


@pytest.mark.parametrize("dtype", [torch.complex64, torch.complex128])
def test_stats_complex_are_of_the_modulus(dtype):
    t = torch.complex(torch.tensor([3.0, 0.0, -1.0]), torch.tensor([4.0, 0.0, 0.0])).to(dtype)
    got = aoti_debug_printer.stats(t)
    assert got["of"] == "modulus"
    assert (got["min"], got["max"], got["zeros"]) == (0.0, 5.0, 1)


def test_stats_shapes():
    check(torch.empty(0, 4))
    check(torch.tensor(3.5))
    check(torch.tensor([1.0, 2.0]).expand(500, 2))  # zero stride
    big = torch.randn(2_000_003)  # several parallel chunks
    check(big)
    i64 = torch.tensor([-(2**62) - 1, 2**62 + 1])
    assert aoti_debug_printer.stats(i64)["min"] == -(2**62) - 1  # exact, not via double


def test_dtypes_without_element_values_say_so():
    bits = torch.zeros(4, dtype=torch.uint8).view(torch.bits8)
    assert aoti_debug_printer.stats(bits)["unsupported"] == "no statistics for dtype Bits8"


WIDE = [
    torch.uint16,
    torch.uint32,
    torch.uint64,
    torch.complex32,
    torch.complex64,
    torch.complex128,
]


def random_bits(dtype: torch.dtype, shape=(6, 7)) -> torch.Tensor:
    g = torch.Generator().manual_seed(3)
    if dtype == torch.bool:
        return torch.randint(0, 2, shape, generator=g).bool()
    size = torch.empty(0, dtype=dtype).element_size()
    raw = torch.randint(0, 256, (*shape[:-1], shape[-1] * size), generator=g, dtype=torch.uint8)
    return raw.view(dtype)


@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")
@pytest.mark.parametrize("dtype", DTYPES + WIDE, ids=str)
def test_fingerprint_changes_with_any_element_and_the_statistics_pass_agrees(dtype):
    """The guard's fingerprint: the statistics pass computes the same one
    (so the guard needs no second read), and changing any single element,
    or swapping two, changes it."""
    t = random_bits(dtype)
    print_of = _C.fingerprint(t)
    assert print_of == _C.stats(t, fingerprint=True)["fingerprint"] == _C.fingerprint(t.clone())
    for view in (t.t(), t[:, ::2], t[1:], t[:1].expand(5, 7), t[2, 3]):
        assert _C.fingerprint(view) == _C.stats(view, fingerprint=True)["fingerprint"] is not None

    # Element by element, as bytes (bool: flipping the low bit keeps it a bool).
    def as_rows(x):
        return x.reshape(-1).view(torch.uint8).view(x.numel(), -1)

    flip = 0x01 if dtype == torch.bool else 0x10
    for i in range(t.numel()):
        changed = t.clone()
        as_rows(changed)[i, -1] ^= flip
        assert _C.fingerprint(changed) != print_of, i
    rows = as_rows(t.clone())
    j = next(j for j in range(1, t.numel()) if not torch.equal(rows[j], rows[0]))
    swapped = rows.clone()
    swapped[[0, j]] = rows[[j, 0]]
    assert _C.fingerprint(swapped.view(dtype)) != print_of == _C.fingerprint(rows.view(dtype))


def test_fingerprint_of_what_has_no_statistics_is_none():
    bits = torch.zeros(4, dtype=torch.uint8).view(torch.bits8)
    assert _C.fingerprint(bits) is None and _C.stats(bits, fingerprint=True)["fingerprint"] is None
    assert _C.fingerprint(torch.zeros(3).to_sparse()) is None
    # Empty tensors of two dtypes differ; of one dtype, they agree.
    assert _C.fingerprint(torch.empty(0)) != _C.fingerprint(torch.empty(0, dtype=torch.int32))
    assert _C.fingerprint(torch.empty(0, 3)) == _C.fingerprint(torch.empty(3, 0))


def test_record_of_every_python_value(records):
    _C.begin_run()
    _C.launch(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "k", 0)
    for arg, value in [("t", torch.ones(2)), ("i", 3), ("f", 0.25), ("b", True), ("n", None)]:
        _C.record(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "k", arg, value)
    recs = {r["arg"]: r for r in records()}
    assert recs["t"]["event"] == "tensor" and recs["t"]["values"] == ["1", "1"]
    assert (recs["i"]["type"], recs["i"]["value"]) == ("int64", "3")
    assert (recs["f"]["type"], recs["f"]["value"]) == ("float64", "0.25")
    assert (recs["b"]["type"], recs["b"]["value"]) == ("bool", "true")
    assert recs["n"]["problem"] == "null tensor handle"


@pytest.mark.parametrize(
    "kernel,arg", [("../../escape", "../x"), ("a/b\\c:d", "\x00\n*?"), ("." * 300, "")]
)
def test_hostile_names_stay_in_the_dump_dir(dump_dir, kernel, arg):
    _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, kernel, arg, torch.arange(3))
    files = [p for p in dump_dir.parent.rglob("*") if p.is_file()]
    assert {p.parent for p in files} == {dump_dir}
    saved = [p for p in files if p.suffix == ".pt"]
    assert len(saved) == 1 and len(saved[0].name) < 255 and not saved[0].name.startswith(".")
    assert torch.equal(torch.load(saved[0], weights_only=True), torch.arange(3))
    line = json.loads((dump_dir / "manifest.jsonl").read_text().splitlines()[-1])
    assert (line["kernel"], line["arg"], line["file"]) == (kernel, arg, saved[0].name)


def saved_line(dump_dir: Path, arg: str, t: torch.Tensor, queued: bool) -> dict:
    """Saves `t` at level 1 and returns its manifest line, once written:
    on this thread (outside a run that ends, as the trap's records), or
    queued to the saver's thread (a run that ends)."""
    if queued:
        _C.begin_run(True)
        _C.launch(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, "k", 0)
    _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, "k", arg, t)
    if queued:
        _C.end_run()
        _C.wait_for_saves()
    return json.loads((dump_dir / "manifest.jsonl").read_text().splitlines()[-1])


@pytest.mark.parametrize("queued", [False, True], ids=["on_its_thread", "queued"])
def test_saved_views_round_trip(dump_dir, queued):
    base = torch.arange(24.0).reshape(4, 6)
    for arg, view in [
        ("t", base.t()),
        ("slice", base[1:3, ::2]),
        ("exp", torch.ones(1).expand(5)),
        ("bf16", base.to(torch.bfloat16)),
        ("e", torch.empty(0, 2)),
    ]:
        entry = saved_line(dump_dir, arg, view, queued)
        assert entry["arg"] == arg and entry["stats"]["finite"] == view.numel()
        back = torch.load(dump_dir / entry["file"], weights_only=True)
        assert back.dtype == view.dtype and back.shape == view.shape
        assert torch.equal(back, view)
        # A slice is saved without the rest of its buffer.
        assert back.untyped_storage().nbytes() <= max(view.numel(), 1) * view.element_size() * 6


# Queues level-1 snapshots, forks while they are written, and saves in both
# processes: the child starts with no queue of the parent's (their files are
# the parent's to write), and its own are written before it exits.
FORKS_WHILE_SAVING = """
import os, sys, torch, aoti_debug_printer
from aoti_debug_printer import _C, load_dump
torch.set_num_threads(1)  # libgomp's threads do not survive a fork: a child's op would hang

def save(dump, n):
    aoti_debug_printer.set_option("dump_dir", dump)
    for i in range(n):
        _C.begin_run(True)
        _C.launch(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, f"k{i}", 0)
        _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, f"k{i}", "x", torch.full((1 << 18,), float(i)))
        _C.end_run()

save(sys.argv[1] + "/parent", 40)
pid = os.fork()
if pid == 0:
    save(sys.argv[1] + "/child", 10)
    _C.wait_for_saves()
    os._exit(0)
save(sys.argv[1] + "/parent", 10)
assert os.waitpid(pid, 0)[1] == 0
for name, n in (("parent", 50), ("child", 10)):
    d = load_dump(sys.argv[1] + "/" + name)
    assert not d.skipped and sorted(r.load()[0].item() for r in d.records) == sorted(
        float(i) for i in list(range(40 if name == "parent" else 0)) + list(range(10))
    ), name
print("ok")
"""


def test_a_fork_while_snapshots_are_queued_keeps_both_processes_dumps(tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", FORKS_WHILE_SAVING, tmp_path],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-3000:]


SAVED_DTYPES = (
    DTYPES
    + [torch.uint16, torch.uint32, torch.uint64, torch.complex32, torch.complex64, torch.complex128]
    + [getattr(torch, n) for n in ("float8_e8m0fnu",) if hasattr(torch, n)]
)


# LibTorch names a storage class that Python lacks for the newer dtypes; the
# saver writes those as Python's torch.save would (seen with float8 on the H100).
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")
@pytest.mark.parametrize("queued", [False, True], ids=["on_its_thread", "queued"])
@pytest.mark.parametrize("dtype", SAVED_DTYPES, ids=str)
def test_every_dtype_saves_for_torch_load(dump_dir, dtype, queued):
    base = (torch.randn(6, 10, generator=torch.Generator().manual_seed(0)) * 4).abs().to(dtype)
    for arg, view in [
        ("whole", base),
        ("view", base.t()[2:, 1::2]),
        ("scalar", base[1, 1]),
        ("empty", base[:0]),
    ]:
        entry = saved_line(dump_dir, arg, view, queued)
        assert entry["arg"] == arg
        back = torch.load(dump_dir / entry["file"], weights_only=True)
        assert (back.dtype, back.shape, back.device.type) == (dtype, view.shape, "cpu"), arg
        # Bit for bit: float8 has no torch.equal.
        assert (
            back.reshape(-1).view(torch.uint8).tolist()
            == view.reshape(-1).view(torch.uint8).tolist()
        ), arg


def test_options_validate():
    with pytest.raises(ValueError, match="unknown option"):
        aoti_debug_printer.set_option("colour", "red")
    with pytest.raises(ValueError, match="max_values"):
        aoti_debug_printer.set_option("max_values", "many")
    before = aoti_debug_printer.get_option("max_values")
    with pytest.raises(ZeroDivisionError), aoti_debug_printer.options(max_values=3, trap=1):
        assert aoti_debug_printer.get_option("max_values") == "3"
        raise ZeroDivisionError  # options() restores on an error too
    assert aoti_debug_printer.get_option("max_values") == before
    assert aoti_debug_printer.get_option("trap") == "off"
    for bad in ("-1", "lots", "nan", "1e12"):
        with pytest.raises(ValueError, match="save_memory must be a size in MiB"):
            aoti_debug_printer.set_option("save_memory", bad)
    # A size in MiB reads back as the same number of bytes.
    with aoti_debug_printer.options(save_memory="0.00005"):
        assert float(aoti_debug_printer.get_option("save_memory")) * 2**20 == 52
    assert aoti_debug_printer.get_option("save_memory") == "512"
    keys = [key for key, _, _ in aoti_debug_printer.option_table()]
    assert {"output", "format", "dump_dir", "level", "kernels", "trap", "ranks"} <= set(keys)


def test_option_values_are_read_one_way():
    """Switches take the usual spellings in any case (Python's True too),
    surrounding whitespace is dropped for every option, and a NUL is an
    error, never a value cut short (output="x\\0.evil" would write to x)."""
    from aoti_debug_printer.inductor.switches import OFF, ON

    with aoti_debug_printer.options():
        for spelling in sorted(ON | OFF):
            for written in (spelling, spelling.upper(), f" {spelling} "):
                aoti_debug_printer.set_option("trap", written)
                assert aoti_debug_printer.get_option("trap") == ("on" if spelling in ON else "off")
        aoti_debug_printer.set_option("trap", True)
        assert aoti_debug_printer.get_option("trap") == "on"
        with pytest.raises(ValueError, match="1/0, on/off, true/false or yes/no"):
            aoti_debug_printer.set_option("trap", "maybe")
        for written in (" 2", "2 ", "\t2\n"):
            aoti_debug_printer.set_option("max_values", written)
            assert aoti_debug_printer.get_option("max_values") == "2"
        before = aoti_debug_printer.get_option("output")
        with pytest.raises(ValueError, match="NUL"):
            aoti_debug_printer.set_option("output", "x\0.evil")
        assert aoti_debug_printer.get_option("output") == before


def test_a_misspelt_variable_is_named_with_the_nearest_one():
    code = "import torch, aoti_debug_printer as a; print(a.get_option('level'))"
    done = subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, "AOTI_DEBUG_PRINTER_LEVLE": "2"},
    )
    assert done.returncode == 0 and done.stdout.split() == ["-1"], done.stderr
    assert done.stderr.count("AOTI_DEBUG_PRINTER_LEVLE") == 1
    assert "did you mean AOTI_DEBUG_PRINTER_LEVEL?" in done.stderr


def test_threads_write_whole_records(records):
    def work(i):
        _C.begin_run()
        t = torch.full((8,), float(i))
        for _ in range(50):
            _C.launch(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "k", 0)
            _C.record(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "k", f"t{i}", t)

    threads = [threading.Thread(target=work, args=(i,)) for i in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    recs = records()  # every line parses as JSON: nothing interleaved
    assert len(recs) == 300
    for i in range(6):
        mine = [r for r in recs if r["arg"] == f"t{i}"]
        assert [r["launch"] for r in mine] == list(range(50))
        assert all(r["values"] == [str(i)] * 8 for r in mine)


def test_the_headers_codes_are_mirrored_once_and_used_by_the_codegen():
    """The C header defines every code generated code passes (the compiled
    level among them, as itself); _C exports them, _C.pyi mirrors them, and
    the codegen writes _C's numbers."""
    from aoti_debug_printer.inductor import codegen as _codegen
    from aoti_debug_printer.inductor import provenance as _provenance

    header = (ROOT / "csrc/include/aoti_debug_printer.h").read_text()
    defined = {
        name: int(value)
        for name, value in re.findall(r"^\s*AOTI_DEBUG_PRINTER_(\w+) =\s*(\d+),", header, re.M)
    }
    for name in ("ABI_VERSION", "RECORD_SCHEMA"):
        defined[name] = int(re.search(rf"#define AOTI_DEBUG_PRINTER_{name} (\d+)", header)[1])
    # Reason codes, as strings.
    defined.update(re.findall(r'^#define AOTI_DEBUG_PRINTER_(\w+) "(\w+)"', header, re.M))
    stub = (ROOT / "python/aoti_debug_printer/_C.pyi").read_text()
    mirrored = {name: int(v) for name, v in re.findall(r"^(\w+): Literal\[(\d+)\]", stub, re.M)}
    mirrored.update(re.findall(r'^(\w+): Literal\["(\w+)"\]', stub, re.M))
    exported = {name for name in dir(_C) if name.isupper()}
    # STOPPED_BY_* are return codes of the C functions, not passed by Python.
    returned = {name for name in defined if name.startswith("STOPPED_BY_")}
    assert len(returned) == 5
    assert exported == set(mirrored) == set(defined) - returned
    for name in exported:
        assert getattr(_C, name) == mirrored[name] == defined[name], name
    for name in (
        "LEVEL_SAVE",
        "LEVEL_PRINT",
        "LEVEL_KERNEL_NAMES",
        "BEFORE_LAUNCH",
        "AFTER_LAUNCH",
        "MODEL_INPUT",
        "ANNOUNCE",
        "UNSELECTED",
        "WRITES_UNSEEN",
        "RECORDS_END",
        "RECORDS_CONTINUE",
        "CONSTANTS_HOLD",
    ):
        assert getattr(_codegen, name) == getattr(_C, name), name
    # The constant's reason, as the record schema spells it.
    assert Reason.CONSTANT.why() == _C.WHY_CONSTANT
    for name in ("ROLE_UNKNOWN", "ROLE_READ", "ROLE_WRITE", "ROLE_READ_WRITE", "ROLE_ACCUMULATE"):
        assert getattr(_provenance, name) == getattr(_C, name), name
    # Upstream's levels, as the codegen names them, are the header's.
    levels = _codegen.IntermediateValueDebuggingLevel
    assert [levels(str(n)).code for n in range(4)] == [
        None,
        _C.LEVEL_SAVE,
        _C.LEVEL_PRINT,
        _C.LEVEL_KERNEL_NAMES,
    ]


# A process that saves 16 MiB snapshots into argv[1] until it is killed: on
# its own thread (a run that never ends, as the trap's), or, with
# SAVER_QUEUED=1, queued to the saver's thread (runs that end).
SAVER = """
import os, sys, torch, aoti_debug_printer
from aoti_debug_printer import _C
queued = os.environ.get("SAVER_QUEUED") == "1"
with aoti_debug_printer.options(dump_dir=sys.argv[1]):
    _C.begin_run()
    print("saving", flush=True)
    for i in range(int(sys.argv[2]) if len(sys.argv) > 2 else 10**9):
        if queued:
            _C.begin_run(True)
        _C.launch(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, f"k{i}", 0)
        _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, f"k{i}", "x", torch.full((4 << 20,), float(i)))
        if queued:
            _C.end_run()
"""

SAVING = pytest.mark.parametrize("queued", ["0", "1"], ids=["on_its_thread", "queued"])


@SAVING
def test_a_run_killed_while_saving_loses_nothing_the_next_run_can_keep(tmp_path, queued):
    """SIGKILL at random points of saving, again and again, then at once a
    run into the same directory: it removes the unfinished temporary files (saying
    so), every listed snapshot loads, and one saved but never listed is
    reported by the reader, not silently dropped. Snapshots still queued
    at the kill are lost, never a listed one."""
    dump = tmp_path / "dump"
    rng = random.Random(0)
    env = {**os.environ, "SAVER_QUEUED": queued}
    for _ in range(6):
        p = subprocess.Popen([sys.executable, "-c", SAVER, dump], stdout=subprocess.PIPE, env=env)
        assert p.stdout.readline().strip() == b"saving"
        time.sleep(rng.uniform(0.05, 0.6))
        p.send_signal(signal.SIGKILL)
        p.wait()
    leftovers = list(dump.glob(".tmp-*.pt"))
    # The next run comes at once: the lock, not the files' age, says their
    # writers are gone.
    done = subprocess.run(
        [sys.executable, "-c", SAVER, dump, "1"], capture_output=True, text=True, env=env
    )
    assert done.returncode == 0, done.stderr
    assert not list(dump.glob(".tmp-*.pt"))
    if leftovers:
        assert "note: removed" in done.stderr and "killed while saving" in done.stderr
    d = load_dump(dump)
    assert not [line for line in d.skipped if "torn" in line]
    assert len(d.records) >= 7
    for r in d.records:
        assert r.load().numel() == 4 << 20
    listed = {r.path.name for r in d.records}
    orphans = [p.name for p in dump.glob("*.pt") if p.name not in listed]
    assert bool(orphans) == any("no manifest line lists" in line for line in d.skipped)


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
def test_two_processes_with_one_pid_keep_their_runs_apart(tmp_path):
    """Two containers' processes are both PID 1: their records carry a
    process token, and the reader keeps two runs."""
    dump = tmp_path / "dump"
    for _ in range(2):
        done = subprocess.run(
            ["unshare", "-p", "-f", "--mount-proc", sys.executable, "-c", SAVER, dump, "2"],
            capture_output=True,
            text=True,
        )
        if done.returncode != 0 and "unshare" in done.stderr:
            pytest.skip(f"no PID namespace here: {done.stderr.strip().splitlines()[-1]}")
        assert done.returncode == 0, done.stderr
    d = load_dump(dump)
    assert {r.tensor.pid for r in d.records} == {1}
    assert len({r.tensor.process for r in d.records}) == 2
    assert sorted({r.run for r in d.records}) == [0, 1] and len(d.records) == 4


FULL_DISK = """
set -e
mount -t tmpfs -o size=1m tmpfs "$1"
head -c 300000 /dev/zero > "$1/filler"
python -c "$2" "$1/dump" 200 2> "$1/../first.err"
rm "$1/filler"
python -c "$2" "$1/dump" 5
python -c "
import sys, json
from aoti_debug_printer import load_dump
d = load_dump(sys.argv[1])
print(json.dumps({'records': len(d.records), 'skipped': d.skipped,
                  'unsaved': sum(bool(r.tensor.unsaved) for r in d.records),
                  'loaded': sum(r.path is not None and r.load().numel() == 4 << 20
                                for r in d.records)}))
" "$1/dump"
"""


@pytest.mark.skipif(shutil.which("unshare") is None, reason="needs util-linux's unshare")
@SAVING
def test_a_full_disk_keeps_every_whole_record_and_the_next_run_appends_cleanly(tmp_path, queued):
    """Saving into a 1 MiB tmpfs until it is full: one error line, the
    manifest holds only whole lines, a snapshot that did not fit keeps its
    record (with why it has no file), and once space is freed the next
    run's records are read after them."""
    small = SAVER.replace("(4 << 20,)", "(20000,)")
    mnt = tmp_path / "mnt"
    mnt.mkdir()
    done = subprocess.run(
        [
            "unshare",
            "-m",
            "bash",
            "-c",
            FULL_DISK.replace("4 << 20", "20000"),
            "full-disk",
            mnt,
            small,
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "SAVER_QUEUED": queued},
    )
    if done.returncode != 0 and ("unshare" in done.stderr or "mount" in done.stderr):
        pytest.skip(f"no mount namespace or tmpfs here: {done.stderr.strip().splitlines()[-1]}")
    assert done.returncode == 0, done.stderr
    first = (tmp_path / "first.err").read_text()
    assert "No space left on device" in first and first.count("ERROR") <= 2
    result = json.loads(done.stdout.strip().splitlines()[-1])
    assert result["skipped"] == [] and result["loaded"] >= 6 and result["unsaved"] >= 1
    assert result["records"] == result["loaded"] + result["unsaved"]


# The kernel filter's documented forms: (spec, kernel, selected).
FILTER_CONFORMANCE = [
    ("", "cpp_fused_add_0", True),
    ("cpp_fused_add_0", "cpp_fused_add_0", True),
    ("cpp_fused_add_0", "cpp_fused_add_1", False),
    ("CPP_FUSED_ADD_0", "cpp_fused_add_0", True),
    ("cpp_fused_*", "cpp_fused_relu_3", True),
    ("cpp_fused_*", "triton_poi_fused_0", False),
    ("triton_?oi_*", "triton_poi_fused_0", True),
    ("{cpp_fused_*, aoti_torch_cpu_mm_out}", "aoti_torch_cpu_mm_out", True),
    ("{cpp_fused_*, aoti_torch_cpu_mm_out}", "cpp_fused_gelu_1", True),
    ("{cpp_fused_*, aoti_torch_cpu_mm_out}", "aoti_torch_cpu_addmm_out", False),
    ("a,{b}", "b", True),
    ("  a ,  b*  ", "bc", True),
    ("mylib::*", "mylib::scale_rows", True),
    (",,", "anything", True),
]


@pytest.mark.parametrize(("spec", "kernel", "selected"), FILTER_CONFORMANCE)
def test_one_kernel_filter_grammar_at_compile_and_at_run_time(spec, kernel, selected, records):
    from aoti_debug_printer.inductor.filter import KernelFilter

    # Compile time: the codegen's filter.
    assert KernelFilter.parse(spec)(kernel) is selected
    # Run time: a record of that kernel is written or not.
    with aoti_debug_printer.options(kernels=spec):
        _C.begin_run()
        _C.launch(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, kernel, 0)
        _C.record(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, kernel, "x", torch.ones(2))
        _C.launch(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, kernel, 0)
        _C.end_run()
    assert bool([r for r in records() if r["event"] == "tensor"]) is selected
