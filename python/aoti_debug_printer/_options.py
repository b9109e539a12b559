"""The shim's run-time options, from Python. The table of options lives in
C++ (settings.cpp) and is read from there: keys, environment variables and
meanings are defined once."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from ._native import shim


def option_table() -> list[tuple[str, str, str]]:
    """(key, environment variable, meaning) of every run-time option."""
    return [tuple(row) for row in shim().options()]


def set_option(key: str, value: Any) -> None:
    shim().set_option(key, str(value))


def get_option(key: str) -> str:
    return shim().get_option(key)


@contextlib.contextmanager
def options(**values: Any) -> Iterator[None]:
    """Set run-time options for a block; every option is put back as it was
    on leaving, also when the block raises. The snapshots level 1 took in
    the block are written by then (wait_for_saves): its dump is whole.

        with aoti_debug_printer.options(format="jsonl", output="records.jsonl"):
            compiled(x)
    """
    C = shim()
    saved = {key: C.get_option(key) for key, _, _ in option_table()}
    try:
        for key, value in values.items():
            C.set_option(key, str(value))
        yield
    finally:
        C.wait_for_saves()
        for key, value in saved.items():
            C.set_option(key, value)
