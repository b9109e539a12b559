"""CUDA: device statistics, every kernel kind in both wrappers, the CUDA
error check, ranks. Skipped where no GPU is present; test/gpu/run.sh runs
them (and the rest of the suite) on a CUDA machine.

Tests that share a compiled package share an xdist group, so that with
`-n N --dist loadgroup` each package is compiled once, in parallel with the
others."""

from __future__ import annotations

import concurrent.futures
import json
import os
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest
import torch
from conftest import level1_lines, wrapper_source

import aoti_debug_printer
from aoti_debug_printer import _C

pytestmark = pytest.mark.gpu
HERE = Path(__file__).resolve().parent


def compile_gpu(name: str, level: int, path: Path, kernels: str | None = None) -> Path:
    from testmodels import gpu

    model, inputs = gpu.build(name)
    patch = {
        "aot_inductor.debug_intermediate_value_printer": str(level),
        "aot_inductor.filtered_kernel_names": kernels,
    }
    aoti_debug_printer.install()
    with torch._inductor.config.patch(patch):
        exported = torch.export.export(model, inputs)
        return Path(torch._inductor.aoti_compile_and_package(exported, package_path=str(path)))


@pytest.fixture(scope="session")
def gpu_package(tmp_path_factory):
    cache: dict[tuple, Path] = {}

    def get(name: str, level: int, kernels: str | None = None) -> Path:
        key = (name, level, kernels)
        if key not in cache:
            cache[key] = compile_gpu(
                name, level, tmp_path_factory.mktemp("pt2") / f"{name}-L{level}.pt2", kernels
            )
        return cache[key]

    return get


def run_package(path: Path, name: str):
    from testmodels import gpu

    _, inputs = gpu.build(name)
    out = torch._inductor.aoti_load_package(str(path))(*inputs)
    torch.cuda.synchronize()
    return out


# -- statistics on the device ----------------------------------------------------

FLOATS = [torch.float16, torch.bfloat16, torch.float32, torch.float64]
FLOAT8 = [
    t
    for t in (
        getattr(torch, n, None)
        for n in (
            "float8_e4m3fn",
            "float8_e5m2",
            "float8_e4m3fnuz",
            "float8_e5m2fnuz",
            "float8_e8m0fnu",
        )
    )
    if t
]
INTS = [
    torch.bool,
    torch.uint8,
    torch.int8,
    torch.int16,
    torch.int32,
    torch.int64,
    torch.uint16,
    torch.uint32,
    torch.uint64,
]
COMPLEX = [torch.complex32, torch.complex64, torch.complex128]


def sample(dtype: torch.dtype, n: int = 10_007) -> torch.Tensor:
    g = torch.Generator().manual_seed(1)
    x = torch.randn(n, generator=g, dtype=torch.float64) * 50
    if dtype.is_complex:
        t = torch.complex(x, x.flip(0)).to(dtype)
    elif dtype.is_floating_point:
        t = x.to(dtype)
        if dtype != getattr(torch, "float8_e8m0fnu", None):
            t[7] = float("nan")
            t[100] = float("inf")
            t[200] = float("-inf")
            t[300:310] = 0
    elif dtype == torch.bool:
        t = x > 0
    elif dtype in (torch.uint16, torch.uint32, torch.uint64):
        t = x.abs().to(torch.int64).to(dtype)
    else:
        info = torch.iinfo(dtype)
        t = x.clamp(info.min, info.max).to(dtype)
    return t


def assert_same_stats(device_stats: dict, host_stats: dict):
    for key in ("numel", "finite", "nan", "pos_inf", "neg_inf", "zeros", "of", "unsupported"):
        assert device_stats[key] == host_stats[key], key
    # Exact, but for complex moduli: CUDA's hypot and glibc's may differ in
    # the last bit.
    exact = device_stats["of"] == "value"
    for key in ("min", "max", "absmax"):
        if exact:
            assert device_stats[key] == host_stats[key], key
        else:
            assert device_stats[key] == pytest.approx(host_stats[key], rel=1e-15), key
    for key in ("mean", "std"):
        assert device_stats[key] == pytest.approx(host_stats[key], rel=1e-9, abs=1e-12, nan_ok=True)


