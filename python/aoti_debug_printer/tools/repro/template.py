#!/usr/bin/env python3
"""One kernel of an AOTInductor model, alone, on the arguments it had.

Written by `aoti-debug repro` (aoti-debug-printer). It needs torch, and
Triton for a Triton kernel: no model, no dump, no aoti-debug-printer.

    python repro.py                  launch the kernel as compiled, check it
    python repro.py --source FILE    launch an edited kernel (kernel.cpp,
                                     kernel.py) or, for an op, a Python file
                                     whose kernel(*args) replaces it

It prints what the finding expected next to what came out, and exits 1
while a check fails (the bug is there), 0 when all pass, 2 when it cannot
run. repro.json says which checks, args.pt holds the arguments in call
order, recorded.pt what the launch wrote in the model's run, expected.pt
the value expected (where the finding knew it).
"""

from __future__ import annotations

import argparse
import importlib
import importlib.util
import json
import re
import sys
from pathlib import Path

import torch

HERE = Path(__file__).resolve().parent


def load_kernel(spec: dict, source: Path | None):
    """The kernel as a Python callable, built from `source` (default: the
    one Inductor generated)."""
    kind, name = spec["kind"], spec["kernel"]
    for module in spec.get("imports", []):
        try:
            importlib.import_module(module)  # registers the op
        except ImportError as e:
            where = spec.get("import_paths", {}).get(module) or "the directory that holds it"
            sys.exit(
                f"repro: this kernel needs module {module}, which does not import here "
                f"({e}); put it on the path: PYTHONPATH={where} python {Path(sys.argv[0]).name}"
            )
    if kind == "op":
        if source is not None:
            return _module(source).kernel
        namespace, _, rest = spec["op"].partition("::")
        op_name, _, overload = rest.partition(".")
        packet = getattr(getattr(torch.ops, namespace), op_name)
        return getattr(packet, overload or "default")
    path = source or HERE / spec["source"]
    text = path.read_text()
    if kind == "cpp":
        from torch._inductor.codecache import CppPythonBindingsCodeCache

        # Inductor's bindings call the function `kernel`, as in its JIT code.
        text, found = re.subn(
            r'(extern "C"\s+void\s+)' + re.escape(name) + r"(\s*\()", r"\1kernel\2", text, count=1
        )
        if not found:
            sys.exit(f"repro: {path} defines no function {name}")
        return CppPythonBindingsCodeCache.load_pybinding(spec["argtypes"], text)
    function = spec.get("function", name)  # a user kernel keeps its own name
    kernel = getattr(_module(path), function, None)
    if kernel is None:
        sys.exit(f"repro: {path} defines no kernel {function}")
    return kernel


