"""Statistics kept inside the kernels Inductor generates
(AOTI_DEBUG_PRINTER_STATS_IN_KERNELS): the Triton kernels on the GPU
(inductor/stored_stats.py), the C++ kernels on the CPU (inductor/kept_cpp.py).

The correct models of findings.CORRECT, as the parts of one program, are
compiled at level 2 with the statistics in the kernels and without (a
statistics pass per record), and with the printer off. Their records
must be the same record for record (counts, minima and maxima exactly,
means and deviations within 1e-6), their outputs bit for bit the printer-off
run's, and on the GPU the statistics launches left must be those of what no
Triton kernel stored. The trap stops at the kernel that stored a NaN."""

from __future__ import annotations

import contextlib
import importlib.util
import json
import math
import os
import re

import pytest
import torch
from conftest import wrapper_source
from testmodels import findings, small

import aoti_debug_printer
from aoti_debug_printer.inductor.switches import hooks_wanted

pytestmark = [
    pytest.mark.slow,
    # No hook of patches/ covers the kernels' stores: where the hooks are
    # required (a patched torch's run) no method is wrapped, and no kernel
    # keeps statistics.
    pytest.mark.skipif(hooks_wanted() == "require", reason="wraps Inductor's kernels' stores"),
]

SWITCH = "AOTI_DEBUG_PRINTER_STATS_IN_KERNELS"
# On the CPU, the correct models the issue names (residual LayerNorm stacks,
# attention, conv and batch-norm, dynamic shapes, in-place ops, buffer reuse)
# and the two of 16-bit floats: three compiles of the whole list would take
# a worker minutes.
CPU_MODELS = findings.CORRECT[: findings.CORRECT.index("gpt2")]
DEVICES = [
    "cpu",
    pytest.param(
        "cuda",
        marks=[
            pytest.mark.gpu,
            pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA device"),
        ],
    ),
]
# The correct models whose packages import here (transformers', torchvision's).
NEEDS = {
    "gpt2": "transformers",
    "bert": "transformers",
    "llama": "transformers",
    "resnet18": "torchvision",
}
# The fields of a record's statistics that must be equal, and those that
# sums make (float64 sums, in another order).
EXACT = ("finite", "nan", "pos_inf", "neg_inf", "zeros", "min", "max", "absmax")
SUMMED = ("mean", "std")


@contextlib.contextmanager
def switch(value: str):
    before = os.environ.get(SWITCH)
    os.environ[SWITCH] = value
    try:
        yield
    finally:
        if before is None:
            os.environ.pop(SWITCH)
        else:
            os.environ[SWITCH] = before


# The same kernel configs in every compile, where this torch can pin them
# (Inductor's deterministic mode picks them without timing): a reduction's
# config decides its order of summation, and two compiles' autotuning may
# pick differently by the noise of its timings alone. The kernels never
# keep statistics while the autotuner times them (stored_stats.py).
PINNED = {"deterministic": True} if hasattr(torch._inductor.config, "deterministic") else {}


def compile_at(program, level: str, in_kernels: str, path) -> str:
    aoti_debug_printer.install()
    settings = {"aot_inductor.debug_intermediate_value_printer": level, **PINNED}
    with switch(in_kernels), torch._inductor.config.patch(settings):
        return torch._inductor.aoti_compile_and_package(program, package_path=str(path))


@pytest.fixture(scope="module", params=DEVICES)
def device(request):
    return request.param


def synchronize(device: str) -> None:
    if device == "cuda":
        torch.cuda.synchronize()


@pytest.fixture(scope="module")
def compiled(device, tmp_path_factory):
    """The correct models' program, its inputs, and its packages: printer
    off, level 2 with the statistics in the kernels, level 2 without."""
    keys = [
        name
        for name in (findings.CORRECT if device == "cuda" else CPU_MODELS)
        if name not in NEEDS or importlib.util.find_spec(NEEDS[name]) is not None
    ]
    model, inputs, dynamic = findings.build_parts({k: {"name": k} for k in keys}, device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    tmp = tmp_path_factory.mktemp(f"stored_{device}")
    return (
        inputs,
        {
            name: compile_at(program, level, in_kernels, tmp / f"{name}.pt2")
            for name, level, in_kernels in (
                ("off", "0", "1"),
                ("in_kernels", "2", "1"),
                ("separate", "2", "0"),
            )
        },
    )


def statistics_launches(run) -> int:
    """The printer's statistics kernels one call of `run` launches."""
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CUDA]) as prof:
        run()
        torch.cuda.synchronize()
    return sum(
        e.count for e in prof.key_averages() if re.search(r"(dense|batch|strided)_partials", e.key)
    )


def close(a, b, scale: float) -> bool:
    if a is None or b is None:
        return a is b
    return abs(a - b) <= 1e-6 * max(abs(a), abs(b), scale)