# torch warns on every complex32 tensor it creates; pytest's "error" filter
# would make that warning the test's failure (seen on the H100).
@pytest.mark.filterwarnings("ignore:ComplexHalf support is experimental:UserWarning")
@pytest.mark.parametrize("dtype", FLOATS + FLOAT8 + INTS + COMPLEX, ids=str)
@pytest.mark.parametrize(
    "layout", ["contiguous", "offset", "transposed", "strided", "expanded", "scalar"]
)
def test_device_stats_equal_host_stats(dtype, layout):
    t = sample(dtype).cuda()
    if layout == "offset":
        t = t[3:]  # not 16-byte aligned: the vector loop's head and tail
    elif layout == "transposed":
        t = t[:10_000].view(100, 100).t()  # dense, permuted: read as one flat array
    elif layout == "strided":
        t = t[:10_000].view(100, 100)[::3, 1::2]
    elif layout == "expanded":
        t = t[5:6].expand(4000)  # zero stride
    elif layout == "scalar":
        t = t[11].clone()
    assert _C.has_device_stats(t)
    on_device = _C.stats(t, "device", fingerprint=True)
    assert_same_stats(on_device, aoti_debug_printer.stats(t.cpu(), on="host"))
    # The write guard's fingerprint from the same pass is the CPU's, for the
    # same view of the same bytes (positions count from the first element).
    same_layout = torch.empty(0, dtype=t.dtype).set_(
        t.untyped_storage().cpu(), t.storage_offset(), t.size(), t.stride()
    )
    assert on_device["fingerprint"] == _C.fingerprint(same_layout) == _C.fingerprint(t)


def test_device_stats_of_empty_and_huge_strided_tensors():
    empty = aoti_debug_printer.stats(torch.empty(0, 3, device="cuda"), on="device")
    assert empty["numel"] == 0 and empty["finite"] == 0 and empty["min"] is None
    # More than 2**31 elements through a non-dense view: 64-bit indexing
    # splits the iteration; the statistics must still cover every element.
    big = torch.zeros(2, 2**31 + 64, dtype=torch.uint8, device="cuda")
    big[0, 5] = 7
    big[1, 2**31 + 10] = 9
    view = big[:, :-1]
    s = aoti_debug_printer.stats(view, on="device")
    assert s["numel"] == view.numel()
    assert (s["min"], s["max"], s["zeros"]) == (0, 9, view.numel() - 2)
    assert s["mean"] == pytest.approx(16 / view.numel(), rel=1e-9)
    del big, view


def test_device_stats_from_threads_on_their_own_streams():
    # Each host thread keeps its own pinned buffer and device scratch;
    # threads on different streams must never see each other's partials.
    import concurrent.futures

    tensors = [
        sample(dtype).cuda()[: 1000 + 997 * i]
        for i, dtype in enumerate([torch.float32, torch.bfloat16, torch.int32, torch.float16] * 2)
    ]
    tensors.append(torch.randn(3000, 3000, device="cuda").t()[::2])  # strided, several blocks
    want = [aoti_debug_printer.stats(t.cpu(), on="host") for t in tensors]

    def work(seed: int) -> list[dict]:
        with torch.cuda.stream(torch.cuda.Stream()):
            order = [(seed + k) % len(tensors) for k in range(3 * len(tensors))]
            return [(i, aoti_debug_printer.stats(tensors[i], on="device")) for i in order]

    with concurrent.futures.ThreadPoolExecutor(6) as pool:
        for results in pool.map(work, range(6)):
            for i, got in results:
                assert_same_stats(got, want[i])


def test_small_cuda_tensor_record_carries_values(records):
    from aoti_debug_printer import _C

    t = torch.tensor([[1.5, -2.0], [float("nan"), 4.0]], device="cuda", dtype=torch.bfloat16)
    _C.record(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "k", "x", t)
    (r,) = records()
    assert r["device"] == "cuda:0" and r["dtype"] == "bfloat16"
    assert r["values"] == ["1.5", "-2", "nan", "4"]
    assert (r["stats"]["nan"], r["stats"]["min"], r["stats"]["max"]) == (1, -2.0, 4.0)


# -- the AOTI C++ wrapper and the JIT Python wrapper on CUDA --------------------------


@pytest.mark.xdist_group("mixed-2")
def test_aoti_level2_records_every_kernel_kind_and_results_are_unchanged(gpu_package, records):
    source = wrapper_source(gpu_package("mixed", 2))
    out = run_package(gpu_package("mixed", 2), "mixed")
    recs = [r for r in records() if r["event"] == "tensor"]
    kernels = {r["kernel"] for r in recs}
    assert any(k.startswith("triton_") for k in kernels), kernels
    assert any("shifted_copy" in k for k in kernels), kernels  # user-defined Triton
    assert any(
        k.startswith("aoti_torch_cuda_") or "mm" in k for k in kernels if not k.startswith("triton")
    ), kernels
    assert [r["arg"] for r in recs if r["phase"] == "model_input"]
    assert {r["device"] for r in recs} == {"cuda:0"}
    dtypes = {r["dtype"] for r in recs if r["phase"] == "after_launch"}
    assert {"float32", "bfloat16", "float16", "float8_e4m3fn"} <= dtypes
    # The model's outputs, recorded after their kernels, have their statistics.
    for t in out:
        want = aoti_debug_printer.stats(t, on="host")
        match = [
            r
            for r in recs
            if r["phase"] == "after_launch"
            and r["dtype"] == str(t.dtype)[6:]
            and r["shape"] == list(t.shape)
            and r["stats"]["finite"] == want["finite"]
            and r["stats"]["max"] == pytest.approx(want["max"])
        ]
        assert match, t.dtype
    reference = run_package(gpu_package("mixed", 0), "mixed")
    for a, b in zip(out, reference):
        assert torch.equal(a.view(torch.uint8), b.view(torch.uint8))
    assert "aoti_debug_printer" in source