def _module(path: Path):
    spec = importlib.util.spec_from_file_location(f"repro_{path.stem}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# Every tensor argument lies inside an allocation of its own with this
# many bytes of a known pattern before and after it: a kernel that writes
# past its arguments changes them (where in the model it would have changed
# a neighbour, or faulted).
FENCE_BYTES = 4096
FENCE_PATTERN = 0xA5


class Fences:
    def __init__(self) -> None:
        self.fences: list[tuple[torch.Tensor, int, int]] = []  # (bytes, first, end)

    def place(self, shape, stride, dtype, device, value=None) -> torch.Tensor:
        """A tensor of this layout in a fenced allocation: `value`'s elements,
        else zeros (an output not yet written)."""
        itemsize = torch.empty((), dtype=dtype).element_size()
        span = 0 if 0 in shape else 1 + sum((n - 1) * st for n, st in zip(shape, stride))
        pad = FENCE_BYTES // itemsize
        base = torch.empty(span + 2 * pad, dtype=dtype, device=device)
        raw = base.view(torch.uint8)
        raw.fill_(FENCE_PATTERN)
        t = base.as_strided(shape, stride, pad)
        if value is None:
            t.zero_()
        else:
            t.copy_(value.to(device))
        self.fences.append((raw, pad * itemsize, (pad + span) * itemsize))
        return t

    def breaches(self) -> list[tuple[int, str, int]]:
        """For each tensor placed, in order: where outside it bytes changed
        (index, "before"/"after", how far from its first or last byte)."""
        out = []
        for i, (raw, first, end) in enumerate(self.fences):
            changed = (raw.cpu() != FENCE_PATTERN).nonzero().reshape(-1)
            below, above = changed[changed < first], changed[changed >= end]
            if below.numel():
                out.append((i, "before", first - int(below.max())))
            if above.numel():
                out.append((i, "after", int(above.max()) - end + 1))
        return out


def materialise(arg, device_ok: bool, fences: Fences):
    """An argument of args.pt as the kernel gets it: a tensor on its device,
    fenced (an output not yet written as zeros of its layout), or a value."""
    if isinstance(arg, list):
        return [materialise(a, device_ok, fences) for a in arg]
    if "value" in arg:
        return arg["value"]
    if "layout" in arg:
        layout = arg["layout"]
        return fences.place(
            layout["shape"], layout["stride"], layout["dtype"], _device(layout["device"], device_ok)
        )
    t = arg["tensor"]
    return fences.place(
        list(t.shape), list(t.stride()), t.dtype, _device(arg["device"], device_ok), t
    )


def _device(name: str, device_ok: bool) -> str:
    if name.startswith("cuda") and not device_ok:
        sys.exit("repro: this kernel ran on CUDA and no CUDA device is present")
    return name


def tensors_of(args):
    for a in args:
        if isinstance(a, list):
            yield from tensors_of(a)
        elif isinstance(a, torch.Tensor):
            yield a


def non_finite(t: torch.Tensor) -> int:
    if not (t.dtype.is_floating_point or t.dtype.is_complex):
        return 0
    return int((~torch.isfinite(t)).sum())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, help="an edited kernel to launch instead")
    options = parser.parse_args()
    spec = json.loads((HERE / "repro.json").read_text())
    raw_args = torch.load(HERE / "args.pt", weights_only=True)
    fences = Fences()
    args = [materialise(a, torch.cuda.is_available(), fences) for a in raw_args]
    names = spec["names"]
    roles = spec["roles"]
    print(f"kernel {spec['kernel']} ({spec['kind']}): {spec['finding']}")
    kernel = load_kernel(spec, options.source)

    before = {n: t.clone() for n, t in zip(names, args) if isinstance(t, torch.Tensor) and n}
    error = None
    try:
        if spec["kind"] == "op":
            returned = kernel(*args)
        elif spec["kind"] == "cpp":
            returned = kernel(*args)
        else:
            stream = torch.cuda.current_stream().cuda_stream
            returned = kernel.run(*args, stream=stream)
        if torch.cuda.is_available():
            torch.cuda.synchronize()
    except Exception as e:  # noqa: BLE001 - a fault is what a CUDA error repro shows
        error = f"{type(e).__name__}: {str(e).strip().splitlines()[0] if str(e).strip() else ''}"
        returned = None

    # What the launch left in each named argument (an op's outputs are returned).
    after = {n: t for n, t in zip(names, args) if isinstance(t, torch.Tensor) and n}
    if spec["kind"] == "op" and returned is not None:
        outs = list(returned) if isinstance(returned, (tuple, list)) else [returned]
        after.update(
            {n: t for n, t in zip(spec.get("outputs", []), outs) if isinstance(t, torch.Tensor)}
        )

    failed = False
    if error is not None:
        print(f"  FAIL launch: {error}")
        return 1
    if "no_error" in spec["checks"]:
        print("  ok   launch: no error")
    if "finite" in spec["checks"]:
        for n, t in after.items():
            if roles.get(n, "write") == "read":
                continue
            had = non_finite(before[n]) if n in before and roles.get(n) == "read_write" else 0
            now = non_finite(t)
            bad = now > had
            failed |= bad
            print(
                f"  {'FAIL' if bad else 'ok  '} {n}: {now} NaN/Inf after launch "
                f"(expected no new ones; {had} before)"
            )
    if "unchanged" in spec["checks"]:
        for n, t in after.items():
            if roles.get(n) != "read" or n not in before:
                continue
            same = torch.equal(t.cpu(), before[n].cpu()) or (
                bool(torch.equal(t.isnan(), before[n].isnan()))
                and torch.equal(t.nan_to_num().cpu(), before[n].nan_to_num().cpu())
            )
            if not same:
                changed = (t.cpu() != before[n].cpu()).reshape(-1)
                first = int(changed.nonzero()[0]) if changed.any() else -1
                print(
                    f"  FAIL {n}: the kernel only reads it, and changed {int(changed.sum())} of "
                    f"{t.numel()} elements (first at flat index {first}: "
                    f"{before[n].reshape(-1)[first].item()} -> {t.reshape(-1)[first].item()})"
                )
                failed = True
            else:
                print(f"  ok   {n}: unchanged (the kernel only reads it)")
    if "in_bounds" in spec["checks"]:
        breaches = fences.breaches()
        for i, side, distance in breaches:
            name = names[i] if i < len(names) and names[i] else f"tensor argument {i}"
            print(f"  FAIL {name}: the kernel wrote outside it, up to {distance} bytes {side} it")
        if not breaches:
            print("  ok   nothing outside the arguments changed")
        failed |= bool(breaches)
    if "close" in spec["checks"]:
        failed |= check_close(spec, after)
    recorded_path = HERE / "recorded.pt"
    if recorded_path.exists() and options.source is None:
        recorded = torch.load(recorded_path, weights_only=True)
        for n, value in recorded.items():
            if n in after:
                got = after[n].detach().cpu().reshape(value.shape)
                same = torch.equal(got.nan_to_num(), value.nan_to_num()) and torch.equal(
                    got.isnan(), value.isnan()
                )
                print(
                    f"  note {n}: {'the same, bit for bit, as' if same else 'DIFFERS from'} "
                    "what this launch wrote in the model's run"
                )
    print("FAILED: the bug reproduces" if failed else "passed")
    return 1 if failed else 0


