"""CPU benchmark, all measured side by side in this one run:

1. one inference of a model with many kernels: printer off, our level 2,
   our level 2 with the statistics kept inside the C++ kernels
   (AOTI_DEBUG_PRINTER_STATS_IN_KERNELS), our level 2 switched off at run time, our level 2 with the NaN/Inf trap,
   PyTorch's built-in level 2, our level 3 (records go to /dev/null for
   all), and our level 1, each run
   saving into a fresh directory synced to the disk, its bytes per second
   against one sequential write to the same disk;
2. where one record's time goes on the CPU: its statistics alone against
   the whole record (statistics, description, formatting, the write to
   /dev/null), for the model's activations and for a small tensor whose
   values are printed; with the records one inference writes, what
   formatting and writing cost of the level-2 overhead;
3. per-tensor statistics of one large tensor: ours against PyTorch's
   built-in aoti_torch_print_tensor_handle (called from libtorch itself),
   and that tensor saved by level 1, against the disk's sequential write;
4. level 1 of a deep model (100 blocks of 512x512 activations: 400 MiB a
   run) to the disk, its snapshots written behind the model (the default)
   and on the model's thread (save_memory=0), synced, against the disk.

    python bench/bench_cpu.py [--blocks 24] [--runs 20] [--numel 67108864] [--deep-blocks 100]
"""

from __future__ import annotations

import argparse
import contextlib
import ctypes
import json
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer
from aoti_debug_printer import _C

IN_KERNELS = "AOTI_DEBUG_PRINTER_STATS_IN_KERNELS"


class ManyKernels(torch.nn.Module):
    def __init__(self, blocks: int, width: int) -> None:
        super().__init__()
        self.layers = torch.nn.ModuleList(torch.nn.Linear(width, width) for _ in range(blocks))

    def forward(self, x):
        for layer in self.layers:
            x = torch.nn.functional.layer_norm(torch.nn.functional.gelu(layer(x)), x.shape[-1:])
        return x


@contextlib.contextmanager
def stdout_to_devnull():
    """Both printers write to fd 1; time them writing to /dev/null. (Python's
    own buffered output is flushed first, or it would land there too.)"""
    sys.stdout.flush()
    saved = os.dup(1)
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, 1)
    try:
        yield
    finally:
        sys.stdout.flush()
        os.dup2(saved, 1)
        os.close(saved)
        os.close(devnull)


def median_ms(fn, runs: int, warmup: int = 2) -> float:
    for _ in range(warmup):
        fn()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def per_call_us(fn, calls: int = 2000, rounds: int = 5) -> float:
    return median_ms(lambda: [fn() for _ in range(calls)], rounds) * 1e3 / calls