@pytest.mark.xdist_group("mixed-1")
def test_aoti_level1_saves_cuda_tensors_that_load_without_a_gpu(gpu_package, dump_dir):
    run_package(gpu_package("mixed", 1), "mixed")
    aoti_debug_printer.wait_for_saves()  # the saver's thread writes behind the model
    manifest = [json.loads(x) for x in (dump_dir / "manifest.jsonl").read_text().splitlines()]
    tensors = [r for r in manifest if r["event"] == "tensor"]
    assert {r["device"] for r in tensors} == {"cuda:0"}
    assert any("shifted_copy" in r["kernel"] for r in tensors)
    # A process that sees no GPU reads every snapshot.
    code = (
        "import json, sys, torch; d = sys.argv[1]; n = 0\n"
        "for line in open(d + '/manifest.jsonl'):\n"
        "    r = json.loads(line)\n"
        "    if 'file' not in r: continue\n"
        "    t = torch.load(d + '/' + r['file'], weights_only=True)\n"
        "    assert t.device.type == 'cpu' and list(t.shape) == r['shape'], r\n"
        "    n += 1\n"
        "print(n)"
    )
    env = dict(os.environ, CUDA_VISIBLE_DEVICES="")
    done = subprocess.run(
        [sys.executable, "-c", code, str(dump_dir)], env=env, capture_output=True, text=True
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert int(done.stdout) == len([r for r in tensors if "file" in r]) > 0
    # Only outputs before launch (leftover memory) have no file.
    assert {(r["phase"], r["role"]) for r in tensors if "file" not in r} <= {
        ("before_launch", "write")
    }


@pytest.mark.xdist_group("mixed-1")
def test_aoti_level1_queued_cuda_copies_write_what_the_models_thread_would(gpu_package, tmp_path):
    """CUDA tensors staged in pinned memory, their copies queued on the
    stream, and written by the saver's thread (in memory larger than the
    run, and of a few snapshots), against the same runs saved on the
    model's thread: the same lines, in order, the same bytes."""
    from testmodels import gpu

    compiled = torch._inductor.aoti_load_package(str(gpu_package("mixed", 1)))
    _, inputs = gpu.build("mixed")
    dumps = {}
    for memory in ("0", "512", "0.002"):
        with aoti_debug_printer.options(dump_dir=tmp_path / memory, save_memory=memory):
            for _ in range(2):
                compiled(*inputs)
        dumps[memory] = level1_lines(tmp_path / memory)
    assert dumps["0"]
    for memory, lines in dumps.items():
        # Said precisely where it fails: the first line that differs, and how.
        assert len(lines) == len(dumps["0"]), memory
        for i, (a, b) in enumerate(zip(dumps["0"], lines)):
            differ = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            assert not differ, (memory, i, a["kernel"], a["arg"], a["phase"], differ)


@pytest.mark.xdist_group("mixed-3")
def test_aoti_level3_filter_and_sync(gpu_package, capfd):
    path = gpu_package("mixed", 3, kernels="triton_*")
    out = run_package(path, "mixed")
    text = capfd.readouterr().out
    named = re.findall(r"^\[aoti-debug-printer\] (before|after)_launch (\S+) ", text, re.M)
    assert named and all(k.startswith("triton_") for _, k in named)
    assert "CUDA ERROR" not in text
    assert len(out) == 4


@pytest.mark.xdist_group("jit")
def test_jit_python_wrapper_records_cuda_kernels(records):
    from testmodels import gpu

    model, inputs = gpu.build("mixed")
    torch._dynamo.reset()
    aoti_debug_printer.install()
    try:
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": "2"}):
            got = torch.compile(model)(*inputs)
    finally:
        torch._dynamo.reset()
    want = model(*inputs)
    torch.testing.assert_close(got[0], want[0], rtol=1e-4, atol=1e-4)
    recs = [r for r in records() if r["event"] == "tensor"]
    kernels = {r["kernel"] for r in recs}
    assert any(k.startswith("triton_") for k in kernels), kernels
    assert any("shifted_copy" in k for k in kernels), kernels
    assert "extern_kernels.mm" in kernels
    assert any(r["phase"] == "model_input" for r in recs)
    assert "cuda:0" in {r["device"] for r in recs}


# -- level 2 without a sync per tensor -------------------------------------------------


def assert_same_records(got: list[dict], want: list[dict]) -> None:
    """Equal but for what differs between runs and processes."""

    def key(r: dict) -> dict:
        return {k: v for k, v in r.items() if k not in ("run", "pid", "process")}

    for i, (g, w) in enumerate(zip(got, want)):
        assert key(g) == key(w), f"record {i} differs:\n{json.dumps(g)}\n{json.dumps(w)}"
    assert len(got) == len(want)


@pytest.mark.xdist_group("deep-2")
def test_aoti_level2_records_that_wait_for_nothing_equal_the_synchronous_ones(gpu_package, records):
    """In a run of the AOTI wrapper a CUDA record queues its statistics and
    does not wait; by the time the run returns every record is written, in
    order, the same as when each waits for its statistics (sync=on). (The
    24-block model: no buffer of it is read before something wrote it, so
    its records are the same in every run.)"""
    path = gpu_package("deep", 2)
    # Its 48 kernels (24 addmm, 24 fused Triton kernels) follow one another
    # with only buffers made between: the records of each kernel's end and
    # the next one's start go to the GPU together (RECORDS_CONTINUE; 47
    # take-backs with torch 2.11).
    assert wrapper_source(path).count("records continue below") > 40
    run_package(path, "deep")
    queued = records()
    with aoti_debug_printer.options(sync="on"):
        run_package(path, "deep")
    waited = records()[len(queued) :]
    assert len(queued) > 200 and {r["run"] for r in queued} != {r["run"] for r in waited}
    assert_same_records(queued, waited)
    tensors = [r for r in queued if r["event"] == "tensor"]
    assert all(r["stats"] for r in tensors if r["role"] != "write" or r["phase"] == "after_launch")


def test_queued_records_fill_the_ring_change_streams_and_keep_their_order(records):
    """More records than the ring holds, on two streams, of non-contiguous
    tensors freed (and their memory reused) right after the record: every
    record is written, in order, with the statistics of the tensor as it was."""
    from aoti_debug_printer import _C

    g = torch.Generator(device="cuda").manual_seed(0)
    side = torch.cuda.Stream()
    kept = []
    count = 12_000  # 512 bytes a slot: the 4 MiB ring fills once
    _C.begin_run(with_end=True)
    try:
        for i in range(count):
            t = torch.randn(8, 8, device="cuda", generator=g)[:, ::2]
            if i % 3 == 0:
                t[0, 0] = float("nan")
            kept.append(t.clone())
            if i % 1000 == 999:
                side.wait_stream(torch.cuda.current_stream())
                with torch.cuda.stream(side):
                    _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", f"t{i}", t)
                torch.cuda.current_stream().wait_stream(side)
            else:
                _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", f"t{i}", t)
            del t  # its memory goes to the next randn, after the record's kernels
    finally:
        _C.end_run()
    recs = records()
    assert [r["arg"] for r in recs] == [f"t{i}" for i in range(count)]
    for i in (0, 1, 2, 999, 1000, 8191, 8192, 8193, count - 1):
        want = aoti_debug_printer.stats(kept[i], on="host")
        got = recs[i]
        assert got["stats"]["nan"] == want["nan"] == (1 if i % 3 == 0 else 0), i
        assert (got["stats"]["min"], got["stats"]["max"]) == (want["min"], want["max"]), i
        values = kept[i].flatten().tolist()
        assert len(got["values"]) == 32
        assert [float(v) for v in got["values"]] == pytest.approx(values, rel=1e-5, nan_ok=True), i


def test_a_queued_record_does_not_keep_its_tensor_alive(records):
    """A record waiting for its statistics holds no reference to its tensor:
    freed right after the record, the tensor's memory goes back to the
    allocator at once, as with the printer off (dense and strided views take
    different kernels)."""
    from aoti_debug_printer import _C

    torch.cuda.synchronize()
    before = torch.cuda.memory_allocated()
    _C.begin_run(with_end=True)
    try:
        for name in ("dense", "strided"):
            t = torch.randn(1024, 1024, device="cuda")
            view = t if name == "dense" else t[:, ::2]
            _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", name, view)
            del t, view
            assert torch.cuda.memory_allocated() == before, name
    finally:
        _C.end_run()
    recs = records()
    assert [r["arg"] for r in recs] == ["dense", "strided"]
    assert [r["stats"]["finite"] for r in recs] == [1024 * 1024, 1024 * 512]
    assert all(0.9 < r["stats"]["std"] < 1.1 for r in recs)


def test_queued_records_are_written_off_the_models_thread_while_the_run_goes_on(records):
    """The thread that queues records never formats them: the writer thread
    writes each once its statistics land, while the run still goes on. The
    thread hands its records over at its launch events, and every 32
    records; here it takes no launch event and no flush, only the end of
    its last records (records_end, as the wrapper's launch events end); the
    run's end then finds nothing left, and the records are in order."""
    from aoti_debug_printer import _C

    tensors = [torch.full((64, 64), float(i), device="cuda") for i in range(50)]
    torch.cuda.synchronize()
    _C.begin_run(with_end=True)
    try:
        for i, t in enumerate(tensors):
            _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", f"t{i}", t)
        _C.records_end()
        torch.cuda.synchronize()
        deadline = time.monotonic() + 10
        while len(records()) < len(tensors) and time.monotonic() < deadline:
            time.sleep(0.01)
        written_before_the_end = len(records())
    finally:
        _C.end_run()
    assert written_before_the_end == len(tensors)
    recs = records()
    assert [r["arg"] for r in recs] == [f"t{i}" for i in range(len(tensors))]
    assert [r["stats"]["mean"] for r in recs] == [float(i) for i in range(len(tensors))]


def test_threads_queueing_records_at_once_each_keep_their_order(records):
    """Four threads queue records of their own runs at once, on their own
    streams, with one synchronous record (of a CPU tensor) among them: the one
    writer writes every record once, whole, each thread's in its order."""
    from aoti_debug_printer import _C

    def work(name: str) -> None:
        with torch.cuda.stream(torch.cuda.Stream()):
            t = torch.randn(256, 256, device="cuda")
            _C.begin_run(with_end=True)
            try:
                for i in range(300):
                    _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, name, f"t{i}", t)
                    if i == 150:
                        _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, name, "n", torch.ones(3))
            finally:
                _C.end_run()

    threads = [threading.Thread(target=work, args=(f"k{j}",)) for j in range(4)]
    for th in threads:
        th.start()
    for th in threads:
        th.join()
    recs = records()
    assert len(recs) == 4 * 301
    for j in range(4):
        mine = [r["arg"] for r in recs if r["kernel"] == f"k{j}"]
        want = [f"t{i}" for i in range(300)]
        want.insert(151, "n")
        assert mine == want, j
        assert len({r["run"] for r in recs if r["kernel"] == f"k{j}"}) == 1


