"""`aoti-debug diverge --bisect`: the compiler decision behind a divergence.

Each planted bug is a module of testmodels/compiler_bugs that a user would
--import (it registers a decomposition, replaces a lowering, sets a custom
pass); the command runs in a fresh process, so what the module plants
stays there. Every case is a real AOTInductor compile, bisected by real
compiles, and must name the planted decision, its file and line, within 15
compiles; the correct model must be silent (exit 0, no cause)."""

from __future__ import annotations

import html
import inspect
import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
from testmodels import compiler_bugs

BUGS = Path(compiler_bugs.__file__).parent


def line_of(module: str, definition: str) -> str:
    """path:line where `def definition` in the planted module begins: its
    first decorator (where a decomposition is registered), else the def."""
    path = BUGS / f"{module}.py"
    lines = path.read_text().splitlines()
    number = next(i for i, text in enumerate(lines) if text.startswith(f"def {definition}("))
    while number > 0 and lines[number - 1].startswith("@"):
        number -= 1
    return f"{path}:{number + 1}"


DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


@pytest.fixture(scope="module")
def programs(tmp_path_factory):
    made = {}

    def program(device: str) -> Path:
        if device not in made:
            made[device] = tmp_path_factory.mktemp(f"bisect-{device}") / "program.pt2"
            compiler_bugs.export(made[device], device)
        return made[device]

    return program


def bisect(
    program: Path, *imports: str, repro: Path | None = None, report: Path | None = None
) -> subprocess.CompletedProcess:
    args = [sys.executable, "-m", "aoti_debug_printer._cli", "diverge", str(program), "--bisect"]
    if repro is not None:
        args += ["--repro", str(repro)]
    if report is not None:
        args += ["--report", str(report)]
    for module in imports:
        args += ["--import", f"testmodels.compiler_bugs.{module}"]
    test_dir = str(Path(__file__).parent)
    env = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([test_dir, os.environ.get("PYTHONPATH", "")]),
    }
    return subprocess.run(args, capture_output=True, text=True, env=env, timeout=900)


def cause_of(done: subprocess.CompletedProcess) -> str:
    causes = [line for line in done.stdout.splitlines() if line.startswith("cause: ")]
    assert len(causes) == 1, done.stdout + done.stderr[-3000:]
    return causes[0]


def compiles_of(done: subprocess.CompletedProcess) -> int:
    m = re.search(r"^bisected in (\d+) compiles, [0-9.]+ s$", done.stdout, re.M)
    assert m, done.stdout
    return int(m[1])


PLANTED = {
    # module: (what the cause line must say, the planted definition)
    "wrong_decomposition": ("the decomposition of aten.sigmoid.default, registered at", "sigmoid"),
    "nan_decomposition": ("the decomposition of aten.tanh.default, registered at", "tanh"),
    "wrong_lowering": (
        "the lowering of node tanh, registered at",
        "tanh",
    ),
    "wrong_post_grad_pass": ("post_grad_custom_post_pass", "scale_doublings"),
}


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("module", sorted(PLANTED))
def test_bisect_names_the_planted_compiler_decision(module, device, programs, tmp_path):
    said, definition = PLANTED[module]
    done = bisect(programs(device), module, repro=tmp_path / "repro", report=tmp_path / "r.html")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "Traceback" not in done.stderr
    # The first divergence, with the user's line that made its node.
    assert "FIRST DIVERGENCE FROM EAGER" in done.stdout
    model_file = inspect.getsourcefile(compiler_bugs.GatedBlock)
    assert re.search(
        rf"^  at .*{re.escape(Path(model_file).name)}:\d+ in forward: ", done.stdout, re.M
    )
    cause = cause_of(done)
    assert said in cause, cause
    assert line_of(module, definition) in cause, cause
    if module == "wrong_lowering":
        assert "falling back to ATen for node tanh removes the divergence" in cause
    # How to compile without it, and the cost.
    assert "  the compile without it (node " in done.stdout
    assert compiles_of(done) <= 15
    # A compile that made an earlier compile's code took that compile's
    # verdict without g++ or a run; the first, the bad one, diverged.
    steps = re.findall(
        r"^  compile (\d+): .*: (good|diverges)(?: \(the code of compile (\d+), not built or "
        r"run again\))?$",
        done.stdout,
        re.M,
    )
    verdicts = {1: "diverges"} | {int(n): said for n, said, _ in steps}
    reused = [(int(n), said, int(earlier)) for n, said, earlier in steps if earlier]
    assert reused or device != "cpu", done.stdout
    assert all(earlier < n and verdicts[earlier] == said for n, said, earlier in reused), reused
    # The repro is of the bad compile, and its line says so, with the cause.
    finding = json.loads((tmp_path / "repro" / "repro.json").read_text())["finding"]
    assert "; from the bad compile (the default one), whose cause: " in finding, finding
    assert cause.removeprefix("cause: ") in finding, finding
    # The report of the bad compile's dump: the cause, and the diverging row.
    assert done.stdout.rstrip().endswith(f"wrote the report {tmp_path / 'r.html'}")
    page = (tmp_path / "r.html").read_text()
    assert f'<p id="cause" class="bad">{html.escape(cause)}</p>' in page
    marked = re.findall(r'<tr class="[^"]*\bfirst-divergence\b[^"]*">(.*?)</tr>', page)
    assert len(marked) == 1 and "forward: " in marked[0], marked


