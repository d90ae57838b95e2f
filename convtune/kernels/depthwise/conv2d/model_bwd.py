"""Analytic time model of the 2-D depthwise gradient kernels (``dw2d_dgrad.cu``, ``dw2d_wgrad.cu``), for ranking
their configurations; the same terms as the forward model (:mod:`~convtune.kernels.depthwise.model`):

predicted time = (max(DRAM, L2, issue) + ``OVERLAP_LOSS`` × the others) / efficiency + launches × 2.5 µs

* DRAM: ``problem.compulsory_bytes`` — dy, w, dx (dgrad) or x, dy, dw (wgrad) are the forward's three
  tensors, each moved once;
* L2: the plan's requested words (:func:`~convtune.kernels.depthwise.conv2d.dgrad.traffic_words`,
  :func:`~convtune.kernels.depthwise.conv2d.wgrad.traffic_words`) in bytes
  (:func:`~convtune.kernels.depthwise.dtypes.stream_bytes`: tensors at the problem's itemsize, the weight
  gradient's fp32 partials and atomics at 4 bytes) over 2.5 × the copy bandwidth;
* issue: ``problem.macs`` multiply-adds (both gradients are adjoints of the forward: every (output, tap)
  pair once) × (``COST_BASE`` + ``COST_WINDOW`` × shared-memory wavefronts per multiply-add of an item: a
  float4 read counts one, times its bank-conflict degree over the block's first items) × the code-size
  factor max(1, multiply-adds of one fully unrolled item / ``UNROLLED_MACS``); the weight gradient adds
  its block reduction, R·S sums × 5 shuffle steps per thread of every block at ``SHUFFLE_COST``
  multiply-add slots each (shuffles issue at a quarter of the FFMA rate): what makes small blocks expensive;
* efficiency: SM fill × tail × latency hiding from the plan's threads, shared memory and register estimate,
  times the threads' use over a block's items, items / (⌈items / threads⌉ · threads);
* launches: dgrad 1; wgrad 2 (main + reduction when deterministic, ``memset`` + main when atomic; 3 for an
  atomic one of 16-bit storage: ``memset``, main into the fp32 workspace, conversion).

The constants are the forward's, plus one H200 observation (convnext 7×7, N=32 C=96 56×56): the input
gradient with 8×8 outputs per item (3136 unrolled multiply-adds) ran at twice the time of 7×4 (1372), which
``UNROLLED_MACS`` encodes. Check its choices against H200 measurements
(``benchmarks/results/depthwise_h200/suite_v2``: the best of a few candidates per shape).
"""

from __future__ import annotations

from collections import Counter
from typing import Any

from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.kernels.depthwise.conv2d.dgrad import Dw2dDgradPlan
from convtune.kernels.depthwise.conv2d.wgrad import Dw2dWgradPlan
from convtune.kernels.depthwise.dtypes import stream_bytes
from convtune.kernels.depthwise.model import (
    COST_2D_FAST_BASE,
    COST_2D_FAST_WINDOW,
    L2_OVER_DRAM_BANDWIDTH,
    DepthwisePrediction,
    _combine,
    _efficiency,
)
from convtune.machine import MachineModel

COST_BASE = COST_2D_FAST_BASE
COST_WINDOW = COST_2D_FAST_WINDOW
SHUFFLE_COST = 4.0
SHUFFLE_STEPS = 5
UNROLLED_MACS = 1536
WARP = 32


def dgrad_item_macs(pl: Dw2dDgradPlan) -> int:
    """Multiply-adds of one item of VH × VW dx outputs: the (v, r) and (u, s) pairs whose numerators
    PH + v − r and PW + u − s the strides divide (the kernel skips the others at compile time)."""
    p, c = pl.problem, pl.config
    rows = sum(1 for v in range(c.rows_per_thread) for r in range(p.R) if (p.pad_h + v - r) % p.stride_h == 0)
    cols = sum(1 for u in range(c.outputs_per_thread) for s in range(p.S) if (p.pad_w + u - s) % p.stride_w == 0)
    return rows * cols


