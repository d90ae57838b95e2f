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

from convtune.kernels.direct.model import (
    ATOMIC_WORDS,
    GLOBAL_LATENCY_S,
    L2_OVER_DRAM_BANDWIDTH,
    LATENCY_WARPS,
    LAUNCH_OVERHEAD_S,
    DirectPrediction,
)
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
    p, c = pl.problem, pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return DirectPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf, tile_efficiency(pl))
    warps = c.threads // 32
    wave_count = pl.blocks / (machine.sm_count * bps)
    per_sm = -(-pl.blocks // machine.sm_count)
    resident = min(per_sm, bps)
    per_block = warps * (pl.chunks_per_split * instructions_per_chunk(pl) + 4 * c.accumulators)
    sm_rate = machine.fp32_peak_flops_per_s / 64 / machine.sm_count
    latency = min(1.0, resident * warps / LATENCY_WARPS) ** 0.5
    chunk_issue_s = resident * warps * instructions_per_chunk(pl) / (sm_rate * latency)
    stall_s = max(0.0, GLOBAL_LATENCY_S - (c.stages - 1) * chunk_issue_s) / resident
    issue_s = per_sm / resident * (resident * per_block / (sm_rate * latency) + pl.chunks_per_split * stall_s)
    l2_s = 4 * total_traffic_words(pl) / (L2_OVER_DRAM_BANDWIDTH * machine.copy_bandwidth_bytes_per_s)
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    atomic_s = 0.0
    if c.splits > 1:
        atomic_s = c.splits * p.output_elements * ATOMIC_WORDS * 4 / machine.copy_bandwidth_bytes_per_s
    overhead = LAUNCH_OVERHEAD_S * (2 if c.splits > 1 else 1)
    return DirectPrediction(max(issue_s, l2_s, dram_s) + atomic_s + overhead, issue_s, l2_s, dram_s, bps,
                            wave_count, tile_efficiency(pl), atomic_s)
