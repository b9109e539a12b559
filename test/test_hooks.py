"""The two ways into Inductor give the same records: Inductor's debug-printer
hooks (a torch built with patches/) and, on a stock torch, the methods the
package wraps. On the patched torch the package wraps nothing. Whichever the
installed torch is, check.sh makes the other one's files in a scratch copy,
loaded in place of the installed modules."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, SITE_PACKAGES, fx_graph_cache_counts, torch_has_the_hooks
from test_install import CACHED_COMPILE

from aoti_debug_printer import load_dump
from aoti_debug_printer.inductor.install import _HOOKS_MODULE as HOOKS_MODULE

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

# A child process: loads the other torch's modules in place of the installed
# torch's (argv[1]: module name -> [file, installed file], {} for the
# installed torch; no file: a module that torch lacks), compiles the
# custom-op model at level 1 with AOTInductor (the proxy executor's call)
# and with torch.compile (the Python wrapper's `bufN = op(...)` and its C++
# kernels), runs both into the dump directory argv[2], and says which way in
# it took.
OVERLAY = """
import importlib.abc, importlib.machinery, importlib.util, json, os, sys

overlay = json.loads(sys.argv.pop(1))  # the script's own arguments follow


# The other source, under the installed file's name: Inductor finds the
# files beside its modules (aoti_runtime/, templates) through it.
class OtherInductor(importlib.abc.MetaPathFinder):

    def find_spec(self, name, path, target=None):
        if name not in overlay:
            return None
        source, installed = overlay[name]
        if source is None:
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        loader = importlib.machinery.SourceFileLoader(name, source)
        return importlib.util.spec_from_file_location(name, installed or source, loader=loader)


sys.meta_path.insert(0, OtherInductor())
"""
CHILD = (
    OVERLAY
    + """
import torch
import aoti_debug_printer
from aoti_debug_printer.inductor import install as _install
from aoti_debug_printer.inductor.provenance import capture
from testmodels import small

# How often the line being rendered is found by walking the stack.
walks = []
walk = capture._line_from_frames
capture._line_from_frames = lambda: walks.append(1) or walk()

model, inputs = small.build("custom_op")
config = {"aot_inductor.debug_intermediate_value_printer": "1"}
with aoti_debug_printer.options(dump_dir=sys.argv[1]), torch._inductor.config.patch(config):
    ep = torch.export.export(model, inputs)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2])
    torch._inductor.aoti_load_package(path)(*inputs)
    torch.compile(model)(*inputs)
print(json.dumps({
    "hooks": _install.uses_inductor_hooks(),
    "wrapped": sorted(_install.originals),
    "overlaid": sorted(m for m in overlay if m in sys.modules),
    "frame_walks": len(walks),
}))
"""
)


@pytest.fixture(scope="module")
def trees(tmp_path_factory) -> dict[str, dict[str, list]]:
    """The overlays of the patched and the stock torch: {} for the installed
    one; for the other, the files that patches/ changes, by module name:
    [file with the series applied (or taken out), installed file (None for
    a file the series adds)], and the hooks module as [None, None] where it
    is taken out."""
    scratch = tmp_path_factory.mktemp("other-torch")
    site = SITE_PACKAGES
    # check.sh picks the series for this torch and leaves the copies: patched
    # on a stock torch, stock on a patched one.
    subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", site, scratch], check=True, capture_output=True
    )
    names = [str(p.relative_to(scratch)) for p in scratch.rglob("*.py")]
    other = {
        n[: -len(".py")].replace("/", "."): [
            str(scratch / n),
            str(site / n) if (site / n).exists() else None,
        ]
        for n in names
    }
    if torch_has_the_hooks():
        return {"patched": {}, "stock": {HOOKS_MODULE: [None, None], **other}}
    return {"patched": other, "stock": {}}


STORED_STATISTICS = (
    "torch._inductor.codegen.triton.TritonKernel.",
    "torch._inductor.codegen.cpp_wrapper_gpu.CppWrapperGpu.make_zero_buffer",
)


def run_child(tmp_path: Path, name: str, overlay: dict, hooks: str) -> tuple[dict, Path]:
    """CHILD with AOTI_DEBUG_PRINTER_HOOKS=hooks. Every child generates its
    code afresh (the FX graph and AOTAutograd caches off), through its own
    way in; what a way in does not change (the VecISA check, compiled
    kernels) comes from the test run's Inductor cache."""
    dump = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(overlay), dump, tmp_path / f"{name}.pt2"],
        env={
            **os.environ,
            "PYTHONPATH": str(HERE),
            "TORCHINDUCTOR_FX_GRAPH_CACHE": "0",
            "TORCHINDUCTOR_AUTOGRAD_CACHE": "0",
            "AOTI_DEBUG_PRINTER_HOOKS": hooks,
        },
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1]), dump