@pytest.mark.parametrize("device", DEVICES)
def test_a_custom_op_that_makes_nan_is_not_the_compilers(device, tmp_path):
    """NaN that eager makes too (the trap's finding, not a divergence), in
    a custom op's own kernel: no compiler decision can be behind it, so the
    cause says so after the one compile, naming the op and where it is
    defined."""
    from testmodels.compiler_bugs import nan_custom_op

    nan_custom_op.export(tmp_path / "program.pt2", device)
    done = bisect(tmp_path / "program.pt2", "nan_custom_op")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert re.search(
        r"^NaN: kernel \S*log_gate\S* \(launch \d+\) made NaN in buf\d+ = node log_gate",
        done.stdout,
        re.M,
    ), done.stdout
    assert "nan_custom_op.py:" in done.stdout.split("NaN: kernel", 1)[1].splitlines()[1]
    cause = cause_of(done)
    assert cause.startswith(
        "cause: not the compiler: the custom op adp_bugs::log_gate makes NaN in node log_gate "
        "as eager does on these inputs"
    ), cause
    assert f"(defined at {line_of('nan_custom_op', 'log_gate')})" in cause, cause
    assert compiles_of(done) == 1


def test_nan_of_the_models_own_arithmetic_is_not_the_compilers(tmp_path):
    """The same NaN made by torch.log itself: the cause names the op."""
    from testmodels.compiler_bugs import nan_custom_op

    nan_custom_op.export(tmp_path / "program.pt2", builtin=True)
    done = bisect(tmp_path / "program.pt2")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert cause_of(done).startswith(
        "cause: not the compiler: aten.log.default makes NaN in node log as eager does on "
        "these inputs"
    ), done.stdout
    assert compiles_of(done) == 1


@pytest.mark.parametrize("device", DEVICES)
@pytest.mark.parametrize("name", ["gated_block", "pre_ln_transformer"])
def test_bisect_on_a_correct_model_compiles_once_and_names_nothing(
    name, device, programs, tmp_path
):
    """A residual LayerNorm block, and attention with a causal mask (whose
    -inf is the model's own, not a NaN to bisect). diverge itself is held
    silent on fourteen architectures (test_findings)."""
    import torch
    from testmodels import findings

    if name == "gated_block":
        program = programs(device)
    else:
        model, inputs, _ = findings.build(name, device=device)
        program = tmp_path / "program.pt2"
        torch.export.save(torch.export.export(model, inputs), program)
    done = bisect(program)
    assert done.returncode == 0, done.stdout + done.stderr[-3000:]
    assert "no divergence from eager" in done.stdout
    assert "cause:" not in done.stdout and "bisected in" not in done.stdout


def test_bisect_takes_no_dump_or_runs(programs):
    from conftest import cli

    done = cli("diverge", programs("cpu"), "--bisect", "--runs", "2")
    assert done.returncode == 2
    assert done.stderr.strip() == (
        "aoti-debug diverge: --bisect compiles the program itself: no --dump or --runs"
    )


