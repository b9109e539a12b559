"""The one place where reading Inductor's internals may fail.

This wing reads Inductor's IR, FX metadata and scheduler state, which move
between torch releases. A read that fails must neither break the compile
nor go unseen: `reading(where)` turns any exception but the wing's own into
`InternalsMoved`, counts it by `where`, and logs it once per place. Callers
catch `InternalsMoved` and give the value `Reason.INTERNALS_MOVED` (with
the place and the error), which `diverge` and `compare` count where they
show coverage. test/test_provenance_fallbacks.py fails if a broad `except`
appears anywhere else in inductor/.
"""

from __future__ import annotations

import logging
from collections import Counter
from contextlib import contextmanager

from ...records import Reason

log = logging.getLogger(__name__)

_counts: Counter[str] = Counter()


class InternalsMoved(Exception):
    """Inductor did not hold what the printer reads at `where`."""

    def __init__(self, where: str, error: BaseException) -> None:
        super().__init__(f"{where}: {type(error).__name__}: {error}")
        self.where = where

    def why(self) -> str:
        """The record's `why` for a value this left unknown."""
        return Reason.INTERNALS_MOVED.why(str(self).splitlines()[0][:300])


class Expected(Exception):
    """Base of the wing's own exceptions, which `reading` lets through: they
    say what the code it guards means to say (a formula that cannot be
    written exactly), not that an internal moved."""


@contextmanager
def reading(where: str):
    """Around code that reads Inductor's internals (see the module)."""
    try:
        yield
    except (Expected, InternalsMoved):
        raise
    except Exception as e:  # noqa: BLE001 - the one broad catch: counted, logged, re-raised typed
        _counts[where] += 1
        if _counts[where] == 1:
            log.warning(
                "aoti-debug-printer: could not read %s from this torch's Inductor (%s: %s); "
                "the values it decides are recorded as %s",
                where,
                type(e).__name__,
                e,
                Reason.INTERNALS_MOVED.value,
            )
        raise InternalsMoved(where, e) from e


def fallbacks() -> dict[str, int]:
    """How many reads failed in this process, by place."""
    return dict(_counts)
