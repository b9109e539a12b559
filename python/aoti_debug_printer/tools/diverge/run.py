"""diverge's own compile and runs: the program compiled at level 1 with the
printer installed for that compile (the one place the tools reach into
the inductor wing), run once and judged, or run several times and
compared bit for bit."""

from __future__ import annotations

import tempfile
from pathlib import Path

from ...records import WrongInputRecord
from ..dumps import load_dump
from .format import format_divergence, relative
from .match import match_dump
from .program import ProgramError, inputs_of_the_run, program_and_inputs
from .result import Divergence, Progress, RunsCheck


def first_divergence_from_eager(
    program,
    inputs=None,
    dump=None,
    imports: tuple[str, ...] = (),
    progress: bool = False,
    repro=None,
    package=None,
    report=None,
) -> Divergence:
    """Compiles `program` (an ExportedProgram or a torch.export.save file)
    with AOTInductor at level 1, runs it once on `inputs` (a tuple, or an
    (args, kwargs) pair; default: the program's example inputs), and judges
    the values its kernels wrote against the float64 truth. With `dump`,
    uses that level-1 dump of one run on the same inputs instead of
    compiling. `imports`: modules to import first (custom ops,
    decompositions). `progress`: a line on stderr per long phase. `repro`:
    a new directory to write a one-kernel repro of the first divergence to
    (with `dump`, `package` is the .pt2 its run loaded). `report`: an HTML
    file for the report of the dump judged, with this verdict (`aoti-debug
    report`)."""
    from ...inductor.install import compiling

    steps = Progress(progress)
    program, args, kwargs = program_and_inputs(program, inputs, imports)
    if dump is not None:
        dump = load_dump(dump)
        if wrong := _wrong_input_in(dump):
            return Divergence([], wrong_input=wrong)
        args, kwargs = inputs_of_the_run(dump, args, kwargs, given=inputs is not None)
        result = match_dump(dump, program, args, kwargs, progress=steps)
        with_report(report, dump, result)
        return with_repro(result, dump, package, repro, imports)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-diverge-") as tmp:
        steps.phase("compiling with AOTInductor at level 1")
        with compiling(program) as found:
            package = compile_at_level_1(program, Path(tmp) / "model.pt2")
        narrowed = tuple(found)
        steps.phase("running the compiled model once, saving what its kernels write")
        try:
            run_into(package, args, kwargs, Path(tmp) / "dump")
        except RuntimeError:
            # The package's check of its inputs stops the run before its
            # first kernel, with a record in the dump.
            wrong = _wrong_input_in(load_dump(Path(tmp) / "dump"))
            if wrong is None:
                raise
            result = Divergence([], wrong_input=wrong, narrowed=narrowed)
            with_report(report, Path(tmp) / "dump", result)
            return result
        result = match_dump(Path(tmp) / "dump", program, args, kwargs, progress=steps)
        result.narrowed = narrowed
        with_report(report, Path(tmp) / "dump", result)
        return with_repro(result, Path(tmp) / "dump", package, repro, imports)


def _wrong_input_in(dump) -> WrongInputRecord | None:
    """The dump's first record of a model input its package was not
    compiled for, if any."""
    return next((f for f in dump.findings() if isinstance(f, WrongInputRecord)), None)


def first_difference_between_runs(
    program, inputs=None, runs: int = 2, imports: tuple[str, ...] = (), progress: bool = False
) -> RunsCheck:
    """Compiles `program` at level 1 once, runs it `runs` times on the same
    inputs (as for first_divergence_from_eager), and compares every run's
    values with the first run's bit for bit: the first kernel whose values
    differ is the first that was not deterministic."""
    from ..compare import compare

    if runs < 2:
        raise ProgramError(f"--runs {runs}: a comparison of runs needs at least 2")
    steps = Progress(progress)
    program, args, kwargs = program_and_inputs(program, inputs, imports)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-runs-") as tmp:
        steps.phase("compiling with AOTInductor at level 1")
        package = compile_at_level_1(program, Path(tmp) / "model.pt2")
        dumps = []
        for k in range(runs):
            steps.phase(f"run {k + 1} of {runs}, saving what its kernels write")
            dumps.append(run_into(package, args, kwargs, Path(tmp) / f"run{k}"))
        return RunsCheck([compare(dumps[0], d) for d in dumps[1:]])


def compile_at_level_1(program, package_path: Path) -> str:
    """An AOTInductor package of `program` with our printer at level 1,
    every kernel selected."""
    import torch

    from ...inductor.install import compiling

    patch = {
        "aot_inductor.debug_intermediate_value_printer": "1",
        "aot_inductor.filtered_kernel_names": None,
    }
    with compiling(program), torch._inductor.config.patch(patch):
        return torch._inductor.aoti_compile_and_package(program, package_path=str(package_path))


def run_into(package, args: tuple, kwargs: dict, dump: Path) -> Path:
    """Runs the package once, saving what its kernels write into `dump`."""
    import torch

    from ..._options import options

    with options(dump_dir=dump, level=-1, trap=0, kernels=""):
        torch._inductor.aoti_load_package(package)(*args, **kwargs)
    return dump


def with_report(report, dump, result: Divergence, text: str = "", cause: str = "") -> None:
    """Writes the HTML report of `dump` with diverge's verdict (`text` as
    printed, by default format_divergence's) and `cause`, its first
    divergence marked, where asked."""
    from ..report import Diagnosis, write_report

    if report is None:
        return
    text = text or format_divergence(result)
    r = result.first.record if result.first is not None else None
    diagnosis = Diagnosis(
        text=text, launch=r.launch if r else None, arg=r.arg if r else "", cause=cause
    )
    write_report(dump, report, diagnosis=diagnosis)


def with_repro(result: Divergence, dump, package, repro, imports, note: str = "") -> Divergence:
    """Writes the repro of the first divergence, where asked and found:
    its kernel's launch, checked against the truth by the verdict's bar.
    `note` ends its finding's line (--bisect: which compile this is)."""
    from ..repro import CLOSE, FINITE, IN_BOUNDS, UNCHANGED, Finding, write_repro

    first = result.first
    if repro is None or first is None:
        return result
    r = first.record
    checks = [FINITE, UNCHANGED, IN_BOUNDS] + ([CLOSE] if first.expected is not None else [])
    finding = Finding(
        kernel=r.kernel,
        launch=r.launch,
        call=r.call,
        what=f"diverge: buffer {r.arg} = node {first.node} differs from eager beyond the bar "
        f"({relative(first.own)} times it)"
        + (f", at {source}" if (source := result.source_of(first.node)) else "")
        + note,
        checks=checks,
        arg=r.arg,
        run_id=r.tensor.run_id,
        expected=first.expected,
        bar={"rms": first.own.bar_rms, "max": first.own.bar_max, "bad": first.own.benchmark.bad},
    )
    result.repro = write_repro(dump, package, repro, finding, imports=imports)
    return result