def batch_of_tensors() -> dict[str, torch.Tensor]:
    """One launch event's arguments of every kind the batch meets: dtypes
    mixed and repeated, more of one dtype than one launch takes, tensors
    whose values are printed, views that do not start on 16 bytes, and
    those that take their own launch (strided; dense but permuted, with
    values)."""
    g = torch.Generator(device="cuda").manual_seed(1)
    out: dict[str, torch.Tensor] = {}
    for i in range(40):  # 40 float32: two launches of that dtype
        out[f"f{i}"] = torch.randn(3 + 97 * i, device="cuda", generator=g) * (i + 1)
    out["f_nan"] = torch.tensor([1.0, float("nan"), float("inf"), -2.0], device="cuda")
    out["bf16"] = torch.randn(4096, 33, device="cuda", generator=g).bfloat16()
    out["half_offset"] = torch.randn(1001, device="cuda", generator=g).half()[3:]
    out["i64"] = torch.randint(-9, 9, (5000,), device="cuda", generator=g)
    out["bool"] = torch.rand(777, device="cuda", generator=g) > 0.5
    out["small_values"] = torch.arange(12.0, device="cuda").reshape(3, 4)
    out["permuted_values"] = torch.arange(12.0, device="cuda").reshape(3, 4).t()
    out["strided"] = torch.randn(64, 64, device="cuda", generator=g)[:, ::3]
    out["large"] = torch.randn(1 << 22, device="cuda", generator=g)
    return out


