"""Analytic performance model of the fused and unfused Winograd kernels (for ranking, never as a result).

Both use the direct model's machine terms (:mod:`convtune.kernels.direct.model`): the SM issue rate is
the measured SGEMM rate / 64 flops per warp-FFMA / SMs, the latency factor min(1, resident warps / 8)^½,
L2 bandwidth 2.5× the copy bandwidth.

Fused, per thread and BC-chunk (the unrolled loops of ``winograd_fwd.cu``):
  FFMA = BC·α²·TK·TN; LDS = BC·α²·(TK + TN); per input window α² LDG + α² STS + the transform's adds
  (:func:`~convtune.kernels.winograd.transforms.transform_op_counts`) + 3α² address/predicate
  instructions; 3 per 16-byte filter copy; 30 loop control.
  Epilogue per thread: TN·TK output transforms (+ m² stores).
  time = max(issue, L2 traffic, DRAM compulsory) + one launch.
Unfused: input transform and output transform are memory-bound (their bytes / copy bandwidth), the
GEMM is priced like the fused multiply with LDS = BC·(TK + TT)/4 (float4), and the three add up, each
with a launch overhead. A plan whose batch runs in several passes (``images_per_pass``) pays three launches and
the waves of each pass, and where a pass's V and M fit :data:`RESIDENT_L2_FRACTION` of L2 they move at L2
bandwidth (written by one kernel, read by the next while still in L2). A single pass keeps the DRAM price the
shipped model was calibrated with.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from convtune.kernels.direct.model import GLOBAL_LATENCY_S, L2_OVER_DRAM_BANDWIDTH, LATENCY_WARPS, LAUNCH_OVERHEAD_S
from convtune.kernels.launch_geometry import resident_blocks
from convtune.kernels.winograd import unfused
from convtune.kernels.winograd.launcher import WinogradFwdPlan, total_traffic_words
from convtune.kernels.winograd.transforms import transform_op_counts
from convtune.machine import MachineModel

#: the share of L2 a pass's V and M may take and still be read back from L2 by the next kernel (the filters and the
#: input and output streams take the rest)
RESIDENT_L2_FRACTION = 0.7


@dataclass(frozen=True, slots=True)
class PassTerms:
    """What a plan's passes cost beyond one pass: the sum over passes of their GEMM waves rounded up, the waves,
    the launches, and the bandwidth V and M move at."""

    ceil_waves: int
    waves: float
    launches: int
    workspace_bytes_per_s: float


def pass_terms(pl: unfused.WinogradUnfusedPlan, machine: MachineModel, bps: int, kernels: int = 3) -> PassTerms:
    """:class:`PassTerms` of an unfused plan with ``bps`` GEMM blocks resident per SM and ``kernels`` launches a
    pass."""
    per_wave = machine.sm_count * bps
    blocks = [math.prod(pl.pass_grid(ps)) for ps in pl.passes]
    bw = machine.copy_bandwidth_bytes_per_s
    resident = len(blocks) > 1 and pl.workspace_bytes <= RESIDENT_L2_FRACTION * machine.l2_bytes
    return PassTerms(sum(math.ceil(b / per_wave) for b in blocks), sum(blocks) / per_wave, kernels * len(blocks),
                     L2_OVER_DRAM_BANDWIDTH * bw if resident else bw)


@dataclass(frozen=True, slots=True)
class WinogradPrediction:
    time_s: float
    issue_s: float
    l2_s: float
    dram_s: float
    blocks_per_sm: int
    waves: float

    @property
    def bound_by(self) -> str:
        return max((self.issue_s, "issue"), (self.l2_s, "l2"), (self.dram_s, "dram"))[1]


def _sm_rate(machine: MachineModel) -> float:
    """Warp-instructions per second per SM."""
    return machine.fp32_peak_flops_per_s / 64 / machine.sm_count


def _latency(bps: int, warps: int) -> float:
    return min(1.0, bps * warps / LATENCY_WARPS) ** 0.5


def fused_instructions_per_chunk(pl: WinogradFwdPlan) -> int:
    c = pl.config
    a2 = c.alpha ** 2
    multiply = c.chunk_c * a2 * (c.thread_k * c.thread_n + c.thread_k + c.thread_n)
    windows = pl.windows_per_thread * (a2 + a2 + transform_op_counts(c.m)[0] + 3 * a2)
    copies = 3 * -(-(a2 * c.chunk_c * c.tile_k // 4) // c.threads)
    return multiply + windows + copies + 30


def predict_fused(pl: WinogradFwdPlan, machine: MachineModel, regs_per_thread: int | None = None) -> WinogradPrediction:
    """Model time of one launch of the fused kernel."""
    p, c = pl.problem, pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, regs_per_thread or pl.regs_estimate, machine)
    if bps == 0:
        return WinogradPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf)
    warps = c.threads // 32
    waves = pl.blocks / (machine.sm_count * bps)
    per_chunk = fused_instructions_per_chunk(pl)
    epilogue = c.thread_n * c.thread_k * (transform_op_counts(c.m)[1] + 2 * c.m * c.m)
    per_block = warps * (pl.chunks * per_chunk + epilogue)
    rate = _sm_rate(machine) * _latency(bps, warps)
    chunk_issue_s = bps * warps * per_chunk / rate
    stall_s = max(0.0, GLOBAL_LATENCY_S - (c.stages - 1) * chunk_issue_s) / bps
    issue_s = math.ceil(waves) * (bps * per_block / rate + pl.chunks * stall_s)
    l2_s = 4 * total_traffic_words(pl) / (L2_OVER_DRAM_BANDWIDTH * machine.copy_bandwidth_bytes_per_s)
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    return WinogradPrediction(max(issue_s, l2_s, dram_s) + LAUNCH_OVERHEAD_S, issue_s, l2_s, dram_s, bps, waves)


def gemm_instructions_per_chunk(pl: unfused.WinogradUnfusedPlan) -> int:
    c = pl.config
    multiply = c.chunk_c * (c.thread_k * c.thread_t + (c.thread_k + c.thread_t) // 4)
    copies = 3 * -(-(c.chunk_c * (c.tile_k + c.tile_t) // 4) // c.threads)
    return multiply + copies + 20


def predict_unfused(pl: unfused.WinogradUnfusedPlan, machine: MachineModel,
                    regs_per_thread: int | None = None) -> WinogradPrediction:
    """Model time of the three launches of the unfused path (of each pass)."""
    p, c = pl.problem, pl.config
    bw = machine.copy_bandwidth_bytes_per_s
    t = unfused.traffic_words(pl)
    bps = resident_blocks(c.threads, pl.smem_bytes, regs_per_thread or pl.regs_estimate, machine)
    if bps == 0:
        return WinogradPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf)
    passes = pass_terms(pl, machine, bps)
    ws_bw = passes.workspace_bytes_per_s
    transforms_s = 4 * (p.input_elements + t["output"]) / bw + 4 * (t["v_store"] + t["m_load"]) / ws_bw
    warps = c.threads // 32
    chunks = pl.cp // c.chunk_c
    per_chunk = gemm_instructions_per_chunk(pl)
    per_block = warps * (chunks * per_chunk + 2 * c.thread_k * c.thread_t)
    rate = _sm_rate(machine) * _latency(bps, warps)
    chunk_issue_s = bps * warps * per_chunk / rate
    stall_s = max(0.0, GLOBAL_LATENCY_S - (c.stages - 1) * chunk_issue_s) / bps
    issue_s = passes.ceil_waves * (bps * per_block / rate + chunks * stall_s)
    l2_s = 4 * (t["filter"] + t["v_load"] + t["m_store"]) / (L2_OVER_DRAM_BANDWIDTH * bw)
    gemm_dram_s = 4 * c.points * pl.cp * pl.kp / bw + 4 * (t["v_store"] + t["m_store"]) / ws_bw
    gemm_s = max(issue_s, l2_s, gemm_dram_s)
    return WinogradPrediction(transforms_s + gemm_s + passes.launches * LAUNCH_OVERHEAD_S, issue_s, l2_s,
                              transforms_s + gemm_dram_s, bps, passes.waves)
