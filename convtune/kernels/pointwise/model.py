"""Analytic performance model of the pointwise forward kernel (for ranking configs, never as a result).

The direct family's model (:mod:`convtune.kernels.direct.model`) with this kernel's instruction counts:
predicted time = max(issue time, L2 traffic time, DRAM compulsory time) + split-C atomics + launch overhead.
Instructions per thread per channel chunk of the unrolled loop: FFMA = BK·64, LDS.128 = 4·BK, copies =
a_copies + b_copies (×3 with address math), + 30 for the barrier and loop control; the epilogue ~4 per
accumulator. The SM issue rate is the measured SGEMM rate (``machine.fp32_peak_flops_per_s`` / 64 flops per
warp-FFMA / SMs), the latency factor min(1, resident warps / 8)^½, the tail counted per SM.
"""

from __future__ import annotations

import math

from convtune.kernels.direct.model import DirectPrediction, predict_launch
from convtune.kernels.launch_geometry import resident_blocks
from convtune.kernels.pointwise.launcher import PointwiseFwdPlan, total_traffic_words
from convtune.machine import MachineModel


def tile_efficiency(pl: PointwiseFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang M = N·P·Q and K at the edges, chunks overhang C."""
    p, c = pl.problem, pl.config
    chunks = -(-p.C // c.chunk_c)
    computed = (pl.m_tiles * c.tile_m) * (pl.k_tiles * c.tile_n) * chunks * c.chunk_c
    return (p.N * p.P * p.Q * p.K * p.C) / computed


def instructions_per_chunk(pl: PointwiseFwdPlan) -> int:
    """Instructions one thread issues per channel chunk (see the module docstring)."""
    c = pl.config
    return c.chunk_c * (c.accumulators + 4) + 3 * (pl.a_copies + pl.b_copies) + 30


def predict(pl: PointwiseFwdPlan, machine: MachineModel) -> DirectPrediction:
    """Model time of one launch of ``pl`` on ``machine``."""
    c = pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return DirectPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf, tile_efficiency(pl))
    return predict_launch(pl, machine, bps, instructions_per_chunk(pl), tile_efficiency(pl), total_traffic_words(pl))
