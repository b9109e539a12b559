"""Comparing two dumps: the first value where an error is introduced, and
the worst offenders.

Two runs of one program (two compiles, two devices, two torch versions)
differ everywhere a little. A value is named where its difference jumps
beyond what the differences of the values its kernel read explain
(tools/numerics: K_JUMP times theirs, plus the noise two correct runs show in
its dtype and in the environments the runs recorded), not where the drift
accumulated from earlier values crosses a line. Level-1 dumps compare
element by element; records without files compare by their statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from enum import Enum
from pathlib import Path

from ..records import Phase
from .dumps import Dump, Record, load_dump
from .numerics import K_JUMP, K_MAX, Environment, cross_floor, difference, format_environments

# Which phases hold a kernel's results; before_launch holds its inputs (and
# whatever memory its outputs had), which another compile may not share.
COMPARED_PHASES = (Phase.AFTER_LAUNCH, Phase.MODEL_INPUT)
STATS = ("min", "max", "mean", "std", "absmax")
COUNTS = ("nan", "pos_inf", "neg_inf", "finite")


@dataclass
class Difference:
    a: Record
    b: Record
    # B against A, relative to A's scale (RMS, largest magnitude).
    rel_rms: float = 0.0
    rel_max: float = 0.0
    max_abs: float = 0.0
    # The same of the values its kernel read (in A), the largest of them.
    inputs_rms: float = 0.0
    inputs_max: float = 0.0
    bar_rms: float = 0.0
    bar_max: float = 0.0
    mismatches: int = 0  # non-finite where the other is finite; or statistics that moved
    moved: list[str] = field(default_factory=list)  # statistics that moved
    problem: str = ""  # shape or dtype differ
    # With an explicit tolerance: elements beyond it.
    beyond_tolerance: int = 0
    explicit: bool = False
    # Whether the two values are the same bit for bit; None where only
    # their statistics were recorded.
    identical: bool | None = None

    @property
    def nondeterministic_by_construction(self) -> bool:
        """Its kernel adds with float atomics (Role.ACCUMULATE): two runs on
        the same inputs may differ here in their last bits without a bug."""
        return self.a.role.nondeterministic or self.b.role.nondeterministic

    @property
    def diverged(self) -> bool:
        """An error introduced here (or, with an explicit tolerance, any
        element beyond it)."""
        if self.problem or self.mismatches:
            return True
        if self.explicit:
            return self.beyond_tolerance > 0
        return self.rel_rms > self.bar_rms or self.rel_max > self.bar_max

    @property
    def ratio(self) -> float:
        if self.problem or self.mismatches:
            return math.inf
        return max(
            self.rel_rms / self.bar_rms if self.bar_rms else 0.0,
            self.rel_max / self.bar_max if self.bar_max else 0.0,
        )


@dataclass(kw_only=True)
class Comparison:
    a: Path
    b: Path
    compared: list[Difference]
    only_a: list[Record]
    only_b: list[Record]
    # How records were matched: "node" (what buffers hold, across compiles)
    # or "kernel" (kernel, argument and call: one compile only).
    matched_by: str = "kernel"
    # Values kernels wrote that hold no single node, by Reason code ("" where
    # a record gives none; node matching).
    not_comparable: dict[str, list[Record]] = field(default_factory=dict)
    env_a: Environment | None = None
    env_b: Environment | None = None
    # Where the user's code made each node, innermost frame first (the
    # dumps' environment records: B's, then A's).
    sources: dict[str, list[str]] = field(default_factory=dict)

    def source_of(self, node: str) -> str:
        """The user's innermost line that made `node`; "" where not known."""
        frames = self.sources.get(node)
        return frames[0] if frames else ""

    @property
    def diverged(self) -> list[Difference]:
        return [d for d in self.compared if d.diverged]

    @property
    def first(self) -> Difference | None:
        """The first value, in launch order (of dump A), where an error is introduced."""
        return self.diverged[0] if self.diverged else None

    @property
    def first_different(self) -> Difference | None:
        """The first value, in launch order (of dump A), that differs bit
        for bit, whatever its noise verdict: between two runs of one
        compile, its kernel is the first that was not deterministic."""
        return next((d for d in self.compared if d.identical is False), None)

    @property
    def same_build(self) -> bool:
        """Both runs were of one compile on one kind of device (their
        environments say so): a value that differs bit for bit then differs
        because of a kernel that is not deterministic."""
        a, b = self.env_a, self.env_b
        return (
            a is not None
            and b is not None
            and bool(a.inductor_config)
            and (a.inductor_config, a.torch, a.device) == (b.inductor_config, b.torch, b.device)
        )

    def worst(self, n: int = 10) -> list[Difference]:
        return sorted(
            self.diverged, key=lambda d: (bool(d.problem), d.ratio, d.rel_rms), reverse=True
        )[:n]


