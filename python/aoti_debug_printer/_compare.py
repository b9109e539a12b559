"""Comparing two dumps: the first kernel whose outputs diverge, and the
worst offenders. Level-1 dumps compare element by element; records without
files compare by their statistics."""

from __future__ import annotations

import math
from dataclasses import dataclass, field
from pathlib import Path

from ._dumps import Dump, Record, load_dump, reason_kind

# (rtol, atol) per dtype, close to torch.testing's defaults; integers and
# bool must match exactly.
TOLERANCES = {
    "float16": (1e-3, 1e-5),
    "bfloat16": (1.6e-2, 1e-5),
    "float32": (1.3e-6, 1e-5),
    "float64": (1e-7, 1e-7),
    "complex32": (1e-3, 1e-5),
    "complex64": (1.3e-6, 1e-5),
    "complex128": (1e-7, 1e-7),
}
FLOAT8 = (1.25e-1, 1e-3)
EXACT = (0.0, 0.0)
# Which phases hold a kernel's results; before_launch holds its inputs (and
# whatever memory its outputs had), which another compile may not share.
COMPARED_PHASES = ("after_launch", "model_input")
STATS = ("min", "max", "mean", "std", "absmax")
COUNTS = ("nan", "pos_inf", "neg_inf", "finite")


# float32 values computed on a GPU with TF32 on (cuDNN's convolutions by
# default, matmuls when allowed): two correct algorithms differ by about
# TF32's precision, so float32's tolerance would raise false alarms.
TF32 = (5e-3, 5e-3)


def tf32_in_use() -> bool:
    import torch

    return bool(torch.backends.cudnn.allow_tf32 or torch.backends.cuda.matmul.allow_tf32)


def tolerance(dtype: str, rtol: float | None, atol: float | None,
              device: str = "cpu") -> tuple[float, float]:
    default = TOLERANCES.get(dtype) or (FLOAT8 if dtype.startswith("float8") else EXACT)
    if dtype == "float32" and device.startswith("cuda") and tf32_in_use():
        default = TF32
    return (default[0] if rtol is None else rtol, default[1] if atol is None else atol)


@dataclass
class Difference:
    a: Record
    b: Record
    max_abs: float = 0.0
    max_rel: float = 0.0
    mismatches: int = 0  # elements (files) or statistics (records) beyond tolerance
    moved: list[str] = field(default_factory=list)  # statistics that moved
    problem: str = ""  # shape or dtype differ

    @property
    def diverged(self) -> bool:
        return bool(self.problem) or self.mismatches > 0


@dataclass
class Comparison:
    a: Path
    b: Path
    compared: list[Difference]
    only_a: list[Record]
    only_b: list[Record]
    # How records were matched: "node" (what buffers hold, across compiles)
    # or "kernel" (kernel, argument and call: one compile only).
    matched_by: str = "kernel"
    # Values kernels wrote that hold no single node, by reason (node matching).
    not_comparable: dict[str, list[Record]] = field(default_factory=dict)

    @property
    def diverged(self) -> list[Difference]:
        return [d for d in self.compared if d.diverged]

    @property
    def first(self) -> Difference | None:
        """The first divergence in launch order (of dump A)."""
        return self.diverged[0] if self.diverged else None

    def worst(self, n: int = 10) -> list[Difference]:
        return sorted(self.diverged, key=lambda d: (bool(d.problem), d.max_rel, d.max_abs),
                      reverse=True)[:n]


def _close(x, y, rtol: float, atol: float) -> bool:
    if x is None or y is None:
        return x is None and y is None
    if math.isnan(x) or math.isnan(y):
        return math.isnan(x) and math.isnan(y)
    return abs(x - y) <= atol + rtol * abs(y)


def _compare_stats(d: Difference, rtol: float, atol: float, sa: dict | None = None,
                   sb: dict | None = None) -> None:
    sa = (d.a.stats or {}) if sa is None else sa
    sb = (d.b.stats or {}) if sb is None else sb
    for key in COUNTS:
        if sa.get(key) != sb.get(key):
            d.moved.append(key)
    for key in STATS:
        x, y = sa.get(key), sb.get(key)
        if not _close(x, y, rtol, atol):
            d.moved.append(key)
        if x is not None and y is not None and not (math.isnan(x) or math.isnan(y)):
            d.max_abs = max(d.max_abs, abs(x - y))
            d.max_rel = max(d.max_rel, abs(x - y) / max(abs(y), 1e-30))
    d.mismatches = len(d.moved)


def element_errors(got, want, rtol: float, atol: float) -> tuple[float, float, int]:
    """Max absolute and relative error over finite differences, and how many
    elements are beyond tolerance (NaN matches NaN), of `got` against `want`."""
    import torch

    wide = torch.complex128 if got.dtype.is_complex or want.dtype.is_complex else torch.float64
    x, y = got.detach().cpu().to(wide), want.detach().cpu().to(wide)
    mismatches = int((~torch.isclose(x, y, rtol=rtol, atol=atol, equal_nan=True)).sum())
    diff = (x - y).abs()
    finite = torch.isfinite(diff)
    if not finite.any():
        return 0.0, 0.0, mismatches
    return (float(diff[finite].max()),
            float((diff[finite] / y.abs()[finite].clamp_min(1e-30)).max()), mismatches)


def _compare_tensors(d: Difference, ta, tb, rtol: float, atol: float,
                     reshape: bool = False) -> None:
    if reshape and ta.numel() == tb.numel() and ta.dtype == tb.dtype:
        # One node's value, kept by two compiles in buffers of other shapes
        # (reached through a reshape): the same elements in the same order.
        ta, tb = ta.reshape(-1), tb.reshape(-1)
    if ta.shape != tb.shape or ta.dtype != tb.dtype:
        d.problem = f"{ta.dtype} {list(ta.shape)} vs {tb.dtype} {list(tb.shape)}"
        return
    # Which statistics moved, for the table: of the saved tensors themselves.
    from ._options import shim

    _compare_stats(d, rtol, atol, shim().stats(ta, "host"), shim().stats(tb, "host"))
    d.max_abs, d.max_rel, d.mismatches = element_errors(ta, tb, rtol, atol)


