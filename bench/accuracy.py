"""False alarms and misses of `diverge` and `compare`, side by side: the
criterion of tools/numerics against the per-dtype tolerance they used before
(torch.testing's, and rtol = atol = 5e-3 for float32 on CUDA whenever a
TF32 flag was on).

    python bench/accuracy.py [--device cpu|cuda] [--only diverge|compare] [--shard I/N] [--cases RE]

Every correct model of test/testmodels/findings.py must be silent, and every
planted bug named at its own node. One line per case:

    case  device  tool  model  bug  old  new  (ratio of the planted value to its bar,
                                               the largest ratio of any other value)

old/new: "silent", "named" (the planted node), "WRONG <node>" (another node
named), "MISSED" (nothing named where a bug was planted).
"""

from __future__ import annotations

import argparse
import contextlib
import re
import sys
import tempfile
import time
from pathlib import Path

import torch

# Each case compiles afresh: Inductor's caches key on the graph, not on the
# planted lowering, and processes running shards side by side share them.
torch._inductor.config.force_disable_caches = True
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "test"))
from testmodels import findings  # noqa: E402

import aoti_debug_printer  # noqa: E402
from aoti_debug_printer import Record, eager_values  # noqa: E402

# The tolerance diverge and compare used before the float64 criterion.
OLD = {"float16": (1e-3, 1e-5), "bfloat16": (1.6e-2, 1e-5), "float32": (1.3e-6, 1e-5)}
OLD_TF32 = (5e-3, 5e-3)

# Correct models under the numerics settings users have on.
SETTINGS = ("matmul_high", "cudnn_tf32")
SETTING_CASES = (("post_ln_mlp", "matmul_high"), ("gpt2", "matmul_high"), ("conv_bn", "cudnn_tf32"))
# The cases compare runs, a CPU dump against a CUDA dump of one program.
COMPARE_CORRECT = ("post_ln_mlp", "pre_ln_transformer", "conv_bn", "gpt2")
COMPARE_PLANTED = (
    ("post_ln_mlp", 1, "tanh_gelu"),
    ("post_ln_mlp", 2, "gelu_constant"),
    ("post_ln_mlp", 0, "bf16_reduction"),
    ("post_ln_mlp", 1, "half_kernel"),
    ("pre_ln_transformer", 0, "half_kernel"),
)


def old_tolerance(dtype: torch.dtype, device: str) -> tuple[float, float]:
    name = str(dtype).removeprefix("torch.")
    if (
        name == "float32"
        and device.startswith("cuda")
        and (torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)
    ):
        return OLD_TF32
    return OLD.get(name, (0.0, 0.0))


def verdict(named: Record | None, planted: set[str]) -> str:
    """What a tool said of a case: its finding's record, `planted` the nodes
    of the planted op. Named: the planted node, or a kernel that fuses the
    planted op (Inductor names kernels after the ops they hold) where the
    op's own value is never stored."""
    if named is None:
        return "MISSED" if planted else "silent"
    if named.node in planted or (planted and "planted" in named.kernel):
        return "named"
    return f"WRONG {named.node or named.kernel}"


def planted_nodes(program, kind: str | None) -> set[str]:
    if kind is None:
        return set()
    op = findings.PLANTED_OPS[kind]
    return {n.name for n in program.graph.nodes if n.target == op}


