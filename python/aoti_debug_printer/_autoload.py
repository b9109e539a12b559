"""Entry point torch calls at the end of `import torch` ("torch.backends").

It must be cheap and must never raise: torch turns any exception here into
a failed `import torch`. Installing only registers a post-import hook, so it
costs microseconds; the hook reads the level from Inductor's config when a
wrapper is built, so level 0 keeps the generated code untouched and a level
set later in the script (env var or config) still takes effect.

AOTI_DEBUG_PRINTER_AUTOLOAD=0 (or off, false, no) opts out.
"""

from __future__ import annotations

import logging
import os

# A switch's spellings (inductor/switches, which loads neither torch nor the
# shim).
from .inductor.switches import OFF, ON

log = logging.getLogger(__name__)


def activate() -> None:
    value = os.environ.get("AOTI_DEBUG_PRINTER_AUTOLOAD")
    if value is not None and value.strip().lower() in OFF:
        return
    if value is not None and value.strip().lower() not in ON:
        log.warning(
            "AOTI_DEBUG_PRINTER_AUTOLOAD must be 1/0, on/off, true/false or yes/no, "
            "got %r; installing (the default)",
            value,
        )
    try:
        from .inductor.install import install

        install()
    except Exception:  # noqa: BLE001 - see the module docstring
        log.exception("aoti-debug-printer could not install itself; Inductor keeps its printer")
