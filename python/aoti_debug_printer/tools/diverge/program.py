"""The program diverge judges and the inputs it runs on: an exported program
loaded from itself or a file (its custom ops and pytree types imported
first), inputs from a torch.save file or the API, checked against what the
program takes and moved to the device its inputs live on, and the inputs a
dump's own run had."""

from __future__ import annotations

import importlib
import logging
import re
import sys
import warnings
import zipfile
from pathlib import Path
from typing import Any

from ...records import Phase, dtype_name
from ..dumps import Dump, first_line

log = logging.getLogger(__name__)


class ProgramError(ValueError):
    """The program or inputs given to diverge cannot be used; the message
    says what to give instead."""


def load_program(program):
    """An ExportedProgram from itself or a torch.export.save file; a
    ProgramError for anything else."""
    import torch

    if not isinstance(program, (str, Path)):
        return program
    path = Path(program)
    if path.is_dir():
        raise ProgramError(
            f"{path} is a directory: give the exported program's file "
            "(torch.export.save), and a dump with --dump"
        )
    if not path.is_file():
        raise ProgramError(f"no such file: {path}")
    if not zipfile.is_zipfile(path):
        raise ProgramError(f"{path} is not an exported program (torch.export.save writes one)")
    with zipfile.ZipFile(path) as z:
        if any("/data/aotinductor/" in n for n in z.namelist()):
            raise ProgramError(
                f"{path} is an AOTInductor package (compiled code, no graph to run eagerly); "
                "give the exported program it was compiled from: "
                "torch.export.save(torch.export.export(model, inputs), 'program.pt2')"
            )
    # A program whose inputs or outputs are a library's pytree types (a
    # transformers ModelOutput) loads only where that library registered
    # them: import the modules the program names first.
    missing = _import_pytree_modules(path)
    # torch logs its reason (and a traceback) before it raises something
    # vaguer; the reason goes into our one line, the traceback nowhere. A
    # program that loads keeps torch's warnings.
    reasons = _Collect()
    export_log = logging.getLogger("torch.export")
    saved = export_log.handlers, export_log.propagate, export_log.level
    export_log.handlers, export_log.propagate = [reasons], False
    export_log.setLevel(logging.WARNING)
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            program = torch.export.load(str(path))
    except Exception as e:  # noqa: BLE001 - any failure means: not a program we can load
        # torch's own reason: the one it logged where it raised something
        # vaguer ("check the warnings above", which we kept off the screen).
        why = reasons.first_error() or f"{type(e).__name__}: {first_line(e)}"
        ops = sorted(
            {f"{ns}::{name}" for ns, name in _CUSTOM_OP.findall(why) if ns not in ("aten", "prims")}
        )
        hint = (
            f"; --import the module that registers {', '.join(missing)}"
            if missing
            else f"; --import the module that registers {', '.join(ops)}"
            if ops
            else "; if it calls custom ops, --import the module that registers them"
        )
        raise ProgramError(
            f"{path} could not be loaded as an exported program ({why}){hint}"
        ) from None
    finally:
        export_log.handlers, export_log.propagate = saved[0], saved[1]
        export_log.setLevel(saved[2])
    for w in caught:
        # Under the module that warned: users' filters (and pytest's) name
        # torch's modules, and a warning re-raised without one is nobody's.
        warnings.warn_explicit(
            w.message, w.category, w.filename, w.lineno, module=_module_of(w.filename)
        )
    return program


def _module_of(filename: str) -> str | None:
    """The name of the loaded module whose file is `filename`."""
    for name, module in list(sys.modules.items()):
        if getattr(module, "__file__", None) == filename:
            return name
    return None


_CUSTOM_OP = re.compile(r"torch\.ops\.(\w+)\.(\w+)")


class _Collect(logging.Handler):
    def __init__(self) -> None:
        super().__init__(logging.WARNING)
        self.records: list[logging.LogRecord] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.records.append(record)

    def first_error(self) -> str:
        """The exception torch logged: its record's, or the last line of a
        message that holds a formatted traceback."""
        for r in self.records:
            if r.exc_info and r.exc_info[1] is not None:
                return f"{type(r.exc_info[1]).__name__}: {first_line(r.exc_info[1])}"
            lines = [line.strip() for line in r.getMessage().splitlines() if line.strip()]
            if lines:
                return lines[-1]
        return ""


# A serialized treespec names each node type: "type": "package.module.Class"
# (inside a JSON string, so its quotes may be escaped).
_PYTREE_TYPE = re.compile(r'\\?"type\\?"\s*:\s*\\?"([A-Za-z_]\w*(?:\.[A-Za-z_]\w*)+)\\?"')


def _import_pytree_modules(path: Path) -> list[str]:
    """Imports the module of every pytree type the program's specs name that
    this process has not registered; returns those that stay unregistered."""
    from torch.utils import _pytree as pytree

    names: set[str] = set()
    with zipfile.ZipFile(path) as z:
        for member in z.namelist():
            if member.endswith(".json") and z.getinfo(member).file_size < 64 << 20:
                names.update(_PYTREE_TYPE.findall(z.read(member).decode("utf-8", "replace")))
    registered = pytree.SERIALIZED_TYPE_TO_PYTHON_TYPE
    for name in sorted(names - set(registered)):
        module = name.rsplit(".", 1)[0]
        while module:
            try:
                importlib.import_module(module)
                break
            except ImportError:
                module = module.rpartition(".")[0]
            except Exception:  # noqa: BLE001 - their module failed to import: said below
                break
    return sorted(
        n
        for n in names
        if n not in registered
        and "." in n
        and not n.startswith(("torch.", "builtins.", "collections."))
    )


