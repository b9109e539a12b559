"""Runs that differ: `compare` says where two dumps first differ bit for bit
and whether that kernel is nondeterministic by construction (float
atomics); `diverge --runs N` runs one compile N times and exits 1 only
where a kernel that should be deterministic is not. Real AOTInductor
compiles and runs, on CPU (two threads race in index_add's atomics) and
on CUDA where a GPU is present."""

from __future__ import annotations

import json
import shutil

import pytest
import torch
from conftest import cli
from testmodels import findings
from testmodels.findings import compile_and_dump

import aoti_debug_printer
from aoti_debug_printer import format_comparison, load_dump
from aoti_debug_printer.records import Role

pytestmark = pytest.mark.slow

DEVICES = ["cpu", pytest.param("cuda", marks=pytest.mark.gpu)]


def runs_until_they_differ(package, inputs, dump_root, tries: int = 6):
    """Dumps of runs of one package until two differ bit for bit: atomics
    race, so any one pair may agree."""
    runner = torch._inductor.aoti_load_package(str(package))
    first = dump_root / "run0"
    with aoti_debug_printer.options(dump_dir=first):
        runner(*inputs)
    for k in range(1, tries):
        other = dump_root / f"run{k}"
        with aoti_debug_printer.options(dump_dir=other):
            runner(*inputs)
        c = aoti_debug_printer.compare(first, other)
        if c.first_different is not None:
            return first, other, c
    pytest.fail(f"{tries} runs of index_add's atomics gave the same bits")


@pytest.mark.parametrize("device", DEVICES)
def test_compare_names_the_atomics_kernel_two_runs_differ_in(device, tmp_path):
    model, inputs = findings.atomic_pool(device)
    program = torch.export.export(model, inputs)
    compile_and_dump(program, inputs, tmp_path / "compile")
    a, b, c = runs_until_they_differ(tmp_path / "compile.pt2", inputs, tmp_path)
    first = c.first_different
    # The accumulated value, where the bits first differ: its kernel adds
    # with float atomics, a fact of its construction, not a noise verdict.
    assert first.a.node == "index_add" and first.a.role is Role.ACCUMULATE, format_comparison(c)
    assert first.nondeterministic_by_construction and c.same_build
    # Inside the noise: no divergence, and the command line says all of it.
    assert c.first is None, format_comparison(c)
    done = cli("compare", a, b)
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"values differ; the first: node index_add: A {first.a.kernel}" in done.stdout
    assert "adds with float atomics: nondeterministic by construction" in done.stdout
    # The report says it too, and marks that value's row.
    page = tmp_path / "report.html"
    done = cli("report", a, "-o", page, "--against", b)
    assert done.returncode == 0, done.stdout + done.stderr
    text = page.read_text()
    assert 'id="bitwise" class="bad"' in text and "nondeterministic by construction" in text
    assert text.count('<tr class="different">') == 1
    assert f"<td>{first.a.kernel}</td>" in text.split('<tr class="different">')[1].split("</tr>")[0]

    # A kernel that should be deterministic, giving other bits on the same
    # inputs (its snapshot in B changed in its last bit): named as such.
    # Values before it must be the same, so B is A with that one change.
    shutil.rmtree(b)
    shutil.copytree(a, b)
    target = next(r for r in load_dump(b).written_values() if r.role is Role.WRITE and r.node)
    t = torch.load(target.path, weights_only=True)
    t.view(torch.int32).view(-1)[0] ^= 1
    torch.save(t, target.path)
    done = cli("compare", a, b)
    assert (
        f"NONDETERMINISTIC KERNEL: {target.kernel} is deterministic by construction" in done.stdout
    ), done.stdout


@pytest.mark.parametrize("device", DEVICES)
def test_runs_check_tells_atomics_from_a_deterministic_model(device, tmp_path):
    model, inputs = findings.atomic_pool(device)
    program = torch.export.export(model, inputs)
    check = aoti_debug_printer.first_difference_between_runs(program, runs=4)
    assert check.first is not None, "4 runs of index_add's atomics gave the same bits"
    assert check.first.a.node == "index_add" and not check.nondeterministic_kernel

    # A correct model without atomics: the same bits run after run, exit 0.
    model, inputs, _ = findings.build("post_ln_mlp", device=device)
    torch.export.save(torch.export.export(model, inputs), tmp_path / "program.pt2")
    done = cli("diverge", tmp_path / "program.pt2", "--runs", "2", "--quiet")
    assert done.returncode == 0, done.stdout + done.stderr
    assert "2 runs on the same inputs: all " in done.stdout
    assert "identical bit for bit" in done.stdout
    done = cli("diverge", tmp_path / "program.pt2", "--runs", "1")
    assert done.returncode == 2 and len(done.stderr.strip().splitlines()) == 1, done.stderr


def test_a_comparison_of_nothing_is_no_verdict(tmp_path):
    model, inputs, _ = findings.build("reuse_chain")
    program = torch.export.export(model, inputs)
    a = compile_and_dump(program, inputs, tmp_path / "a")
    # B: a dump of the same kernels whose values hold other nodes, and no
    # model inputs: nothing in it is a value A holds.
    shutil.copytree(a, tmp_path / "b")
    records = [json.loads(x) for x in (a / "manifest.jsonl").read_text().splitlines()]
    for r in records:
        if r.get("node"):
            r["node"] = "other_" + r["node"]
        if r.get("phase") == "model_input":
            (tmp_path / "b" / r["file"]).unlink()
    (tmp_path / "b" / "manifest.jsonl").write_text(
        "".join(json.dumps(r) + "\n" for r in records if r.get("phase") != "model_input")
    )
    done = cli("compare", a, tmp_path / "b")
    assert done.returncode == 2, done.stdout + done.stderr
    assert "compared nothing" in done.stdout and "no divergence" not in done.stdout
    # Values on one side only fail a strict comparison of the same dump
    # less its last record.
    shutil.rmtree(tmp_path / "b")
    shutil.copytree(a, tmp_path / "b")
    lines = (a / "manifest.jsonl").read_text().splitlines(keepends=True)
    (tmp_path / "b" / "manifest.jsonl").write_text("".join(lines[:-1]))
    assert cli("compare", a, tmp_path / "b").returncode == 0
    strict = cli("compare", a, tmp_path / "b", "--strict")
    assert strict.returncode == 1, strict.stdout + strict.stderr
    # A report against something that is not a dump: one line, exit 2.
    bad = cli("report", a, "-o", tmp_path / "r.html", "--against", a / "manifest.jsonl.missing")
    assert bad.returncode == 2 and len(bad.stderr.strip().splitlines()) == 1, bad.stderr
    assert done.stderr.strip().splitlines() == [
        "aoti-debug compare: compared nothing: no value of A has its match in B"
    ]
