"""The first kernel where an AOT-compiled model differs from eager execution
of the same exported program.

The compiled side is a level-1 dump. The codegen tags a value a kernel
wrote with the exported program's node it holds only where that is exact
(see _provenance): the kernel stored it, and it is where the node's
decomposition ends. The eager side runs the exported program node by node
with an FX interpreter and keeps every node's value. Values are compared in
launch order; the first beyond tolerance is the first divergence. What
cannot be compared is counted by reason, so the coverage is stated."""

from __future__ import annotations

import contextlib
import importlib
import logging
import tempfile
import warnings
import zipfile
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ._compare import element_errors, tolerance
from ._dumps import Record, load_dump, reason_kind

log = logging.getLogger(__name__)


class ProgramError(ValueError):
    """The program or inputs given to diverge cannot be used; the message
    says what to give instead."""


def first_line(e: BaseException) -> str:
    """An exception in one line: the first of its message, else its type."""
    text = str(e).strip()
    return text.splitlines()[0] if text else type(e).__name__


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
    # Values kernels wrote that could not be held against eager, with why.
    unmatched: list[tuple[Record, str]] = field(default_factory=list)

    @property
    def first(self) -> Match | None:
        return next((m for m in self.matches if m.diverged), None)

    def coverage(self) -> tuple[int, int, Counter]:
        """(values kernels wrote, of them compared, the rest by kind of reason)."""
        reasons = Counter(reason_kind(why) for _, why in self.unmatched)
        return len(self.matches) + len(self.unmatched), len(self.matches), reasons


def load_program(program):
    """An ExportedProgram from itself or a torch.export.save file; a
    ProgramError for anything else."""
    import torch

    if not isinstance(program, (str, Path)):
        return program
    path = Path(program)
    if not path.is_file():
        raise ProgramError(f"no such file: {path}")
    if not zipfile.is_zipfile(path):
        raise ProgramError(f"{path} is not an exported program (torch.export.save writes one)")
    with zipfile.ZipFile(path) as z:
        if any("/data/aotinductor/" in n for n in z.namelist()):
            raise ProgramError(
                f"{path} is an AOTInductor package (compiled code, no graph to run eagerly); "
                "give the exported program it was compiled from: "
                "torch.export.save(torch.export.export(model, inputs), 'program.pt2')")
    # torch logs a traceback, and may warn (torch 2.11: about a non-writable
    # buffer), before it raises; the one line below says what to do instead.
    # A program that loads keeps torch's warnings.
    export_log = logging.getLogger("torch.export")
    level = export_log.level
    export_log.setLevel(logging.CRITICAL)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program = torch.export.load(str(path))
    except Exception as e:  # noqa: BLE001 - any failure means: not a program we can load
        raise ProgramError(f"{path} could not be loaded as an exported program "
                           f"({first_line(e)}); if it calls custom ops, --import the module "
                           "that registers them") from None
    finally:
        export_log.setLevel(level)
    for w in caught:
        warnings.warn_explicit(w.message, w.category, w.filename, w.lineno)
    return program


