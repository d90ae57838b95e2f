"""TMA descriptors (CUtensorMap, 128 bytes) for the WIP kernel, encoded by the CUDA driver through ctypes and
returned as one-element NumPy arrays of a 128-byte structured dtype: CuPy passes those by value as kernel parameters.

    im2col_map(pl, work)   x channels-last (N, H, W, Cp) in the workspace: boxes of BM pixels x CH channels walking
                           the output pixels (traversal strides = the convolution's strides, the bounding box from
                           the padding, the tap's (s·DW, r·DH) as the instruction's offsets)
    tile_map(pl, filt)     the packed filters (K rows, KRp columns): boxes of BN rows x CH columns
"""

from __future__ import annotations

import ctypes

import numpy as np

DESC = np.dtype([("words", np.uint64, (16,))])
_DTYPES = {"float32": 7, "bfloat16": 9, "float16": 6}   # CU_TENSOR_MAP_DATA_TYPE_FLOAT32 / BFLOAT16 / FLOAT16
_SWIZZLE = {32: 1, 64: 2, 128: 3}                       # CU_TENSOR_MAP_SWIZZLE_32B / 64B / 128B
_L2_256B = 3
_driver = None


def _lib():
    global _driver
    if _driver is None:
        _driver = ctypes.CDLL("libcuda.so.1")
    return _driver


def zeros() -> np.ndarray:
    return np.zeros(1, DESC)


def _encode(fn_name: str, *args) -> np.ndarray:
    scratch = np.zeros(32, np.uint64)                       # 256 bytes: a 64-byte-aligned 128-byte window
    out = scratch.ctypes.data + (-scratch.ctypes.data) % 64
    rc = getattr(_lib(), fn_name)(ctypes.c_void_p(out), *args)
    if rc != 0:
        raise RuntimeError(f"{fn_name} failed: CUresult {rc} for {args}")
    desc = np.zeros(1, DESC)
    ctypes.memmove(desc.ctypes.data, out, 128)
    return desc


def _u64(*v):
    return (ctypes.c_uint64 * len(v))(*v)


def _u32(*v):
    return (ctypes.c_uint32 * len(v))(*v)


def _i32(*v):
    return (ctypes.c_int * len(v))(*v)


def tile_map(pl, filt) -> np.ndarray:
    p, c = pl.problem, pl.config
    e = p.itemsize_bytes
    ch = c.row_bytes // e
    return _encode("cuTensorMapEncodeTiled", ctypes.c_int(_DTYPES[p.dtype]), ctypes.c_uint32(2),
                   ctypes.c_void_p(filt.data.ptr), _u64(pl.krp, p.K), _u64(pl.krp * e), _u32(ch, c.tile_n),
                   _u32(1, 1), ctypes.c_int(0), ctypes.c_int(_SWIZZLE[c.row_bytes]), ctypes.c_int(_L2_256B),
                   ctypes.c_int(0))


def im2col_map(pl, work) -> np.ndarray:
    p, c = pl.problem, pl.config
    e = p.itemsize_bytes
    ch, cp = c.row_bytes // e, pl.cp
    bm = 64 * c.warpgroups * c.m_blocks
    lower = _i32(-p.pad_w, -p.pad_h)                                              # (W, H): innermost first
    upper = _i32(p.pad_w - p.dil_w * (p.S - 1), p.pad_h - p.dil_h * (p.R - 1))
    return _encode("cuTensorMapEncodeIm2col", ctypes.c_int(_DTYPES[p.dtype]), ctypes.c_uint32(4),
                   ctypes.c_void_p(work.data.ptr), _u64(cp, p.W, p.H, p.N),
                   _u64(cp * e, p.W * cp * e, p.H * p.W * cp * e), lower, upper, ctypes.c_uint32(ch),
                   ctypes.c_uint32(bm), _u32(1, p.stride_w, p.stride_h, 1), ctypes.c_int(0),
                   ctypes.c_int(_SWIZZLE[c.row_bytes]), ctypes.c_int(_L2_256B), ctypes.c_int(0))
