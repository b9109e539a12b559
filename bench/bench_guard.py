"""The write guard's cost, and what recording read-only arguments once
saves, measured side by side in this one run on one AOTInductor-compiled
model (a pre-LayerNorm transformer, test/finding_models.py):

- printer off (compiled at level 0);
- level 2 and level 1 (read-only arguments recorded once, before launch);
- the same with the guard at 1, and level 2 with the guard at 2.

Records go to /dev/null, snapshots to a temporary directory.

    python bench/bench_guard.py [--device cuda] [--runs 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
import finding_models  # noqa: E402


def timed(run, runs: int, device: str) -> float:
    """Median milliseconds of one call."""
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


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--runs", type=int, default=20)
    args = parser.parse_args()
    model, inputs, dynamic = finding_models.build("pre_ln_transformer", device=args.device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    work = Path(tempfile.mkdtemp(prefix="bench-guard-"))
    runners = {}
    for level in (0, 1, 2):
        with aoti_debug_printer.enabled(level=level):
            path = torch._inductor.aoti_compile_and_package(
                program, package_path=str(work / f"L{level}.pt2"))
        runners[level] = torch._inductor.aoti_load_package(path)
    rows = [
        ("printer off", 0, {}),
        ("level 2", 2, {}),
        ("level 2, guard 1", 2, {"guard": 1}),
        ("level 2, guard 2", 2, {"guard": 2}),
        ("level 1", 1, {}),
        ("level 1, guard 1", 1, {"guard": 1}),
    ]
    results = {}
    for name, level, options in rows:
        with aoti_debug_printer.options(output="/dev/null", dump_dir=work / "dump", **options):
            results[name] = timed(lambda: runners[level](*inputs), args.runs, args.device)
    off = results["printer off"]
    print(f"pre_ln_transformer on {args.device} "
          f"({torch.cuda.get_device_name() if args.device == 'cuda' else 'CPU'}), torch {torch.__version__}")
    print(f"{'configuration':<22} {'ms / run':>10} {'x off':>8} {'x level':>8}")
    for name, level, _ in rows:
        base = results["level 2" if level == 2 else "level 1" if level == 1 else "printer off"]
        print(f"{name:<22} {results[name]:>10.3f} {results[name] / off:>8.1f} {results[name] / base:>8.2f}")


if __name__ == "__main__":
    main()