@pytest.fixture(scope="module")
def ran(device, compiled, tmp_path_factory):
    """Each package run once on the same inputs: its outputs, and the
    records of the two level-2 runs (in_kernels first)."""

    inputs, paths = compiled
    out = tmp_path_factory.mktemp("records") / "records.jsonl"
    outputs = {}
    with aoti_debug_printer.options(output=out, format="jsonl"):
        for name in ("off", "in_kernels", "separate"):
            outputs[name] = torch._inductor.aoti_load_package(paths[name])(*inputs)
            synchronize(device)
    return outputs, [json.loads(line) for line in out.read_text().splitlines()]


@pytest.mark.xdist_group("stored")
def test_records_equal_a_statistics_launch_per_record(compiled, ran):
    _, paths = compiled
    stored = wrapper_source(paths["in_kernels"]).count("aoti_debug_printer::value_stored(")
    assert stored > 50, f"only {stored} records take a kernel's statistics"
    assert "aoti_debug_printer::value_stored(" not in wrapper_source(paths["separate"])
    written = ran[1]
    runs = sorted({r["run"] for r in written if r["event"] == "tensor"})
    assert len(runs) == 2, runs  # level 0 writes none

    def keyed(run):
        return {
            (r["phase"], r["launch"], r["call"], r["kernel"], r["arg"]): r
            for r in written
            if r["run"] == run and r["event"] == "tensor"
        }

    in_kernels, separate = keyed(runs[0]), keyed(runs[1])
    assert in_kernels.keys() == separate.keys(), set(in_kernels) ^ set(separate)
    compared = 0
    for key, want in separate.items():
        got = in_kernels[key]
        assert (got["stats"] is None) == (want["stats"] is None), key
        if not want["stats"]:
            continue
        compared += 1
        g, w = got["stats"], want["stats"]
        for field in EXACT:
            assert g.get(field) == w.get(field), (key, field, g, w)
        scale = w.get("std") or 0.0
        scale = 0.0 if scale is None or math.isnan(scale) else scale
        for field in SUMMED:
            gv, wv = g.get(field), w.get(field)
            if isinstance(wv, float) and math.isnan(wv):
                assert isinstance(gv, float) and math.isnan(gv), (key, field)
            else:
                assert close(gv, wv, scale), (key, field, g, w)
    assert compared > 100
    print(f"{stored} records take a kernel's statistics; {compared} records compared")


@pytest.mark.xdist_group("stored")
def test_outputs_are_bit_for_bit_the_printer_off_runs(ran):
    outputs = ran[0]
    for name in ("in_kernels", "separate"):
        differ = [
            i
            for i, (got, want) in enumerate(zip(outputs[name], outputs["off"], strict=True))
            if not torch.equal(
                got.contiguous().view(torch.uint8), want.contiguous().view(torch.uint8)
            )
        ]
        assert not differ, f"{name}: outputs {differ} differ from the printer-off run's"


@pytest.mark.xdist_group("stored")
def test_only_what_no_generated_kernel_stored_takes_a_statistics_pass(device, compiled):
    inputs, paths = compiled
    if device == "cpu":
        # No launches to count: each C++ kernel that keeps statistics of a
        # buffer gets its slots just before its call, and keeps them.
        source = wrapper_source(paths["in_kernels"])
        given = source.count("aoti_debug_printer::keep_cpu_statistics(AOTI_DEBUG_PRINTER_API")
        calls = len(re.findall(r"^\s*cpp_fused_\w+\(", source, re.MULTILINE))
        assert 0 < given <= calls, (given, calls)
        assert "aoti_debug_printer::kernel_statistics = " not in wrapper_source(paths["separate"])
        return
    with aoti_debug_printer.options(output=os.devnull):
        counts = {}
        for name in ("in_kernels", "separate"):
            run = torch._inductor.aoti_load_package(paths[name])
            run(*inputs)  # warm
            counts[name] = statistics_launches(lambda run=run: run(*inputs))
    print(f"statistics launches per run: {counts}")
    # What is left: the records of what no Triton kernel stored whole (extern
    # kernels' outputs, model inputs, constants read before each launch).
    assert counts["in_kernels"] < counts["separate"], counts


@pytest.mark.parametrize("device", DEVICES)
def test_the_trap_stops_at_the_kernel_that_stored_the_nan(device, tmp_path, records):
    """nan_maker: an mm, then a fused kernel whose log makes NaN. The fused
    kernel's output record takes its statistics from the kernel's slot, read
    at once where the trap judges it."""
    model, inputs = small.build("nan_maker", device)
    program = torch.export.export(model, inputs)
    path = compile_at(program, "2", "1", tmp_path / "nan.pt2")
    assert "value_stored(" in wrapper_source(path)
    # AOTInductor's runner gives its own message: the record says who stopped.
    with aoti_debug_printer.options(trap=1), pytest.raises(RuntimeError):
        torch._inductor.aoti_load_package(path)(*inputs)
    trapped = [r for r in records() if r["event"] == "trap"]
    kind = "triton_" if device == "cuda" else "cpp_"
    assert len(trapped) == 1 and trapped[0]["kernel"].startswith(kind), trapped
    after = [
        r
        for r in records()
        if r["event"] == "tensor"
        and r["phase"] == "after_launch"
        and r["kernel"] == trapped[0]["kernel"]
    ]
    assert after and after[-1]["stats"]["nan"] > 0
