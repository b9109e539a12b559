"""`aoti-debug repro`: from a finding to one kernel, alone, on its real inputs.

A finding (the trap, the write guard, a CUDA error, `diverge`, or a kernel
the user names) points at one launch of one kernel in a level-1 dump. This
module writes a directory that runs that launch again without the model,
the dump or this package:

    repro.py       builds and launches the kernel, checks what the finding
                   says should hold, exits 1 while the bug is there
    kernel.cpp     the kernel's source as Inductor generated it (or
    kernel.py      the Triton kernel; an op has none: it is called by name)
    args.pt        the kernel's arguments just before that launch, in call
                   order: tensors (outputs as their layout only), scalars
    recorded.pt    what the launch wrote in the run, where the dump holds it
    expected.pt    the value the finding expected, where one is known
    repro.json     what to check, and how the kernel is called

Where things come from: the arguments and the findings from the dump, the
source and each call's argument list (literals included, written by the
codegen as `// aoti-debug-printer call {...}` before the call, see
inductor/codegen) from the AOTInductor package's generated C++.
"""

from __future__ import annotations

import json
import re
import shutil
import time
import zipfile
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ...records import (
    CALL_COMMENT,
    CudaErrorRecord,
    GuardKind,
    GuardRecord,
    Phase,
    Role,
    ScalarRecord,
    TensorRecord,
    TrapRecord,
    WatchedArg,
)
from ..dumps import Dump, Record, load_dump

# The checks repro.py knows, by code (its text says them in words).
FINITE = "finite"  # written arguments gain no NaN/Inf
UNCHANGED = "unchanged"  # arguments the kernel only reads stay as they were
CLOSE = "close"  # a written argument is within a bar of the expected value
NO_ERROR = "no_error"  # the launch raises no error (a CUDA fault)
IN_BOUNDS = "in_bounds"  # nothing outside the tensor arguments changes

_INTEGER = re.compile(r"-?[0-9]+(?:[uU]?[lL]{0,2})\Z")
_FLOAT = re.compile(r"-?(?:[0-9]+\.[0-9]*|\.[0-9]+|[0-9]+)(?:[eE][-+]?[0-9]+)?[fF]?\Z")


class ReproError(ValueError):
    """What stops a repro from being written, in one line."""


@dataclass(kw_only=True)
class Finding:
    """One launch of one kernel, and what should have held there."""

    kernel: str
    launch: int
    call: int
    what: str  # one line for people
    checks: list[str]
    arg: str = ""  # the argument concerned, where the finding names one
    # The raw record's run identity, to find the launch's records.
    run_id: tuple = ()
    expected: Any = None  # CLOSE: the value `arg` should hold (float64)
    bar: dict[str, float] = field(default_factory=dict)  # CLOSE: rms, max, bad


@dataclass
class Repro:
    directory: Path
    kernel: str
    kind: str
    bytes: int
    seconds: float


def _at(finding) -> str:
    """Where the user's code made the finding's node, to end its line."""
    return f", at {finding.source[0]}" if finding.source else ""


