"""Argument checks shared by every depthwise launcher: a kernel takes raw pointers, so a wrong array must be
refused before the launch, naming the argument."""

from __future__ import annotations

from typing import Any

from convtune.errors import InvalidInput
from convtune.kernels.compile import cupy_module


def check_array(name: str, array: Any, shape: tuple[int, ...], dtype: str = "float32") -> None:
    """Raise :class:`InvalidInput` naming ``name`` unless ``array`` is a C-contiguous CuPy array of ``shape``
    holding the storage ``dtype`` (:data:`~convtune.kernels.depthwise.dtypes.ARRAY_DTYPES`: bfloat16 as its
    ``uint16`` bits)."""
    from convtune.kernels.depthwise.dtypes import ARRAY_DTYPES

    cp = cupy_module()
    if not isinstance(array, cp.ndarray):
        raise InvalidInput(name, f"must be a CuPy array, got {type(array).__name__}")
    if array.dtype.name not in ARRAY_DTYPES[dtype]:
        raise InvalidInput(name, f"dtype must be {' or '.join(ARRAY_DTYPES[dtype])}, got {array.dtype}")
    if tuple(array.shape) != shape:
        raise InvalidInput(name, f"shape {tuple(array.shape)} must be {shape}")
    if not array.flags.c_contiguous:
        raise InvalidInput(name, "must be C-contiguous")
