"""diverge's findings as the lines the CLI prints."""

from __future__ import annotations

from ..numerics import Verdict
from .result import Bisection, Divergence, Match, RunsCheck


def format_runs_check(check: RunsCheck) -> str:
    from ..compare import _what, determinism_verdict

    runs = len(check.comparisons) + 1
    compared = len(check.comparisons[0].compared) if check.comparisons else 0
    first = check.first
    if first is None:
        return (
            f"{runs} runs on the same inputs: all {compared} values kernels wrote are "
            "identical bit for bit\n"
        )
    which = next(c for c in check.comparisons if c.first_different is first)
    differ = sum(1 for d in which.compared if d.identical is False)
    lines = [
        f"{runs} runs on the same inputs: {differ} of {compared} values differ bit for bit",
        f"first: {_what(first, True)}",
    ]
    lines.append(determinism_verdict(first))
    lines.append(
        f"  largest difference {first.max_abs:.6g}, relative RMS {first.rel_rms:.3g}, "
        f"in {first.a.tensor.dtype} {first.a.tensor.shape}"
    )
    return "\n".join(lines) + "\n"


def relative(v: Verdict) -> str:
    """An error as a multiple of its bar: above 1 is beyond it."""
    r = v.ratio
    return "inf" if r == float("inf") else f"{r:.3g}"


def format_divergence(d: Divergence) -> str:
    lines = [f"the compiled package accepts fewer sizes than the program: {n}" for n in d.narrowed]
    if d.wrong_input is not None:
        lines += [
            f"WRONG INPUT: {d.wrong_input.message}",
            "  nothing was judged: the package would read this input as the size it was "
            "compiled for. Compile it for this size: export with an example input of this "
            "size, or with a torch.export.Dim range that covers it, and take out what "
            "narrowed it",
        ]
        return "\n".join(lines) + "\n"
    written, compared, reasons = d.coverage()
    env = d.environment
    lines.append(
        f"compared {compared} of {written} values kernels wrote against a float64 truth "
        f"({100 * compared / max(1, written):.0f}%)"
    )
    if env is not None:
        lines.append(
            "benchmark made under the compiled run's settings: "
            + ", ".join(f"{k} {v}" for k, v in env.rows() if v != "-")
        )
    first, drift = d.first, d.drift
    if first is None and drift is None:
        lines.append("no divergence from eager: every value's error is within the benchmark's bar")
    elif first is not None:
        r = first.record
        lines.append(
            f"FIRST DIVERGENCE FROM EAGER: kernel {r.kernel} (launch {r.launch}), "
            f"buffer {r.arg} = node {first.node}"
        )
        if source := d.source_of(first.node):
            lines.append(f"  at {source}")
        lines.extend(explain(first))
        if d.repro is not None:
            from ..repro import format_repro

            lines.append(format_repro(d.repro).rstrip("\n"))
        else:
            lines.append(
                "  a one-kernel repro of it, on its real inputs: the same command with "
                "--repro DIR"
            )
    else:
        r = drift.record
        lines.append(
            "no divergence from eager: every kernel's own error is within the benchmark's bar"
        )
        lines.append(
            f"note: the error accumulated from the model inputs is beyond it, first at "
            f"kernel {r.kernel} (launch {r.launch}), buffer {r.arg} = node "
            f"{drift.node}: the noise the run's settings allow, amplified more than in "
            "eager (docs/accuracy.md)"
        )
        if source := d.source_of(drift.node):
            lines.append(f"  at {source}")
        lines.extend(explain(drift))
    lines.append(
        f"  {'launch':>6} {'kernel':<44} {'buffer':<8} {'node':<22} "
        f"{'own/bar':>9} {'accum/bar':>9}  verdict"
    )
    for m in d.matches:
        mark = "DIVERGES" if m.own.diverged else "drift" if m.accumulated.diverged else "ok"
        r = m.record
        lines.append(
            f"  {r.launch:>6} {r.kernel[:44]:<44} {r.arg[:8]:<8} "
            f"{m.node[:22]:<22} {relative(m.own):>9} {relative(m.accumulated):>9}  {mark}"
        )
    first_of = {}
    for u in d.unmatched:
        first_of.setdefault(u.code, u)
    for code, n in reasons.most_common():
        u = first_of[code]
        detail = f" (the first: {u.detail})" if u.detail else ""
        lines.append(f"  not compared ({n}) {code}: {u.text}{detail}")
    return "\n".join(lines) + "\n"


def explain(m: Match) -> list[str]:
    region = (
        f"{m.region} nodes evaluated back to the values the dump holds"
        if not m.from_model_inputs
        else f"{m.region} nodes back to the model inputs: no value before it was saved, so its "
        "own error is its accumulated one"
    )
    out = []
    for what, v in (
        (f"its own error (on the compiled run's inputs; {region})", m.own),
        ("accumulated from the model inputs", m.accumulated),
    ):
        if v.value.problem:
            out.append(f"  {what}: {v.value.problem}")
            continue
        out.append(
            f"  {what}: RMSE {v.value.rms:.3g} (bar {v.bar_rms:.3g}, benchmark "
            f"{v.benchmark.rms:.3g}); largest {v.value.max:.3g} (bar {v.bar_max:.3g}, "
            f"benchmark {v.benchmark.max:.3g})"
            + (f"; {v.value.bad} non-finite where the truth is finite" if v.value.bad else "")
        )
    return out


def undecided(b: Bisection) -> str:
    """The verdict where compiles that failed left suspects: none is
    decided, and nothing is ruled out."""
    said = "; ".join(
        f"{what}" + (f" (registered at {where})" if where else "") + f": {why}"
        for what, where, why in b.suspects
    )
    return f"undecided: a compile that would decide failed, so these stay suspects: {said}"


def format_bisection(b: Bisection) -> str:
    """diverge --bisect's lines: the divergence, a line per compile, the cause."""
    lines = [format_divergence(b.divergence).rstrip("\n")]
    if b.divergence.first is None and b.non_finite is None:
        return lines[0] + "\n"
    if (r := b.non_finite) is not None:
        lines.append(
            f"NaN: kernel {r.kernel} (launch {r.launch}) made NaN in {r.arg} = node "
            f"{r.node}, as eager does on these inputs (not a divergence; what the trap stops at)"
        )
        if b.source:
            lines.append(f"  at {b.source}")
    lines += [f"  {s}" for s in b.steps]
    if b.cause is not None:
        lines.append(f"cause: {b.cause.text}")
        if b.cause.good:
            state = "without NaN" if b.non_finite is not None else "within its bar"
            lines.append(f"  the compile without it (node {b.node} {state}): {b.cause.good}")
        if b.cause.bad:
            lines.append(f"  the compile with it: {b.cause.bad}")
    elif b.suspects:
        lines.append(undecided(b))
    else:
        lines.append(
            f"no compiler decision found: node {b.node} "
            f"{'makes NaN' if b.non_finite is not None else 'diverges'} with each stage the "
            "bisector can disable disabled (decompositions, passes, the lowerings of its "
            "kernel's nodes, configs)"
        )
    lines.append(f"bisected in {b.compiles} compiles, {b.seconds:.1f} s")
    return "\n".join(lines) + "\n"
