"""Builds and compiles that every pytest-xdist worker of one test run
shares: test/conftest.py sets ADP_TESTS_SHARED_DIR, and each
artifact is made there once, by the first worker that asks, while the
others wait for it. Without the variable (a bench script), each is made
afresh where it is asked for."""

from __future__ import annotations

import hashlib
import os
import shutil
import tempfile
from collections.abc import Callable
from pathlib import Path

import torch
from filelock import FileLock


def shared(key: str, make: Callable[[Path], object]) -> Path:
    """The directory `make(directory)` fills, made once per test run. Nothing
    a test changes may live there: a test that alters what it gets works on
    a copy."""
    root = os.environ.get("ADP_TESTS_SHARED_DIR")
    if not root:
        directory = Path(tempfile.mkdtemp(prefix=f"adp-{key[:40]}-"))
        make(directory)
        return directory
    directory = Path(root) / key
    with FileLock(f"{directory}.lock"):
        if not (directory / ".made").exists():
            shutil.rmtree(directory, ignore_errors=True)
            directory.mkdir(parents=True)
            make(directory)
            (directory / ".made").touch()
    return directory


def compile_key(program, *more) -> str:
    """What decides the code a compile of `program` makes now: its graph,
    shapes, devices and weights, Inductor's config (its own hash, the one
    its caches use), the matmul and cuDNN numerics flags, and `more`. (The
    graph's text names no device: a model built on the CPU and on CUDA
    with the same weights differs only in its placeholders' devices, those
    of the user inputs, weights, buffers and constants.)"""
    placeholders = [n.meta.get("val") for n in program.graph.nodes if n.op == "placeholder"]
    digest = hashlib.sha256()
    for part in (
        str(program.graph),
        str(program.range_constraints),
        [str(v.device) for v in placeholders if isinstance(v, torch.Tensor)],
        torch._inductor.config.get_hash(),
        torch.get_float32_matmul_precision(),
        torch.backends.cudnn.allow_tf32,
        *more,
    ):
        digest.update(repr(part).encode() + b"\0")
    for name, value in sorted({**program.state_dict, **program.constants}.items()):
        if isinstance(value, torch.Tensor):
            value = value.detach().cpu().contiguous()
            digest.update(name.encode() + str(value.dtype).encode() + str(value.shape).encode())
            digest.update(value.reshape(-1).view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()[:24]