def test_nan_origin_is_where_eager_makes_it_and_none_where_eager_has_none():
    """NaN a kernel carries is named where eager makes it (the log, not the
    add after it); where eager's value of the watched node holds no NaN,
    the NaN is the compile's, and the stages must be bisected (None)."""
    from types import SimpleNamespace

    import torch
    from testmodels.compiler_bugs import nan_custom_op

    from aoti_debug_printer.tools.diverge import bisect as bisecting

    torch.manual_seed(0)
    x = torch.randn(4, 32)
    program = torch.export.export(nan_custom_op.LogBlock().eval(), (x,))
    region = [n.name for n in program.graph.nodes if n.op == "call_function"]
    assert region[-2:] == ["log", "add"], region
    oracle = SimpleNamespace(program=program, args=(x,), kwargs={}, node="add")
    assert bisecting._nan_origin(oracle, region) == "log"
    oracle.node = region[-3]  # the Linear before the log: no NaN in eager
    assert bisecting._nan_origin(oracle, region[:-2]) is None


@pytest.fixture
def off(monkeypatch) -> list[set]:
    """The bisector's decisions turned off, with no compile: the last item
    is the set turned off now (an oracle's verdict reads it)."""
    import contextlib

    from aoti_debug_printer.tools.diverge import bisect as bisecting

    turned: list[set] = [set()]

    @contextlib.contextmanager
    def turned_off(subsystem, names):
        turned.append(set(names))
        yield
        turned.pop()

    monkeypatch.setattr(bisecting, "turned_off", turned_off)
    return turned


@pytest.mark.parametrize("needed", [{3}, {0}, {8}, {5}, {2, 7}, {0, 1, 2, 3, 4, 5, 6, 7, 8}])
def test_halving_finds_the_decisions_that_remove_it_in_few_compiles(needed, monkeypatch, off):
    """The search of one stage (decompositions, lowerings), on an oracle
    that is good exactly when every decision in `needed` is turned off:
    one decision is found alone, in at most 2 + log2(n) compiles; decisions
    that only together remove it give a set that does, never a wrong one."""
    import math

    from aoti_debug_printer.tools.diverge import bisect as bisecting

    items = [f"op{i}" for i in range(9)]

    class Oracle:
        what = ""
        compiles = 0

        def verdict(self):
            self.compiles += 1
            return {items[i] for i in needed} <= off[-1]

    oracle = Oracle()
    found = bisecting._one_of(oracle, items, "decomposition", "without")
    assert {items[i] for i in needed} <= set(found)
    if len(needed) == 1:
        assert found == [items[next(iter(needed))]]
        assert oracle.compiles <= 2 + math.ceil(math.log2(len(items)))
    # And where nothing turned off removes it: None, after one compile.
    monkeypatch.setattr(Oracle, "verdict", lambda self: False)
    assert bisecting._one_of(Oracle(), items, "decomposition", "without") is None


def test_a_custom_ops_wrong_decomposition_is_named_not_its_kernel(tmp_path):
    """A custom op whose kernel is right and whose registered decomposition
    is wrong: turning the decomposition off (out of Inductor's table; the
    bisector's hook alone fails Inductor's "both a fallback and a decomp"
    check) removes the divergence, and the cause is that decomposition,
    with its file and line, never "not the compiler"."""
    # Exported in a process of its own: importing the module registers its
    # decomposition, which must not stay in this one.
    exported = subprocess.run(
        [
            sys.executable,
            "-c",
            "import sys; from testmodels.compiler_bugs import wrong_custom_op_decomposition as b; "
            "b.export(sys.argv[1])",
            str(tmp_path / "program.pt2"),
        ],
        capture_output=True,
        text=True,
        env={**os.environ, "PYTHONPATH": str(Path(__file__).parent)},
        timeout=600,
    )
    assert exported.returncode == 0, exported.stderr[-3000:]
    done = bisect(tmp_path / "program.pt2", "wrong_custom_op_decomposition")
    assert done.returncode == 1, done.stdout + done.stderr[-3000:]
    assert "failed (" not in done.stdout, done.stdout
    cause = cause_of(done)
    assert cause.startswith(
        "cause: the decomposition of adp_bugs.gelu_exact.default, registered at "
        f"{line_of('wrong_custom_op_decomposition', 'gelu_tanh')}"
    ), cause
    assert compiles_of(done) <= 15