def _close(x, y, rtol: float, atol: float) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= atol + rtol * abs(y)


def _compare_stats(d: Difference, rtol: float, atol: float) -> None:
    sa, sb = d.a.stats, d.b.stats
    for key in COUNTS:
        if getattr(sa, key, None) != getattr(sb, key, None):
            d.moved.append(key)
    for key in STATS:
        x, y = getattr(sa, key, None), getattr(sb, key, None)
        if not _close(x, y, rtol, atol):
            d.moved.append(key)
        if x is not None and y is not None and not (math.isnan(x) or math.isnan(y)):
            d.max_abs = max(d.max_abs, abs(x - y))
            d.rel_max = max(d.rel_max, abs(x - y) / max(abs(x), 1e-30))
    d.mismatches = len(d.moved)


def _compare_tensors(
    d: Difference, ta, tb, reshape: bool, rtol: float | None, atol: float | None
) -> None:
    import torch

    if reshape and ta.numel() == tb.numel() and ta.dtype == tb.dtype:
        # One node's value, kept by two compiles in buffers of other shapes
        # (reached through a reshape): the same elements in the same order.
        ta, tb = ta.reshape(-1), tb.reshape(-1)
    if ta.shape != tb.shape or ta.dtype != tb.dtype:
        d.problem = f"{ta.dtype} {list(ta.shape)} vs {tb.dtype} {list(tb.shape)}"
        return
    d.identical = _bitwise_equal(ta, tb)
    diff = difference(ta, tb)
    d.rel_rms, d.rel_max, d.mismatches, d.max_abs = (
        diff.rel_rms,
        diff.rel_max,
        diff.bad,
        diff.abs_max,
    )
    if rtol is not None or atol is not None:
        d.explicit = True
        wide = torch.complex128 if ta.dtype.is_complex else torch.float64
        d.beyond_tolerance = int(
            (
                ~torch.isclose(
                    tb.to(wide), ta.to(wide), rtol=rtol or 0.0, atol=atol or 0.0, equal_nan=True
                )
            ).sum()
        )


def _bitwise_equal(ta, tb) -> bool:
    """The same bits in every element (NaNs of one payload equal)."""
    import torch

    ta, tb = ta.contiguous(), tb.contiguous()
    if ta.dtype == torch.bool or ta.numel() == 0:
        return torch.equal(ta, tb)
    return torch.equal(ta.view(torch.uint8), tb.view(torch.uint8))


def node_keyed(dump: Dump) -> tuple[dict[tuple, Record], dict[str, list[Record]]]:
    """Model inputs and the values kernels wrote that hold a node, keyed by
    (rank, run, what, occurrence); the other written values by reason."""
    keyed: dict[tuple, Record] = {}
    unkeyed: dict[str, list[Record]] = {}
    seen: dict[tuple, int] = {}
    for r in dump.records:
        if r.phase is Phase.MODEL_INPUT:
            what = ("input", r.arg)
        elif r.written and r.node:
            what = ("node", r.node)
        else:
            if r.written:
                reason = r.tensor.reason
                unkeyed.setdefault(reason.value if reason else "", []).append(r)
            continue
        base = (r.rank, r.run, what)
        n = seen.get(base, 0)
        seen[base] = n + 1
        keyed[(*base, n)] = r
    return keyed, unkeyed


