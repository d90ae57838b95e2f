"""Model time of the TF32 unfused Winograd path (:mod:`.launcher`): the fp32 path's transforms (as
:func:`convtune.kernels.winograd.model.predict_unfused` prices them) and a tensor-core GEMM.

    time = transforms + max(GEMM issue + fold, GEMM L2 re-reads, GEMM DRAM traffic) + launches
    GEMM issue = Σ_passes ⌈waves⌉ · chunks · max(chunk time, global-load latency / (stages − 1))
    chunk time = 2·BK·BT·BC·products FLOPs of every resident block / (TF32_MMA_FRACTION · the TF32 ceiling per SM)

products: TF32 MMAs per term, 1 here, 3 in the strict-fp32 3xTF32 family
(:mod:`convtune.kernels.winograd_3xtf32`). That family's fused plans (``fuse = 1``: GEMMs and output transform in
one kernel) move no M (the traffic terms of M are 0), run α²·Cp/BC chunks a block over a grid without the frequency
axis, and add the fold: ⌈waves⌉ · α² · 2·(outputs per thread)·threads of every resident block / (the fp32 FMA ceiling
per SM); two launches instead of three.
"""

from __future__ import annotations

import math
from typing import Any

from convtune.kernels.direct.model import GLOBAL_LATENCY_S, L2_OVER_DRAM_BANDWIDTH, LAUNCH_OVERHEAD_S
from convtune.kernels.launch_geometry import resident_blocks
from convtune.kernels.winograd.model import WinogradPrediction, pass_terms
from convtune.machine import MachineModel

#: the share of the TF32 GEMM ceiling an mma.sync main loop fed by scalar shared-memory fragment loads (6 loads and
#: 6 cvt per m16n8k8 at the widest warp tiles, twice that with 3xTF32's split) sustains. Fitted on the 3xTF32 family's
#: 274 unfused configs timed on an H100 (benchmarks/results/winograd_3xtf32_h100; 16 shapes): measured / predicted
#: time is 1.55 (geomean) at the prior 0.5, 1.09 at 0.25 (mean |log| error 0.16, the least of 0.1–0.5), 0.95 at 0.2
TF32_MMA_FRACTION = 0.25
#: the H200's datasheet dense TF32 rate, when the machine carries no TF32 ceiling
FALLBACK_TF32_FLOPS = 494.7e12


def predict(pl: Any, machine: MachineModel) -> WinogradPrediction:
    """Model time of the three launches (module docstring) of a :class:`.launcher.WinogradUnfusedTf32Plan`."""
    p, c = pl.problem, pl.config
    bw = machine.copy_bandwidth_bytes_per_s
    fused = pl.fused
    t = pl.traffic()
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return WinogradPrediction(math.inf, math.inf, 0.0, 0.0, 0, math.inf)
    passes = pass_terms(pl, machine, bps, kernels=2 if fused else 3)
    ws_bw = passes.workspace_bytes_per_s
    transforms_s = 4 * (p.input_elements + t["output"]) / bw + 4 * (t["v_store"] + t["m_load"]) / ws_bw
    peak = machine.tf32_peak_flops_per_s or machine.datasheet_tf32_flops_per_s or FALLBACK_TF32_FLOPS
    rate_per_sm = TF32_MMA_FRACTION * peak / machine.sm_count
    chunks = pl.cp // c.chunk_c * (c.alpha ** 2 if fused else 1)    # a block's chunks
    chunk_s = 2.0 * c.tile_k * c.tile_t * c.chunk_c * c.products * bps / rate_per_sm   # a chunk of every resident block
    # stages − 1 chunks in flight: a chunk's loads have (stages − 1) chunk times to land, so the pipeline issues a
    # chunk every max(chunk time, latency / (stages − 1)) (never cheaper when a chunk costs more)
    issue_s = passes.ceil_waves * chunks * max(chunk_s, GLOBAL_LATENCY_S / (c.stages - 1))
    fold_s = (passes.ceil_waves * c.alpha ** 2 * 2.0 * c.output_registers * c.threads * bps
              / (machine.fp32_peak_flops_per_s / machine.sm_count))
    l2_s = 4 * (t["filter"] + t["v_load"] + t["m_store"]) / (L2_OVER_DRAM_BANDWIDTH * bw)
    gemm_dram_s = 4 * c.alpha ** 2 * pl.cp * pl.kp / bw + 4 * (t["v_store"] + t["m_store"]) / ws_bw
    gemm_s = max(issue_s + fold_s, l2_s, gemm_dram_s)
    return WinogradPrediction(transforms_s + gemm_s + passes.launches * LAUNCH_OVERHEAD_S, issue_s + fold_s, l2_s,
                              transforms_s + gemm_dram_s, bps, passes.waves)
