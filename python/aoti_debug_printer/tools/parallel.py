"""A tensor-parallel run against the single-device run of the same model.

The ranks of a tensor-parallel job each hold a part of what one device
computes. Each value of the single-device dump (A) is matched by node with
every rank's value in the tensor-parallel dump (B), and what the ranks hold
is told by their shapes and values:

- SHARDED: along one dimension each rank holds a slice of A's value, the
  slices in rank order making it up (column-parallel outputs, shards of the
  weights). Each rank's value is judged against its slice of A.
- PARTIAL: each rank holds A's shape, and the ranks' sum is A's value (the
  partial sums a row-parallel layer leaves for its all_reduce). The sum is
  judged against A, on behalf of every rank.
- REPLICATED: each rank holds A's shape and, when right, A's value. Each
  rank is judged against A.

Each rank is then compared with A as `compare` compares two dumps (the same
criterion, the same bar from what a kernel's inputs carried), and the first
divergence, in A's launch order, is named with the ranks that show it. A
missing all_reduce shows where the partial sums are first used as the whole:
the ranks hold different values where A holds one."""

from __future__ import annotations

from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path
from typing import Any

from .compare import Comparison, Difference, compare, node_keyed
from .dumps import Dump, Record, load_dump
from .ranks import rank_view


class Layout(str, Enum):
    """How the ranks hold one value of the single-device run."""

    REPLICATED = "replicated"
    SHARDED = "sharded"
    PARTIAL = "partial"
    UNSPLIT = "unsplit"  # shapes that no split of A's value gives


@dataclass
class Gathered:
    """One value of A and how the ranks hold it."""

    a: Record
    layout: Layout
    dim: int | None = None  # SHARDED: the dimension split
    slices: dict[int, tuple[int, int]] = field(default_factory=dict)  # rank -> (start, length)
    ranks_agree: bool = True  # the ranks hold the same bits


@dataclass
class ParallelDivergence:
    """The first value, in A's launch order, where ranks leave the
    single-device run; `differences`: each of those ranks' Difference."""

    gathered: Gathered
    differences: dict[int, Difference]

    @property
    def ranks(self) -> list[int]:
        return sorted(self.differences)


@dataclass
class ParallelComparison:
    single: Path
    parallel: Path
    ranks: list[int]
    # A's values matched on every rank, in A's launch order.
    gathered: list[Gathered]
    # Each rank against A, its values as `gathered` says.
    per_rank: dict[int, Comparison]
    # A's values some rank lacks, and B's values A lacks (the collectives'
    # own, for one), as rank 0 holds them.
    only_a: list[Record] = field(default_factory=list)
    only_b: list[Record] = field(default_factory=list)

    def count(self, layout: Layout) -> int:
        return sum(g.layout is layout for g in self.gathered)

    @cached_property
    def first(self) -> ParallelDivergence | None:
        firsts = {k: c.first for k, c in self.per_rank.items() if c.first is not None}
        if not firsts:
            return None
        order = {id(g.a.tensor): n for n, g in enumerate(self.gathered)}
        where = min(order[id(d.a.tensor)] for d in firsts.values())
        g = self.gathered[where]
        return ParallelDivergence(
            g, {k: d for k, d in firsts.items() if order[id(d.a.tensor)] == where}
        )


class _Held(Record):
    """A record whose value is computed here (A's slice, the ranks' sum),
    not read from its file; its path stays the file it came from."""

    def __init__(self, record: Record, value: Any) -> None:
        super().__init__(record.tensor, record.run, record.path)
        self.value = value

    def load(self):
        return self.value


def single_and_parallel(a: Dump, b: Dump) -> tuple[Dump, Dump] | None:
    """(single-device dump, tensor-parallel dump) where one of `a` and `b`
    holds one rank and the other several (compare then gathers the ranks);
    None otherwise."""
    for single, parallel in ((a, b), (b, a)):
        if len(single.ranks) == 1 and len(parallel.ranks) > 1:
            return single, parallel
    return None


def _wide(t):
    """`t` in double precision (complex where it is), whatever its dtype."""
    import torch

    return t.to(torch.complex128 if t.dtype.is_complex else torch.float64)


