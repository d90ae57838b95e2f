"""Argument checks shared by every depthwise launcher: a kernel takes raw pointers, so a wrong array must be
refused before the launch, naming the argument."""

from __future__ import annotations

from typing import Any

from convtune.errors import InvalidInput
from convtune.kernels.compile import cupy_module


def check_array(name: str, array: Any, shape: tuple[int, ...]) -> None:
    """Raise :class:`InvalidInput` naming ``name`` unless ``array`` is a C-contiguous float32 CuPy array of
    ``shape``."""
    cp = cupy_module()
    if not isinstance(array, cp.ndarray):
        raise InvalidInput(name, f"must be a CuPy array, got {type(array).__name__}")
    if array.dtype != cp.float32:
        raise InvalidInput(name, f"dtype must be float32, got {array.dtype}")
    if tuple(array.shape) != shape:
        raise InvalidInput(name, f"shape {tuple(array.shape)} must be {shape}")
    if not array.flags.c_contiguous:
        raise InvalidInput(name, "must be C-contiguous")
