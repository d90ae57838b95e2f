"""Analytic performance model of the implicit-GEMM tensor-core kernel (for ranking configs, never as a result).

predicted time = max(SM time, L2 traffic time, DRAM compulsory time) + split atomics + launch overhead:

* SM time: waves = ⌈blocks / (resident blocks · SMs)⌉, each costing ``resident`` blocks' cycles on one SM at
  ``SM_CLOCK_HZ``, where a block's cycles per reduction chunk are the largest of three pipes:
  - tensor: warps · (BK/8) · MI·NI mma.sync m16n8k8 at ``MMA_PER_CLK`` per SM,
  - L1/shared memory (one wavefront per clock: 32 banks × 4 B, the data stage shared by shared-memory and L1
    traffic): warps · (BK/8) · (4·MI + 2·NI) fragment wavefronts, plus per A warp-copy ``A_COPY_WAVEFRONTS``
    (13 for the NCHW kernel's 4-byte cp.async gathers: calibrated on ncu's L1/TEX throughput of 128×128×16 2×2
    on a 3×3 256-channel 56×56 layer, 73% busy at 1237 wavefronts per block-chunk; 6 assumed for a 16-byte copy
    of the NHWC variant) and one per table read, plus 4 per 16-byte B warp-copy,
  - issue: warps · (A copies · 8 + B copies · 6 + (BK/8) · (5·MI + NI + MI·NI)) instructions at 4 per clock
    (the table-driven gather: load, two adds, two compares, address, copy; the fragment loads, A's TF32 rounding
    (B is rounded when packed), the mma);
  divided by a latency factor min(1, resident warps / 8)^½ for SMs with too few warps to hide latencies;
* L2 time: the words the kernel requests (:func:`~convtune.kernels.igemm.launcher.traffic_words`) at the L2 read
  bandwidth, ``L2_FRACTION`` of the optimistic L2 figure;
* DRAM time: compulsory bytes at the copy bandwidth.

The NHWC variant (``pl.channels_last``): its A copies are 16-byte pieces (6 instructions each, one wavefront per
warp copy, conflict-free) and its fragment loads four 4-byte reads per A tile; the layout change before it adds
2·N·C·H·W·4 bytes at the copy bandwidth and a second launch. The 1×1 variant (``pl.pointwise``) copies A in
16-byte pieces from NCHW x (4 instructions each, no table, no layout change), its fragment loads as the NHWC
variant's.

Uncalibrated first figures (no H200 measurement of this family yet): one m16n8k8 mma.sync per two clocks per SM
(~half the dense wgmma TF32 rate: 1024 MACs per clock per SM at 494.7 TFLOP/s, 132 SMs, 1.83 GHz); L2 feeds ~40% of
the optimistic per-SM port figure.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from convtune.kernels.igemm.launcher import WARP, IgemmFwdPlan, reduction_length
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel


def traffic_words(pl: IgemmFwdPlan) -> dict[str, int]:
    """The words the plan's kernels request, per operand (the variant's own formula)."""
    if pl.pointwise:
        from convtune.kernels.igemm import pointwise

        return pointwise.traffic_words(pl)
    if pl.channels_last:
        from convtune.kernels.igemm import nhwc

        return nhwc.traffic_words(pl)
    from convtune.kernels.igemm import launcher

    return launcher.traffic_words(pl)

MMA_PER_CLK = 0.5
SM_CLOCK_HZ = 1.755e9
ISSUE_PER_CLK = 4
L2_FRACTION = 0.4
LAUNCH_OVERHEAD_S = 3e-6
A_COPY_WAVEFRONTS_NCHW = 13   # L1 wavefronts of one warp's 4-byte cp.async gather (ncu, see above)
A_COPY_WAVEFRONTS_NHWC = 6    # of one warp's 16-byte cp.async.cg copy: 4 shared-memory writes + 2 (assumed)
#: a split's fp32 atomics into y (the 16-bit classes': into their fp32 workspace), per element relative to a plain
#: store at the copy bandwidth: a reduction in L2 reads and writes its word, so 2 (as the direct model's ATOMIC_WORDS).
#: On the four tensor-core replay tables (H100 and H200, TF32 and bf16; 603 (family, shape) units of the igemm and
#: wgmma families; the wgmma model takes this constant too) the geometric-mean regret of each family's model-first
#: config goes 1.138 → 1.125 (held out by shape 1.125; 3 gives 1.123), and the untuned choice across families
#: (family_choice_calibration's regret on the vs_cudnn reports) H100 TF32 1.072 → 1.059, bf16 1.104 → 1.086, H200
#: TF32 1.112 → 1.086, bf16 1.095 → 1.086 (benchmarks/split_atomics_fit.py and its table in
#: benchmarks/results/igemm_wgmma_h200/split_atomics_fit.md). Through the op on an H100 it moved 12 wide-suite
#: choices, 11 faster (DeepLabv3 layer4 dil2 TF32 0.79 → 1.00× cuDNN): TF32 untuned 1.38 → 1.41×
#: (igemm_wgmma_h200/class_tuned_h100/untuned_wide_split_atomics)
SPLIT_ATOMICS_FACTOR = 2.0


@dataclass(frozen=True, slots=True)
class IgemmPrediction:
    time_s: float
    sm_s: float             # the largest of the three pipes' times below
    l2_s: float
    dram_s: float
    resident_blocks: int
    tile_efficiency: float
    tensor_s: float = 0.0   # each pipe's SM time alone (same waves, latency factor and clock)
    l1_s: float = 0.0
    issue_s: float = 0.0
    atomics_s: float = 0.0
    added_s: float = 0.0    # launches and, for the NHWC variant, the layout change


def _nan_prediction(eff: float) -> IgemmPrediction:
    return IgemmPrediction(math.inf, math.inf, math.inf, math.inf, 0, eff, math.inf, math.inf, math.inf)


def tile_efficiency(pl: IgemmFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang M = N·P·Q and K at the edges, chunks overhang C·R·S."""
    p, c = pl.problem, pl.config
    kr = reduction_length(p)
    chunks = -(-kr // c.tile_k)
    computed = (pl.m_tiles * c.tile_m) * (pl.n_tiles * c.tile_n) * chunks * c.tile_k
    return (p.N * p.P * p.Q * p.K * kr) / computed


def predict(pl: IgemmFwdPlan, machine: MachineModel) -> IgemmPrediction:
    """Model time of one launch of ``pl`` on ``machine`` (see the module docstring)."""
    c = pl.config
    eff = tile_efficiency(pl)
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return _nan_prediction(eff)
    p = pl.problem
    mi, ni = c.mma_tiles
    warps = c.threads // WARP
    k8 = c.tile_k // 8
    tensor_clk = warps * k8 * mi * ni / MMA_PER_CLK
    a_warp_copies = warps * pl.a_copies
    b_wavefronts = 4 * c.tile_k * c.tile_n / 4 / WARP
    if pl.pointwise:
        l1_clk = warps * k8 * (4 * mi + 2 * ni) + a_warp_copies * A_COPY_WAVEFRONTS_NHWC + b_wavefronts
        issue_clk = warps * (pl.a_copies * 4 + pl.b_copies * 6 + k8 * (8 * mi + ni + mi * ni)) / ISSUE_PER_CLK
    elif pl.channels_last:
        table_reads = warps                     # one entry per thread and chunk
        l1_clk = warps * k8 * (4 * mi + 2 * ni) + a_warp_copies * A_COPY_WAVEFRONTS_NHWC + table_reads + b_wavefronts
        issue_clk = warps * (pl.a_copies * 6 + pl.b_copies * 6 + k8 * (8 * mi + ni + mi * ni)) / ISSUE_PER_CLK
    else:
        table_reads = a_warp_copies             # one (broadcast) entry per copy
        l1_clk = warps * k8 * (4 * mi + 2 * ni) + a_warp_copies * A_COPY_WAVEFRONTS_NCHW + table_reads + b_wavefronts
        issue_clk = warps * (pl.a_copies * 8 + pl.b_copies * 6 + k8 * (5 * mi + ni + mi * ni)) / ISSUE_PER_CLK
    latency = min(1.0, bps * warps / 8) ** 0.5
    waves = -(-pl.blocks // (bps * machine.sm_count))
    per_clk_s = waves * bps * pl.chunks_per_split / latency / SM_CLOCK_HZ
    tensor_s, l1_s, issue_s = tensor_clk * per_clk_s, l1_clk * per_clk_s, issue_clk * per_clk_s
    sm_s = max(tensor_s, l1_s, issue_s)
    l2_bw = L2_FRACTION * (machine.l2_bandwidth_bytes_per_s or 10 * machine.copy_bandwidth_bytes_per_s)
    words = traffic_words(pl)
    words.pop("layout", None)   # the layout change is its own kernel (added below)
    l2_s = 4 * sum(words.values()) / l2_bw
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    atomics_s = (SPLIT_ATOMICS_FACTOR * 4 * p.output_elements * c.splits / machine.copy_bandwidth_bytes_per_s
                 if c.splits > 1 else 0.0)
    added_s = LAUNCH_OVERHEAD_S
    if pl.channels_last:   # the layout change: read and write x once, its own launch
        added_s += 8 * p.N * p.C * p.H * p.W / machine.copy_bandwidth_bytes_per_s + LAUNCH_OVERHEAD_S
    time_s = max(sm_s, l2_s, dram_s) + atomics_s + added_s
    return IgemmPrediction(time_s, sm_s, l2_s, dram_s, bps, eff, tensor_s, l1_s, issue_s, atomics_s, added_s)

