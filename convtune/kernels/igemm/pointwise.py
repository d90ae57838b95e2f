"""The 1×1 implicit-GEMM TF32 forward (family ``igemm_1x1``): which problems it takes and its config class.

R = S = 1, stride 1, no padding, H·W a multiple of 4: A[m][c] = x[n, c, pq] is contiguous along the pixels, so the
kernel (``igemm_1x1_body`` in ``igemm_fwd.cu``) copies it 16 bytes (4 pixels) at a time straight from NCHW x, with
neither the gather table nor a layout change. Plans, filters (the NCHW kernel's packing, whose (c, r, s) order is
c here), arguments and the prepared launch are :mod:`convtune.kernels.igemm.launcher`'s.

Traffic, in words, what the kernel requests::

    input  = ⌈K/BN⌉ · N·C·H·W
    weight = ⌈M/BM⌉ · KRc · Σ_nt min(BN, Kp8 − nt·BN)       (KRc = ⌈C/BK⌉·BK)
    output = splits · N·K·H·W (+ N·K·H·W zeroing y when split)
"""

from __future__ import annotations

from dataclasses import dataclass

from convtune.kernels.igemm import launcher as _igemm
from convtune.kernels.igemm.launcher import POINTWISE_FAMILY, IgemmFwdConfig, IgemmFwdPlan
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class IgemmPointwiseFwdConfig(IgemmFwdConfig):
    """The 1×1 variant's tunable parameters: the NCHW kernel's fields (see :class:`IgemmFwdConfig`)."""

    family = POINTWISE_FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """What the NCHW kernel runs, restricted to 1×1 filters, stride 1, no padding and H·W a multiple of 4."""
    p = problem
    return (_igemm.supports(p) and p.R == 1 and p.S == 1 and p.stride_h == 1 and p.stride_w == 1
            and p.pad_h == 0 and p.pad_w == 0 and (p.H * p.W) % 4 == 0)


def traffic_words(pl: IgemmFwdPlan) -> dict[str, int]:
    """Words the kernel requests (module docstring)."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    weight_cols = sum(min(c.tile_n, pl.kp8 - nt * c.tile_n) for nt in range(pl.n_tiles))
    return {
        "input": pl.n_tiles * p.N * p.C * p.H * p.W,
        "weight": pl.m_tiles * pl.chunks * c.tile_k * weight_cols,
        "output": out * c.splits + (out if c.splits > 1 else 0),
    }


def total_traffic_words(pl: IgemmFwdPlan) -> int:
    return sum(traffic_words(pl).values())
