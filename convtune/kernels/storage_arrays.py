"""CuPy arrays in a problem's storage dtype: float32, float16, or bfloat16 as ``uint16`` bits (CuPy has no bfloat16).

What the benchmarkers feed a 16-bit family: inputs rounded to the dtype (round to nearest even, as PyTorch's
``.to(torch.bfloat16)``), outputs poisoned with the dtype's NaN, read back as float32 for the error check.
"""

from __future__ import annotations

from typing import Any

from convtune.kernels.compile import cupy_module

#: CuPy dtype of each storage dtype
ARRAY_DTYPES = {"float32": "float32", "float16": "float16", "bfloat16": "uint16"}
BF16_NAN_BITS = 0x7FC0


def to_storage(a: Any, dtype: str) -> Any:
    """float32 CuPy array -> the storage array of ``dtype`` (a copy, rounded to nearest even)."""
    cp = cupy_module()
    if dtype == "float32":
        return a
    if dtype == "float16":
        return a.astype(cp.float16)
    bits = cp.ascontiguousarray(a, dtype=cp.float32).view(cp.uint32)
    rounded = (bits + cp.uint32(0x7FFF) + ((bits >> cp.uint32(16)) & cp.uint32(1))) >> cp.uint32(16)
    return rounded.astype(cp.uint16)   # random normal inputs hold no NaN (whose rounding this would not keep)


def to_float32(a: Any, dtype: str) -> Any:
    """A storage array -> its float32 values (exact)."""
    cp = cupy_module()
    if dtype == "bfloat16":
        return (a.astype(cp.uint32) << cp.uint32(16)).view(cp.float32)
    return a.astype(cp.float32) if dtype == "float16" else a


def empty(shape: tuple[int, ...], dtype: str) -> Any:
    return cupy_module().empty(shape, dtype=ARRAY_DTYPES[dtype])


def poison(a: Any, dtype: str) -> None:
    """Fill a storage array with its dtype's NaN (outputs a kernel never writes stay NaN)."""
    a.fill(BF16_NAN_BITS if dtype == "bfloat16" else float("nan"))
