"""Real AOTInductor compiles on CPU, at every level, and what they do."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from conftest import compile_package, custom_op_output_record, level1_lines, wrapper_source
from testmodels import small

import aoti_debug_printer
from aoti_debug_printer import _C
from aoti_debug_printer.inductor import codegen

pytestmark = pytest.mark.slow


def run(package_path, model_name, repeat=1):
    _, inputs = small.build(model_name)
    compiled = torch._inductor.aoti_load_package(str(package_path))
    for _ in range(repeat):
        out = compiled(*inputs)
    return out


def eager(model_name):
    model, inputs = small.build(model_name)
    with torch.no_grad():
        return model(*inputs)


def launches(
    source: str, phase: int, flags: int | None = None, level: int | None = None
) -> list[str]:
    """Kernel names of the launch events the generated code emits (of a
    compile at `level`, with `flags`, where given: CONSTANTS_HOLD, which
    nearly every event before launch carries, aside)."""
    pattern = (
        r"aoti_debug_printer::launch\(AOTI_DEBUG_PRINTER_API, "
        + (r"\d" if level is None else str(level))
        + f", {phase}, "
        + r'"([^"]+)", (\d+)\);'
    )
    return [
        m.group(1)
        for m in re.finditer(pattern, source)
        if flags is None or int(m.group(2)) & ~_C.CONSTANTS_HOLD == flags
    ]


def test_level0_generated_code_is_stock(package, tmp_path):
    ours = wrapper_source(package("mlp", 0, source_only=True))
    aoti_debug_printer.uninstall()
    try:
        stock = wrapper_source(compile_package("mlp", 0, tmp_path / "stock.pt2", source_only=True))
    finally:
        aoti_debug_printer.install()
    assert "aoti_debug_printer" not in ours

    # Identical but for the trailing compile/link command comments, which
    # name the per-compile cache paths.
    def code(src):
        return re.sub(r"^// (Compile|Link) cmd\n// .*$", "", src, flags=re.M).rstrip()

    assert code(ours) == code(stock)


@pytest.mark.parametrize("level", [1, 2, 3])
def test_generated_calls_per_level(package, level):
    source = wrapper_source(package("mlp", level))
    stock3 = wrapper_source(package("mlp", 3))
    kernels = launches(stock3, 0)
    assert len(kernels) >= 4 and any(k.startswith("cpp_fused_") for k in kernels)
    assert any(k.startswith("aoti_torch_cpu_") for k in kernels)
    # Never the upstream names: libtorch exports those too.
    assert not re.search(r"^\s*aoti_torch_(print|save)_tensor_handle\(", source, re.M)
    assert 'printf("[' not in source
    values = re.findall(r"aoti_debug_printer::value\(AOTI_DEBUG_PRINTER_API, (\d), (\d),", source)
    # Every launch event carries the level the model was compiled at.
    assert launches(source, 0, level=level) == kernels
    # No line between the mlp's kernels names a constant: what a record of
    # one read holds for the next (CONSTANTS_HOLD, before launch only).
    held = re.findall(r"aoti_debug_printer::launch\(.*, (\d), .*, (\d+)\);", source)
    assert {(p, int(f) & _C.CONSTANTS_HOLD) for p, f in held} == {
        ("0", _C.CONSTANTS_HOLD),
        ("1", 0),
    }
    if level == 3:
        # Announced (and, being level 3, checked for CUDA errors by default).
        assert launches(source, 1, flags=1) == kernels
        # Arguments are only noted (WATCH), before launch.
        assert values and set(values) == {("3", "0")}
    else:
        # Records end with records_end: their statistics may wait for it.
        assert launches(source, 1, flags=_C.RECORDS_END) == kernels
        assert {a for a, _ in values} == {str(level)}
        # Every kernel records before and after, and the inputs once.
        assert sum(p == "0" for _, p in values) == sum(p == "1" for _, p in values) >= len(kernels)
        assert sum(p == "2" for _, p in values) == 1
        # The mlp's kernels follow one another with only buffers made between.
        assert assert_records_end_after_records(source) > 0


def assert_records_end_after_records(source: str) -> int:
    """Every launch event that says RECORDS_END is followed by its records,
    then records_end, or the comment that takes it back where nothing but
    lines that do no GPU work lie before the next event, which then says
    RECORDS_CONTINUE; events without the flag by neither. Returns how many
    records_end were taken back."""
    taken_back = "// aoti-debug-printer: records continue below"
    lines = [ln.strip() for ln in source.splitlines()]
    lines = [ln for ln in lines if ln and (not ln.startswith("//") or ln == taken_back)]
    event = re.compile(r"aoti_debug_printer::launch\(AOTI_DEBUG_PRINTER_API, \d, \d, .*, (\d+)\);")
    events = [(i, int(m[1])) for i, ln in enumerate(lines) if (m := event.fullmatch(ln))]
    ends = continued = 0
    for (i, flags), (k, next_flags) in zip(events, events[1:] + [(len(lines), 0)]):
        j = i + 1
        while lines[j].startswith("aoti_debug_printer::value("):
            j += 1
        ended = lines[j] in (taken_back, "aoti_debug_printer::records_end(AOTI_DEBUG_PRINTER_API);")
        assert ended == bool(flags & _C.RECORDS_END), lines[i : j + 1]
        ends += ended
        if ended and lines[j] == taken_back:
            assert all(codegen._does_no_gpu_work(ln) for ln in lines[j + 1 : k]), lines[j:k]
            assert next_flags & _C.RECORDS_CONTINUE, lines[j : k + 1]
            continued += 1
        else:
            assert not next_flags & _C.RECORDS_CONTINUE, lines[j : k + 1]
    assert ends > 0 and ends - continued == source.count("aoti_debug_printer::records_end(")
    return continued


@pytest.mark.parametrize("level", [1, 2, 3])
def test_filter_applies_at_every_level(package, level):
    # A glob and an exact name, in another case than the kernels'.
    source = wrapper_source(
        package("mlp", level, kernels="{CPP_FUSED_*, aoti_torch_cpu_MM_out}", source_only=True)
    )
    kernels = launches(source, 0)
    selected = [k for k in kernels if k.startswith("cpp_fused_")]
    assert 0 < len(selected) < len(kernels)
    recorded = {k for k in re.findall(r'aoti_debug_printer::value\([^;]*?, "([^"]*)", "', source)}
    if level == 3:
        assert launches(source, 0, flags=1) == selected
        assert launches(source, 1, flags=1) == selected
        # Unselected kernels are still checked for CUDA errors, silently.
        assert launches(source, 1, flags=4) == [k for k in kernels if k not in selected]
    else:
        # Unselected kernels still advance the launch index, silently.
        assert launches(source, 0) == kernels
        assert launches(source, 0, flags=_C.RECORDS_END) == selected
        assert_records_end_after_records(source)
    assert recorded - {""} == set(selected)


def test_level2_records_every_kernel(package, records):
    path = package("mlp", 2)
    kernels = launches(wrapper_source(package("mlp", 3)), 0)
    out = run(path, "mlp")
    recs = [r for r in records() if r["event"] == "tensor"]
    assert [r["arg"] for r in recs if r["phase"] == "model_input"] == ["arg4_1"]
    for phase in ("before_launch", "after_launch"):
        seen = []
        for r in recs:
            if r["phase"] == phase and (not seen or seen[-1] != r["kernel"]):
                seen.append(r["kernel"])
        assert seen == kernels
    assert {r["run"] for r in recs} == {recs[0]["run"]}
    # Every output before launch: its metadata, no statistics of leftover
    # memory; after launch, its statistics.
    unwritten = [r for r in recs if r["phase"] == "before_launch" and r["role"] == "write"]
    assert unwritten and {r["kernel"] for r in unwritten} <= set(kernels)
    for r in unwritten:
        assert r["stats"] is None and r["problem"] == "output, not yet written: no statistics"
        assert "values" not in r and r["shape"]
        assert [
            a
            for a in recs
            if a["phase"] == "after_launch" and a["launch"] == r["launch"] and a["arg"] == r["arg"]
        ][0]["stats"] is not None
    assert [r["launch"] for r in recs if r["phase"] != "model_input"] == sorted(
        r["launch"] for r in recs if r["phase"] != "model_input"
    )
    # The last kernel's output is the model's output: same statistics.
    last = [
        r
        for r in recs
        if r["phase"] == "after_launch"
        and r["kernel"] == kernels[-1]
        and r["shape"] == list(out.shape)
    ][0]
    stats = aoti_debug_printer.stats(out)
    assert last["stats"]["min"] == pytest.approx(stats["min"])
    assert last["stats"]["max"] == pytest.approx(stats["max"])
    assert last["stats"]["mean"] == pytest.approx(out.double().mean().item())
    assert last["stats"]["std"] == pytest.approx(out.double().std().item())
    assert last["values"] == [f"{v:.6g}" for v in out.flatten().tolist()]


def test_level2_text_goes_to_stdout(package, capfd):
    run(package("mlp", 2), "mlp")
    out = capfd.readouterr().out
    assert re.search(r"^\[aoti-debug-printer\] model_input arg4_1 \(run \d+\)$", out, re.M)
    assert re.search(
        r"^\[aoti-debug-printer\] after_launch cpp_fused_\w+ buf\d+ "
        r"\(run \d+, launch \d+, call 0\)$",
        out,
        re.M,
    )
    assert re.search(r"^    min=\S+ max=\S+ mean=\S+ std=\S+ absmax=\S+$", out, re.M)
    assert re.search(r"^    finite=\d+ nan=0 \+inf=0 -inf=0 zeros=\d+$", out, re.M)


@pytest.mark.parametrize("model_name", ["mlp", "externs"])
def test_outputs_identical_with_printer_on_and_off(package, model_name, records, dump_dir):
    reference = run(package(model_name, 0), model_name)
    for level in (1, 2, 3):
        assert torch.equal(run(package(model_name, level), model_name), reference)
    torch.testing.assert_close(reference, eager(model_name), rtol=1e-4, atol=1e-5)


def test_aten_fallback_records_inputs_constants_and_output(package, records):
    out = run(package("externs", 2), "externs")
    addmm = [r for r in records() if r.get("kernel") == "aoti_torch_cpu_addmm_out"]
    args = {r["arg"] for r in addmm}
    assert any(a.startswith("buf") for a in args)
    assert any(not a.startswith(("buf", "arg")) for a in args), "the constant (bias) is recorded"
    assert {r["phase"] for r in addmm} == {"before_launch", "after_launch"}
    assert torch.equal(out, run(package("externs", 0), "externs"))


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_a_tensor_no_kernel_wrote_since_its_record_is_read_once(package, records, device):
    """externs: x is a model input that the sin kernel reads; w1 and w2 are
    model inputs that two mm kernels read kernels later; each kernel's output
    is read by the next. Every such tensor is read once a run. With roles
    not trusted (roles=0) every record after a launch reads again: the
    records must be the same."""
    path = package("externs", 2, device=device)
    # The run's first kernel continues the model inputs' records.
    first = re.search(
        r"aoti_debug_printer::launch\(AOTI_DEBUG_PRINTER_API, 2, 0, .*, (\d+)\);",
        wrapper_source(path),
    )
    assert int(first[1]) & _C.RECORDS_CONTINUE, first[0]
    _, inputs = small.build("externs", device)
    compiled = torch._inductor.aoti_load_package(str(path))

    out, read_once, tensors = counted_run(compiled, inputs, records)
    out_again, read_again, kept_again = counted_run(compiled, inputs, records, roles=0)
    assert torch.equal(out, out_again)
    # Each value a record holds is read once: the inputs, the constant, and
    # what each kernel wrote.
    inputs_read = len({r["arg"] for r in tensors if r["phase"] == "model_input"})
    constants_read = len({r["arg"] for r in tensors if r["why"] == "constant"})
    written = [
        r for r in tensors if r["phase"] == "after_launch" and r["role"] in ("write", "read_write")
    ]
    assert (inputs_read, constants_read) == (3, 1) and len(written) >= 3
    assert read_once == inputs_read + constants_read + len(written) < read_again
    again = {(r["phase"], r["launch"], r["arg"]): r for r in kept_again}
    compared = 0
    for r in tensors:
        if r["stats"] and "unsupported" not in r["stats"]:
            assert r["stats"] == again[(r["phase"], r["launch"], r["arg"])]["stats"], r
            compared += 1
    # Every record but the outputs' before launch (leftover memory) has statistics.
    assert compared > read_once


def counted_run(compiled, inputs, records, **opts):
    """One run of `compiled`: its output, the tensors its records read, and
    its tensor records."""
    start, read = len(records()), _C.tensors_read()
    with aoti_debug_printer.options(**opts):
        out = compiled(*inputs)
    kept = [r for r in records()[start:] if r["event"] == "tensor"]
    return out, _C.tensors_read() - read, kept


def test_a_constant_is_read_once_a_process_while_unchanged(package, records):
    """externs reads one constant (its addmm's weight): read in the first
    run only, then again once AOTInductor's constant update gives it new
    values, and once the caller changes a constant it manages in place."""
    _, inputs = small.build("externs")
    compiled = torch._inductor.aoti_load_package(str(package("externs", 2)))

    def constant_record(kept):
        (record,) = [r for r in kept if r["why"] == _C.WHY_CONSTANT]
        return record

    _, first, kept = counted_run(compiled, inputs, records)
    _, second, kept_again = counted_run(compiled, inputs, records)
    assert second == first - 1
    assert constant_record(kept_again)["stats"] == constant_record(kept)["stats"]
    name = constant_record(kept)["arg"]
    (fqn,) = [f for f in compiled.get_constant_fqns() if f.endswith(name)]
    for user_managed in (False, True):
        new_value = torch.full_like(dict(small.build("externs")[0].named_parameters())[fqn], 3.0)
        compiled.load_constants(
            {fqn: new_value}, check_full_update=False, user_managed=user_managed
        )
        _, third, kept = counted_run(compiled, inputs, records)
        assert third == first and constant_record(kept)["stats"]["min"] == 3.0, kept
        if user_managed:
            # The caller's own change, in place: its version tells.
            new_value.fill_(4.0)
            _, fourth, kept = counted_run(compiled, inputs, records)
            assert fourth == first and constant_record(kept)["stats"]["min"] == 4.0


def test_a_buffer_the_program_changes_is_read_at_every_run(package, records):
    """steps: the program adds 1 to its buffer at each run, in a kernel whose
    records say so: each run's record before that kernel shows the buffer as
    the last run left it, although the buffer is a constant of the program."""
    _, inputs = small.build("steps")
    compiled = torch._inductor.aoti_load_package(str(package("steps", 2)))
    seen = []
    for _ in range(3):
        _, _, kept = counted_run(compiled, inputs, records)
        (before,) = [r for r in kept if r["arg"] == "steps" and r["phase"] == "before_launch"]
        seen.append(before["stats"]["min"])
    assert seen == [0.0, 1.0, 2.0]


@pytest.mark.parametrize("device", ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)])
def test_custom_op_called_through_the_proxy_executor_is_recorded(
    package, records, dump_dir, device
):
    path = package("custom_op", 2, device=device)
    source = wrapper_source(path)
    assert "aoti_torch_proxy_executor_call_function" in source
    assert "adp_models::scale_rows" in launches(source, 0)
    assert "adp_models::scale_rows" in launches(source, 1)
    _, (x, s) = small.build("custom_op", device)

    def run_on_device(level):
        return torch._inductor.aoti_load_package(str(package("custom_op", level, device=device)))(
            x, s
        )

    out = run_on_device(2)
    output = custom_op_output_record(records(), x, s)
    made = output["arg"]
    assert output["device"].startswith(device)
    made_by_op = ((torch.relu(x) + 1) * s[:, None]).cpu()
    assert torch.equal(out, run_on_device(0))
    # Level 1 saves what the op made.
    run_on_device(1)
    aoti_debug_printer.wait_for_saves()  # the saver's thread writes behind the model
    manifest = [json.loads(line) for line in (dump_dir / "manifest.jsonl").read_text().splitlines()]
    (saved,) = [
        r
        for r in manifest
        if r["event"] == "tensor"
        if r["kernel"] == "adp_models::scale_rows"
        and r["phase"] == "after_launch"
        and r["arg"] == made
    ]
    torch.testing.assert_close(torch.load(dump_dir / saved["file"], weights_only=True), made_by_op)


def test_level1_saves_loadable_snapshots(package, dump_dir):
    out = run(package("externs", 1), "externs", repeat=2)
    aoti_debug_printer.wait_for_saves()  # the saver's thread writes behind the model
    lines = [json.loads(line) for line in (dump_dir / "manifest.jsonl").read_text().splitlines()]
    # Each run's numerics environment, before its snapshots.
    environments = [r for r in lines if r["event"] == "environment"]
    assert [r["run"] for r in environments] == sorted(
        {r["run"] for r in lines if r["event"] == "tensor"}
    )
    # The Inductor config the program was compiled with, the same for both runs.
    assert len({r["inductor_config"] for r in environments}) == 1
    assert re.fullmatch(r"[0-9a-f]{12}", environments[0]["inductor_config"])
    manifest = [r for r in lines if r["event"] == "tensor"]
    files = sorted(p.name for p in dump_dir.glob("*.pt"))
    # Outputs before launch hold leftover memory: a manifest line says so,
    # with no file and no statistics.
    unwritten = [r for r in manifest if "file" not in r]
    assert unwritten and all(
        r["phase"] == "before_launch"
        and r["role"] == "write"
        and r["stats"] is None
        and r["problem"] == "output, not yet written: no statistics"
        for r in unwritten
    )
    manifest = [r for r in manifest if "file" in r]
    assert not [r for r in manifest if r["phase"] == "before_launch" and r["role"] == "write"]
    assert sorted(r["file"] for r in manifest) == files
    assert all(":" not in f for f in files)
    assert len({r["run"] for r in manifest}) == 2
    mm = [r for r in manifest if r["kernel"] == "aoti_torch_cpu_mm_out"]
    assert {r["call"] for r in mm} == {0, 1}
    for r in manifest:
        t = torch.load(dump_dir / r["file"], weights_only=True)
        assert list(t.shape) == r["shape"]
        assert str(t.dtype) == "torch." + r["dtype"]
        for key in ("run", "launch", "call", "kernel", "arg", "phase", "stats"):
            assert key in r
        # Statistics cover the finite values only.
        finite = t.double()[torch.isfinite(t)]
        assert r["stats"]["finite"] == finite.numel()
        if finite.numel():
            assert finite.mean().item() == pytest.approx(r["stats"]["mean"], rel=1e-9)
    # The second mm's output, after launch, is the model's output.
    last = [
        r
        for r in mm
        if r["call"] == 1 and r["phase"] == "after_launch" and r["shape"] == list(out.shape)
    ]
    assert len(last) == 2  # one per run
    for r in last:
        assert torch.equal(torch.load(dump_dir / r["file"], weights_only=True), out)
    inputs = [r for r in manifest if r["phase"] == "model_input"]
    assert len(inputs) == 2 * 3


@pytest.mark.parametrize("model_name", ["externs", "mlp", "dynamic"])
def test_level1_queued_to_the_saver_writes_what_the_models_thread_would(
    package, model_name, tmp_path
):
    """The same runs saved on the model's thread (save_memory=0), queued in
    staging memory larger than the run, in memory of a few snapshots (1 KiB:
    taken and given back around and around), and in memory smaller than a
    64-byte piece (none: each snapshot is saved on the model's thread): the
    same lines, in the same order, with the same bytes in every file; the
    outputs are the same."""
    compiled = torch._inductor.aoti_load_package(str(package(model_name, 1)))
    _, inputs = small.build(model_name)
    dumps, outputs = {}, {}
    for memory in ("0", "512", "0.001", "0.00005"):
        name = f"mem{memory}"
        with aoti_debug_printer.options(dump_dir=tmp_path / name, save_memory=memory):
            outputs[name] = [compiled(*inputs) for _ in range(2)]
        dumps[name] = level1_lines(tmp_path / name)
    assert dumps["mem0"] and len({json.dumps(d, sort_keys=True) for d in dumps.values()}) == 1
    for out in outputs.values():
        assert all(torch.equal(a, b) for a, b in zip(out, outputs["mem0"]))
    # Each snapshot's line says how long the model's thread waited for the
    # disk: every one it saved itself, and none where the memory held them
    # (the run is smaller than it).
    waited = [
        r
        for r in map(json.loads, (tmp_path / "mem0.00005" / "manifest.jsonl").open())
        if "file" in r
    ]
    assert waited and all(r["save_waited_ms"] > 0 for r in waited)
    held = [r for r in map(json.loads, (tmp_path / "mem512" / "manifest.jsonl").open())]
    assert not [r for r in held if "save_waited_ms" in r]


# Runs a package at level 1 and exits at once: whatever the saver's thread
# still holds is written before the process ends.
EXITS_AT_ONCE = """
import sys, torch, aoti_debug_printer
from testmodels import small
_, inputs = small.build("mlp")
aoti_debug_printer.set_option("dump_dir", sys.argv[2])
compiled = torch._inductor.aoti_load_package(sys.argv[1])
for _ in range(int(sys.argv[3])):
    compiled(*inputs)
"""


def test_a_process_that_exits_right_after_its_runs_keeps_every_snapshot(package, tmp_path):
    done = subprocess.run(
        [sys.executable, "-c", EXITS_AT_ONCE, package("mlp", 1), tmp_path / "dump", "20"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert done.returncode == 0, done.stderr
    d = aoti_debug_printer.load_dump(tmp_path / "dump")
    assert not d.skipped
    per_run: dict[int, int] = {}
    for r in d.records:
        if r.path is not None:
            r.load()
            per_run[r.tensor.run] = per_run.get(r.tensor.run, 0) + 1
    assert len(per_run) == 20 and len(set(per_run.values())) == 1


def test_level3_prints_kernel_names_in_order(package, capfd):
    kernels = launches(wrapper_source(package("mlp", 3)), 0)
    run(package("mlp", 3), "mlp")
    lines = [ln for ln in capfd.readouterr().out.splitlines() if ln.startswith("[aoti-debug")]
    expected = []
    for k in kernels:
        expected += [f"before_launch {k} (run", f"after_launch {k} (run"]
    assert [ln.split("] ", 1)[1].split(" (run")[0] + " (run" for ln in lines] == expected
    assert all(f"launch {i}," in lines[2 * i] for i in range(len(kernels)))


# Runs a package twice into an unusable dump directory, saving its output.
UNSAVED = """
import sys, torch, aoti_debug_printer
from testmodels import small
_, inputs = small.build("mlp")
with aoti_debug_printer.options(dump_dir=sys.argv[2]):
    compiled = torch._inductor.aoti_load_package(sys.argv[1])
    for _ in range(2):
        out = compiled(*inputs)
torch.save(out, sys.argv[3])
"""


def test_unwritable_dump_dir_reports_once_and_model_runs(package, tmp_path):
    """In a process of its own: the summary of what could not be saved comes
    at its exit, and belongs to no other test's output."""
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    done = subprocess.run(
        [sys.executable, "-c", UNSAVED, package("mlp", 1), blocker / "dump", tmp_path / "out.pt"],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
    )
    assert done.returncode == 0, done.stderr
    errors = [line for line in done.stderr.splitlines() if "[aoti-debug-printer] ERROR" in line]
    assert len(errors) == 2, done.stderr
    assert "Not a directory" in errors[0]
    # At exit, how many in all: every tensor of both runs.
    assert re.search(r"ERROR: \d+ snapshots in all could not be saved$", errors[1]), errors
    out = torch.load(tmp_path / "out.pt")
    assert torch.equal(out, run(package("mlp", 0), "mlp"))


def test_symint_arguments_print_as_integers(package, records):
    compiled = torch._inductor.aoti_load_package(str(package("dynamic", 2)))
    x = torch.randn(7, 3)
    torch.testing.assert_close(compiled(x), torch.softmax(x * 2, dim=0))
    scalars = [r for r in records() if r["event"] == "scalar"]
    assert scalars, "the C++ kernels take the batch size"
    assert all(r["type"] == "int64" and r["kernel"].startswith("cpp_fused_") for r in scalars)
    assert "7" in {r["value"] for r in scalars}
