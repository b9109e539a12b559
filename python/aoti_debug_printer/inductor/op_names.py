"""How this wing spells an op: one room, two spellings, each for its reader.

- `schema_name`: "mylib::scale_rows.out", as users declare the op; records
  name a custom op's kernel so, and the repro's call says so.
- `torch_ops_path`: "aten.rsqrt.default", the attribute path under
  torch.ops (str of an OpOverload); a formula's steps carry it, and
  `diverge` finds the op again by it.
"""

from __future__ import annotations

import operator


def schema_name(op) -> str:
    """mylib::scale_rows, mylib::scale_rows.out: the name users wrote."""
    schema = getattr(op, "_schema", None)
    if schema is None:
        return str(op)
    return schema.name + (f".{schema.overload_name}" if schema.overload_name else "")


def torch_ops_path(target) -> str:
    """aten.rsqrt.default; "getitem" for operator.getitem (a formula's
    step that takes one output of several)."""
    return "getitem" if target is operator.getitem else str(target)
