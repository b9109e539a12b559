"""One kernel of a dump, alone, on the arguments it had: writer makes the
directory, template is the repro.py it holds."""

from .writer import (
    CLOSE,
    FINITE,
    IN_BOUNDS,
    UNCHANGED,
    Finding,
    Repro,
    format_repro,
    write_repro,
)

__all__ = [
    "CLOSE",
    "FINITE",
    "IN_BOUNDS",
    "UNCHANGED",
    "Finding",
    "Repro",
    "format_repro",
    "write_repro",
]