class _Unnamed(Enum):
    """What a launch read that no node names (a buffer Inductor made, an
    intermediate): its difference is bounded by everything written before.
    One member: a sentinel that no ("node", name) or ("input", arg) key
    can equal."""

    UNNAMED = "unnamed"


UNNAMED = _Unnamed.UNNAMED


def inputs_of(dump: Dump) -> dict[tuple, set[tuple | _Unnamed]]:
    """(rank, run, launch) -> what that launch read: the nodes its read
    arguments held before it, and the model inputs, as node_keyed's `what`;
    UNNAMED where it read something else."""
    model_inputs = {r.arg for r in dump.records if r.phase is Phase.MODEL_INPUT}
    reads: dict[tuple, set[tuple]] = {}
    for r in dump.records:
        if r.phase is not Phase.BEFORE_LAUNCH or not r.role.reads:
            continue
        key = (r.rank, r.run, r.launch)
        if r.node:
            reads.setdefault(key, set()).add(("node", r.node))
        elif r.arg in model_inputs:
            reads.setdefault(key, set()).add(("input", r.arg))
        elif not (r.tensor.reason and r.tensor.reason.constant):  # the same on both sides
            reads.setdefault(key, set()).add(UNNAMED)
    return reads


class _LargestBefore:
    """The largest differences of the values written before a launch, per
    (rank, run). A run's records come in launch order (one thread writes
    them), so a running maximum per run does, in one pass."""

    def __init__(self) -> None:
        # (rank, run) -> [launch being filled, largest before it (rms, max),
        # largest up to and including it (rms, max)]
        self._runs: dict[tuple, list] = {}

    def _advance(self, rank: int, run: int, launch: int) -> list:
        state = self._runs.setdefault((rank, run), [launch, 0.0, 0.0, 0.0, 0.0])
        if launch > state[0]:
            state[:] = [launch, state[3], state[4], state[3], state[4]]
        return state

    def of(self, rank: int, run: int, launch: int) -> tuple[float, float]:
        state = self._advance(rank, run, launch)
        return state[1], state[2]

    def add(self, rank: int, run: int, launch: int, d: Difference) -> None:
        state = self._advance(rank, run, launch)
        state[3], state[4] = max(state[3], d.rel_rms), max(state[4], d.rel_max)