def load_inputs(path) -> tuple[tuple, dict]:
    """A torch.save'd tuple (or list) of positional inputs, or an
    (args, kwargs) pair."""
    import torch

    path = Path(path)
    if not path.is_file():
        raise ProgramError(f"no such inputs file: {path}")
    try:
        # Where they were saved from, where that device is here.
        where = None if torch.cuda.is_available() else "cpu"
        value = torch.load(path, weights_only=True, map_location=where)
    except Exception as e:  # noqa: BLE001
        raise ProgramError(f"{path} is not a torch.save'd inputs file: {first_line(e)}") from None
    return split_inputs(value, str(path))


def split_inputs(value, what: str) -> tuple[tuple, dict]:
    if (
        isinstance(value, (tuple, list))
        and len(value) == 2
        and isinstance(value[0], (tuple, list))
        and isinstance(value[1], dict)
    ):
        return tuple(value[0]), dict(value[1])
    if isinstance(value, (tuple, list)):
        return tuple(value), {}
    raise ProgramError(
        f"{what}: inputs must be a tuple of positional inputs or an "
        f"(args, kwargs) pair, not {type(value).__name__}"
    )


def program_and_inputs(program, inputs, imports) -> tuple[Any, tuple, dict]:
    """The program (loaded, after `imports`) and the inputs to run it on:
    the given ones, checked against what the program takes and moved to
    the device its example inputs live on, else its example inputs."""
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
        return program, tuple(args), dict(kwargs or {})
    args, kwargs = split_inputs(inputs, "inputs")
    args, kwargs = fit_inputs(program, args, kwargs)
    return program, args, kwargs


def fit_inputs(program, args: tuple, kwargs: dict) -> tuple[tuple, dict]:
    """The given inputs, checked against the program's user inputs (count,
    dtype, rank: a ProgramError naming the argument), each tensor moved to
    the device of the program's own input there, with one note."""
    import torch
    from torch.utils import _pytree as pytree

    names = list(program.graph_signature.user_inputs)
    placeholders = {n.name: n for n in program.graph.nodes if n.op == "placeholder"}
    expected = [placeholders[n].meta.get("val") for n in names if n in placeholders]
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    if len(flat) != len(expected):
        raise ProgramError(
            f"inputs: {len(flat)} given, the program takes {len(expected)} " f"({', '.join(names)})"
        )
    moved: set[tuple[str, str]] = set()
    for i, (given, want) in enumerate(zip(flat, expected)):
        name = names[i]
        if not isinstance(want, torch.Tensor):
            continue
        if not isinstance(given, torch.Tensor):
            raise ProgramError(
                f"inputs: {name} (input {i}) is a {type(given).__name__}, the program takes "
                f"a {dtype_name(want.dtype)} tensor of rank {want.dim()}"
            )
        if given.dtype != want.dtype or given.dim() != want.dim():
            raise ProgramError(
                f"inputs: {name} (input {i}) is {dtype_name(given.dtype)} of rank "
                f"{given.dim()}, the program takes {dtype_name(want.dtype)} of rank {want.dim()}"
            )
        if given.device != want.device:
            moved.add((str(given.device), str(want.device)))
            flat[i] = given.to(want.device)
    for source, target in sorted(moved):
        log.info(
            "diverge: inputs moved from %s to %s, where the program's inputs and weights live",
            source,
            target,
        )
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return tuple(args), dict(kwargs)


def inputs_of_the_run(dump: Dump, args: tuple, kwargs: dict, given: bool) -> tuple[tuple, dict]:
    """The inputs diverge evaluates eagerly, where the dump saved its first
    run's model inputs (level 1): those, in place of the program's example
    inputs; inputs the user gave must be them. Judging a run by other
    inputs than its own would name kernels that did nothing wrong."""
    import torch
    from torch.utils import _pytree as pytree

    first = [r for r in dump.records if r.run == 0 and r.phase is Phase.MODEL_INPUT]
    saved = [r for r in first if r.rank == first[0].rank] if first else []
    flat, spec = pytree.tree_flatten((tuple(args), dict(kwargs or {})))
    tensors = [i for i, x in enumerate(flat) if isinstance(x, torch.Tensor)]
    if not saved or any(r.path is None for r in saved) or len(saved) != len(tensors):
        return args, kwargs  # not saved, or not one per tensor input: as given
    for k, (i, r) in enumerate(zip(tensors, saved)):
        value = r.load()
        if value.dtype != flat[i].dtype:
            return args, kwargs  # not the program's inputs in order: as given
        value = value.to(flat[i].device)
        if given and (
            value.shape != flat[i].shape
            or not torch.equal(value.nan_to_num(), flat[i].nan_to_num())
        ):
            raise ProgramError(
                f"the inputs given differ from those the dump's run had (tensor input {k}, "
                f"{r.arg}): leave --inputs out to judge the run on its own inputs"
            )
        flat[i] = value
    args, kwargs = pytree.tree_unflatten(flat, spec)
    return tuple(args), kwargs
