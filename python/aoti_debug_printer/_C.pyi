# The compiled module _C (csrc/python.cpp), for type checkers and readers.
# Every constant mirrors the C header's (csrc/include/aoti_debug_printer.h),
# which defines it once; test_shim holds the three equal.
from typing import Any, Literal

import torch

ABI_VERSION: Literal[12]
RECORD_SCHEMA: Literal[8]
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
CONSTANTS_HOLD: Literal[64]
# The reason code of a constant no kernel has written (records.Reason.CONSTANT).
WHY_CONSTANT: Literal["constant"]
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
# The fields of a slot of the statistics generated kernels keep (STORED_SLOT a slot).
STORED_SWITCH: Literal[0]
STORED_NAN: Literal[0]
STORED_POS_INF: Literal[1]
STORED_NEG_INF: Literal[2]
STORED_ZEROS: Literal[3]
STORED_MAX_KEY: Literal[4]
STORED_MIN_KEY: Literal[5]
STORED_SUM: Literal[6]
STORED_SUM_OF_SQUARES: Literal[7]
STORED_SHIFT: Literal[8]
STORED_FINITE: Literal[9]
STORED_SLOT: Literal[16]

def begin_run(with_end: bool = False, inductor_config: str = "", sources: str = "") -> None: ...
def end_run() -> None: ...

class Capturable: ...

def begin_capturable() -> Capturable: ...
def wait_for_replays() -> None: ...
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
def tensors_read() -> int: ...
def save_failures() -> int: ...
def wait_for_saves() -> None: ...
def safe_name_part(name: str) -> str: ...
def package_loaded(path: str) -> None: ...
def library_path() -> str: ...
def cuda_statistics_unavailable() -> str: ...
def upstream_print_tensor_handle(tensor: torch.Tensor, msg: str) -> None: ...
