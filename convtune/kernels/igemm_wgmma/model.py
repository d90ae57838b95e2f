"""Analytic performance model of the wgmma forward, TF32 and 16-bit (for ranking configs, never as a result).

predicted time = max(SM time, L2 time, DRAM compulsory time) + layout change + split atomics (``SPLIT_ATOMICS_FACTOR``
× the output's bytes per split at the copy bandwidth, the implicit-GEMM model's) + launches:

* SM time: waves = ⌈blocks / (resident blocks · SMs)⌉, each costing ``resident`` blocks' chunks on one SM, a
  block-chunk costing the larger of its tensor-core time (2·BM·BN·ch FLOP, ch the chunk's columns: 32/16/8 TF32,
  64/32/16 16-bit; at the SM's share of the class's peak (TF32, or bf16 for both 16-bit types),
  ``TENSOR_FRACTION`` of the measured GEMM ceiling, itself near the dense wgmma rate) and a fixed per-chunk cost
  ``CHUNK_OVERHEAD_CLK`` (barrier, proxy fence, the wgmma queue's wait), which resident blocks overlap, and at
  least ``CHUNK_LATENCY_S / (stages − 2)`` (a block's copies run stages − 2 chunks ahead of its MMAs); TMA configs:
  ``TMA_OVERHEAD_FRACTION`` of the fixed cost and ``CHUNK_LATENCY_S / stages`` (the producer runs stages ahead);
* L2 time: the bytes the kernels request (:func:`~convtune.kernels.igemm_wgmma.launcher.traffic_words`, the
  layout change's excepted) at ``L2_FRACTION`` of the optimistic L2 figure;
* DRAM time: compulsory bytes at the copy bandwidth;
* the layout change reads x and writes the workspace at the copy bandwidth, one launch;
* folded-tap configs (stems): the max above × ``FOLD_FACTOR``, × ``FOLD_ROW_COPY_FACTOR`` more at m_blocks = 2.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from convtune.kernels.igemm.model import SPLIT_ATOMICS_FACTOR
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdPlan, chunk_elements, folded, traffic_words, uses_tma
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel

SM_CLOCK_HZ = 1.755e9
TENSOR_FRACTION = 0.8
CHUNK_OVERHEAD_CLK = 150
#: a chunk's copy latency: with loads (stages − 2) chunks ahead a block waits at least this / (stages − 2) per chunk.
#: CHUNK_LATENCY_S and L2_FRACTION are fitted on the H200 tables (the bf16 and TF32 replay tables, each family's
#: measured configs): model_v2 (105 (family, shape) units, no TMA configs) gave 1 µs and 0.15; model_v3 (116 units of
#: the unified_v3/v4 tables, tma=1 configs among them) 2 µs: leave-one-shape-out geomean regret of the model's first
#: config 1.154 (1 µs) → 1.115, and the untuned choice across families 1.213 → 1.159 (TF32), 1.114 → 1.106 (bf16)
#: (benchmarks/results/igemm_wgmma_h200/model_v3)
CHUNK_LATENCY_S = 2e-6
L2_FRACTION = 0.15
LAUNCH_OVERHEAD_S = 3e-6
#: the TMA kernel's per-chunk fixed cost relative to the copying kernel's (no copy issue, no block barrier, no proxy
#: fence in the consumers): set so that the model ranks it first where it measured 1.00–1.49× faster than the same
#: tile copying (the wip_wgmma_ws experiment, 14 losing (shape, class) pairs,
#: benchmarks/results/igemm_wgmma_h200/tma_v1)
TMA_OVERHEAD_FRACTION = 0.25
#: folded-tap configs (``row_taps`` > 1, stems): their kernel time × this. The model under-predicts them more than
#: the rest (measured / predicted 1.88× bf16 and 1.99× TF32 on the H200 replay tables, against 1.32× and 1.35×
#: unfolded), so the untuned TF32 choice ran large-batch stems folded at 1.7–2.7× the best family's time. With × 2
#: the untuned choice's geomean regret (benchmarks/family_choice_calibration.py, the shipped choice scales) goes, TF32:
#: 1.159 → 1.117 on the H200 tables (unified_v3, max 2.71 → 1.43) and 1.106 → 1.092 on the H100 ones (six_families_h100,
#: max 1.79 → 1.48), fitted on neither; bf16 1.137 → 1.137 and 1.108 → 1.108. Worse with it: ZFNet conv1 b1/b16 and
#: ResNet-50 conv1 b1 in TF32 on the H100 (1.03–1.14 → 1.28–1.48), where folding measured fastest.
FOLD_FACTOR = 2.0
#: folded-tap configs whose copying threads each copy a whole tile row per chunk (m_blocks = 2: 128·warpgroups rows
#: over 128·warpgroups threads, against half a row at m_blocks = 1): their time × this more. A folded row is S taps'
#: channels gathered by one thread, so its copy issue doubles; measured, (m_blocks 2, warpgroups 1) took 1.31–1.59×
#: the time of (1, 2) at the same tile on folded stems and 1.02–1.07× unfolded (tile_pairs.md). benchmarks/
#: fold_rows_fit.py (fold_rows_fit.md): from 1.5 to 4 the untuned choice across families is the same, bf16 1.086 →
#: 1.055 (H100) and 1.086 → 1.058 (H200), TF32 unchanged; model-first regret 1.125 → 1.121 at 2 (1.116 at 3, the
#: held-out pick), but at 3 the tuner's model pruning drops a bf16 stem's winners (AlexNet conv1 b16: a folded
#: m_blocks = 2 config 3.3% ahead of the rest), at 2 every replay shape keeps a config within 3% of its best
#: (tests/tuner/test_pruning_keeps_winners.py)
FOLD_ROW_COPY_FACTOR = 2.0
#: the H200's datasheet dense TF32 rate, when the machine carries no TF32 ceiling
FALLBACK_TF32_FLOPS = 494.7e12
#: the H200's datasheet dense bf16 / fp16 rate, when the machine carries no bf16 ceiling
FALLBACK_BF16_FLOPS = 989.4e12


def fold_factor(config: Any) -> float:
    """The factor on the max of a config's terms: ``FOLD_FACTOR`` for folded taps (× ``FOLD_ROW_COPY_FACTOR`` where
    each copying thread copies a whole tile row, m_blocks = 2), else 1."""
    if not folded(config):
        return 1.0
    return FOLD_FACTOR * (FOLD_ROW_COPY_FACTOR if config.m_blocks == 2 else 1.0)


@dataclass(frozen=True, slots=True)
class WgmmaPrediction:
    time_s: float
    sm_s: float
    l2_s: float
    dram_s: float
    resident_blocks: int
    tile_efficiency: float
    added_s: float = 0.0    # launches, the layout change, split atomics


def tile_efficiency(pl: IgemmWgmmaFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang M = N·P·Q and K, channels are padded to Cp per tap."""
    p, c = pl.problem, pl.config
    computed = (pl.m_tiles * c.tile_m) * (pl.n_tiles * c.tile_n) * pl.krp
    return p.N * p.P * p.Q * p.K * p.C * p.R * p.S / computed


