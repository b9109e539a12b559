"""A finding tool must name the right kernel or nothing. On correct models
of several architectures, `diverge` and `compare` (two differently
configured compiles) report nothing, nor does the write guard; with one op planted wrong at several
places, `diverge` names the kernel that holds it. Real AOTInductor compiles
and runs, on CPU, and on CUDA where a GPU is present."""

from __future__ import annotations

import contextlib
import dataclasses
import importlib.util
import inspect
import json
import os
import re
import shutil
import subprocess
import sys
import warnings
import zipfile
from pathlib import Path

import pytest
import torch
from conftest import cli
from testmodels import findings
from testmodels.findings import compile_and_dump

import aoti_debug_printer
from aoti_debug_printer import format_comparison, format_divergence, load_dump
from aoti_debug_printer.records import Phase, Reason, Role
from aoti_debug_printer.tools.diverge.program import load_program

pytestmark = pytest.mark.slow

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]
# Another configuration of the same program: every node its own kernel, and
# C++ kernels without SIMD (other loops, other orders of reduction; and a
# third cheaper to compile than the default).
OTHER_CONFIG = {"max_fusion_size": 1, "cpp.simdlen": 0}


def guard_changes_no_output(package: Path, inputs, dump_root: Path) -> list[bool]:
    """The write guard on a correct model: runs at either level raise no
    alarm (every argument a kernel only reads, the buffers it never stores
    among them, is unchanged after it; an alarm fails the run), and give
    outputs bit-identical to the guard off: per output, whether they do.
    Each run loads the package afresh: a model may change its own buffers."""
    off = torch._inductor.aoti_load_package(str(package))(*inputs)
    same = [True] * len(off)
    for guard in (1, 2):
        with aoti_debug_printer.options(guard=guard, dump_dir=dump_root / f"guard{guard}"):
            on = torch._inductor.aoti_load_package(str(package))(*inputs)
        assert len(on) == len(off)
        same = [s and torch.equal(x, y) for s, x, y in zip(same, off, on)]
    return same


def planted_nodes(program, kind: str) -> set[str]:
    op = findings.PLANTED_OPS[kind]
    return {n.name for n in program.graph.nodes if n.target == op}


def names_the_planted_kernel(record, planted: set[str]) -> bool:
    """The planted op's own value, or the kernel that fuses it where that
    value is never stored (Inductor names a kernel after the ops it holds)."""
    return record.node in planted or "planted" in record.kernel


def has_packages_of(name: str) -> bool:
    """Whether the packages a model comes from import: transformers' GPT-2,
    BERT and Llama, torchvision's ResNet-18."""
    needs = {
        "gpt2": "transformers",
        "bert": "transformers",
        "llama": "transformers",
        "resnet18": "torchvision",
    }
    return name not in needs or importlib.util.find_spec(needs[name]) is not None


def needs_packages_of(name: str):
    if not has_packages_of(name):
        pytest.skip(f"{name} needs a package this Python lacks")


@dataclasses.dataclass
class Judged:
    """A program of findings.Parts, compiled and run, and what the tools
    made of it: each test judges its own part."""

    program: torch.export.ExportedProgram
    parts: findings.PartsOfProgram
    found: aoti_debug_printer.Divergence | None
    comparison: aoti_debug_printer.Comparison | None = None
    inputs: tuple = ()
    dump: Path | None = None
    # Part key -> its output unchanged by the write guard.
    guard_keeps_output: dict[str, bool] = dataclasses.field(default_factory=dict)

    def divergence(self, key: str) -> aoti_debug_printer.Divergence:
        return self.parts.divergence(self.found, key)