def _rms_of_difference(x, y) -> float:
    d = _wide(x) - _wide(y)
    return float(d.abs().square().mean().sqrt()) if d.numel() else 0.0


def gather(ra: Record, a, values: dict[int, Any]) -> Gathered:
    """How the ranks' `values` (rank -> tensor) hold A's value `a`, the
    tensor of record `ra`."""
    import torch

    shapes = {k: tuple(v.shape) for k, v in values.items()}
    whole = tuple(a.shape)
    first, *others = values.values()
    agree = all(
        v.dtype == first.dtype and v.shape == first.shape and torch.equal(v, first) for v in others
    )
    if all(s == whole for s in shapes.values()):
        if agree:
            return Gathered(ra, Layout.REPLICATED)
        # Ranks that differ: partial sums where their sum is nearer A's
        # value than the farthest of them is.
        worst_replica = max(_rms_of_difference(v, a) for v in values.values())
        total = sum(_wide(v) for v in values.values())
        partial = _rms_of_difference(total, a) < worst_replica
        return Gathered(ra, Layout.PARTIAL if partial else Layout.REPLICATED, ranks_agree=False)
    for dim in range(len(whole)):
        fits = all(
            len(s) == len(whole) and all(s[i] == whole[i] for i in range(len(whole)) if i != dim)
            for s in shapes.values()
        )
        if fits and sum(s[dim] for s in shapes.values()) == whole[dim]:
            slices, start = {}, 0
            for k in sorted(shapes):
                slices[k] = (start, shapes[k][dim])
                start += shapes[k][dim]
            return Gathered(ra, Layout.SHARDED, dim, slices, ranks_agree=False)
    return Gathered(ra, Layout.UNSPLIT, ranks_agree=agree)


def compare_parallel(
    single: str | Path | Dump,
    parallel: str | Path | Dump,
    rtol: float | None = None,
    atol: float | None = None,
) -> ParallelComparison:
    """Holds each rank of a tensor-parallel dump against a single-device
    dump of the same model, both level-1 dumps whose records name their
    nodes. A ValueError in one line where they are not."""
    da = single if isinstance(single, Dump) else load_dump(single)
    db = parallel if isinstance(parallel, Dump) else load_dump(parallel)
    if len(da.ranks) != 1:
        raise ValueError(f"{da.source}: the single-device dump holds ranks {da.ranks}")
    ranks = db.ranks
    if len(ranks) < 2:
        raise ValueError(f"{db.source}: the tensor-parallel dump holds one rank")
    if not (da.has_provenance and db.has_provenance):
        raise ValueError("values are matched by node: a dump's records say no node")
    a_view = rank_view(da, da.ranks[0])
    views = {k: rank_view(db, k) for k in ranks}
    in_a, _ = node_keyed(a_view)
    in_b = {k: node_keyed(v)[0] for k, v in views.items()}
    for name, keyed in (("A", in_a), *((f"rank {k} of B", in_b[k]) for k in ranks)):
        unsaved = next((r for r in keyed.values() if r.path is None), None)
        if unsaved is not None:
            raise ValueError(
                f"{name} saved no tensors ({unsaved.label}): gathering the ranks' values "
                "needs level-1 dumps (AOTI_DEBUG_PRINTER_LEVEL=1)"
            )

    gathered: list[Gathered] = []
    only_a: list[Record] = []
    # Per rank: record id -> what to judge instead of the file (A's side, B's side).
    a_held: dict[int, dict[int, Any]] = {k: {} for k in ranks}
    b_held: dict[int, dict[int, Any]] = {k: {} for k in ranks}
    for key, ra in in_a.items():
        rbs = {k: in_b[k].get(key) for k in ranks}
        if any(rb is None for rb in rbs.values()):
            only_a.append(ra)
            continue
        a = ra.load()
        values = {k: rb.load() for k, rb in rbs.items()}
        g = gather(ra, a, values)
        gathered.append(g)
        if g.layout is Layout.SHARDED:
            for k, (start, length) in g.slices.items():
                a_held[k][id(ra.tensor)] = a.narrow(g.dim, start, length)
        elif g.layout is Layout.PARTIAL:
            total = sum(_wide(v) for v in values.values()).to(a.dtype)
            for k, rb in rbs.items():
                b_held[k][id(rb.tensor)] = total

    matched = {id(g.a.tensor) for g in gathered}
    per_rank = {}
    for k in ranks:
        # A's values some rank lacks are left out of every rank's comparison.
        a_k = _with_values(a_view, a_held[k], keep=matched)
        b_k = _with_values(views[k], b_held[k])
        per_rank[k] = compare(a_k, b_k, rtol=rtol, atol=atol)
    in_any_a = set(in_a)
    only_b = [r for key, r in in_b[ranks[0]].items() if key not in in_any_a]
    return ParallelComparison(da.source, db.source, ranks, gathered, per_rank, only_a, only_b)