def dgrad_item_reads(pl: Dw2dDgradPlan) -> int:
    """Shared-memory reads of one item: NE dy rows, each a window of NF values (⌈(D4 + NF)/4⌉ float4s when
    VW/stride_w is a multiple of 4)."""
    start = pl.f0 + pl.off
    d4 = start % 4 if pl.f4 else 0
    return pl.ne * (-(-(d4 + pl.nf) // 4) if pl.f4 else pl.nf)


def wgrad_item_reads(pl: Dw2dWgradPlan) -> int:
    """Shared-memory reads of one item: VH rows of VW dy values (float4s when VW % 4 == 0), then
    (VH−1)·stride_h + R x rows' windows of (VW−1)·stride_w + S values (float4s when VW·stride_w % 4 == 0)."""
    p, c = pl.problem, pl.config
    vh, vw = c.rows_per_thread, c.outputs_per_thread
    dy_reads = vh * (vw // 4 if vw % 4 == 0 else vw)
    win = (vw - 1) * p.stride_w + p.S
    f4 = (vw * p.stride_w) % 4 == 0 and pl.pitch % 4 == 0
    d4 = (pl.off - p.pad_w) % 4 if f4 else 0
    rows_in = (vh - 1) * p.stride_h + p.R
    return dy_reads + rows_in * (-(-(d4 + win) // 4) if f4 else win)


def bank_degree(starts: list[int], f4: bool) -> float:
    """Shared-memory wavefronts of one window read per group of lanes, over the ideal one: float4 reads are
    served per quarter-warp (8 lanes, conflict-free when their 16-byte units differ modulo 8), scalar reads
    per warp (distinct words in one bank serialise); ``starts`` are the lanes' first words."""
    group = 8 if f4 else WARP
    cost = groups = 0
    for g0 in range(0, len(starts), group):
        lanes = set(starts[g0:g0 + group])
        cost += max(Counter((a // 4) % 8 if f4 else a % WARP for a in lanes).values())
        groups += 1
    return cost / max(1, groups)


def _item_starts(items: int, rows: int, cols: int, row_words: int, col_words: int) -> list[int]:
    """First shared word of each of a block's first ``items`` items (plane-major, then row group, then
    column group; planes and row groups ``row_words`` apart in total per row group, columns ``col_words``)."""
    return [(it // cols) * row_words + (it % cols) * col_words for it in range(items)]


def _thread_use(items: int, threads: int) -> float:
    """Share of the thread slots a block's items fill: items / (⌈items / threads⌉ · threads)."""
    return items / (-(-items // threads) * threads)


def predict_2d_dgrad(pl: Dw2dDgradPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one launch of a 2-D input-gradient plan."""
    bw = machine.copy_bandwidth_bytes_per_s
    p, c = pl.problem, pl.config
    dram_s = p.compulsory_bytes / bw
    l2_s = stream_bytes(plan2d_dgrad.traffic_words(pl), p.itemsize_bytes) / (L2_OVER_DRAM_BANDWIDTH * bw)
    macs = max(1, dgrad_item_macs(pl))
    nh, nq = c.band_h // c.rows_per_thread, pl.n_w
    items = c.planes * nh * nq
    starts = _item_starts(min(items, c.threads), nh, nq, (c.rows_per_thread // p.stride_h) * pl.pitch,
                          c.outputs_per_thread // p.stride_w)
    reads = dgrad_item_reads(pl) * bank_degree(starts, pl.f4)
    cost = (COST_BASE + COST_WINDOW * reads / macs) * max(1.0, macs / UNROLLED_MACS)
    issue_s = p.macs * cost / (machine.fp32_peak_flops_per_s / 2)
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine) * _thread_use(items, c.threads)
    return _combine(dram_s, l2_s, issue_s, eff, 1)


def predict_2d_wgrad(pl: Dw2dWgradPlan, machine: MachineModel) -> DepthwisePrediction:
    """Model time of one call of a 2-D weight-gradient plan (its reduction or memset included)."""
    bw = machine.copy_bandwidth_bytes_per_s
    p, c = pl.problem, pl.config
    dram_s = p.compulsory_bytes / bw
    l2_s = stream_bytes(plan2d_wgrad.traffic_words(pl), p.itemsize_bytes) / (L2_OVER_DRAM_BANDWIDTH * bw)
    macs = c.rows_per_thread * c.outputs_per_thread * pl.taps
    nh, nq = c.band_h // c.rows_per_thread, -(-p.Q // c.outputs_per_thread)
    items = c.planes * nh * nq
    f4 = (c.outputs_per_thread * p.stride_w) % 4 == 0 and pl.pitch % 4 == 0
    starts = _item_starts(min(items, c.threads), nh, nq, c.rows_per_thread * p.stride_h * pl.pitch,
                          c.outputs_per_thread * p.stride_w)
    reads = wgrad_item_reads(pl) * bank_degree(starts, f4)
    cost = (COST_BASE + COST_WINDOW * reads / macs) * max(1.0, macs / UNROLLED_MACS)
    reduction = pl.grid * pl.threads * pl.taps * SHUFFLE_STEPS * SHUFFLE_COST
    issue_s = (p.macs * cost + reduction) / (machine.fp32_peak_flops_per_s / 2)
    eff = _efficiency(pl.grid, pl.threads, pl.smem_bytes, pl.regs_estimate, machine) * _thread_use(items, c.threads)
    return _combine(dram_s, l2_s, issue_s, eff, 3 if pl.atomic_workspace else 2)


def predict(pl: Any, machine: MachineModel) -> DepthwisePrediction:
    """:func:`predict_2d_dgrad` or :func:`predict_2d_wgrad` by plan type.

    Raises:
        TypeError: any other plan (the forward plans are modelled by :func:`convtune.kernels.depthwise.model.predict`).
    """
    if isinstance(pl, Dw2dDgradPlan):
        return predict_2d_dgrad(pl, machine)
    if isinstance(pl, Dw2dWgradPlan):
        return predict_2d_wgrad(pl, machine)
    raise TypeError(f"{type(pl).__name__} is not a 2-D depthwise gradient plan")