def record_all(tensors: dict[str, torch.Tensor], flags: int, end: bool = True) -> None:
    _C.launch(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", flags)
    for name, t in tensors.items():
        _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", name, t)
    if end:
        _C.records_end()


def test_a_launch_events_records_go_to_the_gpu_together_and_equal_their_own_launches(records):
    """Records after an event that says RECORDS_END wait for records_end,
    which launches the dense ones once per dtype (32 at most a launch): the
    records are bit for bit those of each tensor's own launch (records
    that wait for nothing and those that wait, sync=on), in order."""
    from torch.profiler import ProfilerActivity, profile

    tensors = batch_of_tensors()
    torch.cuda.synchronize()

    def batched_run() -> None:
        _C.begin_run(with_end=True)
        try:
            record_all(tensors, _C.RECORDS_END)
        finally:
            _C.end_run()

    # A fresh thread: the device scratch is the thread's own, and whether it
    # has had some must not depend on which tests ran before on this worker.
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        with concurrent.futures.ThreadPoolExecutor(max_workers=1) as pool:
            pool.submit(batched_run).result()
    batched = records()
    _C.begin_run(with_end=True)
    try:
        record_all(tensors, 0)
    finally:
        _C.end_run()
    alone = records()[len(batched) :]
    with aoti_debug_printer.options(sync="on"):
        record_all(tensors, 0)
    waited = records()[len(batched) + len(alone) :]
    assert [r["arg"] for r in batched] == list(tensors)
    assert_same_records(batched, alone)
    assert_same_records(batched, waited)
    by_arg = {r["arg"]: r for r in batched}
    assert by_arg["small_values"]["values"] == [str(float(v)).removesuffix(".0") for v in range(12)]
    assert by_arg["f_nan"]["stats"]["nan"] == 1 and by_arg["f_nan"]["stats"]["pos_inf"] == 1
    kernels = [e.name for e in prof.events() if e.device_type.name == "CUDA"]
    batches = [re.search(r"batch_partials<([^>]*)>", k) for k in kernels]
    # The permuted tensor's values need device scratch this thread has not
    # had: the records ahead of it are written first, their batch launched
    # (float32 42 tensors: two launches; bfloat16, half, int64, bool); the
    # last float32 tensor opens the next batch.
    assert sorted(b[1] for b in batches if b) == sorted(
        ["float", "float", "c10::BFloat16", "c10::Half", "long", "bool", "float"]
    ), kernels
    # Their own launches: the strided view and the permuted one with values.
    assert sum("strided_partials" in k for k in kernels) == 1, kernels
    assert sum("dense_partials" in k for k in kernels) == 1, kernels


def test_records_left_in_the_batch_are_launched_when_the_thread_waits_for_them(records):
    """A run that ends (or writes out its records) before records_end, and
    a launch event that comes first: the batch goes to the GPU then, and
    every record has its statistics."""
    tensors = {f"t{i}": torch.full((100,), float(i), device="cuda") for i in range(5)}
    _C.begin_run(with_end=True)
    try:
        record_all(tensors, _C.RECORDS_END, end=False)
    finally:
        _C.end_run()
    _C.begin_run(with_end=True)
    try:
        record_all(tensors, _C.RECORDS_END, end=False)
        _C.launch(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "next", 0)
        for t in tensors.values():
            t.zero_()  # after the next launch event: the records must not see it
    finally:
        _C.end_run()
    recs = [r for r in records() if r["event"] == "tensor"]
    assert [r["stats"]["mean"] for r in recs] == [float(i) for i in range(5)] * 2


def test_records_that_continue_into_the_next_event_keep_their_tensors(records):
    """Records that continue into the next launch event (RECORDS_CONTINUE:
    the generated code releases and makes buffers between, and leaves out
    records_end) keep their tensors until the batch is launched: a buffer
    released between is not handed out again before then."""
    _C.begin_run(with_end=True)
    try:
        _C.launch(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "a", _C.RECORDS_END)
        t = torch.full((1 << 20,), 3.0, device="cuda")
        released = t.data_ptr()
        _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "a", "t", t)
        del t
        u = torch.empty(1 << 20, device="cuda")
        assert u.data_ptr() != released
        u.fill_(7.0)
        _C.launch(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "b", _C.RECORDS_END | _C.RECORDS_CONTINUE)
        _C.record(_C.LEVEL_PRINT, _C.BEFORE_LAUNCH, "b", "u", u)
        _C.records_end()
    finally:
        _C.end_run()
    assert [(r["arg"], r["stats"]["mean"]) for r in records()] == [("t", 3.0), ("u", 7.0)]


