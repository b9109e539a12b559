"""How many of the values kernels wrote `diverge` judges, per model.

    python bench/coverage.py [--device cuda] [--models gpt2 llama ...] [--detail]

For each correct test model (and ResNet-18 where torchvision imports):
compile at level 1, run, judge the dump against eager, and print the
values compared of those kernels wrote, and the rest counted by reason
code (a record's Reason, or diverge's NotCompared). `--detail` lists each
value left out: kernel, buffer, shape, code and detail.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
import tempfile
import time
from pathlib import Path

import torch

import aoti_debug_printer

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from testmodels import findings  # noqa: E402


def models() -> list[str]:
    """The correct test models (ResNet-18 only where torchvision imports)."""
    have_torchvision = importlib.util.find_spec("torchvision") is not None
    return [n for n in findings.CORRECT if n != "resnet18" or have_torchvision]


def measure(name: str, device: str, detail: bool) -> tuple[int, int]:
    model, inputs, dynamic = findings.build(name, device=device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    start = time.perf_counter()
    with tempfile.TemporaryDirectory() as tmp:
        dump = findings.compile_and_dump(program, inputs, Path(tmp) / "dump")
        found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    written, compared, reasons = found.coverage()
    verdict = "silent" if found.first is None else f"DIVERGES at {found.first.record.kernel}"
    codes = ", ".join(f"{code} {n}" for code, n in reasons.most_common())
    print(
        f"{name:<24} {compared:>4}/{written:<4} {100 * compared / max(1, written):5.1f}%  "
        f"{verdict}  {time.perf_counter() - start:5.0f} s  {codes}",
        flush=True,
    )
    if detail:
        for u in found.unmatched:
            r = u.record
            print(f"    {r.kernel[:60]} {r.arg} {list(r.tensor.shape)} {u.code} {u.detail[:80]}")
    return written, compared


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--models", nargs="*", default=None, help="default: all")
    parser.add_argument("--detail", action="store_true")
    args = parser.parse_args()
    names = args.models or models()
    print(f"# torch {torch.__version__}, {args.device}", flush=True)
    total_written = total_compared = 0
    for name in names:
        written, compared = measure(name, args.device, args.detail)
        total_written += written
        total_compared += compared
    print(
        f"{'all':<24} {total_compared:>4}/{total_written:<4} "
        f"{100 * total_compared / max(1, total_written):5.1f}%"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
