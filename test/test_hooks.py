"""The two ways into Inductor give the same records: Inductor's debug-printer
hooks (a torch built with patches/, here the installed torch's modules
patched in a scratch copy and loaded in their place) and, on a stock torch,
the methods the package wraps. On the patched torch the package wraps
nothing."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import ROOT, fx_graph_cache_counts
from test_install import CACHED_COMPILE

from aoti_debug_printer._dumps import load_dump

pytestmark = pytest.mark.slow

HERE = Path(__file__).resolve().parent

# A child process: loads the patched modules in place of the installed
# torch's (argv[1]: module name -> file, {} for stock torch), compiles the
# custom-op model at level 1 with AOTInductor (the proxy executor's call)
# and with torch.compile (the Python wrapper's `bufN = op(...)` and its C++
# kernels), runs both into the dump directory argv[2], and says which way in
# it took.
OVERLAY = """
import importlib.abc, importlib.machinery, importlib.util, json, os, sys

patched = json.loads(sys.argv.pop(1))  # the script's own arguments follow


# The patched source, under the installed file's name: Inductor finds the
# files beside its modules (aoti_runtime/, templates) through it.
class PatchedInductor(importlib.abc.MetaPathFinder):

    def find_spec(self, name, path, target=None):
        if name not in patched:
            return None
        source, installed = patched[name]
        loader = importlib.machinery.SourceFileLoader(name, source)
        return importlib.util.spec_from_file_location(name, installed or source, loader=loader)


sys.meta_path.insert(0, PatchedInductor())
"""
CHILD = (
    OVERLAY
    + """
import torch
import aoti_debug_printer
from aoti_debug_printer import _install
from testmodels import small

model, inputs = small.build("custom_op")
config = {"aot_inductor.debug_intermediate_value_printer": "1"}
with aoti_debug_printer.options(dump_dir=sys.argv[1]), torch._inductor.config.patch(config):
    ep = torch.export.export(model, inputs)
    path = torch._inductor.aoti_compile_and_package(ep, package_path=sys.argv[2])
    torch._inductor.aoti_load_package(path)(*inputs)
    torch.compile(model)(*inputs)
print(json.dumps({
    "hooks": _install.uses_inductor_hooks(),
    "wrapped": sorted(_install._originals),
    "patched": sorted(m for m in patched if m in sys.modules),
}))
"""
)


@pytest.fixture(scope="module")
def patched_inductor(tmp_path_factory) -> dict[str, list]:
    """The installed torch's files that patches/ changes, with the series
    applied, by module name: [patched file, installed file (None for a file
    the series adds)]."""
    import torch._inductor as inductor

    scratch = tmp_path_factory.mktemp("patched-torch")
    site = Path(inductor.__file__).parents[2]
    # check.sh picks the series for this torch and leaves the copies patched.
    subprocess.run(
        ["bash", ROOT / "patches" / "check.sh", site, scratch], check=True, capture_output=True
    )
    names = [str(p.relative_to(scratch)) for p in scratch.rglob("*.py")]
    return {
        n[: -len(".py")].replace("/", "."): [
            str(scratch / n),
            str(site / n) if (site / n).exists() else None,
        ]
        for n in names
    }


def run_child(tmp_path: Path, name: str, patched: dict, **env) -> tuple[dict, Path]:
    dump = tmp_path / name
    done = subprocess.run(
        [sys.executable, "-c", CHILD, json.dumps(patched), dump, tmp_path / f"{name}.pt2"],
        env={
            **os.environ,
            "PYTHONPATH": str(HERE),
            "TORCHINDUCTOR_CACHE_DIR": str(tmp_path / f"{name}-cache"),
            **env,
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


def test_patched_and_stock_torch_give_the_same_records(patched_inductor, tmp_path):
    hooked, hooked_dump = run_child(tmp_path, "hooks", patched_inductor)
    assert hooked["hooks"] and hooked["wrapped"] == [], hooked
    assert "torch._inductor.debug_printer_hooks" in hooked["patched"], hooked
    # On the patched torch, the wraps switched on by hand: the same again.
    forced, forced_dump = run_child(
        tmp_path, "forced", patched_inductor, AOTI_DEBUG_PRINTER_HOOKS="0"
    )
    assert not forced["hooks"] and forced["wrapped"], forced
    stock, stock_dump = run_child(tmp_path, "stock", {})
    assert not stock["hooks"] and stock["wrapped"], stock
    records = records_of(stock_dump)
    # The custom op's call, from both wrappers, and the kernels around it.
    ops = [r for r in records if r[2] == "adp_models::scale_rows"]
    assert {r[0] for r in ops} == {0, 1} and any(r[1] == "after_launch" for r in ops), records
    assert any(r[2].startswith("cpp_fused_") and r[5] for r in records), records
    assert records_of(hooked_dump) == records
    assert records_of(forced_dump) == records


def test_the_hooks_set_are_taken_out_by_uninstall(patched_inductor, tmp_path):
    """uninstall() gives Inductor back its own printer on a patched torch too."""
    code = (
        "import importlib.util, json, sys\n"
        "patched = json.loads(sys.argv[1])\n"
        "spec = importlib.util.spec_from_file_location("
        "'torch._inductor.debug_printer_hooks', patched['torch._inductor.debug_printer_hooks'][0])\n"
        "import torch, torch._inductor\n"
        "hooks = importlib.util.module_from_spec(spec); spec.loader.exec_module(hooks)\n"
        "sys.modules[spec.name] = hooks\n"
        "from aoti_debug_printer import _install\n"
        "_install.install(); import torch._inductor.codegen.wrapper\n"
        "print(hooks.get_hooks() is _install._HOOKS, end=' ')\n"
        "_install.uninstall(); print(hooks.get_hooks() is None)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code, json.dumps(patched_inductor)],
        capture_output=True,
        text=True,
        env={**os.environ, "AOTI_DEBUG_PRINTER_AUTOLOAD": "0"},
    )
    assert done.stdout.split() == ["True", "True"], done.stdout + done.stderr


def test_the_hooks_keep_level_0_on_the_patched_torchs_cache(patched_inductor, tmp_path):
    """As test_install's stock-torch test, through the hooks' cache tag: it
    reaches AOTAutograd's cache too, whose details derive from Inductor's."""

    def cache(level: str, autoload: str) -> list[str]:
        argv = ["-c", OVERLAY + CACHED_COMPILE, json.dumps(patched_inductor), level]
        return fx_graph_cache_counts(argv, tmp_path, autoload)

    hit, miss = ["1", "0"], ["0", "1"]
    assert cache("0", "0") == miss
    assert cache("0", "1") == hit
    assert cache("2", "0") == miss
    assert cache("2", "1") == miss
    assert cache("2", "1") == hit