def records_of(dump: Path) -> list[tuple]:
    """What a dump says, without what differs from process to process."""
    out = []
    for r in load_dump(dump).records:
        t = r.tensor
        stats = (t.stats.min, t.stats.max, t.stats.nan) if t.stats else None
        out.append((r.run, t.phase, t.kernel, t.arg, t.call, t.node, t.role, t.why, t.shape, stats))
    return out


def test_patched_and_stock_torch_give_the_same_records(trees, tmp_path):
    # The hooks or nothing: a method wrap would stop the child.
    hooked, hooked_dump = run_child(tmp_path, "hooks", trees["patched"], "require")
    # Triton kernels' stores are wrapped on every torch: no hook of patches/
    # covers the statistics they keep (stored_stats.py).
    unhooked = [w for w in hooked["wrapped"] if not w.startswith(STORED_STATISTICS)]
    assert hooked["hooks"] and unhooked == [], hooked
    # The wrapper says which line it renders (patches/0006): no stack walk.
    assert hooked["frame_walks"] == 0, hooked
    assert torch_has_the_hooks() or HOOKS_MODULE in hooked["overlaid"], hooked
    # On the patched torch, the wraps switched on by hand: the same again.
    forced, forced_dump = run_child(tmp_path, "forced", trees["patched"], "0")
    assert not forced["hooks"] and forced["wrapped"], forced
    stock, stock_dump = run_child(tmp_path, "stock", trees["stock"], "1")
    assert not stock["hooks"] and stock["wrapped"], stock
    assert stock["frame_walks"] > 0, stock
    records = records_of(stock_dump)
    # The custom op's call, from both wrappers, and the kernels around it.
    ops = [r for r in records if r[2] == "adp_models::scale_rows"]
    assert {r[0] for r in ops} == {0, 1} and any(r[1] == "after_launch" for r in ops), records
    assert any(r[2].startswith("cpp_fused_") and r[5] for r in records), records
    assert records_of(hooked_dump) == records
    assert records_of(forced_dump) == records


def test_the_hooks_set_are_taken_out_by_uninstall(trees):
    """uninstall() gives Inductor back its own printer on a patched torch too."""
    code = OVERLAY + (
        "import torch, torch._inductor.debug_printer_hooks as hooks\n"
        "from aoti_debug_printer.inductor import install as _install\n"
        "_install.install(); import torch._inductor.codegen.wrapper\n"
        "print(hooks.get_hooks() is _install._HOOKS, end=' ')\n"
        "_install.uninstall(); print(hooks.get_hooks() is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(trees["patched"])],
        capture_output=True,
        text=True,
        env={**os.environ, "AOTI_DEBUG_PRINTER_AUTOLOAD": "0"},
    )
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr


def test_the_hooks_keep_level_0_on_the_patched_torchs_cache(trees, tmp_path):
    """As test_install's stock-torch test, through the hooks' cache tag: it
    reaches AOTAutograd's cache too, whose details derive from Inductor's."""

    def cache(levels: str, autoload: str) -> list[list[str]]:
        argv = ["-c", OVERLAY + CACHED_COMPILE, json.dumps(trees["patched"]), levels]
        return fx_graph_cache_counts(argv, tmp_path, autoload)

    hit, miss = ["1", "0"], ["0", "1"]
    assert cache("0,2", "0") == [miss, miss]
    assert cache("0,2,2", "1") == [hit, miss, hit]