def diverge_case(model_name: str, position, kind, device: str, tmp: Path) -> str:
    setting = None
    if kind in SETTINGS:  # a correct model under a numerics setting
        setting, kind = kind, None
    model, inputs, dynamic = findings.build(
        model_name, plant_at=position, device=device, kind=kind or "affine"
    )
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    planted = planted_nodes(program, kind)
    with findings.numerics(setting) if setting else contextlib.nullcontext():
        with findings.wrong_lowering(kind) if kind else contextlib.nullcontext():
            dump = findings.compile_and_dump(
                program, inputs, tmp / f"{model_name}-{position}-{kind}-{device}"
            )
        found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    # The old rule: the first value with an element beyond the per-dtype
    # tolerance against eager in the program's own dtypes.
    with findings.numerics(setting) if setting else contextlib.nullcontext():
        eager = eager_values(program, *program.example_inputs)
    old = None
    for m in found.matches:
        if m.node not in eager:
            continue  # a value judged by its formula: the old rule had none
        got, want = m.record.load(), eager[m.node]
        with findings.numerics(setting) if setting else contextlib.nullcontext():
            rtol, atol = old_tolerance(want.dtype, device)
        if not torch.isclose(
            got.reshape(want.shape).cpu().double(),
            want.cpu().double(),
            rtol=rtol,
            atol=atol,
            equal_nan=True,
        ).all():
            old = m.record
            break
    named = found.first.record if found.first else None
    ratios = [m.own.ratio for m in found.matches if m.node in planted]
    others = max((m.own.ratio for m in found.matches if m.node not in planted), default=0.0)
    written, compared, reasons = found.coverage()
    drift = f" drift at {found.drift.node}" if found.drift else ""
    return (
        f"{verdict(old, planted):<10} {verdict(named, planted):<10} planted/bar "
        f"{max(ratios, default=0):.3g} others/bar {others:.3g} coverage {compared}/{written}"
        f"{drift} not compared: {dict(reasons)}"
    )


def compare_case(model_name: str, position, kind, tmp: Path) -> str:
    dumps = {}
    for device in ("cpu", "cuda"):
        model, inputs, dynamic = findings.build(
            model_name, plant_at=position, device=device, kind=kind or "affine"
        )
        program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
        wrong = kind and device == "cuda"
        with findings.wrong_lowering(kind) if wrong else contextlib.nullcontext():
            dumps[device] = findings.compile_and_dump(
                program, inputs, tmp / f"{model_name}-{kind}-{device}"
            )
        planted = planted_nodes(program, kind)
    new = aoti_debug_printer.compare(dumps["cpu"], dumps["cuda"])
    rtol, atol = old_tolerance(torch.float32, "cuda")
    old = aoti_debug_printer.compare(dumps["cpu"], dumps["cuda"], rtol=rtol, atol=atol)
    ratios = [d.ratio for d in new.compared if d.a.node in planted]
    others = max((d.ratio for d in new.compared if d.a.node not in planted), default=0.0)
    return (
        f"{verdict(old.first and old.first.b, planted):<10} "
        f"{verdict(new.first and new.first.b, planted):<10} planted/bar "
        f"{max(ratios, default=0):.3g} others/bar {others:.3g} compared {len(new.compared)}"
    )


def cases(device: str, only: str | None):
    if only in (None, "diverge"):
        for name in findings.CORRECT:
            yield "diverge", name, None, None
        for name, setting in SETTING_CASES:
            yield "diverge", name, None, setting
        for name, position, kind in findings.PLANTED + (
            findings.PLANTED_CUDA if device == "cuda" else ()
        ):
            yield "diverge", name, position, kind
    if only in (None, "compare") and device == "cuda":
        for name in COMPARE_CORRECT:
            yield "compare", name, None, None
        for name, position, kind in COMPARE_PLANTED:
            yield "compare", name, position, kind


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument("--only", choices=("diverge", "compare"))
    parser.add_argument("--shard", default="0/1", help="I/N: every Nth case from the Ith")
    parser.add_argument(
        "--cases",
        default="",
        help="only cases whose 'tool model position kind' matches this regular expression",
    )
    args = parser.parse_args()
    index, count = map(int, args.shard.split("/"))
    print(
        f"# torch {torch.__version__}, {args.device}"
        + (f" ({torch.cuda.get_device_name()})" if args.device == "cuda" else ""),
        flush=True,
    )
    with tempfile.TemporaryDirectory() as tmp:
        for i, (tool, name, position, kind) in enumerate(cases(args.device, args.only)):
            if i % count != index or not re.search(args.cases, f"{tool} {name} {position} {kind}"):
                continue
            start = time.monotonic()
            try:
                row = (
                    diverge_case(name, position, kind, args.device, Path(tmp))
                    if tool == "diverge"
                    else compare_case(name, position, kind, Path(tmp))
                )
            except Exception as e:  # noqa: BLE001 - one line per case, the others go on
                row = f"ERROR {type(e).__name__}: {str(e).strip().splitlines()[0][:200]}"
            print(
                f"{tool:<8} {args.device:<5} {name:<24} {position if position is not None else '-':<3} "
                f"{kind or '-':<15} {row} ({time.monotonic() - start:.0f}s)",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