def finding_in(
    dump: Dump, kernel: str | None = None, launch: int | None = None, call: int | None = None
) -> Finding:
    """The finding to reproduce: the launch named (by launch index, or a
    kernel and its call index, 0 by default), else the dump's first trap,
    guard or CUDA error record."""
    if kernel is not None or launch is not None:
        # A launch index names one call; a kernel alone means its first.
        want_call = call if call is not None else (0 if launch is None else None)
        for r in dump.records:
            if r.phase is Phase.MODEL_INPUT or r.run != 0:
                continue
            if (
                (launch is None or r.launch == launch)
                and (kernel is None or r.kernel == kernel)
                and (want_call is None or r.call == want_call)
            ):
                what = f"kernel {r.kernel} (launch {r.launch}), as the user named it"
                return Finding(
                    kernel=r.kernel,
                    launch=r.launch,
                    call=r.call,
                    what=what,
                    checks=[FINITE, UNCHANGED, IN_BOUNDS],
                    run_id=r.tensor.run_id,
                )
        named = " ".join(
            x
            for x in (
                kernel and f"kernel {kernel}",
                launch is not None and f"launch {launch}",
                call is not None and f"call {call}",
            )
            if x
        )
        raise ReproError(f"{dump.source}: no record of {named} in its first run")
    for ev in dump.findings():
        where = {"kernel": ev.kernel, "launch": ev.launch, "call": ev.call, "run_id": ev.run_id}
        if isinstance(ev, TrapRecord):
            if not ev.kernel:
                raise ReproError(
                    f"{dump.source}: the trap found NaN/Inf in model input "
                    f"{ev.arg}: no kernel made it, there is none to repro"
                )
            return Finding(
                **where, what=ev.message + _at(ev), checks=[FINITE, IN_BOUNDS], arg=ev.arg
            )
        if isinstance(ev, GuardRecord):
            what = "write guard: " + ev.message + _at(ev)
            if ev.kind is GuardKind.READ_ONLY_ARGUMENT_CHANGED:
                return Finding(**where, what=what, checks=[UNCHANGED, IN_BOUNDS], arg=ev.arg)
            # Overwritten between its writer and its reader: the kernel that
            # did it, where the guard saw it (AOTI_DEBUG_PRINTER_GUARD=2).
            culprit = re.fullmatch(r"(.+) \(launch ([0-9]+)\)", ev.culprit)
            if culprit is None:
                raise ReproError(
                    f"{dump.source}: the guard found {ev.arg} overwritten before its reader "
                    "read it, and did not see which kernel did it: run again with "
                    "AOTI_DEBUG_PRINTER_GUARD=2, whose record names it"
                )
            kernel, launch = culprit.group(1), int(culprit.group(2))
            calls = [
                r.call
                for r in dump.records
                if r.launch == launch and r.kernel == kernel and r.tensor.run_id == ev.run_id
            ]
            if not calls:
                raise ReproError(
                    f"{dump.source}: no record of {kernel} (launch {launch}), which "
                    "the guard names: was its run saved at level 1?"
                )
            return Finding(
                kernel=kernel,
                launch=launch,
                call=calls[0],
                what=what,
                checks=[IN_BOUNDS, UNCHANGED],
                run_id=ev.run_id,
            )
        return Finding(
            **where,
            what=f"CUDA error after kernel {ev.kernel}: {ev.error}",
            checks=[NO_ERROR, FINITE, UNCHANGED, IN_BOUNDS],
        )
    raise ReproError(
        f"{dump.source} holds no trap, guard or CUDA error record: name the launch "
        "(--kernel, --launch)"
    )


# -- the package ---------------------------------------------------------------


@dataclass
class _Package:
    path: Path
    sources: list[str]  # the generated C++ files' text, wrapper first

    def calls_of(self, kernel: str) -> list[dict]:
        """The call comments of `kernel`, in the order its calls run."""
        out = []
        for text in self.sources:
            for line in text.splitlines():
                at = line.find(CALL_COMMENT)
                if at < 0:
                    continue
                try:
                    call = json.loads(line[at + len(CALL_COMMENT) :])
                except ValueError:
                    continue
                if isinstance(call, dict) and call.get("kernel") == kernel:
                    out.append(call)
        return out

    def cpp_kernel(self, kernel: str) -> tuple[str, list[str]] | None:
        """A C++ kernel's definition and its parameters' types."""
        head = re.compile(r'extern "C"\s+void\s+' + re.escape(kernel) + r"\s*\(([^)]*)\)\s*\{")
        for text in self.sources:
            m = head.search(text)
            if m is None:
                continue
            end = _matching_brace(text, m.end() - 1)
            params = [p.strip() for p in m.group(1).split(",") if p.strip()]
            # A parameter is "TYPE NAME": the type is all but its last word.
            types = [re.sub(r"\s*\b[A-Za-z_][A-Za-z0-9_]*\Z", "", p) for p in params]
            return text[m.start() : end + 1], types
        return None

    def triton_kernel(self, kernel: str) -> tuple[str, str] | None:
        """A Triton kernel's source and the name it defines, from the comment
        AOTInductor keeps of it in the C++ function that launches it,
        `call_KERNEL` (a user kernel's source defines its own name, without
        Inductor's `_N` suffix)."""
        import ast
        import textwrap

        launcher = re.compile(r"void\s+call_" + re.escape(kernel) + r"\s*\(")
        body = re.compile(
            r"async_compile\.triton\(\s*['\"]([A-Za-z_][A-Za-z0-9_]*)['\"]\s*,\s*'''(.*?)'''",
            re.S,
        )
        for text in self.sources:
            at = launcher.search(text)
            m = body.search(text, at.end()) if at else None
            if m is None:
                continue
            # The comment holds a Python string literal: read it as one.
            source = ast.literal_eval("'''" + textwrap.dedent(m.group(2)) + "'''")
            return source.strip("\n") + "\n", m.group(1)
        return None


