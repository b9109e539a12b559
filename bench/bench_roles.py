"""What argument roles save, and what the write guard costs, measured side
by side in this one run on one AOTInductor-compiled model (a pre-LayerNorm
transformer, test/testmodels/findings.py):

- printer off (compiled at level 0);
- ours at level 2 and level 1, with roles (outputs get no statistics before
  launch, read-only arguments are recorded once) and without them
  (AOTI_DEBUG_PRINTER_ROLES=0: every argument in full before and after its
  kernel, as before roles);
- PyTorch's built-in printer at the same levels;
- ours with the guard at 1, and level 2 with the guard at 2.

Records go to /dev/null, snapshots (ours and the built-in's) to a temporary
directory. Variants run in interleaved rounds, the best round kept.

    python bench/bench_roles.py [--device cuda] [--runs 20]
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import multiprocessing
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "test"))
sys.path.insert(0, str(HERE))
from bench_cpu import stdout_to_devnull  # noqa: E402
from testmodels import findings  # noqa: E402


def median_ms(run, runs: int, device: str) -> float:
    run()
    times = []
    for _ in range(runs):
        if device == "cuda":
            torch.cuda.synchronize()
        start = time.perf_counter()
        run()
        if device == "cuda":
            torch.cuda.synchronize()
        times.append((time.perf_counter() - start) * 1e3)
    return statistics.median(times)


def compile_at(device: str, level: int, ours: bool, path: str) -> str:
    """In a fresh process: the model compiled by our printer or the built-in."""
    (aoti_debug_printer.install if ours else aoti_debug_printer.uninstall)()
    model, inputs, dynamic = findings.build("pre_ln_transformer", device=device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    with torch._inductor.config.patch(
        {"aot_inductor.debug_intermediate_value_printer": str(level)}
    ):
        return torch._inductor.aoti_compile_and_package(program, package_path=path)


# (row, compiled variant, run-time options of ours)
ROWS = [
    ("printer off", "ours 0", {}),
    ("ours level 2", "ours 2", {}),
    ("ours level 2, no roles", "ours 2", {"roles": 0}),
    ("built-in level 2", "built-in 2", {}),
    ("ours level 2, guard 1", "ours 2", {"guard": 1}),
    ("ours level 2, guard 2", "ours 2", {"guard": 2}),
    ("ours level 1", "ours 1", {}),
    ("ours level 1, no roles", "ours 1", {"roles": 0}),
    ("built-in level 1", "built-in 1", {}),
    ("ours level 1, guard 1", "ours 1", {"guard": 1}),
]


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    _, inputs, _ = findings.build("pre_ln_transformer", device=args.device)
    work = Path(tempfile.mkdtemp(prefix="bench-roles-"))
    # The built-in saves under the working directory.
    os.chdir(work)
    variants = {
        f"{who} {level}": (level, who == "ours")
        for who in ("ours", "built-in")
        for level in (0, 1, 2)
        if who == "ours" or level > 0
    }
    with futures.ProcessPoolExecutor(
        len(variants), mp_context=multiprocessing.get_context("spawn")
    ) as pool:
        jobs = {
            name: pool.submit(compile_at, args.device, level, ours, str(work / f"{i}.pt2"))
            for i, (name, (level, ours)) in enumerate(variants.items())
        }
        paths = {name: job.result() for name, job in jobs.items()}
    aoti_debug_printer.install()
    runners = {name: torch._inductor.aoti_load_package(path) for name, path in paths.items()}
    results: dict[str, list[float]] = {row: [] for row, _, _ in ROWS}
    with stdout_to_devnull():
        for _ in range(3):  # interleaved rounds: drift hits every variant alike
            for row, variant, options in ROWS:
                with aoti_debug_printer.options(output="stdout", dump_dir=work / "dump", **options):
                    run = runners[variant]
                    results[row].append(
                        median_ms(lambda run=run: run(*inputs), max(args.runs // 3, 1), args.device)
                    )
    best = {row: min(times) for row, times in results.items()}
    off = best["printer off"]
    machine = torch.cuda.get_device_name() if args.device == "cuda" else "CPU"
    print(f"pre_ln_transformer on {args.device} ({machine}), torch {torch.__version__}")
    print(f"{'configuration':<26}{'ms / run':>10}{'x off':>8}{'overhead / ours':>17}")
    for row, _, _ in ROWS:
        level = "2" if "level 2" in row else "1" if "level 1" in row else None
        ours = best[f"ours level {level}"] - off if level else None
        ratio = f"{(best[row] - off) / ours:>17.2f}" if ours else ""
        print(f"{row:<26}{best[row]:>10.3f}{best[row] / off:>8.1f}{ratio}")


if __name__ == "__main__":
    main()
