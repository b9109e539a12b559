"""Which changes in place add floats with atomics: their result's last bits
depend on the order the hardware picks, so a record of one is judged as an
accumulation (ROLE_ACCUMULATE), not bit for bit."""

from __future__ import annotations

from .internals import InternalsMoved, reading

# ATen ops that add into their input in an order the hardware picks on
# CUDA (torch.use_deterministic_algorithms flags them), where Inductor
# calls them rather than generating the kernel.
_ATOMIC_ON_CUDA = frozenset(
    {
        "aten.index_add_.default",
        "aten.index_add.default",
        "aten.scatter_add_.default",
        "aten.scatter_add.default",
        "aten.scatter_reduce_.two",
        "aten.scatter_reduce.two",
        "aten.index_reduce_.default",
        "aten.index_put_.default",
        "aten._index_put_impl_.default",
        "aten._unsafe_index_put.default",
        "aten.put_.default",
    }
)


def accumulates(mutator) -> bool:
    """Whether `mutator` (an IR buffer or extern kernel changing a buffer
    in place) adds floats into it with atomics: a generated scatter in
    atomic_add mode, or a call of an ATen op that does so on CUDA (unless
    compiled under torch.use_deterministic_algorithms(True), where
    Inductor calls these ops for their deterministic kernels). False where
    that cannot be read (counted and logged by `reading`)."""
    try:
        with reading("whether a change in place adds with atomics"):
            return _accumulates(mutator)
    except InternalsMoved:
        return False


def _accumulates(mutator) -> bool:
    import torch
    from torch._inductor import ir

    data = getattr(mutator, "data", None)
    if isinstance(data, ir.Scatter):
        return data.scatter_mode == "atomic_add" and data.dtype.is_floating_point
    op = getattr(mutator, "op_overload", None)
    if op is None or str(op) not in _ATOMIC_ON_CUDA or torch.are_deterministic_algorithms_enabled():
        return False
    device = mutator.get_device()
    return device is not None and device.type == "cuda" and _accumulate_flag(mutator)


def _accumulate_flag(kernel) -> bool:
    """index_put_ and put_ accumulate only when asked (their `accumulate`
    argument); the other ops always do."""
    name = str(kernel.op_overload)
    if "index_put" not in name and "put_" not in name:
        return True
    schema = kernel.op_overload._schema
    names = [a.name for a in schema.arguments]
    position = names.index("accumulate") if "accumulate" in names else None
    constants = list(getattr(kernel, "constant_args", ()) or ())
    value = (getattr(kernel, "kwargs", {}) or {}).get("accumulate")
    if value is None and position is not None:
        # Tensor arguments are inputs; what follows them are the constants.
        tensors = len(getattr(kernel, "inputs", ()) or ())
        k = position - tensors
        value = constants[k] if 0 <= k < len(constants) else None
    return bool(value)