def judge_correct_models(judged, device: str, tmp: Path) -> Judged:
    """Every correct model whose packages import, as the parts of one
    program: compiled twice (Inductor's default, and OTHER_CONFIG), judged
    against eager, the two compiles compared, and run with the write guard
    on."""
    keys = [name for name in findings.CORRECT if has_packages_of(name)]
    model, inputs, dynamic = findings.build_parts({k: {"name": k} for k in keys}, device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    a = compile_and_dump(program, inputs, tmp / "a")
    b = compile_and_dump(program, inputs, tmp / "b", OTHER_CONFIG)
    judged = Judged(
        program,
        findings.PartsOfProgram(program, a),
        aoti_debug_printer.first_divergence_from_eager(program, dump=a),
        aoti_debug_printer.compare(a, b),
        dump=a,
    )
    same = guard_changes_no_output(a.with_suffix(".pt2"), inputs, tmp)
    judged.guard_keeps_output = dict(zip(keys, same))
    return judged


def planted_key(name: str, position: int, kind: str) -> str:
    return f"{name}_at_{position}_{kind}"


def program_of_planted(cases, device: str) -> tuple[torch.export.ExportedProgram, tuple]:
    """The planted `cases` ((model, position, kind) each) as the parts of
    one exported program, keyed by planted_key; and its inputs."""
    parts = {planted_key(*case): dict(zip(("name", "plant_at", "kind"), case)) for case in cases}
    model, inputs, dynamic = findings.build_parts(parts, device)
    return torch.export.export(model, inputs, dynamic_shapes=dynamic), inputs


def judge_planted_bugs(judged, device: str, tmp: Path) -> Judged:
    """Every planted case on `device` whose packages import, as the parts of
    one program compiled with every kind's wrong lowering (each kind has an
    op of its own): each part holds its own bug, and is judged against
    eager."""
    program, inputs = program_of_planted(
        [case for case in planted_cases(device) if has_packages_of(case[0])], device
    )
    with findings.wrong_lowering(*{kind for _, _, kind in planted_cases(device)}):
        dump = compile_and_dump(program, inputs, tmp / "dump")
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    return Judged(program, findings.PartsOfProgram(program, dump), found, None, inputs, dump)


@pytest.fixture(scope="module")
def judged(tmp_path_factory):
    """judged(what, *arguments) -> Judged: what `what(judged, *arguments,
    tmp)` judged (judge_correct_models, judge_planted_bugs,
    compare_with_a_right_compile), made once per module (the tests of each
    share an xdist_group: one pytest-xdist worker)."""
    made: dict[tuple, Judged] = {}

    def get(what, *arguments) -> Judged:
        key = (what.__name__, *arguments)
        if key not in made:
            made[key] = what(get, *arguments, tmp_path_factory.mktemp(what.__name__))
        return made[key]

    return get


@pytest.mark.xdist_group("correct_models")
@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", findings.CORRECT)
def test_correct_models_raise_no_alarm(name, device, judged, record_property):
    needs_packages_of(name)
    every = judged(judge_correct_models, device)
    # The whole program first: no false alarm, whatever part a value is of
    # (Inductor fuses across parts, so a value no node names may be of a
    # launch of two), and every value that holds a node is of one part.
    assert every.found.first is None, format_divergence(every.found)
    written, compared, reasons = every.found.coverage()
    assert written == compared + sum(reasons.values()) and compared >= 0.98 * written
    assert not [r for r in every.parts.unattributed(every.found) if r.node]
    # Every value read before a kernel says what it holds: a buffer updated
    # in place of memory nothing wrote yet (a reuse of a fresh allocation)
    # is not yet written, and its leftover bytes are neither read nor judged.
    unnamed = [
        (r.kernel, r.arg)
        for r in (d.tensor for d in load_dump(every.dump).records)
        if r.phase is Phase.BEFORE_LAUNCH and r.stats is not None and not (r.node or r.why)
    ]
    assert not unnamed, unnamed

    found = every.divergence(name)
    program = every.program

    written, compared, reasons = found.coverage()
    assert found.first is None, f"false alarm on {name}:\n{format_divergence(found)}"
    # Checked something real, and every value left out is accounted for.
    assert compared >= 2 and written == compared + sum(reasons.values())
    # No blind spots: at least 98% of what kernels wrote is judged.
    assert compared >= 0.98 * written, format_divergence(found)
    # Clear of the bar, not just under it (a value whose error equals the
    # benchmark's, as a TF32 matmul's does, sits at 1/k of it).
    assert max(m.own.ratio for m in found.matches) < 0.75, format_divergence(found)
    record_property("diverge_coverage", f"{compared}/{written} {dict(reasons)}")
    # What a convolution or an attention computes is compared at that call,
    # though the call allocates its output itself (an output handle) or
    # leaves its bias to the next kernel (CUDA): else an error of either is
    # put down to the kernel after it.
    judged_nodes = {m.node.split("/")[0] for m in found.matches}
    calls = {
        n.name
        for n in program.graph.nodes
        if getattr(n.target, "overloadpacket", None)
        in (torch.ops.aten.conv2d, torch.ops.aten.scaled_dot_product_attention)
        and every.parts.of_node.get(n.name) == name
    }
    assert calls <= judged_nodes, (calls - judged_nodes, format_divergence(found))

    assert every.guard_keeps_output[name]

    c = every.parts.comparison(every.comparison, name)
    assert c.matched_by == "node"
    assert c.first is None, f"false alarm on {name}:\n{format_comparison(c)}"
    # compare matches values by node; values judged by a formula have none.
    assert len(c.compared) > sum(1 for m in found.matches if m.record.node) // 2
    record_property(
        "compare_matched",
        f"{len(c.compared)} values, {len(c.only_a)} only in A, {len(c.only_b)} only in B",
    )


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize(
    "name,setting", [("post_ln_mlp", "matmul_high"), ("conv_bn", "cudnn_tf32")]
)
def test_numerics_settings_users_have_on_raise_no_alarm(name, setting, device, tmp_path):
    """float32_matmul_precision("high") and cuDNN's TF32: the benchmark is
    made under the run's settings, so their noise is the bar there."""
    model, inputs, _ = findings.build(name, device=device)
    program = torch.export.export(model, inputs)
    with findings.numerics(setting):
        found = aoti_debug_printer.first_divergence_from_eager(program)
    assert found.first is None, format_divergence(found)
    env = found.environment
    assert env is not None and env.device != ""
    if setting == "matmul_high":
        assert env.matmul_precision == "high"
    else:
        assert env.tf32_cudnn is True
        # The benchmark runs each convolution in the compiled run's memory
        # format (cuDNN applies TF32 to channels-last ones only): the error
        # accumulated from the inputs is within its bar too.
        assert found.drift is None, format_divergence(found)


def planted_cases(device: str):
    cases = list(findings.PLANTED)
    if device == "cuda":
        cases += findings.PLANTED_CUDA
    return cases


@pytest.mark.xdist_group("planted_bugs")
@pytest.mark.parametrize(
    "device,name,position,kind",
    [("cpu", *c) for c in planted_cases("cpu")]
    + [pytest.param("cuda", *c, marks=pytest.mark.gpu) for c in planted_cases("cuda")],
)
def test_a_planted_bug_is_named(name, position, kind, device, judged):
    needs_packages_of(name)
    every = judged(judge_planted_bugs, device)
    key = planted_key(name, position, kind)
    found = every.divergence(key)
    assert found.first is not None, (
        f"{kind} in {name} at {position} not found:\n" + format_divergence(found)
    )
    planted = {n for n in planted_nodes(every.program, kind) if every.parts.of_node[n] == key}
    assert len(planted) == 1
    assert names_the_planted_kernel(found.first.record, planted), format_divergence(found)
    # Every value written before it is within the bar.
    before = [m for m in found.matches if m.record.launch < found.first.record.launch]
    assert not any(m.diverged for m in before)
    # The whole program's first divergence is one of the planted kernels.
    first = every.found.first
    assert first is not None and "planted" in (first.record.kernel + first.node)


def compare_with_a_right_compile(judged, device: str, tmp: Path) -> Judged:
    """The planted program's post-LN MLP cases as a program of their own,
    compiled right (A) and with the wrong lowerings (B), and compared. (Two
    configs of one program: the correct models' test, and
    test_compare_across_configs_from_the_command_line. A right compile of
    the whole planted program took 72 s of a worker here, these two 42 s.)"""
    cases = [case for case in findings.PLANTED if case[0] == "post_ln_mlp"]
    program, inputs = program_of_planted(cases, device)
    right = compile_and_dump(program, inputs, tmp / "right")
    with findings.wrong_lowering(*{kind for _, _, kind in cases}):
        wrong = compile_and_dump(program, inputs, tmp / "wrong")
    comparison = aoti_debug_printer.compare(right, wrong)
    return Judged(program, findings.PartsOfProgram(program, wrong), None, comparison, inputs, wrong)


@pytest.mark.xdist_group("right_and_wrong_compile")
@pytest.mark.parametrize("kind", ["tanh_gelu", "gelu_constant", "bf16_reduction"])
def test_compare_names_the_kernel_one_compile_got_wrong(kind, judged):
    """Two compiles of one program, the second with the planted lowerings:
    in each post-LN MLP part with a bug of `kind`, compare names where the
    error is introduced, not where drift grows."""
    every = judged(compare_with_a_right_compile, "cpu")
    c = every.comparison
    for name, position, k in findings.PLANTED:
        if (name, k) != ("post_ln_mlp", kind):
            continue
        key = planted_key(name, position, k)
        in_part = [d for d in c.diverged if every.parts.of(d.b) == key]
        assert in_part, f"{key}:\n" + format_comparison(c)
        planted = {n for n in planted_nodes(every.program, kind) if every.parts.of_node[n] == key}
        assert names_the_planted_kernel(in_part[0].b, planted), format_comparison(c)


def test_the_store_a_kernel_never_makes_carries_no_node(tmp_path):
    """Issue 9's case: the fused layer-norm kernel takes the linear's buffer
    in and out but never stores the layer norm into it."""
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    dump = load_dump(compile_and_dump(program, inputs, tmp_path / "d"))
    written = [r for r in dump.written_values() if r.node]
    assert written and all(r.role in (Role.WRITE, Role.READ_WRITE) for r in written)
    after = [r for r in dump.records if r.phase is Phase.AFTER_LAUNCH]
    # Layer norm's mean and rstd are its intermediates, never its value.
    assert any(r.tensor.reason is Reason.INTERMEDIATE for r in after)
    # Arguments only read keep what their writer stored (recorded once,
    # before launch).
    before = [r for r in dump.records if r.phase is Phase.BEFORE_LAUNCH]
    read = [r for r in before if r.role is Role.READ and r.node]
    assert read
    writers = {r.node for r in after if r.written}
    assert all(r.node in writers for r in read)


def test_values_no_node_holds_are_judged_by_their_formulas(tmp_path):
    """A layer norm's mean and sum of squared deviations hold no node's
    value: each is judged by its formula. An error of 1e-4 of the value in
    one of them is named there; a formula this torch cannot evaluate is
    counted as not compared, with why."""
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    dump = compile_and_dump(program, inputs, tmp_path / "a")
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    written, compared, _ = found.coverage()
    assert found.first is None and compared == written, format_divergence(found)
    by_formula = [m for m in found.matches if m.record.formula]
    kinds = {m.node.split("/")[-1].rstrip("_0123456789") for m in by_formula}
    assert kinds == {"getitem", "variance_sum"}, format_divergence(found)

    target = [m for m in by_formula if m.node.endswith("/variance_sum")][1].record
    value = torch.load(target.path, weights_only=True)
    torch.save(value * (1 + 1e-4), target.path)
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    assert found.first is not None and found.first.record.path == target.path, format_divergence(
        found
    )
    assert f"buffer {target.arg} = node layer_norm_1/variance_sum" in format_divergence(found)

    manifest = dump / "manifest.jsonl"
    manifest.write_text(
        manifest.read_text().replace("aten.var_mean.correction", "aten.no_such_op.default")
    )
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    assert found.first is None
    assert (
        "formula_failed: its formula cannot be evaluated (the first: this torch has no "
        "aten.no_such_op.default)" in format_divergence(found)
    )


def test_compare_across_configs_from_the_command_line(tmp_path):
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    a = compile_and_dump(program, inputs, tmp_path / "a")
    b = compile_and_dump(program, inputs, tmp_path / "b", OTHER_CONFIG)
    done = cli("compare", a, b)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "matched by node" in done.stdout and "no divergence" in done.stdout
    # The two programs were compiled with different Inductor configs, and say so.
    assert re.search(
        r"^! inductor_config +[0-9a-f]{12} +[0-9a-f]{12}", done.stdout, re.M
    ), done.stdout
    # B's values perturbed at one node: named with each side's kernel.
    target = next(r for r in load_dump(b).written_values() if r.node)
    t = torch.load(target.path, weights_only=True)
    t.view(-1)[0] += 1.0
    torch.save(t, target.path)
    done = cli("compare", a, b)
    assert done.returncode == 1
    assert f"FIRST DIVERGENCE: node {target.node}: A " in done.stdout
    assert f"vs B {target.kernel} (launch {target.launch})" in done.stdout
    # Where the user's code made that node: the line under the verdict.
    model_file = Path(inspect.getsourcefile(type(model))).name
    source = re.search(r"^FIRST DIVERGENCE: .*\n  at (.*)$", done.stdout, re.M)
    assert source and f"{model_file}:" in source[1] and " in forward: " in source[1], done.stdout


def test_diverge_for_real_users(tmp_path):
    """--import loads the module that registers a custom op before the
    program; --inputs runs a dynamic program at another size; the process
    is left as diverge found it."""
    module = tmp_path / "user_ops.py"
    module.write_text(
        "import torch\n"
        "@torch.library.custom_op('adp_user::shift', mutates_args=())\n"
        "def shift(x: torch.Tensor) -> torch.Tensor:\n"
        "    return x + 1\n"
        "@shift.register_fake\n"
        "def _(x):\n"
        "    return torch.empty_like(x)\n"
    )
    program_text = (
        "import sys, torch\n"
        f"sys.path.insert(0, {str(tmp_path)!r})\n"
        "import user_ops\n"
        "class M(torch.nn.Module):\n"
        "    def __init__(self):\n"
        "        super().__init__(); self.l = torch.nn.Linear(8, 8)\n"
        "    def forward(self, x):\n"
        "        return torch.ops.adp_user.shift(torch.relu(self.l(x))) * 2\n"
        "torch.manual_seed(0)\n"
        "ep = torch.export.export(M().eval(), (torch.randn(3, 8),),\n"
        "    dynamic_shapes={'x': {0: torch.export.Dim('b', min=2, max=64)}})\n"
        f"torch.export.save(ep, {str(tmp_path / 'program.pt2')!r})\n"
        f"torch.save((torch.randn(17, 8),), {str(tmp_path / 'inputs.pt')!r})\n"
    )
    subprocess.run([sys.executable, "-c", program_text], check=True, capture_output=True)

    # Without the import the program cannot be loaded: one line, exit 2,
    # naming the op whose module to import.
    done = cli("diverge", tmp_path / "program.pt2")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert len(done.stderr.strip().splitlines()) == 1, done.stderr
    assert "--import the module that registers adp_user::shift" in done.stderr

    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aoti_debug_printer._cli",
            "diverge",
            str(tmp_path / "program.pt2"),
            "--import",
            "user_ops",
            "--inputs",
            str(tmp_path / "inputs.pt"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence from eager" in done.stdout
    assert "compared " in done.stdout and " values kernels wrote" in done.stdout


def test_diverge_on_a_dump_judges_the_run_by_its_own_inputs(tmp_path):
    """A dump recorded on other inputs than the program's examples: diverge
    takes the inputs the dump saved (else every value would differ from an
    eager run on the examples), and refuses --inputs that are not them."""
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    torch.export.save(program, tmp_path / "program.pt2")
    other = (torch.randn(6, 32) * 3,)
    dump = compile_and_dump(program, other, tmp_path / "dump")

    done = cli("diverge", tmp_path / "program.pt2", "--dump", dump, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence from eager" in done.stdout

    torch.save(inputs, tmp_path / "examples.pt")
    done = cli(
        "diverge", tmp_path / "program.pt2", "--dump", dump, "--inputs", tmp_path / "examples.pt"
    )
    assert done.returncode == 2 and "Traceback" not in done.stderr
    assert "differ from those the dump's run had" in done.stderr.splitlines()[-1]


def test_the_truth_holds_one_parameter_in_float64_at_a_time(monkeypatch):
    """The truth adapts each parameter to float64 where an op reads it: the
    unlifted module fetches every parameter before its first op, and copies
    made there would all be held at once (64 GB for an 8B model)."""
    import weakref

    from aoti_debug_printer.tools.diverge.evaluate import Evaluation, eager_values

    layers = [torch.nn.Linear(128, 128) for _ in range(8)]
    model = torch.nn.Sequential(*(m for layer in layers for m in (layer, torch.nn.Tanh())))
    program = torch.export.export(model.eval(), (torch.randn(4, 128),))
    live, most = weakref.WeakSet(), [0]
    adapt = Evaluation.adapt

    def counting(self, x):
        out = adapt(self, x)
        if isinstance(out, torch.Tensor) and out.dtype == torch.float64 and out.numel() == 128**2:
            live.add(out)
            most[0] = max(most[0], len(live))
        return out

    monkeypatch.setattr(Evaluation, "adapt", counting)
    last = [n.name for n in program.graph.nodes if n.op == "call_function"][-1]
    x = torch.randn(4, 128)
    truth = eager_values(program, (x,), float64=True, keep={last})[last]
    assert 1 <= most[0] <= 2, f"{most[0]} float64 copies of a weight held at once"
    with torch.no_grad():
        expected = model.double()(x.double())
    torch.testing.assert_close(truth, expected)


@pytest.mark.parametrize("kind", [None, "tanh_gelu"])
def test_the_kernel_that_adds_a_matmuls_bias_is_judged_from_that_matmul(kind, tmp_path):
    """On the GPU Inductor makes a linear before a pointwise op an mm and an
    add that the next kernel fuses (unfuse_bias_add_to_pointwise); done here
    on the CPU by a post-grad pass. The buffer holds the mm, and says how
    the linear follows from it: the next kernel's own error then starts at
    what it read (its region is its own node), not at the matmul, whose
    TF32 noise would hide a wrong activation (the planted tanh GELU)."""
    model, inputs, _ = findings.build("post_ln_mlp", 1 if kind else None, kind=kind or "affine")
    program = torch.export.export(model, inputs)
    config = {"post_grad_custom_post_pass": findings.UnfusedAddmm()}
    with findings.wrong_lowering(kind) if kind else contextlib.nullcontext():
        dump = compile_and_dump(program, inputs, tmp_path / "dump", config)
    completed = [
        r for r in load_dump(dump).written_values() if r.formula and "completes" in r.formula
    ]
    assert {r.formula["completes"]["node"] for r in completed} == {
        n.name for n in program.graph.nodes if n.target is torch.ops.aten.linear.default
    }
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    after_a_linear = [
        m
        for m in found.matches
        if m.record.node
        and any(
            a.target is torch.ops.aten.linear.default
            for a in next(n for n in program.graph.nodes if n.name == m.node).all_input_nodes
        )
    ]
    assert after_a_linear and all(m.region == 1 for m in after_a_linear), format_divergence(found)
    if kind is None:
        assert found.first is None, format_divergence(found)
    else:
        assert found.first is not None, format_divergence(found)
        assert names_the_planted_kernel(found.first.record, planted_nodes(program, kind))
        # The planted op and the GELU it reads, which its kernel fuses: not the linear.
        assert found.first.region == 2, format_divergence(found)


def test_a_value_whose_snapshot_could_not_be_saved_is_counted_as_lost(tmp_path):
    """A dump whose disk filled during the run: the record of a snapshot that
    could not be saved says so (the shim writes "unsaved" in place of
    "file"), and diverge counts the value as not compared for that reason,
    where a dump missing the record would show full coverage of less."""
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    dump = compile_and_dump(program, inputs, tmp_path / "dump")
    whole, judged, _ = aoti_debug_printer.first_divergence_from_eager(program, dump=dump).coverage()
    manifest = dump / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    lost = next(
        i
        for i, line in enumerate(lines)
        if '"node": "gelu_1"' in line and '"phase": "after_launch"' in line and '"file"' in line
    )
    record = json.loads(lines[lost])
    (dump / record.pop("file")).unlink()
    record["unsaved"] = "cannot write 'x.pt': No space left on device"
    lines[lost] = json.dumps(record)
    manifest.write_text("\n".join(lines) + "\n")

    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    written, compared, reasons = found.coverage()
    assert reasons["save_failed"] == 1 and (written, compared) == (whole, judged - 1)
    assert found.first is None
    text = format_divergence(found)
    assert "could not be saved" in text, text


@pytest.mark.compiles_afresh
def test_diverge_leaves_the_process_as_it_found_it(tmp_path):
    model, inputs, _ = findings.build("reuse_chain")
    program = torch.export.export(model, inputs)
    aoti_debug_printer.uninstall()
    before = {k: aoti_debug_printer.get_option(k) for k, _, _ in aoti_debug_printer.option_table()}
    with aoti_debug_printer.options(format="jsonl", max_values=3):
        inside = {
            k: aoti_debug_printer.get_option(k) for k, _, _ in aoti_debug_printer.option_table()
        }
        found = aoti_debug_printer.first_divergence_from_eager(program)
        assert found.first is None
        assert not aoti_debug_printer.is_installed()
        assert inside == {
            k: aoti_debug_printer.get_option(k) for k, _, _ in aoti_debug_printer.option_table()
        }
        with pytest.raises(ValueError, match="AOTInductor package"):
            aoti_debug_printer.first_divergence_from_eager(
                torch._inductor.aoti_compile_and_package(
                    program, package_path=str(tmp_path / "p.pt2")
                )
            )
        assert not aoti_debug_printer.is_installed()
    assert before == {
        k: aoti_debug_printer.get_option(k) for k, _, _ in aoti_debug_printer.option_table()
    }
    aoti_debug_printer.install()


@pytest.mark.parametrize("what", ["missing", "text", "package", "records"])
def test_diverge_rejects_what_is_not_a_program_in_one_line(what, tmp_path):
    path = tmp_path / "thing.pt2"
    if what == "text":
        path.write_text("not a program\n")
    elif what == "records":
        path = tmp_path / "r.jsonl"
        path.write_text('{"event": "tensor"}\n')
    elif what == "package":
        with zipfile.ZipFile(path, "w") as z:
            z.writestr("model/data/aotinductor/model/x.wrapper.cpp", "//")
    done = cli("diverge", path)
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "Traceback" not in done.stderr, done.stderr
    if what == "package":
        assert "AOTInductor package" in lines[0] and "torch.export.save" in lines[0]


def test_torchs_warnings_while_a_program_loads_stay_torchs(tmp_path, monkeypatch):
    """diverge holds back what torch warns while it loads a program
    (load_program), and gives it out once the program has loaded: under
    torch's module, so that filters naming torch's modules still apply
    (this suite's turn every other warning into an error; torch 2.11's
    load warns on the H200)."""
    model, inputs, _ = findings.build("post_ln_mlp")
    torch.export.save(torch.export.export(model, inputs), tmp_path / "program.pt2")
    load = torch.export.load

    def load_and_warn(path):
        warnings.warn_explicit(
            "torch's own warning", UserWarning, torch.export.__file__, 1, module="torch.export"
        )
        return load(path)

    monkeypatch.setattr(torch.export, "load", load_and_warn)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("error")
        warnings.filterwarnings("always", category=UserWarning, module="torch.*")
        load_program(tmp_path / "program.pt2")
    assert [str(w.message) for w in caught if w.filename == torch.export.__file__] == [
        "torch's own warning"
    ]


def test_compare_rejects_a_file_that_is_not_a_dump(tmp_path):
    archive = tmp_path / "a.pt"
    torch.save(torch.ones(2), archive)
    done = cli("compare", archive, archive)
    assert done.returncode == 2
    assert len(done.stderr.strip().splitlines()) == 1 and "is not a dump" in done.stderr


@pytest.mark.gpu
@pytest.mark.parametrize("name", ["pre_ln_transformer", "conv_bn", "gpt2"])
def test_a_cpu_dump_and_a_cuda_dump_of_a_correct_program_are_silent(name, tmp_path):
    needs_packages_of(name)
    model, inputs, _ = findings.build(name)
    cpu = compile_and_dump(torch.export.export(model, inputs), inputs, tmp_path / "cpu")
    model, inputs, _ = findings.build(name, device="cuda")
    cuda = compile_and_dump(torch.export.export(model, inputs), inputs, tmp_path / "cuda")
    c = aoti_debug_printer.compare(cpu, cuda)
    assert c.matched_by == "node" and len(c.compared) >= 5
    assert c.first is None, format_comparison(c)
    # Each side's environment, as its run recorded it.
    assert c.env_a.device == "cpu" and c.env_b.device == torch.cuda.get_device_name()
    assert "numerics environments" in format_comparison(c)


@pytest.mark.gpu
@pytest.mark.parametrize(
    "position,kind",
    [(1, "tanh_gelu"), (2, "gelu_constant"), (0, "bf16_reduction"), (1, "half_kernel")],
)
def test_a_cpu_dump_and_a_cuda_dump_name_the_bug_the_cuda_run_has(position, kind, tmp_path):
    model, inputs, _ = findings.build("post_ln_mlp", plant_at=position, kind=kind)
    program = torch.export.export(model, inputs)
    cpu = compile_and_dump(program, inputs, tmp_path / "cpu")
    model, inputs, _ = findings.build("post_ln_mlp", plant_at=position, kind=kind, device="cuda")
    with findings.wrong_lowering(kind):
        cuda = compile_and_dump(torch.export.export(model, inputs), inputs, tmp_path / "cuda")
    c = aoti_debug_printer.compare(cpu, cuda)
    assert c.first is not None, format_comparison(c)
    assert names_the_planted_kernel(c.first.b, planted_nodes(program, kind)), format_comparison(c)


def test_every_option_is_documented():
    readme = (Path(__file__).resolve().parents[1] / "docs" / "usage.md").read_text()
    for key, env, meaning in aoti_debug_printer.option_table():
        assert f"`{key}`" in readme and env in readme, key
        assert key in aoti_debug_printer.__doc__, key
        assert meaning


def export_in_a_fresh_process(program: Path, path: Path, code: str) -> Path:
    """Runs `code` (which leaves an ExportedProgram in `ep`) in a fresh
    Python with `path` on sys.path, and saves `ep` to `program`: the process
    that loads it has imported none of what `code` did."""
    subprocess.run(
        [
            sys.executable,
            "-c",
            f"import sys, torch\nsys.path.insert(0, {str(path)!r})\n"
            + code
            + f"torch.export.save(ep, {str(program)!r})\n",
        ],
        check=True,
        capture_output=True,
    )
    return program


def test_diverge_loads_a_transformers_program_as_users_export_it(tmp_path):
    """GPT-2 returning its ModelOutput: the loading process has not imported
    transformers, so the output's pytree type is unregistered until diverge
    imports the module the program names."""
    pytest.importorskip("transformers")
    program = export_in_a_fresh_process(
        tmp_path / "gpt2.pt2",
        Path(__file__).parent,
        "from testmodels import findings\n"
        "torch.manual_seed(0)\n"
        "model, inputs = findings.transformers_model('gpt2', plain_output=False)\n"
        "model.config.use_cache = False\n"
        "ep = torch.export.export(model.eval(), inputs)\n"
        "assert 'ModelOutput' in str(ep.call_spec.out_spec)\n",
    )
    done = cli("diverge", program, "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence from eager" in done.stdout


def test_an_unregistered_pytree_type_names_the_import_to_add(tmp_path):
    (tmp_path / "user_types.py").write_text(
        "import dataclasses, torch\n"
        "from torch.utils import _pytree as pytree\n"
        "@dataclasses.dataclass\n"
        "class Out:\n"
        "    y: torch.Tensor\n"
        "pytree.register_dataclass(Out, serialized_type_name='user_types.Out')\n"
    )
    program = export_in_a_fresh_process(
        tmp_path / "program.pt2",
        tmp_path,
        "import user_types\n"
        "class M(torch.nn.Module):\n"
        "    def forward(self, x):\n"
        "        return user_types.Out(torch.relu(x) * 2)\n"
        "ep = torch.export.export(M(), (torch.randn(3, 4),))\n",
    )
    done = cli("diverge", program, "--quiet")
    assert done.returncode == 2 and "Traceback" not in done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    # torch's own reason, and the exact --import that fixes it.
    assert "user_types.Out in pytree is not registered" in lines[0]
    assert "--import the module that registers user_types.Out" in lines[0]
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "aoti_debug_printer._cli",
            "diverge",
            str(program),
            "--quiet",
            "--import",
            "user_types",
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_compare_judges_by_the_flags_the_runs_recorded(tmp_path):
    """A matmul's output differing by TF32's noise (1e-3) is named between
    two runs that recorded TF32 off, and is not where one recorded a GPU run
    with TF32 matmuls on, whatever this process's own flags say."""
    model, inputs, _ = findings.build("post_ln_mlp")
    program = torch.export.export(model, inputs)
    a = compile_and_dump(program, inputs, tmp_path / "a")
    b = tmp_path / "b"
    shutil.copytree(a, b)
    env = load_dump(a).environment(0)
    assert env is not None and env.torch == torch.__version__ and env.device == "cpu"
    assert env.tf32_matmul is False
    target = next(r for r in load_dump(b).written_values() if r.node and "mm" in r.kernel)
    t = torch.load(target.path, weights_only=True)
    torch.manual_seed(1)
    torch.save(t * (1 + 1e-3 * torch.randn_like(t)), target.path)

    matmul = torch.backends.cuda.matmul
    was = matmul.allow_tf32
    try:
        matmul.allow_tf32 = True  # the comparing process's flag: ignored
        c = aoti_debug_printer.compare(a, b)
    finally:
        matmul.allow_tf32 = was
    assert c.first is not None and c.first.b.node == target.node, format_comparison(c)

    manifest = b / "manifest.jsonl"
    lines = manifest.read_text().splitlines()
    recorded = [json.loads(line) for line in lines]
    for record in recorded:
        if record["event"] == "environment":  # as a GPU run with TF32 matmuls records it
            record.update(device="NVIDIA H100 80GB HBM3", capability="9.0", tf32_matmul=True)
    manifest.write_text("".join(json.dumps(r) + "\n" for r in recorded))
    c = aoti_debug_printer.compare(a, b)
    assert c.first is None, format_comparison(c)
    assert c.env_b.tf32_matmul is True and c.env_a.tf32_matmul is False
    text = format_comparison(c)
    assert re.search(r"^! tf32_matmul +false +true", text, re.M), text


@pytest.mark.parametrize("device", DEVICES)
def test_diverge_at_another_size_with_inputs_from_either_device(device, tmp_path):
    """A dynamic-shape program checked at a size other than its example's:
    --inputs saved from the CPU or the program's device run where its
    weights live (one note when moved); silent when right, and the planted
    kernel named when wrong."""
    model, inputs, dynamic = findings.build("dynamic_batch", device=device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    torch.export.save(program, tmp_path / "program.pt2")
    other = torch.randn(23, 32)
    for source in sorted({"cpu", device}):
        torch.save((other.to(source),), tmp_path / f"inputs-{source}.pt")
        done = cli(
            "diverge", tmp_path / "program.pt2", "--inputs", tmp_path / f"inputs-{source}.pt"
        )
        assert done.returncode == 0, done.stdout + done.stderr
        assert "no divergence from eager" in done.stdout
        assert (f"inputs moved from cpu to {device}" in done.stderr) == (source != device)

    model, inputs, dynamic = findings.build("dynamic_batch", plant_at=1, device=device)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    with findings.wrong_lowering("affine"):
        found = aoti_debug_printer.first_divergence_from_eager(program, inputs=(other,))
    assert found.first is not None, format_divergence(found)
    assert names_the_planted_kernel(found.first.record, planted_nodes(program, "affine"))
    assert found.first.record.tensor.shape[0] == 23


def test_inputs_the_program_cannot_take_get_one_line(tmp_path):
    model, inputs, dynamic = findings.build("dynamic_batch")
    torch.export.save(
        torch.export.export(model, inputs, dynamic_shapes=dynamic), tmp_path / "program.pt2"
    )
    for given, said in (
        ((torch.randn(5, 32), torch.randn(5, 32)), "inputs: 2 given, the program takes 1 (x)"),
        ((torch.randn(5, 32).double(),), "inputs: x (input 0) is float64 of rank 2, the program"),
        ((torch.randn(5, 2, 16),), "inputs: x (input 0) is float32 of rank 3, the program takes"),
    ):
        torch.save(given, tmp_path / "bad.pt")
        done = cli("diverge", tmp_path / "program.pt2", "--inputs", tmp_path / "bad.pt")
        assert done.returncode == 2 and "Traceback" not in done.stderr
        (line,) = done.stderr.strip().splitlines()
        assert said in line, line
