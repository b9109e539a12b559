"""GPU benchmark (CUDA), all measured side by side in this one run:

1. per-tensor statistics of float32 and bfloat16 tensors of 64 MiB to 1 GiB:
   ours against the bandwidth floor (bytes read / device-to-device copy
   bandwidth measured now) and against PyTorch's built-in level-2 print.
   "ours" and "record" wait for each tensor; "queued" is a record in a run
   that ends (as the AOTI wrapper's are): records follow one another without
   waiting, and the run's end writes them, so it is the time per record of a
   stream of them, what a model pays; "queued GPU" is the GPU's share of it
   (CUDA events around the records), without the host's last write-out;
2. one inference of each model (a model of many small kernels; ResNet-18,
   GPT-2, BERT and a 1.1B Llama, test/testmodels/real.py): printer off, our
   level 2, the built-in level 2, our level 3 with and without the sync
   after each kernel, the built-in level 3 (all printing to /dev/null), and
   the printer off with CUDA_LAUNCH_BLOCKING=1: a bare sync after every
   launch, the baseline for our level 3; then our level 1, each run saving
   into a fresh directory and synced to the disk, its bytes per second
   against one sequential write to the same disk: written behind the model
   by the saver's thread (the default), and on the model's thread
   (save_memory=0), side by side;
3. with --graphs, each model captured in a CUDA graph and replayed
   (GRAPH_ROWS): the printer off, level 2, level 2 with the trap, level 1
   saving to the disk, each replay's time and its ratio to the printer off,
   and where the time goes: the printer's own kernels' GPU time in a
   replay, and the bytes written.

    python bench/bench_gpu.py [--sizes-mib 0.0625 64 256 1024] [--runs 20] [--models ...]
        [--graphs resnet18 gpt2 [--replays 200]] [--profile]

The 64 KiB row is not a target size: it shows the fixed cost of one call
(launches, the copy back, the sync; queued: the launch and the formatting),
which is what a model's many small activations pay. --profile adds where that time goes (torch.profiler).
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import faulthandler
import json
import multiprocessing
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer
from aoti_debug_printer import _C

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from bench_cpu import (  # noqa: E402
    disk_write_bandwidth,
    level_1_line,
    stdout_to_devnull,
    time_level_1,
)


def gpu_ms(fn, runs: int, warmup: int = 3) -> float:
    """Median wall time of fn() followed by a device sync: what a caller waits."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(runs):
        start = time.perf_counter()
        fn()
        torch.cuda.synchronize()
        times.append(time.perf_counter() - start)
    return statistics.median(times) * 1e3


def queued_record_ms(t: torch.Tensor, records: int, repeats: int = 5) -> tuple[float, float]:
    """Per record, of `records` records of `t` in one run that ends, the
    medians over `repeats` runs of: the run's wall time (its end waits for
    and writes every record), and the GPU's time from the first record's
    kernel being queued to the last one's end (CUDA events)."""

    def run() -> float:
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        _C.begin_run(with_end=True)
        start.record()
        for _ in range(records):
            _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", "t", t)
        end.record()
        _C.end_run()
        end.synchronize()
        return start.elapsed_time(end)

    run()
    walls, gpus = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        started = time.perf_counter()
        gpus.append(run())
        walls.append((time.perf_counter() - started) * 1e3)
    return statistics.median(walls) / records, statistics.median(gpus) / records


def copy_bandwidth(nbytes: int = 2**30) -> float:
    """Device-to-device copy, bytes read plus written per second."""
    src = torch.empty(nbytes, dtype=torch.uint8, device="cuda")
    dst = torch.empty_like(src)
    start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
    for _ in range(3):
        dst.copy_(src)
    start.record()
    for _ in range(20):
        dst.copy_(src)
    end.record()
    end.synchronize()
    return 2 * nbytes * 20 / (start.elapsed_time(end) / 1e3)


