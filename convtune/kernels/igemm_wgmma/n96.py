"""The general wgmma kernel with column tiles of 96 or 192 output channels: families ``igemm_wgmma_n96`` (TF32,
``math="tf32"``) and ``igemm_wgmma_half_n96`` (bfloat16 / float16), sm_90a.

The same kernel template, plan, layouts, traffic, model and launches as ``igemm_wgmma`` and ``igemm_wgmma_half``
(:mod:`~convtune.kernels.igemm_wgmma.launcher`, :mod:`~convtune.kernels.igemm_wgmma.half`), compiled from
``igemm_wgmma_n96.cu``, which adds the ``wgmma m64n96`` and ``m64n192`` instructions (``wgmma_ss_n96.cuh``). The
power-of-two tiles leave MMAs on zero rows where K is not a multiple of the tile: K = 192 in tiles of 256 (or 128 + 128
with the second half empty) computes 4/3 of the useful MACs; a 192-wide tile computes none in vain. Separate families
because a kernel version is its source's text: adding the instructions to the general source would retire every
measurement stored against it.

Grid (⌈M/BM⌉, ⌈K/BN⌉, splits), BN ∈ {96, 192}, BM = 64 · warpgroups · m_blocks; m_blocks · BN / 2 ≤ 128 accumulators a
thread, so BN = 192 runs one m64 block per warpgroup (BM = 64 or 128). The packed filters are the general families'
(the same layout, shared with them).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from convtune.kernels.compile import kernel_text
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import launcher as _tf32

SOURCE = "igemm_wgmma_n96.cu"
FAMILY = "igemm_wgmma_n96"
HALF_FAMILY = "igemm_wgmma_half_n96"
#: the column tiles (the wgmma's N) of both families
TILE_N = (96, 192)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaN96FwdConfig(_tf32.IgemmWgmmaFwdConfig):
    """The TF32 general kernel's parameters with ``tile_n`` 96 or 192."""

    family = FAMILY
    direction = "fwd"

    tile_n: int = 192
    m_blocks: int = 1      # 192 columns: one m64 block per warpgroup (96 accumulators a thread)
    warpgroups: int = 2


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalfN96FwdConfig(_half.IgemmWgmmaHalfFwdConfig):
    """The 16-bit general kernel's parameters with ``tile_n`` 96 or 192."""

    family = HALF_FAMILY
    direction = "fwd"

    tile_n: int = 192
    m_blocks: int = 1      # 192 columns: one m64 block per warpgroup (96 accumulators a thread)
    warpgroups: int = 2


@cache
def _source() -> str:
    return kernel_text(SOURCE)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaN96Plan(_tf32.IgemmWgmmaFwdPlan):
    """The TF32 general plan compiled from ``igemm_wgmma_n96.cu``."""

    def family_source(self) -> str:
        return _source()


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalfN96Plan(_half.IgemmWgmmaHalfPlan):
    """The 16-bit general plan compiled from ``igemm_wgmma_n96.cu``."""

    def family_source(self) -> str:
        return _source()