def _matching_brace(text: str, at: int) -> int:
    depth = 0
    for i in range(at, len(text)):
        if text[i] == "{":
            depth += 1
        elif text[i] == "}":
            depth -= 1
            if depth == 0:
                return i
    raise ReproError("a kernel's definition in the package ends without its closing brace")


def read_package(path: str | Path) -> _Package:
    path = Path(path)
    if not path.is_file():
        raise FileNotFoundError(f"no such package: {path}")
    if not zipfile.is_zipfile(path):
        raise ReproError(
            f"{path} is not an AOTInductor package (.pt2 from aoti_compile_and_package)"
        )
    sources = []
    with zipfile.ZipFile(path) as z:
        names = sorted(
            (n for n in z.namelist() if n.endswith(".cpp") and "/aotinductor/" in n),
            key=lambda n: not n.endswith("wrapper.cpp"),
        )
        for name in names:
            sources.append(z.read(name).decode("utf-8", "replace"))
    if not sources:
        raise ReproError(f"{path} holds no generated C++ (is it an AOTInductor package?)")
    if not any(CALL_COMMENT in s for s in sources):
        raise ReproError(
            f"{path} was not compiled by aoti-debug-printer at level 1, 2 or 3: its "
            "calls are not described; compile it again at level 1"
        )
    return _Package(path, sources)


# -- the arguments -------------------------------------------------------------


def _records_of_launch(
    dump: Dump, finding: Finding
) -> tuple[list[Record], list[Record], list[ScalarRecord]]:
    """The launch's before- and after-launch tensor records, and its scalars."""

    def here(record) -> bool:
        return (
            record.run_id == finding.run_id
            and record.kernel == finding.kernel
            and record.launch == finding.launch
        )

    before = [r for r in dump.records if r.phase is Phase.BEFORE_LAUNCH and here(r.tensor)]
    after = [r for r in dump.records if r.phase is Phase.AFTER_LAUNCH and here(r.tensor)]
    scalars = [e for e in dump.events if isinstance(e, ScalarRecord) and here(e)]
    return before, after, scalars


def _first_by_arg(records: list[Record]) -> dict[str, Record]:
    out: dict[str, Record] = {}
    for r in records:
        out.setdefault(r.arg, r)
    return out


def _cuda_error_args(dump: Dump, finding: Finding) -> dict[str, WatchedArg]:
    """A CUDA error record's arguments (layout, file), for a level-3 dump."""
    for ev in dump.events:
        if (
            isinstance(ev, CudaErrorRecord)
            and ev.kernel == finding.kernel
            and ev.launch == finding.launch
        ):
            return {a.arg: a for a in ev.args}
    return {}


def _tensor_argument(r: Record | None, layout: WatchedArg | TensorRecord | None, name: str):
    """A tensor as it was before launch: its values where saved (`r`, else
    the CUDA error's replay copy in `layout`), else its layout (an output not
    yet written: its memory held leftovers)."""
    import torch

    meta = r.tensor if r is not None else layout
    dtype = getattr(torch, meta.dtype, None)
    # A copy saved from the host (the CUDA error check's replay) says where
    # it was saved from; the error's own record says where the kernel had it.
    device = (layout.device if layout is not None else "") or meta.device or "cpu"
    if not isinstance(dtype, torch.dtype):
        raise ReproError(f"argument {name} has dtype {meta.dtype!r}, which this torch lacks")
    shape = [int(s) for s in meta.shape]
    stride = [int(s) for s in getattr(meta, "stride", None) or _contiguous(shape)]
    path = r.path if r is not None else None
    if path is None and isinstance(layout, WatchedArg) and layout.file:
        path = Path(layout.file)
    if path is None:
        return {"layout": {"shape": shape, "stride": stride, "dtype": dtype, "device": device}}
    value = r.load() if r is not None and r.path is not None else _load_tensor(path)
    strided = torch.empty_strided(shape, stride, dtype=dtype)
    strided.copy_(value.reshape(shape))
    return {"tensor": strided, "device": device}