def predict(pl: IgemmWgmmaFwdPlan, machine: MachineModel,
            traffic: Callable[[Any], dict[str, int]] = traffic_words) -> WgmmaPrediction:
    """Model time of the plan's launches on ``machine`` (see the module docstring); ``traffic`` is the family's
    request count (the 1×1 kernel's has no layout change)."""
    c, p = pl.config, pl.problem
    eff = tile_efficiency(pl)
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return WgmmaPrediction(math.inf, math.inf, math.inf, math.inf, 0, eff)
    if p.itemsize_bytes == 2:
        peak = machine.bf16_peak_flops_per_s or FALLBACK_BF16_FLOPS
    else:
        peak = machine.tf32_peak_flops_per_s or machine.datasheet_tf32_flops_per_s or FALLBACK_TF32_FLOPS
    sm_flops = TENSOR_FRACTION * peak / machine.sm_count
    item = p.itemsize_bytes
    tensor_s = 2 * c.tile_m * c.tile_n * chunk_elements(p, c) / sm_flops   # one block-chunk alone on an SM
    tma = uses_tma(c)
    overhead_s = CHUNK_OVERHEAD_CLK * (TMA_OVERHEAD_FRACTION if tma else 1.0) / SM_CLOCK_HZ
    waves = -(-pl.blocks // (bps * machine.sm_count))
    # resident blocks share the tensor cores and overlap each other's fixed cost; TMA copies run `stages` ahead
    latency_s = CHUNK_LATENCY_S / (c.stages if tma else max(1, c.stages - 2))
    per_wave_s = pl.chunks_per_split * max(bps * tensor_s, overhead_s + tensor_s, latency_s)
    sm_s = waves * per_wave_s
    l2_bw = L2_FRACTION * (machine.l2_bandwidth_bytes_per_s or 10 * machine.copy_bandwidth_bytes_per_s)
    words = traffic(pl)
    layout_words = words.pop("layout", 0)
    l2_s = item * sum(words.values()) / l2_bw
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    atomics_s = SPLIT_ATOMICS_FACTOR * 4 * p.output_elements * pl.splits_launched \
        / machine.copy_bandwidth_bytes_per_s if pl.splits_launched > 1 else 0.0
    if pl.splits_launched > 1 and item == 2:   # the fp32 workspace's conversion into y: one more launch and pass
        atomics_s += LAUNCH_OVERHEAD_S + 6 * p.output_elements / machine.copy_bandwidth_bytes_per_s
    launches = 2 if layout_words else 1
    added_s = launches * LAUNCH_OVERHEAD_S + item * layout_words / machine.copy_bandwidth_bytes_per_s + atomics_s
    time_s = max(sm_s, l2_s, dram_s) * fold_factor(c) + added_s
    return WgmmaPrediction(time_s, sm_s, l2_s, dram_s, bps, eff, added_s)