def _node_keyed(dump: Dump) -> tuple[dict[tuple, Record], dict[str, list[Record]]]:
    """Model inputs and the values kernels wrote that hold a node, keyed by
    (rank, run, what, occurrence); the other written values by reason."""
    keyed: dict[tuple, Record] = {}
    unkeyed: dict[str, list[Record]] = {}
    seen: dict[tuple, int] = {}
    for r in dump.records:
        if r.raw["phase"] == "model_input":
            what = ("input", r.raw["arg"])
        elif r.written and r.node:
            what = ("node", r.node)
        else:
            if r.written:
                unkeyed.setdefault(reason_kind(r.why or "holds no single node"), []).append(r)
            continue
        base = (r.raw.get("rank", -1), r.run, what)
        n = seen.get(base, 0)
        seen[base] = n + 1
        keyed[(*base, n)] = r
    return keyed, unkeyed


def compare(a: str | Path | Dump, b: str | Path | Dump, rtol: float | None = None,
            atol: float | None = None) -> Comparison:
    """Compares dump B against dump A (the reference order). Dumps that
    both say what their buffers hold are matched by node, so two compiles
    (other configs, devices or torch versions) compare; older dumps by
    kernel, argument and call."""
    da = a if isinstance(a, Dump) else load_dump(a)
    db = b if isinstance(b, Dump) else load_dump(b)
    by_node = da.has_provenance and db.has_provenance
    if by_node:
        in_a, not_comparable = _node_keyed(da)
        in_b, _ = _node_keyed(db)
    else:
        in_a = {}
        for r in da.records:
            if r.raw["phase"] in COMPARED_PHASES:
                in_a.setdefault(r.key, r)
        in_b = {r.key: r for r in db.records if r.raw["phase"] in COMPARED_PHASES}
        not_comparable = {}
    compared, only_a = [], []
    for key, ra in in_a.items():
        rb = in_b.get(key)
        if rb is None:
            only_a.append(ra)
            continue
        d = Difference(ra, rb)
        device = "cuda" if "cuda" in (ra.raw.get("device", "") + rb.raw.get("device", "")) else "cpu"
        r, t = tolerance(ra.raw.get("dtype", ""), rtol, atol, device)
        same_meta = (ra.raw.get("dtype") == rb.raw.get("dtype")
                     and ra.raw.get("shape") == rb.raw.get("shape"))
        if ra.path is not None and rb.path is not None and (same_meta or by_node):
            _compare_tensors(d, ra.load(), rb.load(), r, t, reshape=by_node)
        elif not same_meta:
            d.problem = (f"{rb.raw.get('dtype')} {rb.raw.get('shape')} where A has "
                         f"{ra.raw.get('dtype')} {ra.raw.get('shape')}")
        else:
            _compare_stats(d, r, t)
        compared.append(d)
    only_b = [rb for key, rb in in_b.items() if key not in in_a]
    return Comparison(da.source, db.source, compared, only_a, only_b,
                      "node" if by_node else "kernel", not_comparable)


def _where(r: Record) -> str:
    return f"{r.raw['kernel'] or 'model input'} (launch {r.raw['launch']})"


def _what(d: Difference, by_node: bool) -> str:
    a, b = d.a, d.b
    if not by_node:
        return f"{a.label}, launch {a.raw['launch']} in A"
    if a.raw["phase"] == "model_input":
        return f"model input {a.raw['arg']}"
    return (f"node {a.node}: A {_where(a)} {a.raw['arg']} vs B {_where(b)} {b.raw['arg']}")


def format_comparison(c: Comparison, top: int = 10) -> str:
    by_node = c.matched_by == "node"
    unmatched = sum(len(v) for v in c.not_comparable.values())
    lines = [f"A: {c.a}", f"B: {c.b}",
             f"matched by {'node (what buffers hold)' if by_node else 'kernel, argument and call'}"
             f"; compared {len(c.compared)} values; {len(c.diverged)} diverge; "
             f"{len(c.only_a)} only in A, {len(c.only_b)} only in B"
             + (f"; {unmatched} written values hold no single node" if by_node else "")]
    first = c.first
    if first is None:
        lines.append("no divergence beyond tolerance")
    else:
        lines.append(f"FIRST DIVERGENCE: {_what(first, by_node)}")
        lines.append("  " + (first.problem or
                             f"max abs err {first.max_abs:.6g}, max rel err {first.max_rel:.6g}, "
                             f"{first.mismatches} mismatches, moved: {', '.join(first.moved) or '-'}"))
    if c.diverged:
        lines.append("")
        lines.append(f"{'worst offenders':<72}{'max abs':>12}{'max rel':>12}{'mismatch':>10}  moved")
        for d in c.worst(top):
            lines.append(f"{_what(d, by_node)[:71]:<72}{d.max_abs:>12.4g}{d.max_rel:>12.4g}"
                         f"{d.mismatches:>10}  {d.problem or ', '.join(d.moved)}")
    for side, recs in (("A", c.only_a), ("B", c.only_b)):
        for r in recs:
            what = f"node {r.node} = {r.label}" if by_node and r.node else r.label
            lines.append(f"only in {side}: {what}")
    for why, recs in sorted(c.not_comparable.items(), key=lambda kv: -len(kv[1])):
        lines.append(f"not comparable ({len(recs)}): {why}")
    return "\n".join(lines) + "\n"
