"""Activation: unchanged scripts, the entry point, the explicit API."""

from __future__ import annotations

import importlib.metadata
import os
import re
import shutil
import subprocess
import sys

import pytest
import torch
from conftest import ROOT, fx_graph_cache_counts

import aoti_debug_printer


def python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run(
        [sys.executable, "-c", code],
        capture_output=True,
        text=True,
        env={**os.environ, **env},
        timeout=600,
    )


def test_import_torch_installs_without_importing_inductor():
    r = python(
        "import sys, torch, aoti_debug_printer as a; "
        "print(a.is_installed(), 'torch._inductor.codegen.wrapper' in sys.modules, "
        "'aoti_debug_printer._C' in sys.modules)"
    )
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False"]


@pytest.mark.parametrize(
    "value,installed",
    [
        ("0", "False"),
        ("no", "False"),
        ("OFF", "False"),
        ("false", "False"),
        ("1", "True"),
        ("yes", "True"),
    ],
)
def test_autoload_can_be_turned_off(value, installed):
    r = python(
        "import torch, aoti_debug_printer as a; print(a.is_installed())",
        AOTI_DEBUG_PRINTER_AUTOLOAD=value,
    )
    assert r.stdout.split() == [installed], r.stderr
    assert "AUTOLOAD" not in r.stderr


def test_an_autoload_value_that_is_no_switch_says_so():
    r = python(
        "import torch, aoti_debug_printer as a; print(a.is_installed())",
        AOTI_DEBUG_PRINTER_AUTOLOAD="",
    )
    assert r.stdout.split() == ["True"]
    assert "AOTI_DEBUG_PRINTER_AUTOLOAD must be 1/0, on/off, true/false or yes/no" in r.stderr


def test_install_and_uninstall_swap_the_manager(stock_way_in):
    """The stock way in (on a torch with patches/, test_hooks covers the hooks)."""
    from torch._inductor.codegen import debug_utils, wrapper

    from aoti_debug_printer.inductor.codegen import DebugPrinterManager

    aoti_debug_printer.install()
    assert wrapper.DebugPrinterManager is DebugPrinterManager
    aoti_debug_printer.uninstall()
    try:
        assert wrapper.DebugPrinterManager is debug_utils.DebugPrinterManager
        assert debug_utils.DebugPrinterManager is not DebugPrinterManager
        with aoti_debug_printer.enabled(level=3, kernels="x"):
            assert wrapper.DebugPrinterManager is DebugPrinterManager
            assert torch._inductor.config.aot_inductor.debug_intermediate_value_printer == "3"
        assert wrapper.DebugPrinterManager is not DebugPrinterManager
    finally:
        aoti_debug_printer.install()


