"""`aoti-debug report DUMP [--against DUMP]`: one self-contained HTML page
(no network, no libraries): per-kernel statistics over launch order as an
SVG plot, the first anomaly highlighted, and a sortable table; against
another run's dump, whether the two differ bit for bit, the first value
that does highlighted; where the dump holds the ranks of a job, the ranks
side by side, a column each, the odd one out marked (compare --ranks'
verdict); written by `diverge --report`, diverge's verdict on the dump,
the first divergence marked, and with --bisect its cause. The records are
embedded as JSON (<script id="records">) so that the page carries its own
data."""

from __future__ import annotations

import html
import json
import math
from dataclasses import dataclass
from pathlib import Path

from ..records import Phase
from .dumps import Record, load_dump

PLOT_W, PLOT_H, PAD = 960, 260, 40


@dataclass(frozen=True)
class Diagnosis:
    """A tool's verdict on the dump (diverge, diverge --bisect) for the
    page: its text as the tool prints it, the line that names the cause,
    and the snapshot it is about (launch and argument), marked in the table."""

    text: str
    launch: int | None = None
    arg: str = ""
    cause: str = ""


def _diagnosis_section(diagnosis: Diagnosis | None) -> str:
    if diagnosis is None:
        return ""
    cause = (
        f'<p id="cause" class="bad">{html.escape(diagnosis.cause)}</p>\n' if diagnosis.cause else ""
    )
    return f'<h2>diverge</h2>\n{cause}<pre id="verdict">{html.escape(diagnosis.text)}</pre>'


def _row(i: int, r: Record, sources: dict[str, list[str]]) -> dict:
    t, s = r.tensor, r.stats
    return {
        "index": i,
        "launch": t.launch,
        "run": r.run,
        "rank": t.rank,
        "phase": t.phase.value,
        "kernel": t.kernel or "(model input)",
        "arg": t.arg,
        "node": t.node,
        # Where the user's code made the node (innermost frame).
        "source": (sources.get(t.node) or [""])[0],
        "call": t.call,
        "dtype": t.dtype,
        "shape": t.shape,
        "absmax": s.absmax if s else None,
        "mean": s.mean if s else None,
        "std": s.std if s else None,
        "nan": s.nan if s else 0,
        "pos_inf": s.pos_inf if s else 0,
        "neg_inf": s.neg_inf if s else 0,
        "file": t.file or "",
    }


def first_anomaly(rows: list[dict]) -> dict | None:
    """The first snapshot, in launch order, whose values hold NaN or Inf."""
    for row in rows:
        if row["nan"] or row["pos_inf"] or row["neg_inf"]:
            return row
    return None


def _plot(rows: list[dict], anomaly: dict | None) -> str:
    """log10(absmax) per snapshot, with NaN/Inf counts as red bars."""
    n = max(len(rows), 1)
    xs = [PAD + (PLOT_W - 2 * PAD) * (i / max(n - 1, 1)) for i in range(len(rows))]
    logs = [math.log10(r["absmax"]) if r["absmax"] else None for r in rows]
    known = [v for v in logs if v is not None] or [0.0]
    lo, hi = min(known), max(known)
    span = (hi - lo) or 1.0

    def y(v: float) -> float:
        return PLOT_H - PAD - (PLOT_H - 2 * PAD) * (v - lo) / span

    points = " ".join(f"{x:.1f},{y(v):.1f}" for x, v in zip(xs, logs) if v is not None)
    parts = [
        f'<svg id="plot" xmlns="http://www.w3.org/2000/svg" width="{PLOT_W}" height="{PLOT_H}" '
        f'role="img" aria-label="abs-max per snapshot over launch order">',
        f'<rect width="{PLOT_W}" height="{PLOT_H}" fill="#fff" stroke="#ccc"/>',
        f'<text x="{PAD}" y="16" font-size="12">log10(abs-max) per snapshot, in launch order '
        f"(blue); snapshots with NaN/Inf in red</text>",
        f'<text x="4" y="{y(hi) + 4:.1f}" font-size="10">{hi:.1f}</text>',
        f'<text x="4" y="{y(lo) + 4:.1f}" font-size="10">{lo:.1f}</text>',
        f'<polyline fill="none" stroke="#1f77b4" stroke-width="1.5" points="{points}"/>',
    ]
    for x, r in zip(xs, rows):
        bad = r["nan"] + r["pos_inf"] + r["neg_inf"]
        if bad:
            parts.append(
                f'<rect class="nonfinite" x="{x - 2:.1f}" y="{PAD}" width="4" '
                f'height="{PLOT_H - 2 * PAD}" fill="#d62728" opacity="0.5">'
                f'<title>{html.escape(r["kernel"])} {html.escape(r["arg"])}: nan={r["nan"]} '
                f'+inf={r["pos_inf"]} -inf={r["neg_inf"]}</title></rect>'
            )
    if anomaly is not None:
        x = xs[anomaly["index"]]
        parts.append(
            f'<line id="first-anomaly-marker" x1="{x:.1f}" x2="{x:.1f}" y1="{PAD - 10}" '
            f'y2="{PLOT_H - PAD}" stroke="#d62728" stroke-width="2"/>'
        )
    return "\n".join(parts + ["</svg>"])


