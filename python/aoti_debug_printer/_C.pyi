# The compiled module _C (csrc/python.cpp), for type checkers and readers.
# Every constant mirrors the C header's (csrc/include/aoti_debug_printer.h),
# which defines it once; test_shim holds the three equal.
from typing import Any, Literal

import torch

ABI_VERSION: Literal[7]
RECORD_SCHEMA: Literal[3]
# The level a model was compiled at: what generated code passes to every
# record and launch event (AOTI_DEBUG_PRINTER_LEVEL_*).
LEVEL_SAVE: Literal[1]
LEVEL_PRINT: Literal[2]
LEVEL_KERNEL_NAMES: Literal[3]
# Launch flags.
ANNOUNCE: Literal[1]
UNSELECTED: Literal[4]
WRITES_UNSEEN: Literal[8]
RECORDS_END: Literal[16]
RECORDS_CONTINUE: Literal[32]
# Phases.
BEFORE_LAUNCH: Literal[0]
AFTER_LAUNCH: Literal[1]
MODEL_INPUT: Literal[2]
# Roles.
ROLE_UNKNOWN: Literal[0]
ROLE_READ: Literal[1]
ROLE_WRITE: Literal[2]
ROLE_READ_WRITE: Literal[3]
ROLE_ACCUMULATE: Literal[4]

def begin_run(with_end: bool = False, inductor_config: str = "") -> None: ...
def end_run() -> None: ...
def records_end() -> None: ...
def launch(level: int, phase: int, kernel: str, flags: int) -> None: ...
def record(
    level: int,
    phase: int,
    kernel: str,
    arg: str,
    value: Any,
    node: str = "",
    why: str = "",
    role: int = 0,
    formula: str = "",
) -> None: ...
def stats(tensor: torch.Tensor, on: str = "auto", fingerprint: bool = False) -> dict[str, Any]: ...
def fingerprint(tensor: torch.Tensor) -> int | None: ...
def has_device_stats(tensor: torch.Tensor) -> bool: ...
def kernel_patterns(spec: str) -> list[str]: ...
def kernel_filter_selects(patterns: list[str], kernel: str) -> bool: ...
def set_option(key: str, value: str) -> None: ...
def get_option(key: str) -> str: ...
def options() -> list[tuple[str, str, str]]: ...
def save_failures() -> int: ...
def safe_name_part(name: str) -> str: ...
def library_path() -> str: ...
def upstream_print_tensor_handle(tensor: torch.Tensor, msg: str) -> None: ...