def disk_write_bandwidth(directory: Path, nbytes: int = 2**30) -> float:
    """Bytes per second of one sequential write of `nbytes`, synced to the
    disk, in `directory`: what level 1's saving is held to."""
    block = os.urandom(2**24)
    path = directory / "disk-bandwidth"
    start = time.perf_counter()
    with open(path, "wb") as f:
        for _ in range(nbytes // len(block)):
            f.write(block)
        f.flush()
        os.fsync(f.fileno())
    seconds = time.perf_counter() - start
    path.unlink()
    return nbytes / seconds


def sync_file_system(path: Path) -> None:
    """Every file of the file system holding `path` written to the disk
    (Linux's syncfs; where it is missing, sync: every file system)."""
    syncfs = getattr(ctypes.CDLL(None, use_errno=True), "syncfs", None)
    fd = os.open(path, os.O_RDONLY)
    try:
        if syncfs is None or syncfs(fd) != 0:
            os.sync()
    finally:
        os.close(fd)


def time_level_1(
    run, inputs, directory: Path, runs: int, synchronize=lambda: None
) -> tuple[float, int]:
    """(ms, bytes saved) of the fastest of `runs` level-1 runs, each into a
    fresh dump directory synced to the disk before the clock stops, removed
    after it (a large model saves gigabytes per run). `synchronize` waits
    for the device (torch.cuda.synchronize for a CUDA model).

    One syncfs writes the whole dump back, as the one fsync of
    disk_write_bandwidth does its file: an fsync per file would add a
    journal commit per snapshot, which the library never asks for."""
    best, saved = float("inf"), 0
    for i in range(runs + 1):  # the first one warms up
        dump = directory / f"level1-{i}"
        aoti_debug_printer.set_option("dump_dir", str(dump))
        synchronize()
        start = time.perf_counter()
        run(*inputs)
        synchronize()
        aoti_debug_printer.wait_for_saves()  # the saver's thread writes behind the model
        sync_file_system(directory)
        ms = (time.perf_counter() - start) * 1e3
        files = [p for p in dump.rglob("*") if p.is_file()]
        if i:
            best, saved = min(best, ms), sum(p.stat().st_size for p in files)
        shutil.rmtree(dump)
    return best, saved


def level_1_line(saved: int, ms: float, disk: float) -> str:
    """Level 1's bytes per second against the disk's sequential write."""
    rate = saved / (ms / 1e3)
    return (
        f"  level 1: {saved / 2**20:.1f} MiB saved per run, {rate / 1e9:.2f} GB/s; "
        f"the disk's sequential write {disk / 1e9:.2f} GB/s ({rate / disk:.0%} of it)"
    )


def records_per_inference(run, x) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "records.jsonl"
        with aoti_debug_printer.options(output=out, format="jsonl"):
            run(x)
        return sum(json.loads(line)["event"] == "tensor" for line in out.read_text().splitlines())


def bench_record_cost(tensors: dict[str, torch.Tensor], records: int, overhead_ms: float) -> None:
    print("\nWhere one record's time goes (µs per call, records to /dev/null):")
    print(f"  {'tensor':<28}{'statistics':>12}{'record':>10}{'formatting and writing':>24}")
    costs = {}
    with stdout_to_devnull():
        for name, t in tensors.items():
            # Interleaved rounds, as above.
            stats, whole = [], []
            for _ in range(3):
                stats.append(per_call_us(lambda t=t: _C.stats(t)))
                whole.append(
                    per_call_us(lambda t=t: _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", "t", t))
                )
            costs[name] = (min(stats), min(whole))
    for name, (stats, whole) in costs.items():
        print(
            f"  {name:<28}{stats:>12.2f}{whole:>10.2f}{whole - stats:>13.2f} ({(whole - stats) / whole:.0%})"
        )
    stats, whole = next(iter(costs.values()))
    print(
        f"  one inference writes {records} records: at the activations' rate formatting and writing take "
        f"{records * (whole - stats) / 1e3:.3f} ms of its {overhead_ms:.3f} ms level-2 overhead"
    )


def compile_at(model, x, level: str, ours: bool, path: Path, in_kernels: bool = False) -> Path:
    """`in_kernels`: the C++ kernels keep the statistics of what they store
    (AOTI_DEBUG_PRINTER_STATS_IN_KERNELS, set for this compile only)."""
    (aoti_debug_printer.install if ours else aoti_debug_printer.uninstall)()
    before = os.environ.pop(IN_KERNELS, None)
    if in_kernels:
        os.environ[IN_KERNELS] = "1"
    try:
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": level}):
            ep = torch.export.export(model, (x,))
            return Path(torch._inductor.aoti_compile_and_package(ep, package_path=str(path)))
    finally:
        os.environ.pop(IN_KERNELS, None)
        if before is not None:
            os.environ[IN_KERNELS] = before


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--blocks", type=int, default=24)
    parser.add_argument("--width", type=int, default=256)
    parser.add_argument("--batch", type=int, default=64)
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--numel", type=int, default=64 * 2**20, help="elements of the large tensor"
    )
    parser.add_argument(
        "--deep-blocks",
        type=int,
        default=100,
        help="blocks of the model whose level-1 dump is timed to the disk; 0: none",
    )
    parser.add_argument("--deep-width", type=int, default=512)
    parser.add_argument("--deep-batch", type=int, default=512)
    args = parser.parse_args()

    torch.manual_seed(0)
    model = ManyKernels(args.blocks, args.width).eval()
    x = torch.randn(args.batch, args.width)
    with tempfile.TemporaryDirectory() as tmp:
        variants = {
            "off (level 0)": compile_at(model, x, "0", True, Path(tmp) / "off.pt2"),
            "ours, level 2": compile_at(model, x, "2", True, Path(tmp) / "ours.pt2"),
            "ours, level 2, stats in kernels": compile_at(
                model, x, "2", True, Path(tmp) / "kept.pt2", in_kernels=True
            ),
            "built-in, level 2": compile_at(model, x, "2", False, Path(tmp) / "builtin.pt2"),
            "ours, level 3": compile_at(model, x, "3", True, Path(tmp) / "ours3.pt2"),
            "ours, level 1": compile_at(model, x, "1", True, Path(tmp) / "ours1.pt2"),
        }
        aoti_debug_printer.install()
        runners = {name: torch._inductor.aoti_load_package(str(p)) for name, p in variants.items()}
        # Level 1 saves into fresh directories beside the disk's own
        # sequential write, measured here too.
        directory = Path(tempfile.mkdtemp(prefix="bench-level1-"))
        level1_ms, saved = time_level_1(runners.pop("ours, level 1"), (x,), directory, 3)
        disk = disk_write_bandwidth(directory, 2**29)
        shutil.rmtree(directory)
        aoti_debug_printer.set_option("output", "stdout")
        # The level-2 model again, switched off at run time (no recompiling).
        # And with its check of the inputs (the one call per input and run
        # before the first kernel) switched off.
        cases = [(name, name, -1, "stop", "0") for name in runners]
        cases.insert(2, ("ours, level 2, off at run time", "ours, level 2", 0, "stop", "0"))
        cases.insert(3, ("ours, level 2, inputs unchecked", "ours, level 2", -1, "off", "0"))
        cases.insert(4, ("ours, level 2, trap", "ours, level 2", -1, "stop", "1"))
        with stdout_to_devnull():
            # Interleaved rounds, so drift in the machine's speed hits all alike.
            results: dict[str, list[float]] = {name: [] for name, *_ in cases}
            for _ in range(3):
                for name, variant, level, input_check, trap in cases:
                    aoti_debug_printer.set_option("level", level)
                    aoti_debug_printer.set_option("input_check", input_check)
                    aoti_debug_printer.set_option("trap", trap)
                    run = runners[variant]
                    results[name].append(median_ms(lambda run=run: run(x), max(args.runs // 3, 1)))
            aoti_debug_printer.set_option("level", -1)
            aoti_debug_printer.set_option("input_check", "stop")
            aoti_debug_printer.set_option("trap", "0")
    base = min(results["off (level 0)"])
    print(f"\nOne inference, {args.blocks} blocks ({3 * args.blocks} kernels), batch {args.batch}:")
    print(f"  {'variant':<32}{'ms':>10}{'vs off':>10}{'overhead':>12}")
    for name, times in results.items():
        ms = min(times)
        print(f"  {name:<32}{ms:>10.3f}{ms / base:>9.3f}x{ms - base:>10.3f}ms")
    print(
        f"  {'ours, level 1 (saving)':<32}{level1_ms:>10.3f}{level1_ms / base:>9.3f}x{level1_ms - base:>10.3f}ms"
    )
    print(level_1_line(saved, level1_ms, disk))
    ours = min(results["ours, level 2"]) - base
    builtin = min(results["built-in, level 2"]) - base
    print(f"  level 2: our overhead / built-in overhead = {ours / builtin:.2f}")
    switched = min(results["ours, level 2, off at run time"]) / base - 1
    print(f"  level 2 switched off at run time costs {100 * switched:+.2f}% of an inference")
    checked = min(results["ours, level 2"]) / min(results["ours, level 2, inputs unchecked"]) - 1
    print(f"  level 2's check of the inputs costs {100 * checked:+.2f}% of an inference")
    trapped = min(results["ours, level 2, trap"]) / min(results["ours, level 2"]) - 1
    print(f"  the NaN/Inf trap costs {100 * trapped:+.2f}% of a level-2 inference")
    kept = min(results["ours, level 2, stats in kernels"]) - base
    print(
        f"  level 2 with the statistics in the kernels: overhead {kept / ours:.2f} of the passes'"
    )

    activation = torch.randn(args.batch, args.width)
    bench_record_cost(
        {
            f"activation {list(activation.shape)}": activation,
            "small [16], values printed": torch.randn(16),
        },
        records_per_inference(runners["ours, level 2"], x),
        ours,
    )

    big = torch.randn(args.numel)
    mib = big.numel() * big.element_size() / 2**20
    with stdout_to_devnull():
        stats_ms = median_ms(lambda: _C.stats(big), 5)
        builtin_ms = median_ms(lambda: _C.upstream_print_tensor_handle(big, "bench"), 5)
    print(
        f"\nStatistics of one float32 tensor of {mib:.0f} MiB ({torch.get_num_threads()} threads):"
    )
    print(f"  ours (one fused pass)      {stats_ms:8.1f} ms")
    print(f"  built-in print             {builtin_ms:8.1f} ms")
    print(f"  built-in / ours          = {builtin_ms / stats_ms:8.2f}")

    # The same tensor saved by level 1 alone: its one file, synced.
    directory = Path(tempfile.mkdtemp(prefix="bench-snapshot-"))
    snapshot_ms, saved = time_level_1(
        lambda t: _C.record(_C.LEVEL_SAVE, _C.AFTER_LAUNCH, "k", "t", t), (big,), directory, 3
    )
    shutil.rmtree(directory)
    print(f"\nOne level-1 snapshot of it, synced: {snapshot_ms:.1f} ms")
    print(level_1_line(saved, snapshot_ms, disk))

    if args.deep_blocks:
        bench_level_1_deep(args.deep_blocks, args.deep_width, args.deep_batch)


def file_system_of(path: Path) -> str:
    """The type of the file system holding `path` (/proc/mounts' longest
    mount point above it): a dump to tmpfs would be timed against memory."""
    best, kind = "", "unknown"
    for line in Path("/proc/mounts").read_text().splitlines():
        _, point, fs_type, *_ = line.split()
        if str(path.resolve()).startswith(point) and len(point) > len(best):
            best, kind = point, fs_type
    return kind


def bench_level_1_deep(blocks: int, width: int, batch: int) -> None:
    """Level 1 of a deep model to the disk: its snapshots written behind the
    model by the saver's thread (the default), against the same package
    saving on the model's thread (save_memory=0), interleaved, each timed
    until its files are synced, against the disk's sequential write."""
    torch.manual_seed(0)
    model = ManyKernels(blocks, width).eval()
    x = torch.randn(batch, width)
    with tempfile.TemporaryDirectory() as tmp:
        run = torch._inductor.aoti_load_package(
            str(compile_at(model, x, "1", True, Path(tmp) / "deep1.pt2"))
        )
        off = torch._inductor.aoti_load_package(
            str(compile_at(model, x, "0", True, Path(tmp) / "deep0.pt2"))
        )
    off_ms = median_ms(lambda: off(x), 3)
    directory = Path(tempfile.mkdtemp(prefix="bench-level1-deep-"))
    results: dict[str, list[tuple[float, int]]] = {"behind the model": [], "on its thread": []}
    for _ in range(2):
        for name, memory in (("behind the model", "512"), ("on its thread", "0")):
            with aoti_debug_printer.options(save_memory=memory):
                results[name].append(time_level_1(run, (x,), directory, 2))
    disk = disk_write_bandwidth(directory, 2**30)
    print(
        f"\nLevel 1 of {blocks} blocks ({width} wide, batch {batch}) to {file_system_of(directory)}, "
        f"synced (printer off: {off_ms:.1f} ms):"
    )
    for name, times in results.items():
        ms, saved = min(times)
        print(f"  saved {name:<18}{ms:>9.1f} ms  " + level_1_line(saved, ms, disk).strip())
    shutil.rmtree(directory)


if __name__ == "__main__":
    main()