def load_inputs(path) -> tuple[tuple, dict]:
    """A torch.save'd tuple (or list) of positional inputs, or an
    (args, kwargs) pair."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ProgramError(f"no such inputs file: {path}")
    try:
        value = torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001
        raise ProgramError(f"{path} is not a torch.save'd inputs file: {first_line(e)}") from None
    return _split_inputs(value, str(path))


def _split_inputs(value, what: str) -> tuple[tuple, dict]:
    if (isinstance(value, (tuple, list)) and len(value) == 2
            and isinstance(value[0], (tuple, list)) and isinstance(value[1], dict)):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    raise ProgramError(f"{what}: inputs must be a tuple of positional inputs or an "
                       f"(args, kwargs) pair, not {type(value).__name__}")


def eager_values(program, args: tuple, kwargs: dict | None = None,
                 float64: bool = False) -> dict[str, Any]:
    """Every node's value from running `program` (an ExportedProgram) node by
    node; with float64, parameters and floating inputs in double."""
    import torch
    import torch.fx
    from torch.utils import _pytree as pytree

    module = program.module()
    # The unlifted module takes the user's inputs flattened, in the order
    # the program's input spec gives.
    flat, _ = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    if float64:
        module = module.to(torch.float64)
        flat = [t.to(torch.float64) if isinstance(t, torch.Tensor) and t.is_floating_point() else t
                for t in flat]
    values: dict[str, Any] = {}

    class Recorder(torch.fx.Interpreter):
        def run_node(self, n):
            result = super().run_node(n)
            # A copy: a later in-place op (add_, relu_) would change the
            # tensor this node returned, and with it what it is held against.
            values[n.name] = pytree.tree_map_only(torch.Tensor, torch.clone, result)
            return result

    with torch.no_grad():
        Recorder(module).run(*flat)
    return values


def match_dump(dump_source, values: dict[str, Any], rtol: float | None = None,
               atol: float | None = None) -> Divergence:
    import torch

    dump = load_dump(dump_source)
    if not dump.has_provenance:
        raise ProgramError(f"{dump.source} does not say what its buffers hold: compile the model "
                           "with this version of aoti-debug-printer at level 1")
    result = Divergence([])
    first_run = [r for r in dump.written_values() if r.run == 0]
    if not first_run:
        raise ProgramError(f"{dump.source} holds no value a kernel wrote (is it a level-1 dump?)")
    for r in first_run:
        node = r.node
        if not node:
            result.unmatched.append((r, r.why or "holds no single node's value"))
            continue
        eager = values.get(node)
        if not isinstance(eager, torch.Tensor):
            result.unmatched.append((r, "the node has no tensor value in eager"))
            continue
        if r.path is None:
            result.unmatched.append((r, "no saved file (compile at level 1)"))
            continue
        compiled = r.load()
        if list(compiled.shape) != list(eager.shape):
            if compiled.numel() != eager.numel():
                result.unmatched.append((r, "the buffer and the node's value differ in size"))
                continue
            # The node's value, kept in a buffer of another shape (reached
            # through a reshape): the same elements in the same order.
            compiled = compiled.reshape(eager.shape)
        rt, at = tolerance(r.raw.get("dtype", ""), rtol, atol, r.raw.get("device", "cpu"))
        result.matches.append(Match(r, node, *element_errors(compiled, eager, rt, at)))
    return result


@contextlib.contextmanager
def _installed_for_the_compile():
    """Our printer installed for one compile, then left as it was found."""
    from ._install import install, is_installed, uninstall

    was = is_installed()
    install()
    try:
        yield
    finally:
        if not was:
            uninstall()


def first_divergence_from_eager(program, inputs=None, dump=None, float64: bool = False,
                                rtol: float | None = None, atol: float | None = None,
                                imports: tuple[str, ...] = ()) -> Divergence:
    """Compiles `program` (an ExportedProgram or a torch.export.save file)
    with AOTInductor at level 1, runs it once on `inputs` (a tuple, or an
    (args, kwargs) pair; default: the program's example inputs), and matches
    the values its kernels wrote against eager. With `dump`, uses that
    level-1 dump of one run on the same inputs instead of compiling.
    `imports`: modules to import first (custom ops, decompositions)."""
    import torch

    from ._options import options

    for name in imports:
        try:
            importlib.import_module(name)
        except Exception as e:  # noqa: BLE001 - the user's module: say which and why
            raise ProgramError(f"--import {name}: {type(e).__name__}: {e}") from None
    program = load_program(program)
    if inputs is None:
        if program.example_inputs is None:
            raise ProgramError("the program has no example inputs; pass inputs")
        args, kwargs = program.example_inputs
    else:
        args, kwargs = _split_inputs(inputs, "inputs")
    if dump is not None:
        return match_dump(dump, eager_values(program, args, kwargs, float64), rtol, atol)
    with tempfile.TemporaryDirectory(prefix="aoti-debug-diverge-") as tmp:
        patch = {"aot_inductor.debug_intermediate_value_printer": "1",
                 "aot_inductor.filtered_kernel_names": None}
        with _installed_for_the_compile(), torch._inductor.config.patch(patch):
            package = torch._inductor.aoti_compile_and_package(
                program, package_path=str(Path(tmp) / "model.pt2"))
        with options(dump_dir=Path(tmp) / "dump", level=-1, trap=0, kernels=""):
            torch._inductor.aoti_load_package(package)(*args, **kwargs)
        return match_dump(Path(tmp) / "dump", eager_values(program, args, kwargs, float64),
                          rtol, atol)


def format_divergence(d: Divergence) -> str:
    written, compared, reasons = d.coverage()
    lines = [f"compared {compared} of {written} values kernels wrote against eager "
             f"({100 * compared / max(1, written):.0f}%)"]
    first = d.first
    if first is None:
        lines.append("no divergence from eager beyond tolerance")
    else:
        r = first.record.raw
        lines.append(f"FIRST DIVERGENCE FROM EAGER: kernel {r['kernel']} (launch {r['launch']}), "
                     f"buffer {r['arg']} = node {first.node}")
        lines.append(f"  max abs err {first.max_abs:.6g}, max rel err {first.max_rel:.6g}, "
                     f"{first.mismatches} of {max(1, _numel(r))} elements beyond tolerance")
    for m in d.matches:
        mark = "DIVERGES" if m.diverged else "ok"
        lines.append(f"  {m.record.raw['launch']:>5} {m.record.raw['kernel']:<48} "
                     f"{m.record.raw['arg']:<10} {m.node:<20} {m.max_abs:>11.4g} {mark}")
    for why, n in reasons.most_common():
        lines.append(f"  not compared ({n}): {why}")
    return "\n".join(lines) + "\n"


def _numel(raw: dict) -> int:
    n = 1
    for s in raw.get("shape", []):
        n *= s
    return n
