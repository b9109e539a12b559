"""Prints the two keys of scripts/setup.sh's kept wheel: the build of torch
this Python has (its version.py, the extension suffix, CMAKE_ARGS and CXX),
and the tree (every file git sees, committed or not; without git, a key of
its own each time, so the package is always built)."""

import hashlib
import importlib.util
import os
import subprocess
import sysconfig
import time
from pathlib import Path


def torch_key() -> str:
    torch_dir = Path(importlib.util.find_spec("torch").origin).parent
    parts = [
        (torch_dir / "version.py").read_bytes(),
        sysconfig.get_config_var("EXT_SUFFIX").encode(),
        *(os.environ.get(name, "").encode() for name in ("CMAKE_ARGS", "CXX")),
    ]
    return hashlib.sha256(b"\0".join(parts)).hexdigest()[:16]


def tree_key() -> str:
    try:
        listed = subprocess.run(
            ["git", "ls-files", "-z", "-co", "--exclude-standard"], capture_output=True, check=True
        ).stdout.split(b"\0")
    except (OSError, subprocess.CalledProcessError):
        return f"untracked-{time.time_ns()}"
    digest = hashlib.sha256()
    for name in sorted(filter(None, listed)):
        path = Path(os.fsdecode(name))
        digest.update(name + b"\0" + (path.read_bytes() if path.is_file() else b""))
    return digest.hexdigest()[:16]


if __name__ == "__main__":
    print(torch_key(), tree_key())