def test_a_failed_compile_decides_nothing(off):
    """A set whose compile fails is split until the decision whose compile
    fails, which stays a suspect; a decision found by a compile that ran
    stands; and where suspects are left, the verdict is undecided."""
    from types import SimpleNamespace

    from aoti_debug_printer.tools.diverge import bisect as bisecting
    from aoti_debug_printer.tools.diverge.format import undecided
    from aoti_debug_printer.tools.diverge.result import Bisection, Divergence, Outcome

    items = [f"op{i}" for i in range(6)]

    class Oracle:
        what = ""
        compiles = 0

        def __init__(self, culprit, broken):
            self.culprit, self.broken, self.suspects = culprit, broken, []

        def verdict(self):
            self.compiles += 1
            if self.broken in off[-1]:
                self.why_failed = f"compile {self.compiles} without it failed: AssertionError"
                return None
            return self.culprit in off[-1]

        suspect = bisecting._Oracle.suspect

    # The culprit's own compile fails: nothing found, it stays a suspect.
    oracle = Oracle("op4", "op4")
    assert bisecting._one_of(oracle, items, "decomposition", "without") is None
    assert [s for s, _ in oracle.suspects] == ["decomposition: op4"]
    # Another decision's compile fails: the culprit is still found.
    oracle = Oracle("op4", "op1")
    assert bisecting._one_of(oracle, items, "decomposition", "without") == ["op4"]

    # The whole set's compile fails and the divergence needs decisions of
    # both halves: no half decides, and the set stays a suspect.
    class Both(Oracle):
        def verdict(self):
            self.compiles += 1
            if off[-1] == set(items):
                self.why_failed = "compile failed"
                return None
            return {"op1", "op4"} <= off[-1]

    oracle = Both("", "")
    assert bisecting._one_of(oracle, items, "decomposition", "without") is None
    assert [s for s, _ in oracle.suspects] == [f"decomposition: {', '.join(items)}"]
    # The verdict: undecided, exit 3, never "not the compiler".
    b = Bisection(Divergence([]), node="n", suspects=[("decomposition: op4", "f.py:3", "why")])
    b.divergence.matches = [SimpleNamespace(own=SimpleNamespace(diverged=True))]
    assert b.outcome is Outcome.NO_DECISION
    said = undecided(b)
    assert said.startswith("undecided: ") and "decomposition: op4 (registered at f.py:3)" in said
    assert "not the compiler" not in said


SAME_CODE = """
import sys, torch
from aoti_debug_printer.tools.diverge import same_code

def program(weight, activation):
    linear = torch.nn.Linear(8, 4)
    with torch.no_grad():
        linear.weight.fill_(weight)
        linear.bias.fill_(0.125)
    return torch.export.export(torch.nn.Sequential(linear, activation), (torch.ones(2, 8),))

made = {}
for n, (weight, activation) in enumerate(
    [(0.5, torch.nn.ReLU()), (0.5, torch.nn.ReLU()), (0.25, torch.nn.ReLU()), (0.5, torch.nn.Tanh())]
):
    try:
        with torch._inductor.config.patch({"aot_inductor.package_cpp_only": True}), \\
                same_code.seen_before(made) as compiled:
            torch._inductor.aoti_compile_and_package(
                program(weight, activation), package_path=f"{sys.argv[1]}/{n}.pt2"
            )
    except Exception as e:
        print(n, "same as", made[same_code.made_before(e)])
        continue
    made[compiled.digest] = n
    print(n, "new")
"""


def test_a_compile_is_taken_for_an_earlier_one_only_with_its_code_and_constants(tmp_path):
    """same_code's digest, from real compiles (their C++ written, not
    built) in a process of their own, as a bisection's: the same program
    again is the earlier compile; the same code with one weight changed is
    not, nor is other code."""
    done = subprocess.run(
        [sys.executable, "-c", SAME_CODE, str(tmp_path)],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.splitlines() == ["0 new", "1 same as 0", "2 new", "3 new"], done.stdout
