"""One process, many packages, many threads, switches flipped underneath.

    python test/stress.py DEVICE DUMP_DIR NAME=PACKAGE.pt2 ... [--threads N] [--runs N]

Loads every package (names from testmodels.small: `mlp` at levels 0 to 3
and compiled by PyTorch's own printer, `nan_maker`, `dynamic`), then runs
them interleaved from several threads while another thread switches the
run-time level, the trap and the guard at random. Every output of a run
that was not stopped must equal the eager model's; a stop is allowed only
where a finding may come (the trap on nan_maker, a float64 input given to
`dynamic` on purpose, which runs unchecked where the level is 0 just then). Ends with one line and exit 0; a crash, a sanitizer
report or a wrong result ends otherwise. test_stress.py drives it, on the
CPU in CI (also with the library built with AddressSanitizer and UBSan) and
on the GPU.
"""

from __future__ import annotations

import argparse
import random
import sys
import threading
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from testmodels import small  # noqa: E402

import aoti_debug_printer  # noqa: E402

SWITCHES = {
    "level": ["-1", "-1", "0", "1", "2", "3"],
    "trap": ["0", "1"],
    "guard": ["0", "0", "1", "2"],
}


STOP_WORDS = ("TRAP", "WRITE GUARD", "CUDA ERROR", "WRONG INPUT", "ERROR")


def same(a: torch.Tensor, b: torch.Tensor) -> bool:
    """Bit for bit, NaN where NaN."""
    return torch.equal(a.isnan(), b.isnan()) and torch.equal(a.nan_to_num(0.0), b.nan_to_num(0.0))


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("device")
    parser.add_argument("dump_dir")
    parser.add_argument("packages", nargs="+", metavar="NAME=PACKAGE.pt2")
    parser.add_argument("--threads", type=int, default=6)
    parser.add_argument("--runs", type=int, default=60, help="per thread")
    parser.add_argument(
        "--switch",
        action="append",
        default=[],
        metavar="KEY=V,V",
        help="the values the flipper picks from for KEY (to narrow down a failure)",
    )
    args = parser.parse_args()
    switches = dict(SWITCHES)
    for spec in args.switch:
        key, values = spec.split("=", 1)
        switches[key] = values.split(",")

    Path(args.dump_dir).mkdir(parents=True, exist_ok=True)
    aoti_debug_printer.set_option("output", str(Path(args.dump_dir) / "records.txt"))
    aoti_debug_printer.set_option("dump_dir", args.dump_dir)
    loaded = []
    for spec in args.packages:
        name, path = spec.split("=", 1)
        model_name = name.split(":")[0]
        _, inputs = small.build(model_name, args.device)
        run = torch._inductor.aoti_load_package(path)
        # What the package computes with the printer off: the printer on
        # must give the same bits.
        with aoti_debug_printer.options(level="0"):
            expected = run(*inputs)
        loaded.append((name, run, inputs, expected))

    failures: list[str] = []
    stopped = {"found": 0}
    done = threading.Event()

    def flip() -> None:
        rng = random.Random(1)
        while not done.is_set():
            key = rng.choice(list(switches))
            aoti_debug_printer.set_option(key, rng.choice(switches[key]))
            time.sleep(rng.uniform(0, 0.01))

    def work(seed: int) -> None:
        rng = random.Random(seed)
        for _ in range(args.runs):
            name, run, inputs, expected = rng.choice(loaded)
            wrong_input = name.startswith("dynamic") and rng.random() < 0.2
            given = tuple(t.double() for t in inputs) if wrong_input else inputs
            try:
                out = run(*given)
            except RuntimeError as e:
                if wrong_input or name.startswith("nan_maker"):
                    stopped["found"] += 1
                    continue
                failures.append(
                    f"{name}: stopped where nothing could be found: {e} (switches then: "
                    + ", ".join(f"{k}={aoti_debug_printer.get_option(k)}" for k in SWITCHES)
                    + ")"
                )
                return
            if wrong_input:
                continue  # the level was switched to 0 just then: nothing checks
            if not same(out, expected):
                failures.append(f"{name}: the result changed while the printer was on")
                return

    flipper = threading.Thread(target=flip)
    flipper.start()
    workers = [threading.Thread(target=work, args=(i,)) for i in range(args.threads)]
    for w in workers:
        w.start()
    for w in workers:
        w.join()
    done.set()
    flipper.join()
    aoti_debug_printer.set_option("output", "stdout")
    if failures:
        # The findings the library wrote, which say why a run stopped where
        # the exception does not (torch 2.11 keeps only its own message).
        records = (Path(args.dump_dir) / "records.txt").read_text(errors="replace").splitlines()
        said = [line for line in records if line.startswith("[aoti-debug-printer]")]
        stops = [line for line in said if any(w in line for w in STOP_WORDS)]
        # Those the stress causes on purpose say nothing new.
        unexpected = [
            line
            for line in stops
            if not ("WRONG INPUT" in line and "is float64, but" in line)
            and not ("TRAP" in line and "log_mul_relu" in line)
        ]
        print(
            "\n".join(["stress: stops not caused on purpose:", *unexpected[-12:]]), file=sys.stderr
        )
        print(f"stress: FAILED: {failures[0]}", file=sys.stderr)
        return 1
    print(
        f"stress: {args.threads} threads x {args.runs} runs of {len(loaded)} packages on "
        f"{args.device}, {stopped['found']} stopped by a finding, every other result unchanged "
        f"(library {aoti_debug_printer.library_path()})",
        file=sys.stderr,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
