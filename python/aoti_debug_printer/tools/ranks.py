"""Comparing the ranks of one job: the ranks of a torch.distributed job
share a dump directory, and the values that should agree across them (the
same node, run and occurrence) are held against each other, rank by rank,
with compare's criterion. The ranks that agree with the most others are the
reference, so with three or more ranks one faulty rank is named as the odd
one out, at the first kernel, in launch order, where it leaves them.

What a rank computes from its own data is rank-local by design, not a
divergence: a model input that differs across ranks, and every value
computed from one, are counted apart and never judged."""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from enum import Enum
from functools import cached_property
from pathlib import Path

from ..records import Phase
from .compare import UNNAMED, Comparison, Difference, compare, inputs_of, node_keyed
from .dumps import Dump, load_dump


class RankVerdict(str, Enum):
    """A rank's value against the first reference rank's."""

    AGREES = ""
    ODD_ONE_OUT = "odd"  # where the rank leaves the others (its first divergence)
    DIFFERS = "differs"  # beyond the bar after that, or other bits within the noise
    LOCAL = "local"  # rank-local by design: not judged


@dataclass
class RankDivergence:
    """Where `rank` leaves the reference ranks first: `difference.a` is the
    first reference rank's value, `difference.b` this rank's."""

    rank: int
    difference: Difference


@dataclass
class RanksComparison:
    source: Path
    ranks: list[int]
    # The ranks that agree with the most others (ties: the lowest rank's).
    reference: list[int]
    # Each other rank against the first reference rank.
    against_first: dict[int, Comparison]
    # Per rank outside the first reference rank: values rank-local by design.
    rank_local: dict[int, list[Difference]] = field(default_factory=dict)
    # Values each rank holds, of those matched by node.
    values: int = 0

    @cached_property
    def diverged(self) -> list[RankDivergence]:
        """The ranks that leave the reference, each at its first divergence,
        in launch order."""
        out = []
        for rank, c in self.against_first.items():
            if rank in self.reference:
                continue
            first = next((d for d in judged(c, self.rank_local[rank]) if d.diverged), None)
            if first is not None:
                out.append(RankDivergence(rank, first))
        return sorted(out, key=lambda r: (r.difference.a.run, r.difference.a.launch))

    @property
    def first(self) -> RankDivergence | None:
        return self.diverged[0] if self.diverged else None

    @cached_property
    def _local(self) -> dict[int, set[int]]:
        return {k: {id(d) for d in v} for k, v in self.rank_local.items()}

    @cached_property
    def _odd(self) -> set[int]:
        return {id(r.difference) for r in self.diverged}

    def verdict(self, rank: int, d: Difference) -> RankVerdict:
        """What `d`, one of against_first[rank].compared, says of that rank."""
        if id(d) in self._odd:
            return RankVerdict.ODD_ONE_OUT
        if id(d) in self._local[rank]:
            return RankVerdict.LOCAL
        return RankVerdict.DIFFERS if d.diverged or d.identical is False else RankVerdict.AGREES


def judged(c: Comparison, rank_local: list[Difference]) -> list[Difference]:
    local = {id(d) for d in rank_local}
    return [d for d in c.compared if id(d) not in local]


def rank_view(dump: Dump, rank: int) -> Dump:
    """The records of one rank, as a dump of its own (rank 0), so compare
    matches them with another rank's."""

    def as_rank_0(r):
        return dataclasses.replace(r, tensor=dataclasses.replace(r.tensor, rank=0))

    return Dump(
        Path(f"{dump.source}#rank{rank}"),
        [as_rank_0(r) for r in dump.records if r.rank == rank],
        [],
        {(0, run): e for (k, run), e in dump.environments.items() if k == rank},
    )


def _rank_local(c: Comparison, reads: dict[tuple, set[tuple]]) -> list[Difference]:
    """The values of `c` that are rank-local by design: model inputs that
    differ, and the values whose kernel read one (or read something no
    node names after one was written), in launch order; `reads`: A's
    inputs_of."""
    local: set[tuple] = set()
    out = []
    for d in c.compared:
        a = d.a
        if a.phase is Phase.MODEL_INPUT:
            what = ("input", a.arg)
            is_local = d.identical is False or d.rel_rms > 0 or bool(d.mismatches)
        else:
            what = ("node", a.node)
            read = reads.get((0, a.run, a.launch), set())
            is_local = bool(read & local) or (UNNAMED in read and bool(local))
        if is_local:
            local.add(what)
            out.append(d)
    return out