def _load_tensor(path: Path):
    import torch

    try:
        return torch.load(path, weights_only=True, map_location="cpu")
    except Exception as e:  # noqa: BLE001 - name the file
        raise ReproError(f"{path}: cannot read the saved argument ({e})") from None


def _contiguous(shape: list[int]) -> list[int]:
    stride, step = [], 1
    for s in reversed(shape):
        stride.append(step)
        step *= max(s, 1)
    return stride[::-1]


def _literal(text: str):
    if text in ("nullptr", "None"):
        return None
    if text in ("true", "True"):
        return True
    if text in ("false", "False"):
        return False
    if _INTEGER.match(text):
        return int(text.rstrip("uUlL"))
    if _FLOAT.match(text):
        return float(text.rstrip("fF"))
    raise KeyError(text)


def _scalar_value(event: ScalarRecord):
    text, kind = event.value, event.type
    if kind == "bool":
        return text in ("true", "1", "True")
    return int(text) if kind.startswith(("int", "uint")) else float(text)


# -- writing -------------------------------------------------------------------


def write_repro(
    dump_source,
    package_path,
    out_dir,
    finding: Finding | None = None,
    kernel: str | None = None,
    launch: int | None = None,
    call: int | None = None,
    imports: tuple[str, ...] = (),
) -> Repro:
    """Writes the repro directory of `finding` (else the one `finding_in`
    picks) into `out_dir`, which must not exist or be empty."""
    import torch

    started = time.perf_counter()
    package = read_package(package_path)
    out = Path(out_dir)
    if out.exists() and (not out.is_dir() or any(out.iterdir())):
        raise ReproError(f"{out} exists and is not an empty directory; give a new one")
    dump = dump_source if isinstance(dump_source, Dump) else load_dump(dump_source)
    finding = finding or finding_in(dump, kernel, launch, call)

    calls = package.calls_of(finding.kernel)
    if not calls:
        raise ReproError(
            f"{package.path} describes no call of {finding.kernel}: an ATen call "
            "through the C shim, which repro does not rebuild (its owner is ATen: "
            "call the op with the arguments the dump saved)"
        )
    if finding.call >= len(calls):
        raise ReproError(
            f"{package.path} describes {len(calls)} call(s) of {finding.kernel}, and the "
            f"finding is its call {finding.call}: was the dump made by this package?"
        )
    call_spec = calls[finding.call]
    before, after, scalars = _records_of_launch(dump, finding)
    saved_before, saved_after = _first_by_arg(before), _first_by_arg(after)
    watched = _cuda_error_args(dump, finding)
    scalar_of = {e.arg: e for e in scalars}

    def tensor_or_value(name: str, position: str):
        if name in saved_before or name in watched:
            return _tensor_argument(saved_before.get(name), watched.get(name), name)
        if name in saved_after and saved_after[name].role is Role.WRITE:
            return _tensor_argument(None, saved_after[name].tensor, name)
        if name in scalar_of:
            return {"value": _scalar_value(scalar_of[name])}
        try:
            return {"value": _literal(name)}
        except KeyError:
            raise ReproError(
                f"{position} of {finding.kernel} is {name!r}: no record of the dump "
                "holds it and it is not a literal (was the dump saved at level 1, "
                "or with AOTI_DEBUG_PRINTER_REPLAY=1?)"
            ) from None

    files: dict[str, str] = {}
    spec: dict[str, Any] = {
        "kernel": finding.kernel,
        "finding": finding.what,
        "checks": finding.checks,
        "arg": finding.arg,
        "imports": list(imports),
        # Where each was found when the repro was written: its one line
        # names the directory to put on the path where it is missing.
        "import_paths": {m: _import_path(m) for m in imports},
    }
    if "op" in call_spec:
        spec["kind"] = "op"
        spec["op"] = call_spec["op"]

        def decode(v, where):
            if isinstance(v, list):
                return [decode(x, where) for x in v]
            if isinstance(v, dict):
                if "buffer" in v:
                    return tensor_or_value(v["buffer"], where)
                if "dtype" in v:
                    return {"value": getattr(torch, v["dtype"])}
                raise ReproError(
                    f"{where} of {finding.kernel} is {v}: not rebuilt alone (a view "
                    "or an expression)"
                )
            return {"value": v}

        args = [decode(v, f"argument {i}") for i, v in enumerate(call_spec.get("args", []))]
        spec["outputs"] = list(call_spec.get("outputs", []))
        names = _buffer_names(call_spec.get("args", []))
    else:
        names = list(call_spec.get("args", []))
        args = [tensor_or_value(name, f"argument {i} ({name})") for i, name in enumerate(names)]
        cpp = package.cpp_kernel(finding.kernel)
        if cpp is not None:
            source, types = cpp
            if len(types) != len(args):
                raise ReproError(
                    f"{finding.kernel} takes {len(types)} parameters and its call "
                    f"passes {len(args)}"
                )
            spec.update(kind="cpp", argtypes=types, source="kernel.cpp")
            files["kernel.cpp"] = "#include <torch/csrc/inductor/cpp_prefix.h>\n" + source + "\n"
        else:
            triton = package.triton_kernel(finding.kernel)
            if triton is None:
                raise ReproError(
                    f"{package.path} holds no source of {finding.kernel} (neither a C++ "
                    "kernel nor a Triton kernel)"
                )
            spec.update(kind="triton", source="kernel.py", function=triton[1])
            files["kernel.py"] = triton[0]
    spec["names"] = names
    # The after-launch role wins: before launch, an argument changed in place
    # is recorded as one the kernel reads.
    spec["roles"] = {n: r.role.value for n, r in {**saved_before, **saved_after}.items()}

    recorded = {name: r.load() for name, r in saved_after.items() if r.path is not None}
    if finding.expected is not None:
        spec["bar"] = finding.bar

    out.mkdir(parents=True, exist_ok=True)
    for name, text in files.items():
        (out / name).write_text(text)
    torch.save(args, out / "args.pt")
    if recorded:
        torch.save(recorded, out / "recorded.pt")
    if finding.expected is not None:
        torch.save(finding.expected.detach().to("cpu"), out / "expected.pt")
    (out / "repro.json").write_text(json.dumps(spec, indent=1) + "\n")
    template = Path(__file__).with_name("template.py")
    shutil.copyfile(template, out / "repro.py")
    size = sum(p.stat().st_size for p in out.iterdir())
    return Repro(out, finding.kernel, spec["kind"], size, time.perf_counter() - started)


def _buffer_names(values) -> list:
    out = []
    for v in values:
        if isinstance(v, list):
            out += _buffer_names(v)
        elif isinstance(v, dict) and "buffer" in v:
            out.append(v["buffer"])
    return out


def format_repro(r: Repro) -> str:
    return (
        f"wrote {r.directory}: a one-kernel repro of {r.kernel} ({r.kind}), "
        f"{r.bytes / 1024:.1f} KiB in {r.seconds:.2f} s\n"
        f"  run it: python {r.directory / 'repro.py'}   (an edited kernel: --source FILE)\n"
    )


def _import_path(module: str) -> str:
    """The directory to put on sys.path for `module` to import, as this
    process found it; "" where it is not known."""
    import sys

    found = sys.modules.get(module)
    file = getattr(found, "__file__", None)
    if not file:
        return ""
    path = Path(file).resolve().parent
    # A package's module: the directory above its top-level package.
    for _ in range(module.count(".") + (1 if Path(file).name == "__init__.py" else 0)):
        path = path.parent
    return str(path)