def test_a_tensor_recorded_again_where_nothing_ran_between_is_read_once(records):
    """As on the host (Catch2's [aoti_debug_printer_launch_at_level] case): a
    kernel's output recorded after its launch and the next kernel's input
    before its own, with nothing run between (RECORDS_CONTINUE), share one
    queued read. Another view, a freed tensor's address handed out again,
    and the next event are read again."""
    length = (3 << 18) + 37  # a size of its own in the caching allocator
    t = torch.full((length,), 2.0, device="cuda")
    head = t[: length // 2]
    p, before, after, read = _C.LEVEL_PRINT, _C.BEFORE_LAUNCH, _C.AFTER_LAUNCH, _C.ROLE_READ
    torch.cuda.synchronize()
    torch.cuda.empty_cache()
    _C.begin_run(with_end=True)
    try:
        _C.launch(p, after, "k1", 0)
        _C.record(p, after, "k1", "out", t, role=_C.ROLE_WRITE)
        # The flag says nothing ran between: this change, which the flag
        # rules out in generated code, shows that `t` is not read again.
        t.fill_(3.0)
        _C.launch(p, before, "k2", _C.RECORDS_CONTINUE)
        _C.record(p, before, "k2", "in", t, role=read)
        _C.record(p, before, "k2", "head", head, role=read)
        freed = torch.full((length + 64,), 4.0, device="cuda")
        address = freed.data_ptr()
        _C.record(p, before, "k2", "freed", freed, role=read)
        del freed  # the stretch holds no memory: the block is free at once
        again = torch.full((length + 64,), 5.0, device="cuda")
        assert again.data_ptr() == address
        _C.record(p, before, "k2", "again", again, role=read)
        _C.launch(p, after, "k2", 0)
        # Any other event ends the stretch: `t` is read again.
        _C.launch(p, before, "k3", 0)
        _C.record(p, before, "k3", "in", t, role=read)
    finally:
        _C.end_run()
    mins = {(r["kernel"], r["arg"]): r["stats"]["min"] for r in records()}
    assert mins == {
        ("k1", "out"): 2.0,
        ("k2", "in"): 2.0,
        ("k2", "head"): 3.0,
        ("k2", "freed"): 4.0,
        ("k2", "again"): 5.0,
        ("k3", "in"): 3.0,
    }


# -- pinpointing an illegal memory access ---------------------------------------------

FAR = 1 << 38  # elements past the end: a terabyte away, unmapped


def run_child(path: Path, far: int, **env) -> subprocess.CompletedProcess:
    child_env = {k: v for k, v in os.environ.items() if k != "CUDA_LAUNCH_BLOCKING"}
    child_env.update(env)
    return subprocess.run(
        [
            sys.executable,
            str(HERE / "testmodels" / "gpu.py"),
            "run",
            str(path),
            "far_write",
            "--far",
            str(far),
        ],
        env=child_env,
        capture_output=True,
        text=True,
        timeout=300,
    )


@pytest.mark.xdist_group("far-3")
def test_illegal_memory_access_names_the_faulty_kernel(gpu_package, tmp_path):
    path = gpu_package("far_write", 3)
    ok = run_child(path, 0)
    assert ok.returncode == 0, ok.stderr[-3000:]
    assert "CUDA ERROR" not in ok.stdout
    before = re.findall(r"before_launch (\S+) ", ok.stdout)
    assert len(before) >= 3 and any("shifted_copy" in k for k in before), before
    bad = next(k for k in before if "shifted_copy" in k)

    dump = tmp_path / "replay"
    crash = run_child(
        path, FAR, AOTI_DEBUG_PRINTER_REPLAY="1", AOTI_DEBUG_PRINTER_DUMP_DIR=str(dump)
    )
    output = crash.stdout + crash.stderr
    assert crash.returncode != 0
    errors = re.findall(
        r"^\[aoti-debug-printer\] CUDA ERROR at (\w+) (\S+): (\w+)", crash.stdout, re.M
    )
    assert errors == [("after_launch", bad, "cudaErrorIllegalAddress")], output[-4000:]
    # Its neighbour before completed and was checked; the one after never ran.
    i = before.index(bad)
    assert f"after_launch {before[i - 1]} " in crash.stdout
    assert f"before_launch {before[i + 1]} " not in crash.stdout
    # Its arguments at launch, with their pointers inside their allocations.
    record = crash.stdout.split("CUDA ERROR", 1)[1]
    assert re.search(r"data_ptr=0x[0-9a-f]+", record)
    assert "inside; allocation=" in record and "OUTSIDE" not in record
    # The run fails with the stop's own words, which name the kernel.
    assert f"aoti-debug-printer: CUDA error after kernel {bad} (launch " in output
    # Replay: the failing kernel's inputs, saved before launch.
    saved = sorted(p.name for p in dump.glob("*.pt"))
    assert saved and all(bad in name and "-before-" in name for name in saved), saved
    for p in dump.glob("*.pt"):
        assert torch.load(p, weights_only=True).device.type == "cpu"


@pytest.mark.xdist_group("far-2")
def test_level2_records_up_to_a_faulting_kernel_are_written(gpu_package):
    """Level 2 with no sync: records queue their statistics. When a kernel
    faults, every record taken before it is still written with its
    statistics, and no record queued after it claims any."""
    path = gpu_package("far_write", 2)
    ok = run_child(path, 0, AOTI_DEBUG_PRINTER_FORMAT="jsonl")
    assert ok.returncode == 0, ok.stderr[-3000:]
    good = [json.loads(x) for x in ok.stdout.splitlines() if x.startswith("{")]
    bad = next(r["kernel"] for r in good if "shifted_copy" in r["kernel"])
    crash = run_child(path, FAR, AOTI_DEBUG_PRINTER_FORMAT="jsonl")
    assert crash.returncode != 0
    recs = [json.loads(x) for x in crash.stdout.splitlines() if x.startswith("{")]
    bad_launch = next(r["launch"] for r in recs if r["kernel"] == bad)

    def before_fault(rs: list[dict]) -> list[dict]:
        return [
            r
            for r in rs
            if r["launch"] < bad_launch
            or (r["launch"] == bad_launch and r["phase"] == "before_launch")
        ]

    # Every record taken before the faulting kernel ran, as in the good run
    # (but for contents that differ between the runs: `far` itself, and the
    # output the user kernel is given, which holds leftover memory).
    assert len(before_fault(recs)) >= 4

    def identity(rs: list[dict]) -> list[tuple]:
        return [
            (r["phase"], r["kernel"], r["arg"], r["launch"], r["role"], r.get("shape")) for r in rs
        ]

    assert identity(before_fault(recs)) == identity(before_fault(good))
    earlier = [
        r for r in before_fault(recs) if r["launch"] < bad_launch and r.get("dtype") != "int64"
    ]
    assert_same_records(
        earlier,
        [r for r in before_fault(good) if r["launch"] < bad_launch and r.get("dtype") != "int64"],
    )
    assert all(
        r["stats"] for r in before_fault(recs) if r["event"] == "tensor" and r["role"] != "write"
    )
    launched = [r for r in recs if r not in before_fault(recs)]
    unwritten = "output, not yet written: no statistics"
    for r in (r for r in launched if r["event"] == "tensor" and r.get("problem") != unwritten):
        assert r["stats"] is None and r["problem"].startswith("statistics not computed"), r


# -- ranks ------------------------------------------------------------------------------


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.xdist_group("ranks")
def test_two_nccl_ranks_record_and_save_apart(gpu_package, tmp_path):
    import test_ranks

    test_ranks.check_two_ranks(gpu_package("mixed", 1), tmp_path, backend="nccl", model="mixed")
    done = test_ranks.cli("compare", tmp_path / "shared", "--ranks")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence across ranks 0, 1" in done.stdout


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.xdist_group("ranks")
def test_two_nccl_ranks_part_at_the_op_one_of_them_computes_wrong(package, tmp_path):
    """Two ranks on two GPUs, an op that adds 1e-3 on rank 1 only: named at
    the op; with two ranks there is no majority, and the output says so."""
    import test_ranks

    dump = tmp_path / "dump"
    path = package("rank_shift", 1, device="cuda")
    # The trap on, nothing to trap: the ranks watch the job's store and
    # still finish as they would.
    test_ranks.run_ranks(
        path, "rank_shift", "nccl", dump, 2, ADP_WRONG_RANK="1", AOTI_DEBUG_PRINTER_TRAP="1"
    )
    done = test_ranks.cli("compare", dump, "--ranks")
    assert done.returncode == 1, done.stdout + done.stderr
    assert (
        "FIRST DIVERGENCE ACROSS RANKS: ranks 0 and 1 part at node rank_shift: "
        "adp_models::rank_shift" in done.stdout
    ), done.stdout
    assert "no majority tells which of them is wrong" in done.stdout
    print(done.stdout)


@pytest.mark.skipif(torch.cuda.device_count() < 3, reason="needs 3 GPUs")
@pytest.mark.xdist_group("ranks")
def test_three_nccl_ranks_name_the_rank_that_leaves_the_others(package, tmp_path):
    """The op wrong on rank 0 of three GPUs: ranks 1 and 2 are the
    majority, and rank 0 is named, at the op."""
    import test_ranks

    dump = tmp_path / "dump"
    path = package("rank_shift", 1, device="cuda")
    test_ranks.run_ranks(path, "rank_shift", "nccl", dump, 3, ADP_WRONG_RANK="0")
    done = test_ranks.cli("compare", dump, "--ranks")
    assert done.returncode == 1, done.stdout + done.stderr
    assert "reference: ranks 1, 2" in done.stdout, done.stdout
    assert (
        "FIRST DIVERGENCE ACROSS RANKS: rank 0 leaves ranks 1, 2 at node rank_shift: "
        "adp_models::rank_shift" in done.stdout
    ), done.stdout
    print(done.stdout)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.xdist_group("ranks")
def test_a_trap_on_one_nccl_rank_ends_the_job_within_seconds(package, tmp_path):
    """Without the store, rank 0 would wait in its all_reduce for rank 1
    until NCCL's timeout."""
    import test_ranks

    path = package("rank_shift", 1, device="cuda")
    test_ranks.check_a_trap_ends_the_job(path, tmp_path, "nccl", 2)


@pytest.mark.skipif(torch.cuda.device_count() < 2, reason="needs 2 GPUs")
@pytest.mark.xdist_group("ranks")
def test_a_tensor_parallel_run_on_two_nccl_ranks_against_one_gpu(package, tmp_path):
    import test_ranks

    test_ranks.check_tensor_parallel(package, tmp_path, "nccl", "cuda")
