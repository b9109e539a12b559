"""aoti-debug-printer: kernel-by-kernel tensor records for AOTInductor models.

Installed with pip, it switches itself on through torch's backend
entry point, so an unchanged script only needs
AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER=1/2/3. This module is the
public surface, with `aoti_debug_printer.records` (the record schema and
its codes); importing either imports neither torch, Inductor nor the C++
shim. The classes and formatters of the tools' results (`load_dump`,
`Dump`, `format_divergence`, ...) load on first use.

Run-time options (`set_option`, `options(...)`, or the environment variable
beside each; `option_table()` lists them with their meanings):
output (AOTI_DEBUG_PRINTER_OUTPUT), format (_FORMAT), dump_dir (_DUMP_DIR),
max_values (_MAX_VALUES), sync (_SYNC), replay (_REPLAY), rank (_RANK, else
RANK), ranks (_RANKS), level (_LEVEL), kernels (_KERNELS), trap (_TRAP),
guard (_GUARD), roles (_ROLES), end_job (_END_JOB), input_check (_INPUT_CHECK),
save_memory (_SAVE_MEMORY).

Level 1 writes its snapshots on a thread of its own, behind the model:
`wait_for_saves()` returns once this process's are all written (`load_dump`
calls it; the process's exit waits for them too).
"""

from __future__ import annotations

import contextlib
import importlib
from collections.abc import Iterator
from typing import Any

from ._native import shim, wait_for_saves
from ._options import get_option, option_table, options, set_option
from .inductor.install import install, is_installed, uninstall

# Public names of the tools wing, each imported from its room on first use.
_LAZY = {
    "load_dump": "tools.dumps",
    "Dump": "tools.dumps",
    "Record": "tools.dumps",
    "Environment": "tools.numerics",
    "Comparison": "tools.compare",
    "format_comparison": "tools.compare",
    "compare_ranks": "tools.ranks",
    "RanksComparison": "tools.ranks",
    "format_ranks": "tools.ranks",
    "compare_parallel": "tools.parallel",
    "ParallelComparison": "tools.parallel",
    "format_parallel": "tools.parallel",
    "Divergence": "tools.diverge",
    "RunsCheck": "tools.diverge",
    "ProgramError": "tools.diverge",
    "eager_values": "tools.diverge",
    "format_divergence": "tools.diverge",
    "format_runs_check": "tools.diverge",
    "Bisection": "tools.diverge",
    "Cause": "tools.diverge",
    "format_bisection": "tools.diverge",
    "format_repro": "tools.repro",
}

__all__ = [
    "install",
    "uninstall",
    "is_installed",
    "enabled",
    "stats",
    "set_option",
    "get_option",
    "options",
    "option_table",
    "library_path",
    "compare",
    "report",
    "first_divergence_from_eager",
    "first_difference_between_runs",
    "bisect_divergence",
    "write_repro",
    "wait_for_saves",
    *_LAZY,
]


@contextlib.contextmanager
def enabled(level: int | str | None = None, kernels: str | None = None) -> Iterator[None]:
    """Install for the duration of a block, optionally at a level and with a
    kernel filter (both restored afterwards).

        with aoti_debug_printer.enabled(level=2, kernels="cpp_fused_*"):
            torch._inductor.aoti_compile_and_package(ep)
    """
    from torch._inductor import config

    was_installed = is_installed()
    patch: dict[str, Any] = {}
    if level is not None:
        patch["aot_inductor.debug_intermediate_value_printer"] = str(level)
    if kernels is not None:
        patch["aot_inductor.filtered_kernel_names"] = kernels
    install()
    try:
        with config.patch(patch):
            yield
    finally:
        if not was_installed:
            uninstall()


def stats(tensor, on: str = "auto") -> dict[str, Any]:
    """The shim's fused statistics of one tensor, as a dict. `on` picks where
    they are computed: "auto" (as records do: on the GPU for CUDA tensors),
    "host" (one copy to the CPU) or "device" (CUDA tensors only)."""
    return shim().stats(tensor, on)


