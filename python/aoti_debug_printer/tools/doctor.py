"""`aoti-debug doctor`: the environment as the printer sees it, and each
mismatch with its fix.

Why it exists: an AOTInductor package is a shared object that the C++
compiler Inductor picks builds against that compiler's C++ runtime, and the
process that loads it has its own. Where the compiler's libstdc++ is newer
than the one the process loaded, the package needs symbol versions the
process cannot give, and its load fails or crashes, with this library or
without (issue 70: every package crashed at load on a machine whose default
compiler linked libstdc++ in statically: cxx_runtime says how). The checks
run no compiler but to ask it where its runtime is and how it would link
(-###), and load nothing.
"""

from __future__ import annotations

import dataclasses
import os
import re
import shutil
import subprocess

from ..cxx_runtime import (
    compiler_libstdcxx,
    compiler_to_use,
    links_runtime_statically,
    loaded_libstdcxx,
    newest_glibcxx,
)

# The switches users set: ours, upstream's printer's, and Inductor's compiler.
_SWITCHES = ("AOTI_DEBUG_PRINTER_", "AOT_INDUCTOR_", "CXX", "CUDA_HOME", "CUDAHOSTCXX")


@dataclasses.dataclass
class Check:
    """One line of the report: what was found, and where it is a problem,
    how to fix it."""

    name: str
    found: str
    problem: str = ""
    fix: str = ""


def line_of(command: list[str], containing: str = "") -> str:
    """The first line `command` prints (that holds `containing`)."""
    try:
        done = subprocess.run(command, capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError) as e:
        return f"cannot run ({e})"
    lines = [ln for ln in (done.stdout or done.stderr).splitlines() if containing in ln]
    return lines[0].strip() if lines else ""


def check_torch() -> list[Check]:
    import torch

    from .._native import supported_torch

    wanted = supported_torch()
    checks = [Check("torch", f"{torch.__version__} (supported: {wanted})")]
    release = tuple(int(p) for p in re.findall(r"\d+", torch.__version__)[:2])
    # The requirement's bounds (">=2.11" and "<2.16"), where the metadata says them.
    low = re.search(r">=\s*(\d+)\.(\d+)", wanted)
    high = re.search(r"<\s*(\d+)\.(\d+)", wanted)
    if low and high:
        lo = (int(low[1]), int(low[2]))
        hi = (int(high[1]), int(high[2]))
        if not lo <= release < hi:
            checks[0].problem = "this torch is not one this package supports"
            checks[0].fix = f"pip install a torch that meets {wanted}"
    cuda = torch.version.cuda
    if cuda is None:
        checks.append(Check("CUDA", "none: a CPU build of torch"))
    elif torch.cuda.is_available():
        gpus = [
            f"{torch.cuda.get_device_name(i)} ({'.'.join(map(str, torch.cuda.get_device_capability(i)))})"
            for i in range(torch.cuda.device_count())
        ]
        checks.append(Check("CUDA", f"{cuda}, {', '.join(gpus)}"))
    else:
        checks.append(Check("CUDA", f"{cuda}, no GPU visible"))
    return checks


