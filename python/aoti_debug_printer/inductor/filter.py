"""Which kernels get records: AOT_INDUCTOR_FILTERED_KERNELS_TO_PRINT."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class KernelFilter:
    """The compile-time filter, in the grammar the library defines once
    (csrc/settings.h: names or globs, braces allowed, case-insensitive) and
    also applies at run time (AOTI_DEBUG_PRINTER_KERNELS).

    An empty filter selects every kernel. Unlike upstream, which consults the
    filter only at level 2, the codegen applies it at every level.
    """

    patterns: tuple[str, ...] = ()

    @classmethod
    def parse(cls, spec: str | None) -> KernelFilter:
        from .._native import shim

        return cls(tuple(shim().kernel_patterns(spec))) if spec else cls()

    def __call__(self, kernel_name: str) -> bool:
        from .._native import shim

        return not self.patterns or shim().kernel_filter_selects(list(self.patterns), kernel_name)
