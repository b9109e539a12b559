"""Which kernels get records: AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT."""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass


@dataclass(frozen=True)
class KernelFilter:
    """Exact names (as upstream) and glob patterns, matched case-insensitively.

    An empty filter selects every kernel. Unlike upstream, which consults the
    filter only at level 2, the codegen applies it at every level.
    """

    patterns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> KernelFilter:
        # Upstream's docs write the list as "{name_1, name_2}"; accept that too.
        if not spec:
            return cls()
        spec = spec.strip().strip("{}")
        return cls(tuple(p.strip().lower() for p in spec.split(",") if p.strip()))

    def __call__(self, kernel_name: str) -> bool:
        if not self.patterns:
            return True
        name = kernel_name.lower()
        return any(name == p or fnmatch.fnmatchcase(name, p) for p in self.patterns)