def _with_values(dump: Dump, held: dict[int, Any], keep: set[int] | None = None) -> Dump:
    """`dump` with the records `held` names (by id of their tensor record)
    judged by the value given instead of their file; with `keep`, the
    written values outside it dropped."""
    out = []
    for r in dump.records:
        if keep is not None and r.written and r.node and id(r.tensor) not in keep:
            continue
        value = held.get(id(r.tensor))
        out.append(r if value is None else _Held(r, value))
    return Dump(dump.source, out, dump.events, dump.environments)


def _ranks(ranks: list[int]) -> str:
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(map(str, ranks))


def _how(g: Gathered, rank: int | None = None) -> str:
    if g.layout is Layout.SHARDED:
        text = f"sharded along dimension {g.dim}"
        if rank is not None:
            start, length = g.slices[rank]
            text += f", rank {rank}'s slice {start}:{start + length}"
        return text
    if g.layout is Layout.PARTIAL:
        return "partial sums: the ranks' sum against A"
    return g.layout.value


def format_parallel(pc: ParallelComparison) -> str:
    lines = [
        f"A: {pc.single} (one device)",
        f"B: {pc.parallel} ({_ranks(pc.ranks)}), each rank matched by node with A",
        f"gathered {len(pc.gathered)} values of A: {pc.count(Layout.REPLICATED)} replicated, "
        f"{pc.count(Layout.SHARDED)} sharded (each rank against its slice of A), "
        f"{pc.count(Layout.PARTIAL)} partial sums (added across the ranks); "
        f"{len(pc.only_a)} only in A, {len(pc.only_b)} only in B",
    ]
    unsplit = [g for g in pc.gathered if g.layout is Layout.UNSPLIT]
    if unsplit:
        lines.append(
            f"{len(unsplit)} values the ranks hold in shapes no split of A's gives, "
            f"the first node {unsplit[0].a.node}"
        )
    first = pc.first
    if first is None:
        lines.append(
            "no divergence: every rank holds what the single-device run holds, as its "
            "layout says, within what its inputs and the runs' numerics explain"
        )
    else:
        g, k = first.gathered, first.ranks[0]
        d = first.differences[k]
        lines.append(
            f"FIRST DIVERGENCE: {_ranks(first.ranks)} at node {g.a.node} ({_how(g, k if len(first.ranks) == 1 else None)}): "
            f"B {d.b.kernel or 'model input'} (launch {d.b.launch}) {d.b.arg} vs A "
            f"{d.a.kernel or 'model input'} (launch {d.a.launch}) {d.a.arg}"
        )
        if source := pc.per_rank[k].source_of(g.a.node):
            lines.append(f"  at {source}")
        lines.append(
            "  "
            + (
                d.problem
                or f"relative RMS difference {d.rel_rms:.3g} where the values its kernel read "
                f"differ by {d.inputs_rms:.3g} ({d.ratio:.3g} times the bar)"
            )
        )
        if g.layout is Layout.REPLICATED and not g.ranks_agree:
            lines.append(
                "  the ranks hold different values where the single-device run holds one: "
                "a reduction (all_reduce) missing before this kernel, or a rank that "
                "computes wrong"
            )
    for r in pc.only_a[:5]:
        lines.append(f"only in A: node {r.node} = {r.label}")
    return "\n".join(lines) + "\n"