def check_compiler() -> list[Check]:
    """The compiler AOTInductor uses, its C++ runtime against the one this
    process loaded."""
    from torch._inductor import cpp_builder
    from torch._inductor.exc import InvalidCxxCompiler

    try:
        compiler = cpp_builder.get_cpp_compiler()
    except InvalidCxxCompiler:
        return [
            Check(
                "C++ compiler",
                "none found",
                "AOTInductor cannot compile a package",
                "install g++ or point CXX at a C++ compiler",
            )
        ]
    where = shutil.which(compiler) or compiler
    checks = [Check("C++ compiler", f"{where}: {line_of([compiler, '--version'])}")]
    ours = loaded_libstdcxx()
    have = newest_glibcxx(ours) if ours else None
    static = links_runtime_statically(compiler)
    # A compiler that links the archive needs no version of the shared
    # library, whatever shared library it can name.
    theirs = compiler_libstdcxx(compiler, "libstdc++.a" if static else "libstdc++.so.6")
    need = newest_glibcxx(theirs) if theirs and not static else None
    if static:
        said = f"{theirs or 'an archive'}, linked into each package"
    else:
        said = f"{theirs or 'not found'}" + (
            f" (up to GLIBCXX_3.4.{need})" if need is not None else ""
        )
    checks.append(Check("its libstdc++", said))
    loaded = Check(
        "libstdc++ loaded",
        f"{ours or 'none'}" + (f" (up to GLIBCXX_3.4.{have})" if have is not None else ""),
    )
    fix = compiler_to_use(where)
    if static:
        checks[0].problem = (
            "it links libstdc++ into every package it builds, and a process that runs "
            "the shared libstdc++ (torch does) crashes or fails loading one"
        )
        checks[0].fix = fix
    if need is not None and have is not None and need > have:
        loaded.problem = (
            f"packages built by {where} may need GLIBCXX_3.4.{need}, and this process's "
            f"libstdc++ gives up to 3.4.{have}: their load fails or crashes"
        )
        loaded.fix = (
            f"{fix} (a compiler whose runtime the process has)"
            if fix.startswith("CXX=/")
            else f"LD_PRELOAD={theirs}, or a compiler as old as {ours}"
        )
    checks.append(loaded)
    return checks


def check_cuda_toolkit() -> list[Check]:
    import torch

    from .._native import shim

    nvcc = shutil.which("nvcc")
    home = os.environ.get("CUDA_HOME")
    checks = [
        Check(
            "nvcc",
            f"{nvcc}: {line_of([nvcc, '--version'], 'release')}"
            if nvcc
            else "not on PATH" + (f" (CUDA_HOME={home})" if home else ""),
        )
    ]
    missing = shim().cuda_statistics_unavailable()
    stats = Check(
        "CUDA statistics",
        "computed on the GPU (this build's kernels)" if not missing else f"host copy ({missing})",
    )
    if missing and torch.version.cuda is not None and torch.cuda.is_available():
        stats.problem = "statistics of CUDA tensors are computed after a copy to the host: slow"
        stats.fix = (
            f"a CUDA toolkit {torch.version.cuda.split('.')[0]}.x on PATH, then "
            "pip install --no-build-isolation . again"
        )
    checks.append(stats)
    return checks


def check_switches() -> list[Check]:
    import torch

    set_now = sorted(
        f"{k}={v}" for k, v in os.environ.items() if k.startswith(_SWITCHES) or k in _SWITCHES
    )
    level = torch._inductor.config.aot_inductor.debug_intermediate_value_printer
    return [
        Check("switches", ", ".join(set_now) or "none set"),
        Check("printer level (Inductor's config)", str(level)),
    ]


def diagnose() -> list[Check]:
    """Every check; one that fails (this library's own module refusing to
    load, say, in the mismatch it is here to name) is a problem line."""
    checks: list[Check] = []
    for check in (check_torch, check_compiler, check_cuda_toolkit, check_switches):
        try:
            checks += check()
        except Exception as e:  # noqa: BLE001 - a report line, never a traceback
            name = check.__name__.removeprefix("check_").replace("_", " ")
            checks.append(
                Check(name, "could not be checked", f"{type(e).__name__}: {e}", "see the error")
            )
    return checks


def format_checks(checks: list[Check]) -> str:
    width = max(len(c.name) for c in checks)
    lines = []
    for c in checks:
        lines.append(f"{c.name:<{width}}  {c.found}")
        if c.problem:
            lines.append(f"{'':<{width}}  problem: {c.problem}")
            lines.append(f"{'':<{width}}  fix: {c.fix}")
    problems = sum(1 for c in checks if c.problem)
    lines.append("all is well" if not problems else f"{problems} problem(s)")
    return "\n".join(lines) + "\n"