_SORT_JS = """
document.querySelectorAll('#table th').forEach((th, col) => th.addEventListener('click', () => {
  const body = document.querySelector('#table tbody');
  const rows = Array.from(body.rows);
  const dir = th.dataset.dir === 'asc' ? -1 : 1;
  th.dataset.dir = dir === 1 ? 'asc' : 'desc';
  const key = r => { const v = r.cells[col].dataset.v ?? r.cells[col].textContent;
                     const n = parseFloat(v); return isNaN(n) ? v : n; };
  rows.sort((a, b) => { const x = key(a), y = key(b); return (x > y ? 1 : x < y ? -1 : 0) * dir; });
  rows.forEach(r => body.appendChild(r));
}));
"""

COLUMNS = (
    "index",
    "launch",
    "run",
    "rank",
    "phase",
    "kernel",
    "arg",
    "node",
    "call",
    "dtype",
    "shape",
    "absmax",
    "mean",
    "std",
    "nan",
    "pos_inf",
    "neg_inf",
    "file",
    "source",
)


def _text(value) -> str:
    """A value as the page shows it: floats to 6 significant digits, None as nothing."""
    if isinstance(value, float):
        return f"{value:.6g}"
    return "" if value is None else str(value)


def _cell(key: str, value) -> str:
    sort = f' data-v="{html.escape(str(value))}"' if isinstance(value, (int, float)) else ""
    return f"<td{sort}>{html.escape(_text(value))}</td>"


def _bitwise(dump, against: str | Path) -> tuple[str, object]:
    """The bit-for-bit verdict of `dump` against another run's dump (as
    `aoti-debug compare` gives it), and the record of the first value that
    differs (None where none does)."""
    from .compare import bitwise_lines, compare

    c = compare(dump, load_dump(against))
    lines = bitwise_lines(c)
    if not c.compared:
        lines = [f"bit for bit: no value of this dump has its match in {against}"]
    elif not lines:
        lines = ["bit for bit: no value was compared element by element"]
    first = c.first_different
    cls = "bad" if first is not None and c.same_build else "ok"
    text = "<br>".join(html.escape(line.strip()) for line in lines)
    return f'<p id="bitwise" class="{cls}">Against {html.escape(str(against))}: {text}</p>', (
        first.a if first is not None else None
    )


# The colour of a rank's cell, by its verdict (tools/ranks.py's RankVerdict).
RANK_COLOURS = {"odd": "#fdd", "differs": "#ffe9c2", "local": "#eee"}


def _ranks_section(dump) -> str:
    """Where the dump holds two ranks or more: compare --ranks' verdict, then
    one row per value the ranks should agree on, in launch order, a column
    per rank (its mean; the other statistics in the cell's title)."""
    from .ranks import compare_ranks, format_ranks

    ranks = dump.ranks
    if len(ranks) < 2:
        return ""
    try:
        rc = compare_ranks(dump)
    except ValueError as e:
        return (
            f'<p id="ranks-verdict">Ranks {", ".join(map(str, ranks))}: {html.escape(str(e))}</p>'
        )
    first = rc.reference[0]
    rows: dict[int, tuple] = {}  # id of the reference's record -> (record, {rank: (record, mark)})
    for k, c in rc.against_first.items():
        for d in c.compared:
            rows.setdefault(id(d.a), (d.a, {first: (d.a, "")}))[1][k] = (
                d.b,
                rc.verdict(k, d).value,
            )
    named = id(rc.first.difference.a) if rc.first is not None else None

    def cell(rank: int, cells: dict) -> str:
        if rank not in cells:
            return f'<td data-rank="{rank}"></td>'
        r, mark = cells[rank]
        s = r.stats
        text = "" if s is None else _text(s.mean)
        title = "" if s is None else f"absmax {_text(s.absmax)}, std {_text(s.std)}, nan {s.nan}"
        cls = f' class="{mark}"' if mark else ""
        return f'<td data-rank="{rank}"{cls} title="{html.escape(title)}">{html.escape(text)}</td>'

    body = []
    for key, (a, cells) in sorted(rows.items(), key=lambda kv: (kv[1][0].run, kv[1][0].launch)):
        cls = ' class="first-divergence"' if key == named else ""
        body.append(
            f"<tr{cls}><td>{a.run}</td><td>{a.launch}</td>"
            f"<td>{html.escape(a.kernel or 'model input')}</td><td>{html.escape(a.node or '')}</td>"
            f"<td>{html.escape(a.arg)}</td>" + "".join(cell(k, cells) for k in rc.ranks) + "</tr>"
        )
    heads = ["run", "launch", "kernel", "node", "arg"] + [
        f"rank {k}" + (" (reference)" if k in rc.reference else "") for k in rc.ranks
    ]
    verdict = "<br>".join(html.escape(line) for line in format_ranks(rc).splitlines()[1:])
    return f"""<h2>Ranks side by side</h2>
<p id="ranks-verdict" class="{"bad" if rc.first is not None else "ok"}">{verdict}</p>
<p>Each rank's mean of the value; red: where the rank leaves the others; yellow: it differs
from the reference otherwise (what follows, or bits within the noise); grey: rank-local (the
rank's own data), not judged.</p>
<table id="ranks"><thead><tr>{"".join(f"<th>{h}</th>" for h in heads)}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table>"""


