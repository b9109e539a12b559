"""What each tensor argument of a kernel holds: its role, and the node of
the exported program whose value it holds, or why it holds none.

`diverge` and `compare` match snapshots by that node, so a wrong tag names
a wrong kernel. A tag is therefore given only where it is exact. The rooms:

- capture: what the scheduler and the wrapper are rendering (the one room
  that touches scheduler nodes and wrapper lines);
- nodes: graph facts, and which exported node a buffer holds (`Value`);
- formulas: the value of a buffer no node holds, as JSON steps, and the
  recognisers of such buffers;
- atomics: which changes in place add with atomics;
- ledger: `Provenance`, what every buffer holds in launch order;
- internals: the one place a read of Inductor's internals may fail.
"""

from .capture import Writes, kept_by_line_being_rendered, note_kernel_nodes, note_line
from .internals import fallbacks
from .ledger import (
    ROLE_ACCUMULATE,
    ROLE_READ,
    ROLE_READ_WRITE,
    ROLE_UNKNOWN,
    ROLE_WRITE,
    Held,
    Provenance,
)
from .nodes import Value

__all__ = [
    "ROLE_ACCUMULATE",
    "ROLE_READ",
    "ROLE_READ_WRITE",
    "ROLE_UNKNOWN",
    "ROLE_WRITE",
    "Held",
    "Provenance",
    "Value",
    "Writes",
    "fallbacks",
    "kept_by_line_being_rendered",
    "note_kernel_nodes",
    "note_line",
]