def compare_ranks(source: str | Path | Dump, ranks: list[int] | None = None) -> RanksComparison:
    """Holds the ranks of one dump against each other; `ranks`: which (by
    default every rank the dump holds). A ValueError in one line where the
    dump holds fewer than two of them."""
    dump = source if isinstance(source, Dump) else load_dump(source)
    present = dump.ranks
    if ranks is None:
        ranks = present
    missing = sorted(set(ranks) - set(present))
    if missing:
        raise ValueError(
            f"rank {', '.join(map(str, missing))} not in the dump (it holds ranks "
            f"{', '.join(map(str, present)) or 'none'})"
        )
    ranks = sorted(set(ranks))
    if len(ranks) < 2:
        raise ValueError(
            f"--ranks needs two ranks or more; the dump holds rank "
            f"{', '.join(map(str, present)) or 'none'}"
        )
    if not dump.has_provenance:
        raise ValueError("ranks are matched by node: this dump's records say no node")
    views = {k: rank_view(dump, k) for k in ranks}
    reads = {k: inputs_of(v) for k, v in views.items()}
    # (A, B) -> (compare(A, B), its rank-local values), each pair made once.
    pairs: dict[tuple[int, int], tuple[Comparison, list[Difference]]] = {}

    def pair(i: int, j: int) -> tuple[Comparison, list[Difference]]:
        if (i, j) not in pairs:
            c = compare(views[i], views[j])
            pairs[(i, j)] = (c, _rank_local(c, reads[i]))
        return pairs[(i, j)]

    def agree(i: int, j: int) -> bool:
        c, local = pair(min(i, j), max(i, j))
        return not any(d.diverged for d in judged(c, local))

    group = {k: [j for j in ranks if j == k or agree(j, k)] for k in ranks}
    reference = max(group.values(), key=lambda g: (len(g), -g[0]))
    first = reference[0]
    against = {k: pair(first, k) for k in ranks if k != first}
    return RanksComparison(
        dump.source,
        ranks,
        reference,
        {k: c for k, (c, _) in against.items()},
        {k: local for k, (_, local) in against.items()},
        len(node_keyed(views[first])[0]),
    )


def _ranks(ranks: list[int]) -> str:
    return ("ranks " if len(ranks) > 1 else "rank ") + ", ".join(map(str, ranks))


def format_ranks(rc: RanksComparison) -> str:
    lines = [
        f"dump: {rc.source}",
        f"{_ranks(rc.ranks)}: {rc.values} values each, matched by node across ranks",
    ]
    local = max((len(v) for v in rc.rank_local.values()), default=0)
    if local:
        lines.append(
            f"rank-local: {local} values (model inputs that differ across ranks, and what is "
            "computed from them): each rank's own data, not judged"
        )
    outside = [k for k in rc.ranks if k not in rc.reference]
    if len(rc.ranks) > 2 or not outside:
        lines.append(f"reference: {_ranks(rc.reference)} (the ranks that agree with the most)")
    diverged = rc.diverged
    if not diverged:
        lines.append(
            f"no divergence across {_ranks(rc.ranks)}: no value leaves the others beyond what "
            "its inputs and the runs' numerics explain"
        )
    for n, r in enumerate(diverged):
        d = r.difference
        where = f"node {d.a.node}: {d.b.kernel or 'model input'} (launch {d.b.launch}) {d.b.arg}"
        if len(rc.ranks) == 2:
            head = f"ranks {rc.ranks[0]} and {rc.ranks[1]} part"
        else:
            head = f"rank {r.rank} leaves {_ranks(rc.reference)}"
        lines.append(f"{'also' if n else 'FIRST DIVERGENCE ACROSS RANKS'}: {head} at {where}")
        sources = next(iter(rc.against_first.values()), None)
        if sources is not None and (source := sources.source_of(d.a.node)):
            lines.append(f"  at {source}")
        lines.append(
            f"  relative RMS {d.rel_rms:.3g} against {_ranks([rc.reference[0]])}, "
            f"{d.ratio:.3g} times the bar (what its inputs carried: {d.inputs_rms:.3g})"
        )
    if len(rc.ranks) == 2 and diverged:
        lines.append("  two ranks: no majority tells which of them is wrong; run three or more")
    lines.extend(_bitwise(rc))
    return "\n".join(lines) + "\n"


def _bitwise(rc: RanksComparison) -> list[str]:
    """Whether the ranks hold the same bits, apart from the noise verdict:
    replicas on the same inputs should, unless a kernel is not deterministic."""
    base = rc.reference[0]
    differs = {
        k: next((d for d in judged(c, rc.rank_local[k]) if d.identical is False), None)
        for k, c in sorted(rc.against_first.items())
    }
    out = [
        f"bit for bit: rank {k} first differs from rank {base} at node {d.a.node} "
        f"({d.b.kernel or 'model input'}, launch {d.b.launch})"
        + ("" if d.diverged else ", within the noise")
        for k, d in differs.items()
        if d is not None
    ]
    same = sorted([base] + [k for k, d in differs.items() if d is None])
    if not out:
        out.append(f"bit for bit: every value judged is identical across {_ranks(rc.ranks)}")
    elif len(same) > 1:
        out.append(f"bit for bit: {_ranks(same)} are identical")
    return out
