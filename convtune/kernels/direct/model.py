"""Analytic performance model of the direct forward kernel (for ranking configs, never as a result).

predicted time = max(issue time, L2 traffic time, DRAM compulsory time) + split-C atomics + launch overhead, where

* issue time: the instructions the busiest SM must issue / (SM issue rate · latency factor), plus
  the copy stalls it cannot hide. Instructions per thread per channel chunk are counted from the
  unrolled inner loop: FFMA = CB·PY·R·S·PX·KX, LDS = CB·(ROWS·WIN·conflicts + PY·R·S·KX/4) (conflicts: the
  window loads' mean bank-conflict degree, :func:`~convtune.kernels.direct.launcher.window_conflict_degree`),
  copies = CB·NI +
  NW (×3 with address math), + ~30 for barriers and loop control. The SM issue rate is the measured
  SGEMM rate (``machine.fp32_peak_flops_per_s`` / 64 flops per warp-FFMA / SMs). The latency factor
  is min(1, resident warps / 8)^½: SIMT GEMM-like loops hide latency with ILP from ≥ 8 warps.
  Each chunk also waits for its copies: max(0, latency − (stages−1)·chunk issue time), shared
  among the blocks resident on the SM.

  The tail is counted per SM, not per wave: the block scheduler gives a freed slot its next block at
  once, so the busiest SM runs ⌈blocks / SMs⌉ blocks, ``resident`` = min(that, blocks per SM) at a
  time, in ⌈blocks / SMs⌉ / resident rounds (a fraction: the last blocks share the SM's issue rate
  among fewer warps). Counting ⌈blocks / (SMs · blocks per SM)⌉ full waves instead charged, e.g., a
  grid of 1.7 waves at 4 blocks per SM as 2 full waves.
* split-C: with splits > 1 each block ends with atomic adds of its partial sums into y, issued after
  its main loop, so they add to the time instead of overlapping it: splits·N·K·P·Q adds, each costed
  as one word read and one written at the copy bandwidth (``ATOMIC_WORDS``).

  Both terms are checked against every direct row of the H200 replay tables in ``tests/data`` (15
  problems, 48 to 1981 measured configs each; ``tests/tuner/test_direct_model_replay.py``): the
  Spearman correlation of predicted and measured time, averaged over the problems, is 0.22 without
  them (lowest −0.48), 0.33 with the per-SM tail alone, 0.56 with the split-C term alone and 0.64
  with both (lowest 0.21, no problem worse than without them).
* L2 time: modelled traffic (:func:`~convtune.kernels.direct.launcher.traffic_words`) over an L2
  bandwidth taken as 2.5× the DRAM copy bandwidth (an assumption; the H200's L2 read sweeps reached
  ~5× but SM-side fills are slower).
* DRAM time: compulsory bytes over the copy bandwidth.
* a tie-break: 1% of max(issue time, L2 time) (:data:`TIE_BREAK_FRACTION`), so configs at the DRAM floor rank by
  their on-chip time rather than tie.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from convtune.kernels.direct.launcher import DirectFwdPlan, total_traffic_words, window_conflict_degree
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel

L2_OVER_DRAM_BANDWIDTH = 2.5
LAUNCH_OVERHEAD_S = 2.5e-6
LATENCY_WARPS = 8
#: The direct kernel's own value: refitted on every direct row of the H200 replay tables (18 problems, 51–2000
#: configs each), 12 raises the mean Spearman correlation 0.648 → 0.688 (lowest 0.284 → 0.347) and cuts the regret
#: of the model's pick 1.180 → 1.108 geomean, worst 2.17 → 1.37 (8: 0.648; 10: 0.698 / 1.121 / 1.56; 16: 0.685 /
#: 1.138 / 1.58). Small grids of 2-warp blocks (a few resident warps a scheduler) issue slower than (warps / 8)^½.
#: Through the op on an H100 it took the wide suite's untuned choice from 1.46× to 1.51× cuDNN fp32 with 2 shapes below
#: 0.8× instead of 5 (benchmarks/results/wide_h100/untuned_latency12).
DIRECT_LATENCY_WARPS = 12
GLOBAL_LATENCY_S = 0.8e-6  # a cp.async round trip under load; exposed per chunk unless pipelined
ATOMIC_WORDS = 2           # copy-bandwidth words one split-C atomic add costs (read + write of its word)
#: + this fraction of max(issue time, L2 time): where the DRAM floor binds, every config that keeps its on-chip time
#: under it predicts the same time, and the untuned choice fell to the config key's order. On the H100 (copy 3.04
#: TB/s) the MobileNetV2 b64 and ENet stems had a dozen such ties; the key order picked vec=4, tile_h=1 configs that
#: measured 2.2–3.2× the H200 choice's time (benchmarks/results/igemm_wgmma_h200/six_families_h100). 1%: it orders
#: the ties by how far their on-chip time stays below the floor and moves no prediction by more than 1%.
TIE_BREAK_FRACTION = 0.01


@dataclass(frozen=True, slots=True)
class DirectPrediction:
    time_s: float
    issue_s: float
    l2_s: float
    dram_s: float
    blocks_per_sm: int
    waves: float
    tile_efficiency: float
    atomic_s: float = 0.0
    tie_s: float = 0.0      # the DRAM-floor tie-break, included in time_s

    @property
    def bound_by(self) -> str:
        return max((self.issue_s, "issue"), (self.l2_s, "l2"), (self.dram_s, "dram"))[1]


def blocks_per_sm(pl: DirectFwdPlan, machine: MachineModel, regs_per_thread: int | None = None) -> int:
    """Resident blocks per SM, limited by registers, shared memory, threads and the block limit."""
    return resident_blocks(pl.config.threads, pl.smem_bytes, regs_per_thread or pl.regs_estimate, machine)


def tile_efficiency(pl: DirectFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang P, Q and K at the edges, chunks overhang C."""
    p, c = pl.problem, pl.config
    chunks = -(-p.C // c.chunk_c)
    computed = (pl.tiles_p * c.tile_h) * (pl.tiles_q * c.tile_w) * (pl.k_tiles * c.tile_k) * chunks * c.chunk_c
    return (p.P * p.Q * p.K * p.C) / computed


def instructions_per_chunk(pl: DirectFwdPlan) -> int:
    """Instructions one thread issues per channel chunk (see the module docstring)."""
    p, c = pl.problem, pl.config
    rows = (c.thread_h - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1
    ffma = c.chunk_c * c.thread_h * p.R * p.S * c.thread_w * c.thread_k
    # window loads replay once per extra bank conflict (strided layers: lanes PX·SW floats apart)
    lds = c.chunk_c * (rows * pl.window * window_conflict_degree(pl) + c.thread_h * p.R * p.S * c.thread_k // 4)
    plane = pl.patch_h * (pl.patch_pitch // 4 if c.vec == 4 else pl.patch_w)
    copies = c.chunk_c * -(-plane // c.threads) + -(-c.chunk_c * p.R * p.S * c.tile_k // 4 // c.threads)
    return round(ffma + lds + 3 * copies + 30)


def predict(pl: DirectFwdPlan, machine: MachineModel, regs_per_thread: int | None = None) -> DirectPrediction:
    """Model time of one launch of ``pl`` on ``machine``."""
    bps = blocks_per_sm(pl, machine, regs_per_thread)
    if bps == 0:
        return DirectPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf, tile_efficiency(pl))
    return predict_launch(pl, machine, bps, instructions_per_chunk(pl), tile_efficiency(pl), total_traffic_words(pl),
                          DIRECT_LATENCY_WARPS)


def predict_launch(pl: Any, machine: MachineModel, bps: int, instructions: int, tile_eff: float,
                   traffic_words: int, latency_warps: int = LATENCY_WARPS) -> DirectPrediction:
    """The model of the module docstring for any block-tiled, chunk-pipelined, split-C kernel (direct, pointwise):
    ``pl`` has ``problem``, ``config`` (threads, stages, splits, accumulators), ``blocks`` and ``chunks_per_split``;
    ``bps`` resident blocks per SM (> 0), ``instructions`` per thread per channel chunk, ``traffic_words`` the
    modelled global-memory words of the launch, ``latency_warps`` the resident warps that hide latency (the
    latency factor is min(1, warps / latency_warps)^½)."""
    p, c = pl.problem, pl.config
    warps = c.threads // 32
    wave_count = pl.blocks / (machine.sm_count * bps)
    per_sm = -(-pl.blocks // machine.sm_count)          # blocks the busiest SM runs
    resident = min(per_sm, bps)                          # of them at a time
    per_block = warps * (pl.chunks_per_split * instructions + 4 * c.accumulators)
    sm_rate = machine.fp32_peak_flops_per_s / 64 / machine.sm_count  # warp-instructions / s / SM
    latency = min(1.0, resident * warps / latency_warps) ** 0.5
    chunk_issue_s = resident * warps * instructions / (sm_rate * latency)
    stall_s = max(0.0, GLOBAL_LATENCY_S - (c.stages - 1) * chunk_issue_s) / resident
    issue_s = per_sm / resident * (resident * per_block / (sm_rate * latency) + pl.chunks_per_split * stall_s)
    l2_s = 4 * traffic_words / (L2_OVER_DRAM_BANDWIDTH * machine.copy_bandwidth_bytes_per_s)
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    atomic_s = 0.0
    if c.splits > 1:
        atomic_s = c.splits * p.N * p.K * p.P * p.Q * ATOMIC_WORDS * 4 / machine.copy_bandwidth_bytes_per_s
    overhead = LAUNCH_OVERHEAD_S * (2 if c.splits > 1 else 1)
    # configs at the DRAM floor tie on the max: the tie-break term ranks them by their on-chip time
    tie_s = TIE_BREAK_FRACTION * max(issue_s, l2_s)
    return DirectPrediction(max(issue_s, l2_s, dram_s) + atomic_s + overhead + tie_s, issue_s, l2_s, dram_s, bps,
                            wave_count, tile_eff, atomic_s, tie_s)