def bench_stats(sizes_mib: list[float], runs: int) -> None:
    bw = copy_bandwidth()
    print(
        f"\nDevice-to-device copy: {bw / 1e12:.2f} TB/s (read + write); "
        f"floor = bytes / that bandwidth ({torch.cuda.get_device_name()})"
    )
    print(
        f"  {'tensor':<18}{'floor ms':>10}{'ours ms':>10}{'ours/floor':>12}"
        f"{'record ms':>11}{'queued ms':>11}{'queued/floor':>14}{'queued GPU/floor':>18}"
        f"{'built-in ms':>13}{'built-in/floor':>16}{'built-in/queued':>17}"
    )
    aoti_debug_printer.set_option("output", "stdout")
    for dtype in (torch.float32, torch.bfloat16):
        for mib in sizes_mib:
            numel = int(mib * 2**20) // torch.tensor([], dtype=dtype).element_size()
            t = torch.randn(numel, device="cuda").to(dtype)
            floor = mib * 2**20 / bw * 1e3
            ours = gpu_ms(lambda t=t: _C.stats(t, "device"), runs)
            with stdout_to_devnull():
                record = gpu_ms(
                    lambda t=t: _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", "t", t), runs
                )
                queued, queued_gpu = queued_record_ms(t, runs)
                builtin = gpu_ms(lambda t=t: _C.upstream_print_tensor_handle(t, "bench"), runs)
            name = (
                f"{str(dtype)[6:]} {mib:g} MiB"
                if mib >= 1
                else f"{str(dtype)[6:]} {mib * 1024:g} KiB"
            )
            print(
                f"  {name:<18}{floor:>10.3f}{ours:>10.3f}{ours / floor:>11.2f}x"
                f"{record:>11.3f}{queued:>11.4f}{queued / floor:>13.2f}x{queued_gpu / floor:>17.2f}x"
                f"{builtin:>13.3f}{builtin / floor:>15.1f}x{builtin / queued:>16.1f}x"
            )
            del t
            torch.cuda.empty_cache()


def profile_small_record() -> None:
    from torch.profiler import ProfilerActivity, profile

    t = torch.randn(64, 256, device="cuda")
    with stdout_to_devnull():
        for _ in range(5):
            _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", "t", t)
        torch.cuda.synchronize()
        with profile(activities=[ProfilerActivity.CPU, ProfilerActivity.CUDA]) as prof:
            for _ in range(20):
                _C.record(_C.LEVEL_PRINT, _C.AFTER_LAUNCH, "k", "t", t)
            torch.cuda.synchronize()
    print("\nWhere 20 records of a 64 KiB float32 tensor spend their time:")
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=14))


# name: (level, ours, compile-time switches). "ours, level 2" gives every
# record a statistics launch of its own (the default); "stats in kernels"
# has the Triton kernels keep the statistics of what they store.
IN_KERNELS = {"AOTI_DEBUG_PRINTER_STATS_IN_KERNELS": "1"}
VARIANTS = {
    "off (level 0)": ("0", True, {}),
    "ours, level 1": ("1", True, {}),
    "ours, level 2": ("2", True, {}),
    "ours, level 2, stats in kernels": ("2", True, IN_KERNELS),
    "built-in, level 2": ("2", False, {}),
    "ours, level 3": ("3", True, {}),
    "built-in, level 3": ("3", False, {}),
}


def build_model(name: str):
    """'deep' (test/testmodels/gpu.py: many small kernels) or a real architecture."""
    if name == "deep":
        from testmodels import gpu

        return gpu.build("deep")
    from testmodels import real

    return real.build(name)


def compile_variant(
    model_name: str, level: str, ours: bool, path: str, switches: dict | None = None
) -> str:
    """In a worker process: compile one model for CUDA, by our printer or
    the built-in, with `switches` set in the environment for this compile."""
    (aoti_debug_printer.install if ours else aoti_debug_printer.uninstall)()
    model, inputs = build_model(model_name)
    before = {k: os.environ.get(k) for k in switches or {}}
    os.environ.update(switches or {})
    try:
        with torch._inductor.config.patch({"aot_inductor.debug_intermediate_value_printer": level}):
            ep = torch.export.export(model, inputs, strict=False)
            return torch._inductor.aoti_compile_and_package(ep, package_path=path)
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def bench_models(model_names: list[str], runs: int, variants: list[str]) -> None:
    """The whole-model rows of `variants` (VARIANTS' names; the printer off
    is always one)."""
    chosen = {name: VARIANTS[name] for name in VARIANTS if name in {"off (level 0)", *variants}}
    with tempfile.TemporaryDirectory() as tmp:
        ctx = multiprocessing.get_context("spawn")
        builds = [
            (m, name, level, ours, switches)
            for m in model_names
            for name, (level, ours, switches) in chosen.items()
        ]
        with futures.ProcessPoolExecutor(
            min(len(builds), os.cpu_count() or 1), mp_context=ctx
        ) as pool:
            jobs = {
                (m, name): pool.submit(compile_variant, m, level, ours, f"{tmp}/{i}.pt2", switches)
                for i, (m, name, level, ours, switches) in enumerate(builds)
            }
            paths = {}
            for key, job in jobs.items():
                try:
                    paths[key] = job.result()
                except ImportError as e:  # torchvision or transformers missing
                    print(f"  {key[0]}: skipped ({e})")
        aoti_debug_printer.install()
        for m in model_names:
            if (m, "off (level 0)") not in paths:
                continue
            runners = {name: torch._inductor.aoti_load_package(paths[(m, name)]) for name in chosen}
            blocking = (
                time_launch_blocking(m, paths[(m, "off (level 0)")], runs)
                if "ours, level 3" in chosen
                else None
            )
            bench_model(m, runners, runs, blocking)


