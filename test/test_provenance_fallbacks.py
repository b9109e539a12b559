"""A read of Inductor's internals that fails is never silent: one helper
(inductor/provenance/internals.py) holds the only broad catch of the
inductor wing, counts each failure by place, logs it once, and the values
it leaves unknown say `internals_moved` where diverge shows coverage. On
this torch, no read fails on the correct models."""

from __future__ import annotations

import ast
import logging
from pathlib import Path

import pytest
import torch
from testmodels import findings

import aoti_debug_printer
from aoti_debug_printer import format_divergence
from aoti_debug_printer.inductor.provenance import fallbacks, formulas
from aoti_debug_printer.inductor.provenance.internals import InternalsMoved

INDUCTOR_WING = Path(aoti_debug_printer.__file__).parent / "inductor"
BROAD = {"Exception", "BaseException"}


def broad_catches(path: Path) -> list[int]:
    """Lines of `except:`, `except Exception` or `except BaseException`
    (alone or in a tuple) in `path`."""
    lines = []
    for node in ast.walk(ast.parse(path.read_text())):
        if not isinstance(node, ast.ExceptHandler):
            continue
        caught = node.type
        names = caught.elts if isinstance(caught, ast.Tuple) else [caught]
        if caught is None or any(isinstance(n, ast.Name) and n.id in BROAD for n in names):
            lines.append(node.lineno)
    return lines


def test_the_only_broad_catch_of_the_inductor_wing_is_the_helper():
    found = {
        str(p.relative_to(INDUCTOR_WING)): broad_catches(p)
        for p in sorted(INDUCTOR_WING.rglob("*.py"))
    }
    helper = "provenance/internals.py"
    assert len(found.pop(helper)) == 1, f"{helper} holds the one broad catch"
    assert {room: lines for room, lines in found.items() if lines} == {}


def compile_level_1(name: str, directory: Path, source_only: bool = False):
    """`name` of testmodels.findings compiled at level 1 into `directory`,
    afresh (no cache: what is measured is this compile's reads); with
    `source_only`, the generated code alone (no g++: the reads are done by
    then)."""
    model, inputs, dynamic = findings.build(name)
    program = torch.export.export(model, inputs, dynamic_shapes=dynamic)
    patch = {
        "aot_inductor.debug_intermediate_value_printer": "1",
        "aot_inductor.package_cpp_only": source_only or None,
        "force_disable_caches": True,
    }
    with aoti_debug_printer.enabled(), torch._inductor.config.patch(patch):
        package = torch._inductor.aoti_compile_and_package(
            program, package_path=str(directory / f"{name}.pt2")
        )
    return program, inputs, Path(package)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["pre_ln_transformer", "conv_bn", "inplace_views"])
def test_no_read_fails_on_this_torch(name, tmp_path, caplog):
    """Attention, conv/batch-norm and in-place ops: every read the printer
    makes of this torch's Inductor succeeds (a torch upgrade that moves one
    fails here, not silently in coverage)."""
    before = fallbacks()
    with caplog.at_level(logging.WARNING, logger="aoti_debug_printer"):
        compile_level_1(name, tmp_path, source_only=True)
    assert fallbacks() == before
    assert not [r for r in caplog.records if "could not read" in r.getMessage()]


@pytest.mark.slow
def test_a_read_that_fails_is_counted_logged_and_shown_with_coverage(tmp_path, monkeypatch, caplog):
    """A moved internal, planted: the variance recogniser's read of the IR
    fails. The compile goes on, logs the place once, and diverge counts the
    values it left unknown as not compared, `internals_moved`, with the
    place and the error."""

    def moved(facts, buffer):
        raise AttributeError("'ComputedBuffer' object has no attribute 'data'")

    recognisers = dict(formulas.RECOGNISERS)
    what = next(w for w, f in recognisers.items() if f is formulas.variance_sum)
    monkeypatch.setattr(
        formulas,
        "RECOGNISERS",
        tuple((w, moved if w == what else f) for w, f in formulas.RECOGNISERS),
    )
    place = f"the formula of {what}"
    count = fallbacks().get(place, 0)
    with caplog.at_level(logging.WARNING, logger="aoti_debug_printer"):
        program, inputs, package = compile_level_1("post_ln_mlp", tmp_path)
    assert fallbacks()[place] > count
    said = [r.getMessage() for r in caplog.records if "could not read" in r.getMessage()]
    if count == 0:  # logged once per place and process
        assert len(said) == 1 and place in said[0] and "AttributeError" in said[0], said

    dump = tmp_path / "dump"
    with aoti_debug_printer.options(dump_dir=dump):
        torch._inductor.aoti_load_package(str(package))(*inputs)
    found = aoti_debug_printer.first_divergence_from_eager(program, dump=dump)
    written, compared, reasons = found.coverage()
    # Four layer norms, a sum of squares each: not judged, and said why.
    assert reasons["internals_moved"] == 4, format_divergence(found)
    assert compared == written - 4 and found.first is None, format_divergence(found)
    text = format_divergence(found)
    assert "not compared (4) internals_moved: " in text, text
    assert f"(the first: {place}: AttributeError: " in text, text


def test_the_error_a_fallback_carries_names_its_place():
    try:
        raise InternalsMoved("a buffer's origin node", KeyError("val"))
    except InternalsMoved as e:
        assert e.why() == "internals_moved:a buffer's origin node: KeyError: 'val'"
