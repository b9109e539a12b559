"""Where a node of the exported program came from in the user's code.

torch.export keeps, on each node, the Python stack that made it
(`node.meta["stack_trace"]`, outermost frame first, in the form of a
traceback). A finding names a node; this turns that text into frames, the
user's innermost first, and into the one line people read ("model.py:42
in forward: return x * torch.sigmoid(1.005 * x)"). Frames inside torch
itself (nn.Module's call machinery, functional wrappers) are left out:
they are where every node comes from. Torch-free, like records.
"""

from __future__ import annotations

import os
import re
from dataclasses import dataclass

# One frame of a traceback: its header line, and the source line under it
# where the text has one.
_FRAME = re.compile(
    r'File "(?P<file>[^"\n]+)", line (?P<line>\d+), in (?P<function>[^\n]+)\n'
    r"(?:[ \t]+(?P<code>(?!File \")[^\n]*)\n?)?"
)
# More frames than this say little more: JSON carries this many.
MAX_FRAMES = 8


@dataclass(frozen=True, kw_only=True)
class SourceFrame:
    file: str
    line: int
    function: str
    code: str = ""

    @property
    def text(self) -> str:
        """model.py:42 in forward: return ... (the file relative to the
        current directory where it is under it)."""
        where = f"{_shown(self.file)}:{self.line} in {self.function}"
        return f"{where}: {self.code}" if self.code else where

    def as_json(self) -> dict:
        return {"file": self.file, "line": self.line, "function": self.function, "code": self.code}


def user_frames(stack_trace: str | None, skip_dirs: tuple[str, ...] = ()) -> list[SourceFrame]:
    """The frames of a node's stack trace, innermost first, without those
    under `skip_dirs` (torch's own package), at most MAX_FRAMES. Where every
    frame is under them, the innermost of all: a node torch itself made
    still came from somewhere."""
    if not stack_trace:
        return []
    frames = [
        SourceFrame(
            file=m["file"],
            line=int(m["line"]),
            function=m["function"].strip(),
            code=(m["code"] or "").strip(),
        )
        for m in _FRAME.finditer(stack_trace)
    ]
    frames.reverse()
    prefixes = tuple(os.path.join(os.path.abspath(d), "") for d in skip_dirs)
    own = [f for f in frames if not os.path.abspath(f.file).startswith(prefixes)]
    return (own or frames[:1])[:MAX_FRAMES]


def table(frames: dict[str, list[SourceFrame]]) -> str:
    """The table the C library takes at each run's start (its header's
    aoti_debug_printer_sources): a line per node, its name and its frames
    (the file as given, not made relative) separated by tabs; a tab or a
    newline inside one becomes a space."""

    def flat(s: str) -> str:
        return s.replace("\t", " ").replace("\n", " ").replace("\r", " ")

    def line(f: SourceFrame) -> str:
        where = f"{f.file}:{f.line} in {f.function}"
        return flat(f"{where}: {f.code}" if f.code else where)

    return "".join(
        "\t".join([flat(node), *(line(f) for f in fs)]) + "\n" for node, fs in frames.items() if fs
    )


def torch_dirs() -> tuple[str, ...]:
    """torch's package directory, the frames under which are not the user's."""
    import torch

    return (os.path.dirname(torch.__file__),)


def node_sources(program, names=None) -> dict[str, list[SourceFrame]]:
    """The user's frames of each node of an exported program (or a graph
    module) that has any; `names`: only those nodes."""
    graph = program.graph
    skip = torch_dirs()
    out = {}
    for node in graph.nodes:
        if names is not None and node.name not in names:
            continue
        frames = user_frames(node.meta.get("stack_trace"), skip)
        if frames:
            out[node.name] = frames
    return out


def _shown(path: str) -> str:
    try:
        rel = os.path.relpath(path)
    except ValueError:  # another drive
        return path
    return path if rel.startswith("..") else rel
