"""Configuration spaces of the depthwise kernels for one problem and machine.

:func:`enumerate_plans` yields every valid plan of one 1-D (variant, path): the raw grid of parameter
values below, less what :func:`~convtune.kernels.depthwise.conv1d.plan.plan` rejects (resource limits of the
machine, shapes the variant cannot take) and tiles far larger than the sequence (a tile ≥ 2·L or a
chunk of 32·V ≥ 2·L only idles threads). :func:`enumerate_plans_2d` does the same for the 2-D kernel.
Weight-gradient spaces include both modes; callers that need bitwise-repeatable results keep
``mode == MODE_DETERMINISTIC``.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable, Iterator

from convtune.errors import InvalidConfig
from convtune.kernels.config import KernelConfig
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    MODES,
    PATHS,
    VARIANTS_1D,
    Dw2dFastDgradConfig,
    Dw2dFastFwdConfig,
    Dw2dFastWgradConfig,
    Dw2dPackedFwdConfig,
    Dw2dTiledFwdConfig,
    FusedBwdConfig,
)
from convtune.kernels.depthwise.conv1d.fused import FusedPlan
from convtune.kernels.depthwise.conv1d.fused import plan as plan_fused
from convtune.kernels.depthwise.conv1d.plan import WARP_V, Depthwise1dPlan, plan
from convtune.kernels.depthwise.conv2d.dgrad import Dw2dDgradPlan
from convtune.kernels.depthwise.conv2d.dgrad import plan as plan_2d_dgrad
from convtune.kernels.depthwise.conv2d.fast import Dw2dFastPlan
from convtune.kernels.depthwise.conv2d.fast import plan as plan_2d_fast
from convtune.kernels.depthwise.conv2d.packed import Dw2dPackedPlan
from convtune.kernels.depthwise.conv2d.packed import applies as applies_packed
from convtune.kernels.depthwise.conv2d.packed import plan as plan_2d_packed
from convtune.kernels.depthwise.conv2d.tiled import Dw2dPlan, applies
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.kernels.depthwise.conv2d.wgrad import Dw2dWgradPlan
from convtune.kernels.depthwise.conv2d.wgrad import plan as plan_2d_wgrad
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

THREADS = (64, 128, 256, 512)
SHARED_ROWS = (1, 2, 4, 8, 16, 32)
SHARED_TILE = (16, 32, 64, 128, 256)
SHARED_THREADS = (64, 128, 256)
WARPS = (1, 2, 4, 8)
OUTPUTS_PER_LANE = (1, 2, 4, 8)          # warp wgrad; fwd/dgrad: plan1d.WARP_V
WARP_LANES = (2, 4, 8, 16, 32)
WARP_WGRAD_ROWS = (8, 32, 128, 512)
FAST_ROWS = (32, 64, 128, 256)
FAST_TILE = (4, 8, 12, 16, 24, 32, 48, 64)
FAST_LANES = (1, 2, 4, 8, 16, 32)
FAST_STAGES = (1, 2)
FAST_VEC = (1, 4)
FAST_BLOCKS_PER_SM = (1, 2, 3, 4, 6, 8)
TILE_2D = ((4, 8), (8, 8), (4, 16), (8, 16), (8, 32), (16, 32), (4, 32), (16, 16))
VW_2D = (1, 2, 4, 8)
PLANES_2D = (1, 2, 4, 8)
FAST2D_BAND = (1, 2, 4, 8, 16, 28, 32, 56, 64)
FAST2D_VH = (1, 2, 4, 7)
FAST2D_VW = (1, 2, 4, 7, 8)
FAST2D_PLANES = (1, 2, 4, 8, 16, 32, 64)
FAST2D_THREADS = (32, 64, 128, 256, 512)
PACKED2D_PLANES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128)
PACKED2D_VH = (1, 2, 3, 4, 7, 14)
PACKED2D_THREADS = (32, 64, 128, 256, 512)


def _with_extent(values: tuple[int, ...], extent: int, multiple: int = 1) -> list[int]:
    """``values`` up to ``extent``, plus ``extent`` rounded up to ``multiple`` when it is smaller than the largest
    (a tile exactly as long as the sequence)."""
    top = -(-extent // multiple) * multiple
    out = {v for v in values if v <= top}
    if top < max(values):
        out.add(top)
    return sorted(out or {min(values)})


def _raw_configs(problem: ConvProblem, variant: str, path: str) -> Iterator[KernelConfig]:
    cls: Callable[..., KernelConfig] = CONFIG_CLASSES_1D[(variant, path)]
    p = problem
    modes = sorted(MODES) if path == "wgrad" else [None]

    def extra(mode: int | None) -> dict[str, int]:
        return {} if mode is None else {"mode": mode}

    if variant in ("naive", "coalesced"):
        for threads, mode in itertools.product(THREADS, modes):
            yield cls(threads=threads, **extra(mode))
    elif variant == "shared":
        rows = _with_extent(SHARED_ROWS, p.N)
        for rb, t, threads, mode in itertools.product(rows, _with_extent(SHARED_TILE, p.W), SHARED_THREADS, modes):
            yield cls(rows=rb, tile_l=t, threads=threads, **extra(mode))
    elif variant == "warp" and path == "wgrad":
        for warps, v, mode in itertools.product(WARPS, OUTPUTS_PER_LANE, modes):
            if v > 1 and 32 * v >= 2 * p.W:
                continue
            for rb in _with_extent(WARP_WGRAD_ROWS, p.N):
                yield cls(warps=warps, outputs_per_lane=v, rows=rb, **extra(mode))
        for warps, v, g, mode in itertools.product(WARPS, WARP_V, WARP_LANES, modes):  # the register design
            if g * v >= 2 * p.W and g * v > 2:
                continue
            yield cls(warps=warps, outputs_per_lane=v, rows=1, lanes_per_row=g, design=2, **extra(mode))
    elif variant == "warp":
        for warps, v, g in itertools.product(WARPS, WARP_V, WARP_LANES):
            if g * v >= 2 * p.W and g * v > 2:  # a segment twice the row only idles lanes
                continue
            yield cls(warps=warps, outputs_per_lane=v, lanes_per_row=g)
    else:
        for rb, tl, tpr, stages, vec, bps, mode in itertools.product(
                FAST_ROWS, _with_extent(FAST_TILE, p.W, 4), FAST_LANES, FAST_STAGES, FAST_VEC, FAST_BLOCKS_PER_SM,
                modes):
            if vec == 4 and p.W % 4:
                continue
            yield cls(rows=rb, tile_l=tl, lanes_per_row=tpr, stages=stages, vec=vec, blocks_per_sm=bps,
                      **extra(mode))


def enumerate_plans(problem: ConvProblem, machine: MachineModel, variant: str,
                    path: str) -> Iterator[Depthwise1dPlan]:
    """Every valid plan of the 1-D ``variant`` (naive … fast) and ``path`` (fwd, dgrad, wgrad)."""
    if variant not in VARIANTS_1D:
        raise InvalidConfig("variant", f"{variant!r}: allowed {', '.join(VARIANTS_1D)}")
    if path not in PATHS:
        raise InvalidConfig("path", f"{path!r}: allowed {', '.join(PATHS)}")
    if not problem.causal or problem.dtype != "float32" or problem.dil_w != 1:
        return
    for config in _raw_configs(problem, variant, path):
        try:
            yield plan(problem, config, machine)
        except InvalidConfig:
            continue


def plans_enumerator(variant: str, path: str) -> Callable[[ConvProblem, MachineModel], Iterator[Depthwise1dPlan]]:
    """``enumerate_plans`` bound to one (variant, path): the shape the registry's rows take."""
    return lambda problem, machine: enumerate_plans(problem, machine, variant, path)


