"""Analytic performance model of the implicit-GEMM CUDA-core forward kernel (for ranking configs, never a result).

The direct family's launch model (:func:`convtune.kernels.direct.model.predict_launch`) with this kernel's
instruction counts per thread per reduction chunk of the unrolled loop: FFMA = BK·64, LDS.128 = 4·BK, each 4-byte
A copy ≈ 16 (the row's (c, r, s) by constant divisions, the padding test, the address, the cp.async), each 16-byte
B copy ≈ 4, + 30 for the barrier and loop control; the epilogue ~4 per accumulator.
"""

from __future__ import annotations

import math

from convtune.kernels.direct.model import DirectPrediction, predict_launch
from convtune.kernels.igemm_simt.launcher import IgemmSimtFwdPlan, total_traffic_words
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel

A_COPY_INSTRUCTIONS = 16
B_COPY_INSTRUCTIONS = 4


def tile_efficiency(pl: IgemmSimtFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang M = N·P·Q and K at the edges, chunks overhang C·R·S (padding taps
    are computed as zeros: they count as computed, not useful)."""
    p, c = pl.problem, pl.config
    crs = p.C * p.R * p.S
    chunks = -(-crs // c.chunk_crs)
    computed = (pl.m_tiles * c.tile_m) * (pl.k_tiles * c.tile_n) * chunks * c.chunk_crs
    return p.macs / computed


def instructions_per_chunk(pl: IgemmSimtFwdPlan) -> int:
    """Instructions one thread issues per reduction chunk (see the module docstring)."""
    c = pl.config
    return (c.chunk_crs * (c.accumulators + 4) + A_COPY_INSTRUCTIONS * pl.a_copies
            + B_COPY_INSTRUCTIONS * pl.b_copies + 30)


def predict(pl: IgemmSimtFwdPlan, machine: MachineModel) -> DirectPrediction:
    """Model time of one launch of ``pl`` on ``machine``."""
    c = pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return DirectPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf, tile_efficiency(pl))
    return predict_launch(pl, machine, bps, instructions_per_chunk(pl), tile_efficiency(pl), total_traffic_words(pl))
