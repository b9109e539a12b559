"""Level 2 of two or more builds of this library, side by side on one GPU.

The models (test/testmodels) are compiled once, by the installed package's
codegen: printer off, our level 2 and the built-in level 2. Each build is
then timed on those same packages in a child process of its own (a package
finds the build's library through AOTI_DEBUG_PRINTER_LIBRARY), the builds
taking turns round by round, so that drift in the machine's speed hits
them alike. Every child times the printer-off package too, and each build's
level 2 / off is taken within its own child: on a shared host a whole
process can run a fifth slower than the next one.

A build is a wheel (installed into a temporary directory) or a directory
that holds the aoti_debug_printer package. Records go to /dev/null.

    python bench/compare_builds.py --build before=OLD.whl --build after=NEW.whl \\
        [--models deep gpt2 bert resnet18] [--rounds 2] [--runs 7]
"""

from __future__ import annotations

import argparse
import concurrent.futures as futures
import json
import multiprocessing
import os
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE.parent / "test"))
sys.path.insert(0, str(HERE))

from bench_gpu import VARIANTS as BENCH_GPU_VARIANTS  # noqa: E402

# bench_gpu's variants (level, compiled by our printer) that level 2 is
# judged by, under short names.
VARIANTS = {
    short: BENCH_GPU_VARIANTS[name]
    for short, name in (
        ("off", "off (level 0)"),
        ("ours", "ours, level 2"),
        ("built-in", "built-in, level 2"),
    )
}


def site_of(path: Path, into: Path) -> Path:
    """The directory holding the aoti_debug_printer package of a build."""
    if path.is_dir():
        if not (path / "aoti_debug_printer").is_dir():
            sys.exit(f"compare_builds: {path} holds no aoti_debug_printer package")
        return path
    if path.suffix != ".whl":
        sys.exit(f"compare_builds: {path} is neither a wheel nor a directory")
    subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "install",
            "-q",
            "--no-deps",
            "--target",
            str(into),
            str(path),
        ],
        check=True,
    )
    return into


def compile_all(models: list[str], directory: Path) -> None:
    from bench_gpu import compile_variant

    jobs = [(m, v) for m in models for v in VARIANTS]
    ctx = multiprocessing.get_context("spawn")
    with futures.ProcessPoolExecutor(len(jobs), mp_context=ctx) as pool:
        running = [
            pool.submit(compile_variant, m, *VARIANTS[v], str(directory / f"{m}-{v}.pt2"))
            for m, v in jobs
        ]
        for job in running:
            job.result()


def time_packages(directory: Path, models: list[str], runs: int) -> dict:
    """In a child: one line of JSON with the loaded library, the wall time of
    a queued 64 KiB record, and each model's inference per variant (ms)."""
    import torch
    from bench_gpu import build_model, gpu_ms, queued_record_ms, stdout_to_devnull

    import aoti_debug_printer

    aoti_debug_printer.install()
    aoti_debug_printer.set_option("output", "stdout")
    out: dict = {"library": aoti_debug_printer.library_path()}
    with stdout_to_devnull():
        t = torch.randn(16384, device="cuda")
        out["queued record, float32 64 KiB"] = min(queued_record_ms(t, 20)[0] for _ in range(3))
        for m in models:
            _, inputs = build_model(m)
            runners = {
                v: torch._inductor.aoti_load_package(str(directory / f"{m}-{v}.pt2"))
                for v in VARIANTS
            }
            times: dict[str, list[float]] = {v: [] for v in VARIANTS}
            for _ in range(3):  # interleaved within the child too
                for v, run in runners.items():
                    times[v].append(gpu_ms(lambda run=run, inputs=inputs: run(*inputs), runs))
            out[m] = {v: min(ms) for v, ms in times.items()}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--build", action="append", default=[], metavar="NAME=PATH")
    parser.add_argument("--models", nargs="+", default=["deep", "gpt2", "bert", "resnet18"])
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--runs", type=int, default=7)
    parser.add_argument("--child", help=argparse.SUPPRESS)  # the packages' directory
    args = parser.parse_args()

    if args.child:
        print("RESULT " + json.dumps(time_packages(Path(args.child), args.models, args.runs)))
        return
    builds = dict(b.split("=", 1) for b in args.build if "=" in b)
    if len(builds) < 2 or len(builds) != len(args.build):
        sys.exit("compare_builds: give two or more builds as --build NAME=PATH")

    tmp = Path(tempfile.mkdtemp(prefix="compare-builds-"))
    sites = {name: site_of(Path(p), tmp / f"site-{name}") for name, p in builds.items()}
    compile_all(args.models, tmp)
    results: dict[str, list[dict]] = {name: [] for name in builds}
    for _ in range(args.rounds):
        for name, site in sites.items():
            library = site / "aoti_debug_printer" / "libaoti_debug_printer.so"
            child = subprocess.run(
                [sys.executable, __file__, "--child", str(tmp), "--runs", str(args.runs)]
                + ["--models", *args.models],
                env={
                    **os.environ,
                    "PYTHONPATH": str(site),
                    "AOTI_DEBUG_PRINTER_LIBRARY": str(library),
                },
                capture_output=True,
                text=True,
            )
            line = next((x for x in child.stdout.splitlines() if x.startswith("RESULT ")), None)
            if child.returncode != 0 or line is None:
                sys.exit(f"compare_builds: build {name} failed:\n{child.stderr[-2000:]}")
            result = json.loads(line[len("RESULT ") :])
            if Path(result["library"]).resolve() != library.resolve():
                sys.exit(f"compare_builds: build {name} loaded {result['library']}, not {library}")
            results[name].append(result)

    import torch

    print(f"\n{torch.cuda.get_device_name(0)}, torch {torch.__version__}, {args.rounds} rounds")
    key = "queued record, float32 64 KiB"
    print(f"\n{key} (ms, best round):")
    for name, rounds in results.items():
        print(f"  {name:<12}{min(r[key] for r in rounds):>9.4f}")
    for m in args.models:
        print(
            f"\n{m}: ms (best round), level 2 / off and our overhead / the built-in's (best round)"
        )
        print(
            f"  {'build':<12}{'off':>9}{'level 2':>10}{'built-in':>10}{'L2/off':>9}{'ours/b-in':>11}"
        )
        for name, rounds in results.items():
            rows = [r[m] for r in rounds]
            ratio = min(r["ours"] / r["off"] for r in rows)
            share = min((r["ours"] - r["off"]) / (r["built-in"] - r["off"]) for r in rows)
            best = {v: min(r[v] for r in rows) for v in VARIANTS}
            print(
                f"  {name:<12}{best['off']:>9.3f}{best['ours']:>10.3f}{best['built-in']:>10.3f}"
                f"{ratio:>8.2f}x{share:>11.3f}"
            )


if __name__ == "__main__":
    main()