def render(
    source: str | Path,
    title: str | None = None,
    against: str | Path | None = None,
    diagnosis: Diagnosis | None = None,
) -> str:
    """The page. `against`: another run's dump of the same program, to say
    whether the two differ bit for bit and where first. `diagnosis`: what a
    tool found in this dump, shown above the plot, its snapshot marked."""
    dump = load_dump(source)
    records = [r for r in dump.records if r.phase in (Phase.AFTER_LAUNCH, Phase.MODEL_INPUT)]
    sources = dump.sources()
    rows = [_row(i, r, sources) for i, r in enumerate(records)]
    anomaly = first_anomaly(rows)
    bitwise, different = _bitwise(dump, against) if against is not None else ("", None)
    title = title or f"aoti-debug report: {Path(source).name}"
    if anomaly is None:
        headline = '<p id="first-anomaly" class="ok">No NaN or Inf in any snapshot.</p>'
    else:
        where = (
            "a model input"
            if anomaly["phase"] == Phase.MODEL_INPUT
            else f"kernel <b>{html.escape(anomaly['kernel'])}</b>"
        )
        headline = (
            f'<p id="first-anomaly" class="bad">First anomaly: {where}, argument '
            f'<b>{html.escape(anomaly["arg"])}</b> (launch {anomaly["launch"]}, run '
            f'{anomaly["run"]}): nan={anomaly["nan"]} +inf={anomaly["pos_inf"]} '
            f'-inf={anomaly["neg_inf"]}'
            + (f"<br>at <code>{html.escape(anomaly['source'])}</code>" if anomaly["source"] else "")
            + "</p>"
        )
    body = []
    for row, r in zip(rows, records):
        marks = [
            mark
            for mark, on in (
                ("anomaly", anomaly is not None and row["index"] == anomaly["index"]),
                ("different", r is different),
                (
                    "first-divergence",
                    diagnosis is not None
                    and r.phase == Phase.AFTER_LAUNCH
                    and (row["launch"], row["arg"]) == (diagnosis.launch, diagnosis.arg),
                ),
            )
            if on
        ]
        cls = f' class="{" ".join(marks)}"' if marks else ""
        body.append(f"<tr{cls}>" + "".join(_cell(k, row[k]) for k in COLUMNS) + "</tr>")
    data = json.dumps(rows).replace("</", "<\\/")
    rank_css = " ".join(f"#ranks td.{m} {{ background: {c}; }}" for m, c in RANK_COLOURS.items())
    return f"""<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>{html.escape(title)}</title>
<style>
body {{ font: 13px sans-serif; margin: 16px; }}
table {{ border-collapse: collapse; }} th, td {{ border: 1px solid #ddd; padding: 2px 6px; }}
th {{ cursor: pointer; background: #f3f3f3; position: sticky; top: 0; }}
tr.anomaly td {{ background: #fdd; font-weight: bold; }}
tr.different td {{ background: #ffe9c2; font-weight: bold; }}
tr.first-divergence td {{ font-weight: bold; }} #table tr.first-divergence td {{ background: #fdd; }}
{rank_css}
.bad {{ color: #b00; font-size: 15px; }} .ok {{ color: #070; font-size: 15px; }}
</style></head><body>
<h1>{html.escape(title)}</h1>
<p>{len(rows)} snapshots (after launch, and model inputs) from {html.escape(str(source))}.
Click a column to sort.</p>
{headline}
{bitwise}
{_diagnosis_section(diagnosis)}
{_plot(rows, anomaly)}
<table id="table"><thead><tr>{"".join(f"<th>{c}</th>" for c in COLUMNS)}</tr></thead>
<tbody>
{chr(10).join(body)}
</tbody></table>
{_ranks_section(dump)}
<script type="application/json" id="records">{data}</script>
<script>{_SORT_JS}</script>
</body></html>
"""


def write_report(
    source: str | Path,
    out: str | Path,
    against: str | Path | None = None,
    diagnosis: Diagnosis | None = None,
) -> Path:
    out = Path(out)
    out.write_text(render(source, against=against, diagnosis=diagnosis))
    return out
