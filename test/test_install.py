"""Activation: unchanged scripts, the entry point, the explicit API."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import torch

import aoti_debug_printer
from conftest import ROOT


def python(code: str, **env) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                          env={**os.environ, **env}, timeout=600)


def test_import_torch_installs_without_importing_inductor():
    r = python("import sys, torch, aoti_debug_printer as a; "
               "print(a.is_installed(), 'torch._inductor.codegen.wrapper' in sys.modules, "
               "'aoti_debug_printer._C' in sys.modules)")
    assert r.returncode == 0, r.stderr
    assert r.stdout.split() == ["True", "False", "False"]


def test_autoload_can_be_turned_off():
    r = python("import torch, aoti_debug_printer as a; print(a.is_installed())",
               AOTI_DEBUG_PRINTER_AUTOLOAD="0")
    assert r.stdout.split() == ["False"]


def test_install_and_uninstall_swap_the_manager():
    from torch._inductor.codegen import debug_utils, wrapper

    from aoti_debug_printer._codegen import DebugPrinterManager

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
        capture_output=True, text=True, timeout=900, cwd=tmp_path,
        env={**os.environ, "AOT_INDUCTOR_DEBUG_INTERMEDIATE_VALUE_PRINTER": "2"})
    assert r.returncode == 0, r.stderr[-3000:]
    heads = re.findall(r"^\[aoti-debug-printer\] (\w+) (\S+)", r.stdout, re.M)
    kernels = {k for phase, k in heads if phase == "before_launch"}
    assert {k for phase, k in heads if phase == "after_launch"} == kernels
    assert "aoti_torch_cpu_addmm_out" in kernels
    assert any(k.startswith("cpp_fused_") for k in kernels)
    assert any(phase == "model_input" for phase, _ in heads)
    assert "max |compiled - eager| =" in r.stdout


def test_missing_hook_point_names_the_torch_version():
    from types import ModuleType

    from aoti_debug_printer import _install

    stranger = ModuleType("torch._inductor.codegen.debug_utils")  # no DebugPrinterManager
    with pytest.raises(_install.HookPointMissing, match=re.escape(torch.__version__)):
        _install._patch(stranger)
