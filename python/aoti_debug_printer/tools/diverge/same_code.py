"""A bisection's compiles that make the code an earlier one made.

Most of a bisection's steps turn off a decision that changes nothing in the
program at hand, and Inductor then generates the code it generated before,
to the byte. Such a compile is stopped where Inductor hands its code to the
C++ compiler (AotCodeCompiler.compile), before g++, and the earlier
compile's run and verdict stand for it: the same code on the same inputs
writes the same values."""

from __future__ import annotations

import contextlib
import hashlib
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path


class SameCode(Exception):
    """Raised in a compile whose code an earlier compile made."""

    def __init__(self, digest: str) -> None:
        super().__init__(f"the code of an earlier compile ({digest[:12]})")
        self.digest = digest


@dataclass
class Compiled:
    """The digest of a compile's code, once it reached the C++ compiler
    (None where it did not, or its constants could not be read)."""

    digest: str | None = None


def made_before(e: BaseException | None) -> str | None:
    """The digest of the earlier compile behind `e`, however Inductor
    wrapped the SameCode; None where `e` is another failure."""
    seen: set[int] = set()
    while e is not None and id(e) not in seen:
        if isinstance(e, SameCode):
            return e.digest
        seen.add(id(e))
        e = getattr(e, "inner_exception", None) or e.__cause__ or e.__context__
    return None


def digest_of(arguments: Mapping[str, object]) -> str | None:
    """What decides a package's behaviour on given inputs, as Inductor hands
    it to the C++ compiler: the wrapper's and kernels' code, the proxy
    executor's nodes, the extra files (a GPU's compiled kernels), and the
    constants to the byte (a decision that changes a folded constant's
    value and no code is another compile). None where a constant cannot be
    read, or Inductor names its arguments otherwise: that compile is never
    taken for another. `arguments`: AotCodeCompiler.compile's, by name."""
    import torch

    if any(arguments.get(name) is None for name in ("graph", "wrapper_code", "kernel_code")):
        return None
    h = hashlib.sha256()
    for name in ("wrapper_code", "kernel_code", "serialized_extern_kernel_nodes", "device_type"):
        h.update(str(arguments.get(name)).encode())
        h.update(b"\0")
    try:
        for path in arguments.get("additional_files") or ():
            if isinstance(path, (str, Path)):
                h.update(Path(path).read_bytes())
        for name, value in sorted(getattr(arguments["graph"], "constants", {}).items()):
            h.update(f"{name} {value.dtype} {tuple(value.shape)} {value.stride()}".encode())
            if value.numel():
                data = value.detach().to("cpu").contiguous().reshape(-1).view(torch.uint8)
                h.update(data.numpy().data)
    except (OSError, RuntimeError, TypeError):
        return None
    return h.hexdigest()


@contextlib.contextmanager
def seen_before(made: Mapping[str, object]):
    """Within it, an AOTInductor compile whose code's digest is a key of
    `made` raises SameCode before the C++ compiler runs; another compile's
    digest is in the Compiled it yields."""
    import inspect
    from unittest import mock

    from torch._inductor.codecache import AotCodeCompiler

    compile_code = AotCodeCompiler.compile.__func__
    signature = inspect.signature(compile_code)
    compiled = Compiled()

    def compile(cls, *args, **kwargs):
        try:
            arguments = signature.bind(cls, *args, **kwargs).arguments
        except TypeError:
            arguments = {}
        digest = digest_of(arguments)
        if digest is not None and digest in made:
            raise SameCode(digest)
        compiled.digest = digest
        return compile_code(cls, *args, **kwargs)

    with mock.patch.object(AotCodeCompiler, "compile", classmethod(compile)):
        yield compiled
