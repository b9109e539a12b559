"""The first kernel where an AOT-compiled model differs from eager execution
of the same exported program.

The compiled side is a level-1 dump: each kernel's outputs after launch,
each tagged by the codegen with the exported program's node it holds
(`"node"`, see _codegen._provenance). The eager side runs the exported
program node by node with an FX interpreter and keeps every node's value.
Snapshots are compared in launch order; the first beyond tolerance is the
first divergence."""

from __future__ import annotations

import logging
import tempfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._compare import element_errors, tolerance
from ._dumps import Record, load_dump

log = logging.getLogger(__name__)


@dataclass
class Match:
    record: Record
    node: str
    max_abs: float
    max_rel: float
    mismatches: int

    @property
    def diverged(self) -> bool:
        return self.mismatches > 0


@dataclass
class Divergence:
    matches: list[Match]
    # Snapshots with no eager value to hold against: no node (inputs, views,
    # buffers Inductor made up), or a node whose value has another shape.
    unmatched: list[tuple[Record, str]] = field(default_factory=list)

    @property
    def first(self) -> Match | None:
        return next((m for m in self.matches if m.diverged), None)


def eager_values(program, inputs: tuple, float64: bool = False) -> dict[str, Any]:
    """Every node's value from running `program` (an ExportedProgram) node by
    node on `inputs`; with float64, parameters and floating inputs in double."""
    import torch
    import torch.fx
    from torch.utils import _pytree as pytree

    module = program.module()
    leaves = pytree.tree_leaves(inputs)
    if float64:
        module = module.to(torch.float64)
        leaves = [t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                  for t in leaves]
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            values[n.name] = result
            return result

    with torch.no_grad():
        Recorder(module).run(*leaves)
    return values


def match_dump(dump_source, values: dict[str, Any], rtol: float | None = None,
               atol: float | None = None) -> Divergence:
    import torch

    dump = load_dump(dump_source)
    result = Divergence([])
    first_run = [r for r in dump.records if r.run == 0 and r.raw["phase"] == "after_launch"]
    seen = set()
    for r in first_run:
        node = r.raw.get("node") or ""
        if (node, r.raw["arg"]) in seen:
            continue
        seen.add((node, r.raw["arg"]))
        eager = values.get(node) if node else None
        if not isinstance(eager, torch.Tensor):
            result.unmatched.append((r, "no node" if not node else f"node {node} has no tensor value"))
            continue
        if r.path is None:
            result.unmatched.append((r, "no saved file (compile at level 1)"))
            continue
        compiled = r.load()
        if list(compiled.shape) != list(eager.shape):
            result.unmatched.append((r, f"node {node} is {list(eager.shape)}, the buffer "
                                        f"{list(compiled.shape)} (a view or a fused buffer)"))
            continue
        rt, at = tolerance(r.raw.get("dtype", ""), rtol, atol)
        result.matches.append(Match(r, node, *element_errors(compiled, eager, rt, at)))
    return result


def first_divergence_from_eager(program, inputs: tuple | None = None, dump=None,
                                float64: bool = False, rtol: float | None = None,
                                atol: float | None = None) -> Divergence:
    """Compiles `program` (an ExportedProgram or a torch.export.save file)
    with AOTInductor at level 1, runs it once on `inputs` (default: the
    program's example inputs), and matches its kernels' outputs against
    eager. With `dump`, uses that level-1 dump of one run instead of
    compiling."""
    import torch

    import aoti_debug_printer

    if isinstance(program, (str, Path)):
        program = torch.export.load(str(program))
    if inputs is None:
        args, kwargs = program.example_inputs or ((), {})
        if kwargs:
            raise ValueError("the program's example inputs have keyword arguments; pass inputs")
        inputs = args
    if dump is None:
        with tempfile.TemporaryDirectory(prefix="aoti-debug-diverge-") as tmp:
            aoti_debug_printer.install()
            patch = {"aot_inductor.debug_intermediate_value_printer": "1",
                     "aot_inductor.filtered_kernel_names": None}
            with torch._inductor.config.patch(patch):
                package = torch._inductor.aoti_compile_and_package(
                    program, package_path=str(Path(tmp) / "model.pt2"))
            previous = {k: aoti_debug_printer.get_option(k) for k in ("dump_dir", "level", "trap")}
            aoti_debug_printer.set_option("dump_dir", Path(tmp) / "dump")
            aoti_debug_printer.set_option("level", -1)
            aoti_debug_printer.set_option("trap", 0)
            try:
                torch._inductor.aoti_load_package(package)(*inputs)
            finally:
                for k, v in previous.items():
                    aoti_debug_printer.set_option(k, v)
            return match_dump(Path(tmp) / "dump", eager_values(program, inputs, float64), rtol, atol)
    return match_dump(dump, eager_values(program, inputs, float64), rtol, atol)


def format_divergence(d: Divergence) -> str:
    lines = [f"matched {len(d.matches)} kernel outputs against eager; "
             f"{len(d.unmatched)} snapshots had no eager value to compare"]
    first = d.first
    if first is None:
        lines.append("no divergence from eager beyond tolerance")
    else:
        r = first.record.raw
        lines.append(f"FIRST DIVERGENCE FROM EAGER: kernel {r['kernel']} (launch {r['launch']}), "
                     f"output {r['arg']} = node {first.node}")
        lines.append(f"  max abs err {first.max_abs:.6g}, max rel err {first.max_rel:.6g}, "
                     f"{first.mismatches} of {max(1, _numel(r))} elements beyond tolerance")
    for m in d.matches:
        mark = "DIVERGES" if m.diverged else "ok"
        lines.append(f"  {m.record.raw['launch']:>5} {m.record.raw['kernel']:<48} "
                     f"{m.record.raw['arg']:<10} {m.node:<20} {m.max_abs:>11.4g} {mark}")
    for r, why in d.unmatched:
        lines.append(f"  not compared: {r.label}: {why}")
    return "\n".join(lines) + "\n"


def _numel(raw: dict) -> int:
    n = 1
    for s in raw.get("shape", []):
        n *= s
    return n