def compare(a, b, rtol: float | None = None, atol: float | None = None):
    """Compares two dumps (level-1 directories or JSON-lines records files);
    see `aoti-debug compare`. Returns a Comparison (.first, .worst(),
    .only_a, .only_b)."""
    from .tools.compare import compare as _compare

    return _compare(a, b, rtol=rtol, atol=atol)


def report(dump, output="aoti-debug-report.html"):
    """Writes the HTML report of a dump; see `aoti-debug report`."""
    from .tools.report import write_report

    return write_report(dump, output)


def first_divergence_from_eager(
    program,
    inputs=None,
    dump=None,
    imports=(),
    progress=False,
    repro=None,
    package=None,
    report=None,
):
    """Compiles an exported program at level 1, runs it, and judges each
    value a kernel wrote against a float64 truth, beside a benchmark in the
    run's own dtypes and numerics settings; see `aoti-debug diverge` and
    docs/accuracy.md. `inputs`: a tuple of positional inputs or an (args,
    kwargs) pair, default the program's example inputs. `repro`: a new
    directory for a one-kernel repro of the first divergence (with `dump`,
    `package` is the .pt2 its run loaded). `report`: an HTML file for the
    report of the dump judged, with the verdict and its first divergence
    marked. Leaves the installation and every option as it found them.
    Returns a Divergence (.first, .drift, .matches,
    .unmatched, .coverage(), .repro)."""
    from .tools.diverge import first_divergence_from_eager as _diverge

    return _diverge(
        program,
        inputs,
        dump=dump,
        imports=tuple(imports),
        progress=progress,
        repro=repro,
        package=package,
        report=report,
    )


def first_difference_between_runs(program, inputs=None, runs=2, imports=(), progress=False):
    """Compiles an exported program at level 1 once, runs it `runs` times
    on the same inputs, and compares the runs bit for bit; see `aoti-debug
    diverge --runs`. Returns a RunsCheck (.first: the first value that
    differs, a Difference; .nondeterministic_kernel: whether its kernel
    should have been deterministic)."""
    from .tools.diverge import first_difference_between_runs as _runs

    return _runs(program, inputs, runs=runs, imports=tuple(imports), progress=progress)


def bisect_divergence(program, inputs=None, imports=(), progress=False, repro=None, report=None):
    """Compiles an exported program as first_divergence_from_eager does and,
    where a node diverges, finds the compiler decision that makes it
    diverge: a decomposition, a pass, a lowering or a config, by Inductor's
    CompilerBisector and its hooks, with diverge's verdict on that node as
    the oracle; see `aoti-debug diverge --bisect` and docs/accuracy.md.
    `repro`: a new directory for a one-kernel repro of the first divergence,
    from the bad (default) compile, its line naming the cause. `report`: an
    HTML file for the report of that compile's dump, with the cause. Returns a
    Bisection (.divergence, .node, .cause, .outcome, .compiles, .seconds)."""
    from .tools.diverge import bisect_divergence as _bisect

    return _bisect(
        program, inputs, imports=tuple(imports), progress=progress, repro=repro, report=report
    )


def write_repro(dump, package, directory, kernel=None, launch=None, call=None, imports=()):
    """Writes a one-kernel repro of the dump's first finding (a trap, guard
    or CUDA error record), or of the launch named; see `aoti-debug repro`
    and docs/repro.md. Returns a Repro (.directory, .kernel, .kind, .bytes,
    .seconds)."""
    from .tools.repro import write_repro as _write

    return _write(
        dump, package, directory, kernel=kernel, launch=launch, call=call, imports=tuple(imports)
    )


def library_path() -> str:
    """Absolute path of libaoti_debug_printer.so, which compiled models load."""
    return shim().library_path()


def __getattr__(name: str) -> Any:
    room = _LAZY.get(name)
    if room is None:
        raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
    value = getattr(importlib.import_module(f".{room}", __name__), name)
    globals()[name] = value
    return value