def grid_size(problem: ConvProblem, variant: str, path: str) -> int:
    """Size of the raw parameter grid of one (variant, path) before any validity rule."""
    return sum(1 for _ in _raw_configs(problem, variant, path))


def enumerate_plans_2d(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPlan]:
    """Every valid plan of the 2-D tiled forward kernel."""
    if applies(problem) is not None:
        return
    for (th, tw), vw, pb in itertools.product(TILE_2D, VW_2D, PLANES_2D):
        if tw % vw or (pb > 1 and 2 * th * tw < problem.P * problem.Q):  # several planes: small images only
            continue
        try:
            yield plan_2d(problem, Dw2dTiledFwdConfig(th, tw, vw, pb), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_fast(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dFastPlan]:
    """Every valid plan of the fast 2-D forward kernel: bands up to the output height (plus P itself: whole
    planes), several planes per block only while a block has fewer than 64 items per plane group (small
    images), threads from one warp up to the block's items."""
    if applies(problem) is not None:
        return
    p = problem
    bands = sorted({b for b in FAST2D_BAND if b <= p.P} | {p.P})
    for th, vh, vw, pb, threads in itertools.product(bands, FAST2D_VH, FAST2D_VW, FAST2D_PLANES, FAST2D_THREADS):
        if th % vh or (vw > p.Q and vw > 1):
            continue
        per_plane = th // vh * -(-p.Q // vw)
        if pb > 1 and per_plane * (pb // 2) >= 64:  # more planes only while a block is small
            continue
        try:
            yield plan_2d_fast(p, Dw2dFastFwdConfig(th, vh, vw, pb, threads), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_packed(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPackedPlan]:
    """Every valid plan of the packed 2-D forward kernel (images up to 32 wide): planes per block × output
    rows per item × threads (from one warp up to the block's items)."""
    if applies_packed(problem) is not None:
        return
    for pb, vh, threads in itertools.product(PACKED2D_PLANES, PACKED2D_VH, PACKED2D_THREADS):
        if vh > problem.P:
            continue
        try:
            yield plan_2d_packed(problem, Dw2dPackedFwdConfig(pb, vh, threads), machine)
        except InvalidConfig:
            continue


FUSED_ROWS = (32, 64, 128, 256)
FUSED_BLOCKS_PER_SM = (1, 2, 3, 4)


def enumerate_plans_fused(problem: ConvProblem, machine: MachineModel) -> Iterator[FusedPlan]:
    """Every valid plan of the fused 1-D backward (rows, stages, vec, blocks per SM, both modes)."""
    if not problem.causal or problem.dtype != "float32" or problem.dil_w != 1:
        return
    for rb, stages, vec, bps, mode in itertools.product(FUSED_ROWS, FAST_STAGES, FAST_VEC, FUSED_BLOCKS_PER_SM,
                                                        sorted(MODES)):
        if vec == 4 and problem.W % 4:
            continue
        try:
            yield plan_fused(problem, FusedBwdConfig(rb, stages, vec, bps, mode), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_dgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dDgradPlan]:
    """Every valid plan of the 2-D input-gradient kernel (bands over the input height H; rows and columns per
    item multiples of the strides)."""
    if applies(problem) is not None:
        return
    p = problem
    bands = sorted({b for b in FAST2D_BAND if b <= p.H} | {p.H, -(-p.H // p.stride_h) * p.stride_h})
    for th, vh, vw, pb, threads in itertools.product(bands, (*FAST2D_VH, 8), FAST2D_VW, FAST2D_PLANES,
                                                     FAST2D_THREADS):
        if th % vh or vh % p.stride_h or vw % p.stride_w or (vw > p.W and vw > 1):
            continue
        if pb > 1 and th // vh * -(-p.W // vw) * (pb // 2) >= 64:
            continue
        try:
            yield plan_2d_dgrad(p, Dw2dFastDgradConfig(th, vh, vw, pb, threads), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_wgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dWgradPlan]:
    """Every valid plan of the 2-D weight-gradient kernel, both modes (bands over the output height P; batch
    entries per block only while a block has fewer than 64 items per batch group)."""
    if applies(problem) is not None:
        return
    p = problem
    bands = sorted({b for b in FAST2D_BAND if b <= p.P} | {p.P})
    for th, vh, vw, pb, threads, mode in itertools.product(bands, FAST2D_VH, FAST2D_VW, FAST2D_PLANES,
                                                           FAST2D_THREADS, sorted(MODES)):
        if th % vh or (vw > p.Q and vw > 1):
            continue
        if pb > 1 and th // vh * -(-p.Q // vw) * (pb // 2) >= 64:
            continue
        try:
            yield plan_2d_wgrad(p, Dw2dFastWgradConfig(th, vh, vw, pb, threads, mode), machine)
        except InvalidConfig:
            continue
