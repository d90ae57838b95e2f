"""Analytic time model of the depthwise kernels (for ranking configurations, never reported as a result).

predicted time = max(DRAM time, L2 time, issue time) / efficiency + launch overhead, where

* DRAM time: the path's compulsory bytes (:func:`~convtune.kernels.depthwise.conv1d.traffic.compulsory_bytes`;
  2-D: ``problem.compulsory_bytes``) over the copy bandwidth — one read of the inputs, one write of the
  output;
* L2 time: the variant's modelled request bytes (:mod:`~convtune.kernels.depthwise.conv1d.traffic`, halo
  re-reads and weight reloads included; 2-D: :func:`~convtune.kernels.depthwise.conv2d.tiled.traffic_words`)
  over an L2 bandwidth of 2.5× the copy bandwidth (the direct model's assumption);
* issue time: multiply-adds × instructions per multiply-add (``COST_PER_MAC``) over the SMs' FFMA rate
  (``machine.fp32_peak_flops_per_s`` / 2). The costs are per (variant, path), calibrated once on the
  H200 paper-shape measurements (``benchmarks/results/depthwise_h200``: e.g. shared fwd 1.24 ms for
  2.46 G causal MACs at 25.4 T FFMA/s ≈ 13 instructions per MAC; the strided naive loads show up as
  ~110). The fast variant counts the multiply-adds it issues (:func:`~convtune.kernels.depthwise.conv1d.traffic.
  fast_issued_macs`, causal zeros and tails included) at 1.3 instructions each (FFMA + its share of
  float4 shared-memory loads); the other 1-D variants count causal multiply-adds; 2-D counts every tap
  at ``COST_2D_BASE`` + ``COST_2D_WINDOW`` × the window's shared-memory loads per multiply-add (the 2-D
  fast kernel: ``COST_2D_FAST_*`` with float4 window reads per item of VH × VW outputs; the packed kernel:
  ``COST_2D_FAST_BASE`` + ``COST_2D_PACKED_ROW`` × scalar row reads per multiply-add);
* efficiency = SM fill × tail × latency hiding: blocks resident per SM come from threads, shared
  memory and the register estimate (:func:`~convtune.kernels.launch_geometry.resident_blocks`); a grid
  smaller than one wave fills min(1, grid / SMs) of the SMs; a grid of w waves loses the idle part of
  its last wave (w / ⌈w⌉); an SM with fewer than 8 resident warps hides latency by min(1, warps / 8)^½;
* L1 time (float32, fwd/dgrad), in wavefronts at one 128-byte line per clock per SM (the clock the FFMA rate
  implies: 128 lanes × 2 flops per clock per SM):
  - warp register design: the distinct 128-byte lines each warp load or store touches
    (:func:`~convtune.kernels.depthwise.conv1d.traffic.warp_line_wavefronts`): the L1 looks up one line a clock,
    however few of its sectors an instruction uses. With 2 lanes a row on Vim's odd rows (L = 197, scalar loads)
    a warp's lanes sit in 16–32 lines for 128 useful bytes; priced by sectors (128 bytes a clock) these configs
    were predicted at 0.28–0.52× their measured H200 time and the model picked them as soon as the fast configs'
    prices rose; priced by lines, 0.6–1.0×;
  - fast kernel: its shared-memory wavefronts (:func:`~convtune.kernels.depthwise.conv1d.traffic.
    fast_smem_wavefronts`: float4 window reads and result writes with their bank conflicts, conflict-free copies
    in and out). Lanes a multiple of 128 bytes apart in a row (tile_l = 32) conflict 8 ways: HyenaDNA's pick
    without the term, 61% of copy on the H100, where conflict-free tile_l = 12 configs measured 74–77% on the H200;
  - with both, the model's top measured config over the 12 measured 1-D shapes has regret 1.036 geomean, worst
    1.22 (sectors alone: 1.065, 1.46; no L1 term: 1.222, 2.56;
    ``tests/kernels/depthwise/test_depthwise_model_measured.py``);
* pipeline rounds (1-D fast, warp register design, shared): a block (a warp in the register design) works
  through its items in sequence, and each item waits for its loads. Per round ``ROUND_LATENCY_S`` (0.6 µs:
  a loaded DRAM round trip that the next item's prefetch does not cover) is a latency term, and the memory
  terms are stretched by (rounds + 1) / rounds, the prologue load and the epilogue store that no other item
  overlaps. Items a block takes in sequence: the fast kernel's ⌈row groups · segments / grid⌉; the register
  design's ⌈⌈rows / rows per warp⌉ · segments / (grid · warps)⌉; the shared kernel's waves of blocks. Without a
  prefetch (fast ``stages = 1``, and the shared kernel, which loads, computes and stores one tile per block)
  the memory terms count ``SERIAL_ROUND_FACTOR`` = 2× (load and store phases do not overlap). Before these
  terms every fast config of HyenaDNA's 201 MB layer tied at the DRAM time and the pick, ``stages = 1
  tile_l = 64``, measured 2× the floor on the H100; on the three 1-D shapes with ≥ 20 measured candidates the
  Spearman rank correlation of predicted and measured time went from 0.81 / 0.76 / 0.80 to 0.88 / 0.91 /
  0.98, and constants fitted on any one of them give 0.90–0.97 on the others (held out;
  ``tests/kernels/depthwise/test_depthwise_model_measured.py``);
* the binding term counts fully, the others by ``OVERLAP_LOSS`` = 0.2 (overlap is never perfect; this
  also separates configurations whose binding term ties); the fast variant's scalar copies (vec = 1)
  reach 0.85 of the float4 bandwidth;
* launch overhead: 2.5 µs per kernel (the deterministic weight gradient adds its reduction kernel, the
  atomic one the ``memset`` of dw, and with 16-bit storage the memset of its fp32 workspace and the
  reduction kernel that converts it).

Every term is a lower-bound-like estimate, so the model ranks configurations within a variant by traffic
and occupancy, and across variants by the calibrated issue cost; the tuner's measurements decide.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from convtune.kernels.depthwise.conv1d import traffic
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan, warp_register_design
from convtune.kernels.depthwise.conv2d.fast import Dw2dFastPlan
from convtune.kernels.depthwise.conv2d.fast import traffic_words as traffic_words_2d_fast
from convtune.kernels.depthwise.conv2d.packed import Dw2dPackedPlan
from convtune.kernels.depthwise.conv2d.packed import traffic_words as traffic_words_2d_packed
from convtune.kernels.depthwise.conv2d.tiled import Dw2dPlan
from convtune.kernels.depthwise.conv2d.tiled import traffic_words as traffic_words_2d
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel

L2_OVER_DRAM_BANDWIDTH = 2.5
LAUNCH_OVERHEAD_S = 2.5e-6
LATENCY_WARPS = 8
#: Instructions issued per multiply-add, per (variant, path); "atomic" keys the atomic weight gradient.
COST_PER_MAC: dict[tuple[str, str], float] = {
    ("naive", "fwd"): 110.0, ("naive", "dgrad"): 110.0, ("naive", "wgrad"): 200.0, ("naive", "atomic"): 1400.0,
    ("coalesced", "fwd"): 17.0, ("coalesced", "dgrad"): 17.0, ("coalesced", "wgrad"): 19.0,
    ("shared", "fwd"): 13.0, ("shared", "dgrad"): 13.0, ("shared", "wgrad"): 17.5,
    ("warp", "fwd"): 15.0, ("warp", "dgrad"): 15.0, ("warp", "wgrad"): 15.0,
    ("fast", "fwd"): 1.3, ("fast", "dgrad"): 1.3, ("fast", "wgrad"): 1.3,
}
#: warp-tiled register design: a lane with V outputs gets the K − 1 inputs before its own by shuffles, so
#: its instructions per multiply-add fall as 1/V. Fitted to the H200 paper-shape measurements of this design
#: (benchmarks/results/depthwise_h200: V = 12, G = 4: 0.298 ms; V = 2, G = 32: 1.32 ms, analyze_paper).
WARP_REG_BASE = 1.2
WARP_REG_PER_OUTPUT = 24.0
#: 2-D: instructions per multiply-add = BASE + WINDOW × shared-memory loads per multiply-add of a row's
#: register window, ((VW − 1)·stride_w + S) / (VW·S); VW = 1, S = 3 gives 16 (convnext 7×7 measured ≈ 15).
COST_2D_BASE = 8.0
COST_2D_WINDOW = 8.0
#: 2-D fast: an item of VH × VW outputs reads each of its (VH−1)·stride_h + R input rows' windows of
#: (VW−1)·stride_w + S once (float4) for VH·VW·R·S multiply-adds; not yet calibrated on a GPU.
COST_2D_FAST_BASE = 2.0
COST_2D_FAST_WINDOW = 4.0
#: 2-D packed: an item of VH rows × Q outputs reads (VH−1)·stride_h + R input rows of W floats, one scalar
#: shared-memory load each, for VH·Q·R·S multiply-adds; not yet calibrated on a GPU.
COST_2D_PACKED_ROW = 1.0
#: Unhidden fraction of the non-binding terms: overlap of memory and issue is never perfect, and the
#: penalty separates configurations whose binding term ties (every fast config is at the DRAM time).
OVERLAP_LOSS = 0.2
#: FP32 lanes per SM (the FFMA rate's clock).
FP32_LANES_PER_SM = 128
#: Pipeline rounds (module docstring): the exposed latency of one round, the rounds no prefetch overlaps
#: (prologue load + epilogue store, as a count), and the memory-time factor of a design without a prefetch.
#: Fitted on the H200 1-D tables (grid 0–1 µs × 1–3 × 0–2; each shape alone picks 0.6–1 µs, 2–3, 0.5–2).
ROUND_LATENCY_S = 0.6e-6
UNOVERLAPPED_ROUNDS = 1
SERIAL_ROUND_FACTOR = 2.0
#: The fast variant's 4-byte copies (vec = 1) issue 4× the copy instructions of float4 ones.
SCALAR_COPY_EFFICIENCY = 0.85


@dataclass(frozen=True, slots=True)
class DepthwisePrediction:
    time_s: float
    dram_s: float
    l2_s: float
    issue_s: float
    efficiency: float
    launches: int
    l1_s: float = 0.0
    latency_s: float = 0.0

    @property
    def bound_by(self) -> str:
        return max((self.issue_s, "issue"), (self.l1_s, "l1"), (self.l2_s, "l2"), (self.dram_s, "dram"),
                   (self.latency_s, "latency"))[1]


def _efficiency(grid: int, threads: int, smem_bytes: int, regs: int, machine: MachineModel) -> float:
    bps = resident_blocks(threads, smem_bytes, regs, machine)
    if bps == 0:
        return 0.0
    slots = machine.sm_count * bps
    fill = min(1.0, grid / machine.sm_count)
    waves = grid / slots
    tail = waves / math.ceil(waves) if waves > 1 else 1.0
    blocks_per_sm = min(bps, max(1.0, grid / machine.sm_count))
    latency = min(1.0, blocks_per_sm * threads / 32 / LATENCY_WARPS) ** 0.5
    return fill * tail * latency


def _combine(dram_s: float, l2_s: float, issue_s: float, eff: float, launches: int,
             l1_s: float = 0.0, latency_s: float = 0.0) -> DepthwisePrediction:
    """Busy time (the binding term + ``OVERLAP_LOSS`` × the rest) / efficiency + launch overheads. Every term is
    divided by the efficiency; a per-block term (``latency_s``) comes in multiplied by the SM fill, which undoes the
    fill part of that division."""
    if eff <= 0:
        return DepthwisePrediction(math.inf, dram_s, l2_s, issue_s, 0.0, launches, l1_s, latency_s)
    terms = (dram_s, l2_s, issue_s, l1_s, latency_s)
    busy = max(terms) + OVERLAP_LOSS * (sum(terms) - max(terms))
    time_s = busy / eff + launches * LAUNCH_OVERHEAD_S
    return DepthwisePrediction(time_s, dram_s, l2_s, issue_s, eff, launches, l1_s, latency_s)


def l1_wavefronts_per_s(machine: MachineModel) -> float:
    """L1 / shared-memory wavefronts per second: one 128-byte line per clock per SM, at the clock of the FFMA rate
    (fp32 peak / (2·128·SMs))."""
    return machine.fp32_peak_flops_per_s / (2 * FP32_LANES_PER_SM)


def predict_1d(pl: Depthwise1dPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one call of a 1-D plan (the reduction kernel of a deterministic wgrad included)."""
    bw = machine.copy_bandwidth_bytes_per_s
    dram_s = traffic.compulsory_bytes(pl.problem, pl.path) / bw
    l2_s = traffic.total_traffic_bytes(pl) / (L2_OVER_DRAM_BANDWIDTH * bw)
    macs = traffic.fast_issued_macs(pl) if pl.variant == "fast" else traffic.flops(pl.problem) // 2
    cost = COST_PER_MAC[(pl.variant, "atomic" if pl.atomic and pl.variant == "naive" else pl.path)]
    register = pl.variant == "warp" and _warp_registers(pl)
    if register:
        cost = WARP_REG_BASE + WARP_REG_PER_OUTPUT / pl.config.outputs_per_lane  # type: ignore[attr-defined]
    issue_s = macs * cost / (machine.fp32_peak_flops_per_s / 2)
    l1_s = 0.0
    if register and pl.path != "wgrad" and pl.problem.itemsize_bytes == 4:
        l1_s = traffic.warp_line_wavefronts(pl) / l1_wavefronts_per_s(machine)
    elif pl.variant == "fast":
        l1_s = traffic.fast_smem_wavefronts(pl) / l1_wavefronts_per_s(machine)
    if pl.variant == "fast" and pl.config.vec == 1:  # type: ignore[attr-defined]
        dram_s, l2_s = dram_s / SCALAR_COPY_EFFICIENCY, l2_s / SCALAR_COPY_EFFICIENCY
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine)
    rounds, serial = pipeline_rounds(pl, machine)
    latency_s = 0.0
    if rounds:
        stretch = (rounds + UNOVERLAPPED_ROUNDS) / rounds * (SERIAL_ROUND_FACTOR if serial else 1.0)
        dram_s, l2_s = dram_s * stretch, l2_s * stretch
        # per block: undo the SM fill that _combine's efficiency divides by (the rounds already count the grid)
        latency_s = rounds * ROUND_LATENCY_S * min(1.0, pl.grid / machine.sm_count)
    # wgrad: the main kernel + the memset of dw or its fp32 workspace + (deterministic or 16-bit atomic) the
    # reduction kernel; the deterministic mode writes every partial, so it needs no memset
    launches = 1 if pl.path != "wgrad" else 2 + (pl.atomic_workspace and not pl.deterministic)
    return _combine(dram_s, l2_s, issue_s, eff, launches, l1_s, latency_s)


