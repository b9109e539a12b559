"""From printing to finding: `aoti-debug compare`, `report` and `diverge`,
on real level-1 dumps and records of AOTInductor-compiled models."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from pathlib import Path

import pytest
import torch
from conftest import cli
from test_aoti import run
from testmodels import small

import aoti_debug_printer
from aoti_debug_printer.records import Phase

pytestmark = pytest.mark.slow


@pytest.fixture
def level1_dump(package, tmp_path):
    """dump(model, name) -> a level-1 dump directory of one run."""

    def dump(model_name: str, name: str) -> Path:
        d = tmp_path / name
        with aoti_debug_printer.options(dump_dir=d):
            run(package(model_name, 1), model_name)
        return d

    return dump


def after_launch(d: Path) -> list[dict]:
    return [
        r
        for r in map(json.loads, (d / "manifest.jsonl").read_text().splitlines())
        if r.get("phase") == "after_launch" and "file" in r
    ]


def test_compare_finds_the_first_kernel_that_diverges(level1_dump, tmp_path):
    a = level1_dump("mlp", "a")
    b = level1_dump("mlp", "b")
    same = cli("compare", a, b)
    assert same.returncode == 0, same.stdout + same.stderr
    assert "no divergence" in same.stdout

    # Perturb one middle kernel's output in B: that kernel is the first divergence.
    outs = [r for r in after_launch(b) if r.get("node") and r.get("role") == "write"]
    target = outs[len(outs) // 2]
    t = torch.load(b / target["file"], weights_only=True)
    t.view(-1)[0] += 1.0
    torch.save(t, b / target["file"])
    diff = cli("compare", a, b)
    assert diff.returncode == 1
    first = re.search(r"FIRST DIVERGENCE: node (\S+): A (\S+) \(launch \d+\) (\S+) vs", diff.stdout)
    assert first and first.groups() == (
        target["node"],
        target["kernel"],
        target["arg"],
    ), diff.stdout
    assert re.search(r"largest absolute 1\b", diff.stdout)
    c = aoti_debug_printer.compare(a, b)
    assert c.first.a.kernel == target["kernel"] and c.first.max_abs == pytest.approx(1.0)
    # Introduced there: what its kernel read matched.
    assert c.first.inputs_rms < c.first.bar_rms < c.first.rel_rms


def test_compare_reports_records_on_one_side_only(level1_dump, tmp_path):
    a, b = level1_dump("mlp", "a"), level1_dump("nan_maker", "b")
    # Two models with no value in common: no verdict (exit 2), each side's
    # values listed.
    out = cli("compare", a, b, "--strict")
    assert out.returncode == 2 and "compared nothing" in out.stdout, out.stdout + out.stderr
    assert re.search(r"^only in A: (node \w+ = )?cpp_fused_\w+ ", out.stdout, re.M)
    assert re.search(r"^only in B: (node \w+ = )?aoti_torch_cpu_mm_out ", out.stdout, re.M)


def test_compare_records_by_statistics(package, tmp_path):
    files = []
    for name, scale in (("a", 1.0), ("b", 1.5)):
        out = tmp_path / f"{name}.jsonl"
        with aoti_debug_printer.options(output=out, format="jsonl"):
            compiled = torch._inductor.aoti_load_package(str(package("mlp", 2)))
            _, (x,) = small.build("mlp")
            compiled(x * scale)
        files.append(out)
    c = aoti_debug_printer.compare(*files)
    # The inputs differ, so the model input is the first divergence, by statistics.
    assert c.first.a.phase is Phase.MODEL_INPUT
    assert {"mean", "max"} <= set(c.first.moved)
    assert len(c.diverged) > 1


def test_report_page_holds_the_data_it_claims(level1_dump, tmp_path):
    d = level1_dump("nan_maker", "nan")
    page = tmp_path / "report.html"
    done = cli("report", d, "-o", page)
    assert done.returncode == 0, done.stderr
    text = page.read_text()
    data = json.loads(
        re.search(r'<script type="application/json" id="records">(.*?)</script>', text, re.S).group(
            1
        )
    )
    manifest = [
        r
        for r in map(json.loads, (d / "manifest.jsonl").read_text().splitlines())
        if r.get("phase") in ("after_launch", "model_input") and r.get("event") == "tensor"
    ]
    tbody = text.split("<tbody>", 1)[1].split("</tbody>", 1)[0]
    assert len(data) == len(manifest) == tbody.count("<tr")
    bad = [r for r in data if r["nan"] or r["pos_inf"] or r["neg_inf"]]
    assert bad and bad[0]["kernel"].startswith("cpp_fused_")
    first = re.search(r'<p id="first-anomaly" class="bad">(.*?)</p>', text).group(1)
    assert bad[0]["kernel"] in first and f"launch {bad[0]['launch']}" in first
    # Where the user's code made the value, from the dump's environment record.
    assert re.search(r"<br>at <code>.*small\.py:\d+ in forward: return torch\.log", first), first
    assert bad[0]["node"] and bad[0]["source"] in first
    assert text.count('class="anomaly"') == 1 and 'id="first-anomaly-marker"' in text
    assert "<svg" in text and "<polyline" in text and "http" not in text.split("<svg", 1)[0]


@torch.library.custom_op("adp_test::double_it", mutates_args=())
def double_it(x: torch.Tensor) -> torch.Tensor:
    return x * 2


@double_it.register_fake
def _(x):
    return torch.empty_like(x)


class WrongWhenCompiled(torch.nn.Module):
    """mm, then a fused kernel holding a custom op whose Inductor lowering
    (registered below) computes 2x + 0.5 where eager computes 2x."""

    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(8, 8))

    def forward(self, x):
        return torch.tanh(double_it(torch.relu(x @ self.weight))) * 3


@pytest.fixture
def wrong_lowering():
    from torch._inductor import lowering

    op = torch.ops.adp_test.double_it.default
    aten = torch.ops.aten
    lowering.register_lowering(op)(
        lambda x: lowering.lowerings[aten.add.Tensor](
            lowering.lowerings[aten.mul.Tensor](x, 2), 0.5
        )
    )
    yield
    lowering.lowerings.pop(op, None)


def test_first_divergence_from_eager_names_the_wrong_kernel(wrong_lowering, tmp_path):
    torch.manual_seed(0)
    program = torch.export.export(WrongWhenCompiled().eval(), (torch.randn(4, 8),))
    path = tmp_path / "program.pt2"
    torch.export.save(program, path)
    d = aoti_debug_printer.first_divergence_from_eager(path)
    assert d.first is not None
    kernel = d.first.record.kernel
    assert kernel.startswith("cpp_fused_") and "tanh" in kernel, kernel
    # The mm before it matched eager.
    assert any(m.record.kernel == "aoti_torch_cpu_mm_out" and not m.diverged for m in d.matches)
    assert d.first.own.value.max > 0.01 and d.first.own.diverged


def test_first_divergence_from_eager_finds_none_in_a_correct_model(tmp_path):
    model, inputs = small.build("mlp")
    path = tmp_path / "mlp.pt2"
    torch.export.save(torch.export.export(model, inputs), path)
    done = cli("diverge", path)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "no divergence from eager" in done.stdout
    matched = int(re.search(r"compared (\d+) of \d+ values kernels wrote", done.stdout).group(1))
    assert matched >= 2


def test_cli_reports_a_missing_dump_clearly(tmp_path):
    done = cli("compare", tmp_path / "nope", tmp_path / "nope2")
    assert done.returncode == 2
    assert "no such dump" in done.stderr


def _spoil(dump: Path, how: str) -> str:
    """Spoils a real level-1 dump as a crash, a full disk or a hostile file
    would; returns what the one error line must say ("" where the dump must
    still be read, with a warning)."""
    manifest = dump / "manifest.jsonl"
    lines = manifest.read_bytes().split(b"\n")[:-1]
    records = [i for i, line in enumerate(lines) if b'"file"' in line]
    first = json.loads(lines[records[0]])
    tail = b""
    expected = {
        "text_line": "manifest.jsonl:3: not a JSON record",
        "json_array": "manifest.jsonl:3: not a record of aoti-debug-printer",
        "not_utf8": "manifest.jsonl:3: not UTF-8",
        "path_escape": f"manifest.jsonl:{records[0] + 1}: names a file outside the dump",
        "truncated_pt": first["file"],
        "torn_last_line": "",
        "no_records": "holds no record",
    }[how]
    if how == "text_line":
        lines.insert(2, b"some text that is not a record")
    elif how == "json_array":
        lines.insert(2, b"[1, 2]")
    elif how == "not_utf8":
        lines[2] = lines[2].replace(b'"run"', b'"\xff": 1, "run"')
    elif how == "path_escape":
        lines[records[0]] = lines[records[0]].replace(first["file"].encode(), b"../../elsewhere.pt")
    elif how == "truncated_pt":
        snapshot = dump / first["file"]
        snapshot.write_bytes(snapshot.read_bytes()[:100])
    elif how == "torn_last_line":
        tail = lines[records[-1]][:40]  # a write cut off: no newline after it
    elif how == "no_records":
        lines = []
    manifest.write_bytes(b"".join(line + b"\n" for line in lines) + tail)
    return expected


@pytest.mark.parametrize(
    "how",
    [
        "text_line",
        "json_array",
        "not_utf8",
        "path_escape",
        "truncated_pt",
        "torn_last_line",
        "no_records",
    ],
)
def test_a_spoiled_dump_gives_one_line_and_exit_2_or_is_read_with_a_warning(
    how, level1_dump, tmp_path
):
    a, b = level1_dump("mlp", "a"), level1_dump("mlp", "b")
    expected = _spoil(b, how)
    runs = [cli("compare", a, b)]
    if how != "truncated_pt":  # report reads records, not snapshots
        runs.append(cli("report", b, "-o", tmp_path / "r.html"))
    for done in runs:
        if expected:
            assert done.returncode == 2, done.stdout + done.stderr
            assert done.stderr.count("\n") == 1 and expected in done.stderr, done.stderr
        else:  # every whole record is used; the torn line is said, once
            assert done.returncode == 0, done.stderr
            assert done.stderr.count("a torn last line") == 1, done.stderr
            assert "Traceback" not in done.stderr


def test_text_that_is_not_a_dump_is_refused(tmp_path):
    garbage = tmp_path / "garbage.txt"
    garbage.write_text("hello\nworld\n")
    for done in (cli("compare", garbage, garbage), cli("report", garbage)):
        assert done.returncode == 2 and "holds no record" in done.stderr


def test_diverge_on_a_directory_says_so(tmp_path):
    done = cli("diverge", tmp_path)
    assert done.returncode == 2 and "is a directory" in done.stderr


@pytest.mark.skipif(shutil.which("chromium") is None, reason="needs Debian's chromium")
def test_report_renders_in_headless_chromium(level1_dump, tmp_path):
    page = aoti_debug_printer.report(level1_dump("nan_maker", "nan"), tmp_path / "report.html")
    shot = tmp_path / "report.png"
    subprocess.run(
        [
            "chromium",
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            f"--screenshot={shot}",
            "--window-size=1100,700",
            page.as_uri(),
        ],
        capture_output=True,
        timeout=120,
        check=True,
    )
    png = shot.read_bytes()
    assert png[:8] == b"\x89PNG\r\n\x1a\n"
    width, height = int.from_bytes(png[16:20], "big"), int.from_bytes(png[20:24], "big")
    assert (width, height) == (1100, 700)
    # A blank page compresses to a few KB; the plot, headline and table do not.
    assert len(png) > 20_000