def compare(
    a: str | Path | Dump, b: str | Path | Dump, rtol: float | None = None, atol: float | None = None
) -> Comparison:
    """Compares dump B against dump A (the reference order). Dumps that
    both say what their buffers hold are matched by node, so two compiles
    (other configs, devices or torch versions) compare; older dumps by
    kernel, argument and call. With rtol or atol, every element beyond that
    tolerance counts, as torch.isclose has it, instead of the criterion."""
    da = a if isinstance(a, Dump) else load_dump(a)
    db = b if isinstance(b, Dump) else load_dump(b)
    by_node = da.has_provenance and db.has_provenance
    if by_node:
        in_a, not_comparable = node_keyed(da)
        in_b, _ = node_keyed(db)
    else:
        in_a = {}
        for r in da.records:
            if r.phase in COMPARED_PHASES:
                in_a.setdefault(r.key, r)
        in_b = {r.key: r for r in db.records if r.phase in COMPARED_PHASES}
        not_comparable = {}
    env_a, env_b = da.environment(0), db.environment(0)
    reads = inputs_of(da) if by_node else {}
    compared: list[Difference] = []
    only_a: list[Record] = []
    seen: dict[tuple, Difference] = {}  # (rank, run, what) -> its first difference
    before = _LargestBefore()
    for key, ra in in_a.items():
        rb = in_b.get(key)
        if rb is None:
            only_a.append(ra)
            continue
        d = Difference(ra, rb)
        dtype = ra.tensor.dtype
        floor = cross_floor(dtype, (ra.kernel, rb.kernel), (env_a, env_b))
        same_meta = ra.tensor.dtype == rb.tensor.dtype and ra.tensor.shape == rb.tensor.shape
        if ra.path is not None and rb.path is not None and (same_meta or by_node):
            _compare_tensors(d, ra.load(), rb.load(), by_node, rtol, atol)
        elif not same_meta:
            d.problem = (
                f"{rb.tensor.dtype} {rb.tensor.shape} where A has "
                f"{ra.tensor.dtype} {ra.tensor.shape}"
            )
        else:
            _compare_stats(
                d,
                rtol if rtol is not None else K_MAX * floor,
                atol if atol is not None else K_MAX * floor,
            )
        # What its inputs carried in: the largest difference of the values
        # its kernel read, where both dumps hold them.
        rank, run = key[0], key[1]
        launch = ra.launch
        for what in reads.get((rank, run, launch), ()):
            if what is UNNAMED:
                # Read something no node names: it may carry any difference
                # written before.
                rms, top = before.of(rank, run, launch)
                d.inputs_rms, d.inputs_max = max(d.inputs_rms, rms), max(d.inputs_max, top)
                continue
            held = seen.get((rank, run, what))
            if held is not None and held is not d:
                d.inputs_rms = max(d.inputs_rms, held.rel_rms)
                d.inputs_max = max(d.inputs_max, held.rel_max)
        d.bar_rms = K_JUMP * d.inputs_rms + floor
        d.bar_max = K_JUMP * d.inputs_max + K_MAX * floor
        if by_node:
            seen.setdefault((rank, run, key[2]), d)
            before.add(rank, run, launch, d)
        compared.append(d)
    only_b = [rb for key, rb in in_b.items() if key not in in_a]
    return Comparison(
        a=da.source,
        b=db.source,
        compared=compared,
        only_a=only_a,
        only_b=only_b,
        matched_by="node" if by_node else "kernel",
        not_comparable=not_comparable,
        env_a=env_a,
        env_b=env_b,
        sources={**da.sources(), **db.sources()},
    )


def _where(r: Record) -> str:
    return f"{r.kernel or 'model input'} (launch {r.launch})"


def _what(d: Difference, by_node: bool) -> str:
    a, b = d.a, d.b
    if not by_node:
        return f"{a.label}, launch {a.launch} in A"
    if a.phase is Phase.MODEL_INPUT:
        return f"model input {a.arg}"
    return f"node {a.node}: A {_where(a)} {a.arg} vs B {_where(b)} {b.arg}"


def _ratio(d: Difference) -> str:
    r = d.ratio
    return "inf" if r == math.inf else f"{r:.3g}"