def check_close(spec: dict, after: dict) -> bool:
    """The written argument against the value the finding expected, by the
    finding's bar: root-mean-square and largest error, and no NaN/Inf where
    the expected value is finite."""
    name, bar = spec["arg"], spec["bar"]
    expected = torch.load(HERE / "expected.pt", weights_only=True).to(torch.float64)
    got = after[name].detach().cpu().reshape(expected.shape).to(torch.float64)
    finite = torch.isfinite(expected)
    bad = int((finite & ~torch.isfinite(got)).sum())
    diff = (got - expected).abs().where(finite & torch.isfinite(got), torch.zeros(()))
    rms = float(diff.pow(2).mean().sqrt()) if diff.numel() else 0.0
    worst = int(diff.reshape(-1).argmax()) if diff.numel() else 0
    largest = float(diff.reshape(-1)[worst]) if diff.numel() else 0.0
    failed = rms > bar["rms"] or largest > bar["max"] or bad > bar.get("bad", 0)
    print(
        f"  {'FAIL' if failed else 'ok  '} {name}: RMSE {rms:.3g} (bar {bar['rms']:.3g}), "
        f"largest error {largest:.3g} (bar {bar['max']:.3g})"
        + (f", {bad} NaN/Inf where the expected value is finite" if bad else "")
    )
    if diff.numel():
        print(
            f"       worst element, flat index {worst}: got {got.reshape(-1)[worst].item():.9g}, "
            f"expected {expected.reshape(-1)[worst].item():.9g}"
        )
    return failed


if __name__ == "__main__":
    sys.exit(main())