def pipeline_rounds(pl: Depthwise1dPlan, machine: MachineModel) -> tuple[int, bool]:
    """(items one block — one warp in the register design — takes in sequence, whether it has no prefetch);
    (0, False) for the variants without a round structure (naive, coalesced, the warp shared-memory design)."""
    g = pl.geometry
    if pl.variant == "fast":
        return -(-g["ngroups"] * g["nseg"] // pl.grid), pl.config.stages == 1  # type: ignore[attr-defined]
    if pl.variant == "warp" and pl.path != "wgrad" and g.get("register"):
        rows_per_warp = traffic.WARP_LANES // pl.config.lanes_per_row  # type: ignore[attr-defined]
        items = -(-pl.rows // rows_per_warp) * g["nseg"]
        return -(-items // (pl.grid * pl.threads // traffic.WARP_LANES)), False
    if pl.variant == "shared":
        slots = machine.sm_count * max(1, resident_blocks(pl.threads, pl.smem_bytes, pl.regs_estimate, machine))
        return -(-pl.grid // slots), True
    return 0, False


def _warp_registers(pl: Depthwise1dPlan) -> bool:
    """Whether a warp plan runs the register design (fwd/dgrad by shape and tile, wgrad with design=2)."""
    c = pl.config
    if pl.path == "wgrad":
        return getattr(c, "design", 1) == 2
    return warp_register_design(pl.problem, c.lanes_per_row, c.outputs_per_lane)  # type: ignore[attr-defined]


def predict_2d(pl: Dw2dPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one launch of the 2-D tiled forward plan."""
    bw = machine.copy_bandwidth_bytes_per_s
    p = pl.problem
    dram_s = p.compulsory_bytes / bw
    l2_s = 4 * sum(traffic_words_2d(pl).values()) / (L2_OVER_DRAM_BANDWIDTH * bw)
    vw = pl.config.outputs_per_thread
    cost = COST_2D_BASE + COST_2D_WINDOW * ((vw - 1) * p.stride_w + p.S) / (vw * p.S)
    issue_s = p.macs * cost / (machine.fp32_peak_flops_per_s / 2)
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine)
    return _combine(dram_s, l2_s, issue_s, eff, 1)


def predict_2d_fast(pl: Dw2dFastPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one launch of the 2-D fast forward plan."""
    bw = machine.copy_bandwidth_bytes_per_s
    p, c = pl.problem, pl.config
    dram_s = p.compulsory_bytes / bw
    l2_s = p.itemsize_bytes * sum(traffic_words_2d_fast(pl).values()) / (L2_OVER_DRAM_BANDWIDTH * bw)
    vh, vw = c.rows_per_thread, c.outputs_per_thread
    loads = ((vh - 1) * p.stride_h + p.R) * ((vw - 1) * p.stride_w + p.S) / 4   # float4 reads
    cost = COST_2D_FAST_BASE + COST_2D_FAST_WINDOW * loads / (vh * vw * p.R * p.S)
    issue_s = p.macs * cost / (machine.fp32_peak_flops_per_s / 2)
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine)
    return _combine(dram_s, l2_s, issue_s, eff, 1)


def predict_2d_packed(pl: Dw2dPackedPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one launch of the 2-D packed forward plan."""
    bw = machine.copy_bandwidth_bytes_per_s
    p, vh = pl.problem, pl.config.rows_per_thread
    dram_s = p.compulsory_bytes / bw
    l2_s = p.itemsize_bytes * sum(traffic_words_2d_packed(pl).values()) / (L2_OVER_DRAM_BANDWIDTH * bw)
    row_loads = ((vh - 1) * p.stride_h + p.R) * p.W
    cost = COST_2D_FAST_BASE + COST_2D_PACKED_ROW * row_loads / (vh * p.Q * p.R * p.S)
    issue_s = p.macs * cost / (machine.fp32_peak_flops_per_s / 2)
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine)
    return _combine(dram_s, l2_s, issue_s, eff, 1)


def predict(pl: Any, machine: MachineModel) -> DepthwisePrediction:
    """:func:`predict_1d`, :func:`predict_2d`, :func:`predict_2d_fast` or :func:`predict_2d_packed` by plan
    type."""
    if isinstance(pl, Dw2dPackedPlan):
        return predict_2d_packed(pl, machine)
    if isinstance(pl, Dw2dFastPlan):
        return predict_2d_fast(pl, machine)
    return predict_2d(pl, machine) if isinstance(pl, Dw2dPlan) else predict_1d(pl, machine)