def format_comparison(c: Comparison, top: int = 10) -> str:
    by_node = c.matched_by == "node"
    unmatched = sum(len(v) for v in c.not_comparable.values())
    lines = [f"A: {c.a}", f"B: {c.b}"]
    if c.env_a is not None or c.env_b is not None:
        lines.append("numerics environments (! where they differ):")
        lines.extend(format_environments([("A", c.env_a), ("B", c.env_b)]))
    lines.append(
        f"matched by {'node (what buffers hold)' if by_node else 'kernel, argument and call'}"
        f"; compared {len(c.compared)} values; {len(c.diverged)} diverge; "
        f"{len(c.only_a)} only in A, {len(c.only_b)} only in B"
        + (f"; {unmatched} written values hold no single node" if by_node else "")
    )
    if not c.compared:
        lines.append(
            "compared nothing: no value of A has its match in B (no verdict; are they "
            "dumps of one program?)"
        )
    lines.extend(bitwise_lines(c))
    first = c.first
    if first is None and c.compared:
        lines.append(
            "no divergence: no value's difference goes beyond what its inputs and the "
            "runs' numerics explain"
        )
    elif first is not None:
        lines.append(f"FIRST DIVERGENCE: {_what(first, by_node)}")
        if source := c.source_of(first.a.node or first.b.node):
            lines.append(f"  at {source}")
        lines.append("  " + (first.problem or _explain(first)))
        if c.b.is_dir() and first.b.kernel:
            lines.append(
                f"  a one-kernel repro of B's launch: aoti-debug repro {c.b} --package "
                f"B.pt2 --launch {first.b.launch}  (B.pt2: the package B's run "
                "loaded)"
            )
    if c.diverged:
        lines.append("")
        lines.append(f"{'worst offenders':<72}{'rel RMS':>10}{'inputs':>10}{'x bar':>8}  moved")
        for d in c.worst(top):
            lines.append(
                f"{_what(d, by_node)[:71]:<72}{d.rel_rms:>10.3g}{d.inputs_rms:>10.3g}"
                f"{_ratio(d):>8}  {d.problem or ', '.join(d.moved)}"
            )
    for side, recs in (("A", c.only_a), ("B", c.only_b)):
        for r in recs:
            what = f"node {r.node} = {r.label}" if by_node and r.node else r.label
            lines.append(f"only in {side}: {what}")
    for code, recs in sorted(c.not_comparable.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"not comparable ({len(recs)}) {code or '-'}: {recs[0].tensor.reason_kind}")
    return "\n".join(lines) + "\n"


def bitwise_lines(c: Comparison) -> list[str]:
    """Whether the dumps differ bit for bit, and where first."""
    known = [d for d in c.compared if d.identical is not None]
    if not known:
        return []
    differ = [d for d in known if not d.identical]
    if not differ:
        return [f"bit for bit: all {len(known)} values compared element by element are identical"]
    first = c.first_different
    by_node = c.matched_by == "node"
    lines = [
        f"bit for bit: {len(differ)} of {len(known)} values differ; the first: "
        f"{_what(first, by_node)}"
    ]
    if not c.same_build:
        lines.append(
            "  the runs were compiled or run differently (their environments differ): "
            "values are expected to differ in their last bits"
        )
    elif first.a.phase is Phase.MODEL_INPUT:
        lines.append("  the model inputs differ: these are not two runs on the same inputs")
    else:
        lines.append(determinism_verdict(first))
    return lines


def determinism_verdict(first: Difference) -> str:
    """Whether the kernel of the first value two runs of one compile differ
    in is nondeterministic by construction (atomics) or a bug."""
    if first.nondeterministic_by_construction:
        return (
            f"  {first.a.kernel} adds with float atomics: nondeterministic by construction "
            "(not a bug; torch.use_deterministic_algorithms(True) before compiling avoids it)"
        )
    return (
        f"  NONDETERMINISTIC KERNEL: {first.a.kernel} is deterministic by construction, "
        "and every value before it is identical: on the same inputs it should give the "
        "same bits"
    )


def _explain(d: Difference) -> str:
    if d.explicit:
        return (
            f"{d.beyond_tolerance} elements beyond the given tolerance; largest difference "
            f"{d.max_abs:.6g}"
        )
    text = (
        f"relative RMS difference {d.rel_rms:.3g} where the values its kernel read differ "
        f"by {d.inputs_rms:.3g} (bar {d.bar_rms:.3g}); largest {d.rel_max:.3g} "
        f"(bar {d.bar_max:.3g}); largest absolute {d.max_abs:.6g}"
    )
    if d.mismatches:
        text += f"; {d.mismatches} " + (
            "statistics moved" if d.moved else "elements non-finite on one side only"
        )
    return text
