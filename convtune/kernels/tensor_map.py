"""TMA tensor maps (``CUtensorMap``, 128 opaque bytes) described on the host, encoded by the CUDA driver.

A prepared launch whose kernel reads an operand through the Tensor Memory Accelerator carries a
:class:`TiledMap` or :class:`Im2colMap` per such operand (:class:`~convtune.kernels.prepared.Launch` ``maps``):
everything of the map but the operand's address. At a call the map is encoded for the operand's pointer (once per
pointer: the encoding is kept until the pointer changes) and passed by value after the kernel's int arguments
(``__grid_constant__`` parameters; the driver copies them at the launch, so a CUDA graph keeps the capture's).

Encoding goes through ``cuTensorMapEncodeTiled`` / ``cuTensorMapEncodeIm2col`` of ``libcuda`` by ctypes (CuPy binds
neither); dimensions are listed innermost first, as the driver takes them. The driver seam
(:class:`~convtune.kernels.prepared.Driver` ``encode_map``) lets tests record maps without a GPU.
"""

from __future__ import annotations

import ctypes
from dataclasses import dataclass
from typing import Any

from convtune.errors import LaunchError

MAP_BYTES = 128
#: CU_TENSOR_MAP_DATA_TYPE_* of the storage types (a copy of bits; zero fill outside the tensor)
DATA_TYPES = {"float32": 7, "float16": 6, "bfloat16": 9}
#: CU_TENSOR_MAP_SWIZZLE_* by the swizzle span in bytes (the shared-memory row of the wgmma tiles)
SWIZZLES = {32: 1, 64: 2, 128: 3}
L2_PROMOTION_256B = 3
#: the driver's limits on an im2col map of rank 4 (cuda.h, cuTensorMapEncodeIm2col)
CORNER_RANGE = (-128, 127)
MAX_TRAVERSAL_STRIDE = 8
MAX_BOX = 256


@dataclass(frozen=True, slots=True)
class TiledMap:
    """A 2-D row-major tensor (``rows`` × ``inner`` elements of ``dtype``) read in boxes of ``box_rows`` ×
    ``box_inner``, swizzled over ``swizzle_bytes`` (the box's row bytes)."""

    dtype: str
    inner: int
    rows: int
    box_inner: int
    box_rows: int
    swizzle_bytes: int


@dataclass(frozen=True, slots=True)
class Im2colMap:
    """A channels-last tensor (N, H, W, C elements of ``dtype``) read as im2col boxes of ``pixels`` output pixels ×
    ``channels`` channels: the walk of the output pixels (traversal strides ``stride_w``, ``stride_h``) over the
    bounding box with corners ``lower`` and ``upper`` (W, H: −padding, padding − dilation·(kernel − 1)), each pixel
    shifted by the instruction's tap offsets; zeros outside the tensor."""

    dtype: str
    n: int
    h: int
    w: int
    c: int
    lower: tuple[int, int]
    upper: tuple[int, int]
    stride_w: int
    stride_h: int
    channels: int
    pixels: int
    swizzle_bytes: int


TensorMap = TiledMap | Im2colMap

_libcuda: Any = None


def _driver_library() -> Any:
    global _libcuda
    if _libcuda is None:
        try:
            _libcuda = ctypes.CDLL("libcuda.so.1")
        except OSError as exc:
            raise LaunchError(f"TMA tensor maps need the CUDA driver (libcuda.so.1): {exc}") from None
    return _libcuda


def _array(ctype: Any, values: tuple[int, ...]) -> Any:
    return (ctype * len(values))(*values)


def _itemsize(dtype: str) -> int:
    return 4 if dtype == "float32" else 2


def encode(spec: TensorMap, pointer: int) -> bytes:
    """The 128 bytes of ``spec``'s map for the operand at device address ``pointer``.

    Raises:
        LaunchError: the driver refused the map (it names the CUresult) or is missing.
    """
    lib = _driver_library()
    scratch = (ctypes.c_uint64 * 32)()                          # a 64-byte-aligned 128-byte window in 256 bytes
    out = ctypes.addressof(scratch) + (-ctypes.addressof(scratch)) % 64
    e = _itemsize(spec.dtype)
    common = (ctypes.c_int(DATA_TYPES[spec.dtype]),)
    tail = (ctypes.c_int(0), ctypes.c_int(SWIZZLES[spec.swizzle_bytes]), ctypes.c_int(L2_PROMOTION_256B),
            ctypes.c_int(0))                                    # no interleave, the swizzle, L2 256 B, zero fill
    if isinstance(spec, TiledMap):
        rc = lib.cuTensorMapEncodeTiled(
            ctypes.c_void_p(out), *common, ctypes.c_uint32(2), ctypes.c_void_p(pointer),
            _array(ctypes.c_uint64, (spec.inner, spec.rows)), _array(ctypes.c_uint64, (spec.inner * e,)),
            _array(ctypes.c_uint32, (spec.box_inner, spec.box_rows)), _array(ctypes.c_uint32, (1, 1)), *tail)
    else:
        rc = lib.cuTensorMapEncodeIm2col(
            ctypes.c_void_p(out), *common, ctypes.c_uint32(4), ctypes.c_void_p(pointer),
            _array(ctypes.c_uint64, (spec.c, spec.w, spec.h, spec.n)),
            _array(ctypes.c_uint64, (spec.c * e, spec.w * spec.c * e, spec.h * spec.w * spec.c * e)),
            _array(ctypes.c_int, spec.lower), _array(ctypes.c_int, spec.upper), ctypes.c_uint32(spec.channels),
            ctypes.c_uint32(spec.pixels), _array(ctypes.c_uint32, (1, spec.stride_w, spec.stride_h, 1)), *tail)
    if rc != 0:
        raise LaunchError(f"the CUDA driver refused a TMA tensor map (CUresult {rc}): {spec}")
    return ctypes.string_at(out, MAP_BYTES)


def im2col_limits(pad: tuple[int, int], dilation: tuple[int, int], kernel: tuple[int, int],
                  stride: tuple[int, int]) -> str:
    """Why an im2col map cannot describe a convolution of these (h, w) parameters, or '' where it can: the corners
    −pad and pad − dilation·(kernel − 1) within :data:`CORNER_RANGE`, strides up to :data:`MAX_TRAVERSAL_STRIDE`."""
    lo, hi = CORNER_RANGE
    for axis, p, d, k, s in zip("hw", pad, dilation, kernel, stride, strict=True):
        lower, upper = -p, p - d * (k - 1)
        if not (lo <= lower <= hi and lo <= upper <= hi):
            return (f"pad_{axis}={p}, dilation·(kernel−1) = {d * (k - 1)}: the box corners {lower}, {upper} "
                    f"leave {lo}..{hi}")
        if s > MAX_TRAVERSAL_STRIDE:
            return f"stride_{axis}={s} exceeds the TMA traversal stride {MAX_TRAVERSAL_STRIDE}"
    return ""