def time_launch_blocking(model_name: str, package: str, runs: int) -> float:
    """The printer-off package with a sync after every launch
    (CUDA_LAUNCH_BLOCKING=1, which holds for a whole process: a child's):
    the baseline our level-3 sync is held to."""
    child = subprocess.run(
        [
            sys.executable,
            __file__,
            "--time-package",
            package,
            "--models",
            model_name,
            "--runs",
            str(runs),
        ],
        env={**os.environ, "CUDA_LAUNCH_BLOCKING": "1"},
        capture_output=True,
        text=True,
        check=True,
    )
    return float(child.stdout.split()[-1])


# CUDA graphs (docs/cuda.md): the package is loaded with
# run_single_threaded=True, captured with torch.cuda.graph and replayed, as
# serving stacks do. Each row is a child process of its own, run one at a
# time: its package's level and the settings at replay. No level-1 row:
# inside a graph level 1 prints, as level 2 does (docs/cuda.md).
GRAPH_ROWS = {
    "graph, printer off": ("0", {}),
    "graph, level 2": ("2", {}),
    # NaN only: GPT-2's attention mask holds -inf on purpose (the trap's cost
    # is the same).
    "graph, level 2, trap": ("2", {"AOTI_DEBUG_PRINTER_TRAP": "nan"}),
    # The level-2 package switched to level 1 at run time: every tensor saved
    # at every replay, so a tenth of the replays (the disk holds them all).
    "graph, level 1 (disk)": ("2", {"AOTI_DEBUG_PRINTER_LEVEL": "1"}),
}