@pytest.mark.slow
def test_unchanged_script_at_level_2(tmp_path):
    r = subprocess.run(
        [sys.executable, ROOT / "examples" / "their_script.py", "--package", tmp_path / "m.pt2"],
        capture_output=True,
        text=True,
        timeout=900,
        cwd=tmp_path,
        env={**os.environ, "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "2"},
    )
    assert r.returncode == 0, r.stderr[-3000:]
    heads = re.findall(r"^\[aoti-debug-printer\] (\w+) (\S+)", r.stdout, re.M)
    kernels = {k for phase, k in heads if phase == "before_launch"}
    assert {k for phase, k in heads if phase == "after_launch"} == kernels
    assert "aoti_torch_cpu_addmm_out" in kernels
    assert any(k.startswith("cpp_fused_") for k in kernels)
    assert any(phase == "model_input" for phase, _ in heads)
    assert "max |compiled - eager| =" in r.stdout
    # No leftover memory: outputs before launch carry no statistics, and no
    # number of the demo's small values has a huge exponent (leftover memory
    # printed -1.8875e+38 and 1.4013e-45 before roles).
    records = re.split(r"^(?=\[aoti-debug-printer\] )", r.stdout, flags=re.M)
    unwritten = [rec for rec in records if "output, not yet written" in rec]
    assert unwritten and all(
        rec.startswith("[aoti-debug-printer] before_launch") for rec in unwritten
    )
    assert not any("finite=" in rec for rec in unwritten)
    exponents = [int(e) for e in re.findall(r"\de([-+]\d+)", r.stdout)]
    assert all(abs(e) < 20 for e in exponents), sorted(exponents)[:3] + sorted(exponents)[-3:]


def test_missing_hook_point_names_the_torch_version(stock_way_in):
    from types import ModuleType

    from aoti_debug_printer.inductor import install as _install

    stranger = ModuleType("torch._inductor.codegen.debug_utils")  # no DebugPrinterManager
    with pytest.raises(_install.HookPointMissing, match=re.escape(torch.__version__)) as e:
        _install._patch(stranger)
    # The range is the one in the installed package's metadata (pyproject.toml).
    (required,) = [
        r for r in importlib.metadata.requires("aoti-debug-printer") if r.startswith("torch")
    ]
    assert f"Supported: {required}." in str(e.value)


def test_the_cache_tag_follows_what_generates_the_code(tmp_path):
    """Inductor serves cached code for an unchanged graph: after an upgrade
    of this package that code must not be the old version's."""
    from aoti_debug_printer.inductor import install as _install

    installed = _install.PACKAGE_DIR
    copy = tmp_path / "aoti_debug_printer"
    for name in _install.GENERATOR_FILES:
        (copy / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(installed / name, copy / name)
    first = _install.cache_tag(copy)
    assert _install.cache_tag(copy) == first
    for name in _install.GENERATOR_FILES:
        original = (copy / name).read_bytes()
        (copy / name).write_bytes(original + b"\n")
        assert _install.cache_tag(copy) != first, name
        (copy / name).write_bytes(original)
    assert _install.cache_tag(copy) == first
    # Another installation (whose library path the code embeds) is another tag.
    assert _install.cache_tag(installed) != first


CACHED_COMPILE = """
import sys, torch
from torch._dynamo.utils import counters
# One compile per level named (argv[1], comma-separated), each from a fresh
# Dynamo, so that each is served by Inductor's caches alone.
for level in sys.argv[1].split(","):
    torch._dynamo.reset()
    counters.clear()
    torch._inductor.config.aot_inductor.debug_intermediate_value_printer = level
    torch.compile(lambda x: torch.sin(x) * 2 + 1)(torch.randn(8))
    print("cache", counters["inductor"]["fxgraph_cache_hit"], counters["inductor"]["fxgraph_cache_miss"])
"""


def test_the_cache_tag_keeps_level_0_on_the_stock_cache(tmp_path):
    """At level 0 the code is stock PyTorch's: a compile with the package
    installed is served the entry a compile without it made. At level 2 the
    code is ours: it gets an entry of its own (then reused)."""

    def cache(levels: str, autoload: str) -> list[list[str]]:
        return fx_graph_cache_counts(["-c", CACHED_COMPILE, levels], tmp_path, autoload)

    hit, miss = ["1", "0"], ["0", "1"]
    # Stock PyTorch fills the cache at both levels.
    assert cache("0,2", "0") == [miss, miss]
    # The package: level 0 gets stock's entry; level 2, its own code, gets
    # another entry, then reuses it.
    assert cache("0,2,2", "1") == [hit, miss, hit]


def test_an_old_setuptools_gets_one_line_naming_the_fix(tmp_path):
    """pip install --no-build-isolation . uses the Python's own setuptools:
    a fresh venv's (65.5 on Python 3.11) fails on the SPDX license field
    with no hint; setup.py names the version it needs first."""
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", venv], check=True, timeout=300)
    py = venv / "bin" / "python"
    version = subprocess.run(
        [py, "-c", "import setuptools; print(setuptools.__version__)"],
        capture_output=True,
        text=True,
    ).stdout.strip()
    if not version or int(version.split(".")[0]) >= 77:
        pytest.skip(f"this Python's venv brings setuptools {version or 'none'}")
    done = subprocess.run(
        [py, "-m", "pip", "install", "--no-build-isolation", "--no-deps", "--no-index", ROOT],
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert done.returncode != 0
    assert "needs setuptools>=77 to build" in done.stdout + done.stderr


def test_a_moved_hook_point_is_left_alone_and_says_what_is_lost(caplog, stock_way_in):
    """A wrapped Inductor method whose parameters moved is not wrapped (its
    records would be wrong), and a missing one is not silent: one line per
    feature, saying what users lose."""
    import logging
    from types import ModuleType

    from aoti_debug_printer.inductor import wraps

    class CppWrapperCpu:  # as a future torch might have it
        def generate_fallback_kernel_with_runtime_lookup_aot(self, op, raw_args, outputs):
            return "stock"

    original = CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup_aot
    module = ModuleType("torch._inductor.codegen.cpp_wrapper_cpu")
    module.CppWrapperCpu = CppWrapperCpu
    with caplog.at_level(logging.WARNING, logger="aoti_debug_printer"):
        wraps.record_fallback_calls_in(module)
    assert CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup_aot is original
    lines = [r.getMessage() for r in caplog.records]
    assert (
        f"aoti-debug-printer: torch {torch.__version__} changed "
        "CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup_aot (expected (op_overload, "
        "raw_args, output_args), found (op, raw_args, outputs)); ops called through the proxy "
        "executor get no records"
    ) in lines
    # The three JIT methods it lacks, one line each; the one only some
    # releases have (boxed) says nothing.
    missing = [line for line in lines if " has no CppWrapperCpu." in line]
    assert len(missing) == 3 and all("get no records" in line for line in missing), lines
    assert not any("_boxed" in line for line in lines)


def test_hooks_required_refuse_every_wrap_and_a_torch_without_them(monkeypatch):
    """AOTI_DEBUG_PRINTER_HOOKS=require (a patched torch's test run): a method
    wrap, or a torch without the hooks, stops with one line naming it."""
    from types import ModuleType

    from aoti_debug_printer.inductor import install as _install
    from aoti_debug_printer.inductor import wraps

    monkeypatch.setenv("AOTI_DEBUG_PRINTER_HOOKS", "require")

    class CppWrapperCpu:
        def generate_fallback_kernel_with_runtime_lookup_aot(
            self, op_overload, raw_args, output_args
        ):
            return "stock"

    module = ModuleType("torch._inductor.codegen.cpp_wrapper_cpu")
    module.CppWrapperCpu = CppWrapperCpu
    with pytest.raises(_install.HookPointMissing, match="would need CppWrapperCpu.generate_"):
        wraps.record_fallback_calls_in(module)
    assert "_aoti_debug_printer" not in vars(
        CppWrapperCpu.generate_fallback_kernel_with_runtime_lookup_aot
    )
    monkeypatch.setattr(_install, "_HOOKS_MODULE", "torch._inductor.no_debug_printer_hooks")
    with pytest.raises(_install.HookPointMissing, match="HOOKS=require, but torch .* has no"):
        _install.inductor_hooks()