def bench_graphs(model_names: list[str], replays: int) -> None:
    """Per model: the replay's time in each GRAPH_ROWS row, and its ratio to
    the printer off; where the time goes: the GPU time of the printer's own
    kernels in a replay (torch.profiler), and the bytes written."""
    with tempfile.TemporaryDirectory() as tmp:
        levels = sorted({level for level, _ in GRAPH_ROWS.values()})
        ctx = multiprocessing.get_context("spawn")
        with futures.ProcessPoolExecutor(os.cpu_count() or 1, mp_context=ctx) as pool:
            jobs = {
                (m, level): pool.submit(compile_variant, m, level, True, f"{tmp}/{m}-{level}.pt2")
                for m in model_names
                for level in levels
            }
            paths = {}
            for (m, level), job in jobs.items():
                try:
                    paths[(m, level)] = job.result()
                except ImportError as e:  # torchvision or transformers missing
                    print(f"  {m}: skipped ({e})")
        for m in model_names:
            if (m, "0") not in paths:
                continue
            print(f"\n{m}, {replays} replays a round, median of 3 rounds:")
            off = None
            for row, (level, env) in GRAPH_ROWS.items():
                out = Path(tmp) / f"{m}-{level}-records.txt"
                dump = Path(tmp) / f"{m}-{level}-dump"
                saving = env.get("AOTI_DEBUG_PRINTER_LEVEL") == "1"
                runs = max(replays // 10, 5) if saving else replays
                child = subprocess.run(
                    [sys.executable, __file__, "--time-graph", paths[(m, level)]]
                    + ["--models", m, "--runs", str(runs)],
                    env={
                        **os.environ,
                        "AOTI_DEBUG_PRINTER_OUTPUT": str(out),
                        "AOTI_DEBUG_PRINTER_DUMP_DIR": str(dump),
                        **env,
                    },
                    capture_output=True,
                    text=True,
                )
                if child.returncode != 0:
                    print(f"  {row}: failed: {(child.stderr or child.stdout).strip()[-2000:]}")
                    continue
                r = json.loads(child.stdout.splitlines()[-1])
                off = off or r["replay_us"]
                print(
                    f"  {row:24} {r['replay_us']:9.1f} us  {r['replay_us'] / off:5.2f}x   "
                    f"(eager {r['eager_us']:8.1f} us; printer's kernels {r['ours_us']:6.1f} us "
                    f"GPU in {r['ours_kernels']} launches; {r['written_per_replay'] / 1e3:.1f} kB "
                    f"written a replay)"
                )
                shutil.rmtree(dump, ignore_errors=True)
                out.unlink(missing_ok=True)


def time_graph(package: str, model_name: str, replays: int) -> dict:
    """The graph-capture child: eager and replay times of one package, and
    its printer's kernels' GPU time in one replay."""
    _, inputs = build_model(model_name)
    static = [t.cuda() for t in inputs]
    run = torch._inductor.aoti_load_package(package, run_single_threaded=True)
    eager_us = gpu_ms(lambda: run(*static), 10) * 1e3
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        run(*static)
    for _ in range(10):
        graph.replay()
    torch.cuda.synchronize()
    torch.cuda.synchronize()
    _C.wait_for_replays()
    out = Path(os.environ["AOTI_DEBUG_PRINTER_OUTPUT"])
    dump = Path(os.environ["AOTI_DEBUG_PRINTER_DUMP_DIR"])

    def written_so_far() -> int:  # the records' text, and level 1's files
        files = [out, *dump.glob("*")] if dump.exists() else [out]
        return sum(f.stat().st_size for f in files if f.is_file())

    before = written_so_far()
    rounds = []
    for _ in range(3):
        start = time.perf_counter()
        for _ in range(replays):
            graph.replay()
        torch.cuda.synchronize()
        _C.wait_for_replays()  # the writer thread's part of each replay too
        rounds.append((time.perf_counter() - start) / replays * 1e6)
    written = written_so_far() - before
    activities = [torch.profiler.ProfilerActivity.CUDA]
    with torch.profiler.profile(activities=activities) as prof:
        for _ in range(5):
            graph.replay()
        torch.cuda.synchronize()
    ours = [e for e in prof.events() if "aoti_debug_printer" in e.name and e.device_time_total > 0]
    return {
        "eager_us": eager_us,
        "replay_us": statistics.median(rounds),
        "ours_us": sum(e.device_time_total for e in ours) / 5,
        "ours_kernels": len(ours) // 5,
        "written_per_replay": written / (3 * replays),
    }


def bench_model(model_name: str, runners: dict, runs: int, blocking_ms: float | None) -> None:
    _, inputs = build_model(model_name)
    level1 = {}
    if "ours, level 1" in runners:
        # Saved behind the model by the saver's thread (the default), and on
        # the model's thread (save_memory=0), interleaved.
        directory = Path(tempfile.mkdtemp(prefix="bench-level1-"))
        run = runners.pop("ours, level 1")
        timed = {"behind the model": [], "on its thread": []}
        for _ in range(2):
            for name, memory in (("behind the model", "512"), ("on its thread", "0")):
                with aoti_debug_printer.options(save_memory=memory):
                    timed[name].append(
                        time_level_1(run, inputs, directory, 2, torch.cuda.synchronize)
                    )
        disk = disk_write_bandwidth(directory)
        level1 = {name: (*min(times), disk) for name, times in timed.items()}
        shutil.rmtree(directory)
    cases = [(name, name, None) for name in runners]
    if "ours, level 3" in runners:
        cases.insert(
            cases.index(("ours, level 3",) * 2 + (None,)) + 1,
            ("ours, level 3, no sync", "ours, level 3", "off"),
        )
    results: dict[str, list[float]] = {name: [] for name, _, _ in cases}
    with stdout_to_devnull():
        for _ in range(3):  # interleaved rounds: drift hits every variant alike
            for name, variant, sync in cases:
                aoti_debug_printer.set_option("sync", sync or "auto")
                run = runners[variant]
                results[name].append(gpu_ms(lambda run=run: run(*inputs), max(runs // 3, 1)))
    aoti_debug_printer.set_option("sync", "auto")
    base = min(results["off (level 0)"])
    print(f"\nOne inference of {model_name}, records to /dev/null:")
    print(f"  {'variant':<26}{'ms':>9}{'vs off':>9}{'overhead ms':>13}")
    for name, times in results.items():
        ms = min(times)
        print(f"  {name:<26}{ms:>9.3f}{ms / base:>8.1f}x{ms - base:>13.3f}")
    if blocking_ms is not None:
        print(
            f"  {'off, CUDA_LAUNCH_BLOCKING=1':<26}{blocking_ms:>9.3f}"
            f"{blocking_ms / base:>8.1f}x{blocking_ms - base:>13.3f}"
        )
    for name, (level1_ms, saved, disk) in level1.items():
        print(
            f"  {'ours, level 1, ' + name:<26}{level1_ms:>9.3f}{level1_ms / base:>8.1f}x"
            f"{level1_ms - base:>13.3f}"
        )
        print(level_1_line(saved, level1_ms, disk))
    if "ours, level 2, stats in kernels" in results and "ours, level 2" in results:
        in_kernels = min(results["ours, level 2, stats in kernels"])
        separate = min(results["ours, level 2"])
        print(
            f"  level 2: stats in kernels / separate launches = {in_kernels / separate:.2f} "
            f"(overhead {in_kernels - base:.3f} ms against {separate - base:.3f} ms)"
        )
    for level in ("2", "3"):
        if f"ours, level {level}" not in results or f"built-in, level {level}" not in results:
            continue
        ours = min(results[f"ours, level {level}"]) - base
        builtin = min(results[f"built-in, level {level}"]) - base
        if builtin > 0.05 * base:
            print(f"  level {level}: our overhead / built-in overhead = {ours / builtin:.2f}")
        else:  # the built-in's level 3 prints kernel names: no ratio to speak of
            print(f"  level {level}: the built-in's overhead is within 5% of off, no ratio")
    if blocking_ms is not None:
        ours = min(results["ours, level 3"]) - base
        print(
            f"  level 3 with the sync: our overhead / a bare sync after every launch = "
            f"{ours / max(blocking_ms - base, 1e-9):.2f}"
        )


def main() -> None:
    # A crash names where it happened (every thread's Python stack), and
    # every row printed before it is on the screen: stdout is a pipe under
    # tee, block-buffered by default.
    faulthandler.enable()
    sys.stdout.reconfigure(line_buffering=True)
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument(
        "--sizes-mib",
        type=float,
        nargs="*",
        default=[0.0625, 64, 256, 1024],
        help="per-tensor rows; none for the whole-model rows only",
    )
    parser.add_argument("--runs", type=int, default=20)
    parser.add_argument(
        "--models",
        nargs="*",
        default=["deep", "resnet18", "gpt2", "bert", "llama"],
        help="whole-model rows: deep (many small kernels), resnet18, gpt2, bert, llama "
        "(1.1B parameters); none for the per-tensor table only",
    )
    parser.add_argument(
        "--graphs",
        nargs="*",
        default=[],
        help="CUDA-graph rows (GRAPH_ROWS) of these models, e.g. resnet18 gpt2",
    )
    parser.add_argument(
        "--variants",
        nargs="*",
        choices=list(VARIANTS),
        default=list(VARIANTS),
        help="whole-model rows to run beside the printer off (default: all)",
    )
    parser.add_argument("--replays", type=int, default=200, help="a round of CUDA-graph replays")
    parser.add_argument("--profile", action="store_true", help="where one small record's time goes")
    parser.add_argument("--time-package", help=argparse.SUPPRESS)  # the launch-blocking child
    parser.add_argument("--time-graph", help=argparse.SUPPRESS)  # a CUDA-graph row's child
    args = parser.parse_args()
    if not torch.cuda.is_available():
        sys.exit("bench_gpu.py needs a CUDA device")
    os.environ.setdefault("AOTI_DEBUG_PRINTER_OUTPUT", "stdout")
    if args.time_graph:
        print(json.dumps(time_graph(args.time_graph, args.models[0], args.runs)))
        return
    if args.time_package:
        _, inputs = build_model(args.models[0])
        run = torch._inductor.aoti_load_package(args.time_package)
        print(gpu_ms(lambda: run(*inputs), args.runs))
        return
    if args.sizes_mib:
        bench_stats(args.sizes_mib, args.runs)
    if args.profile:
        profile_small_record()
    if args.models:
        bench_models(args.models, args.runs, args.variants)
    if args.graphs:
        bench_graphs(args.graphs, args.replays)


if __name__ == "__main__":
    main()
