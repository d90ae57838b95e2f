"""Depthwise convolution kernels.

1-D causal, (B, C, L): five variants × fwd/dgrad/wgrad (naive, coalesced, shared, warp, fast) and the fused
backward (dx and dw in one pass), in :mod:`.conv1d`. 2-D, NCHW: the tiled forward (baseline), the fast family
(forward, input gradient, weight gradient) and the packed forward for narrow images, in :mod:`.conv2d`.

Modules: ``configs`` (tuning points), ``conv1d`` / ``conv2d`` (validation, launch geometry, sources, traffic,
launchers; ``conv1d.family`` adapts the 1-D forward to the launcher protocol), ``family`` (what every depthwise
row shares: tolerance, bound, floor), ``wgrad_launch`` (the weight gradients' launch sequence), ``dtypes`` (fp32,
and fp16/bf16 storage with fp32 accumulation: which kernels take which), ``model`` (time models), ``space``
(configuration spaces), ``reference`` (float64 references). CuPy is imported lazily.

``SPECS`` are the family's registry rows — one forward row per 1-D variant, then the 2-D kernels — each with the
launcher module of its own plan type; ``PREPARERS`` the kinds :func:`convtune.kernels.prepared.prepare` builds
without a row (the 1-D gradients, the fused backward, the 2-D gradients).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import replace
from functools import partial
from typing import Any

from convtune.kernels.depthwise import configs as configs  # registers the config classes for parse_config_key
from convtune.kernels.depthwise import family as _shared
from convtune.kernels.depthwise import model as _model
from convtune.kernels.depthwise import space as _space
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    VARIANTS_1D,
    Dw2dFastFwdConfig,
    Dw2dPackedFwdConfig,
    Dw2dTiledFwdConfig,
)
from convtune.kernels.depthwise.conv1d import family as _family1d
from convtune.kernels.depthwise.conv1d import fused as _fused
from convtune.kernels.depthwise.conv1d import launcher as _launcher1d
from convtune.kernels.depthwise.conv1d import plan as _plan1d
from convtune.kernels.depthwise.conv2d import dgrad as _dgrad2d
from convtune.kernels.depthwise.conv2d import fast as _fast2d
from convtune.kernels.depthwise.conv2d import packed as _packed2d
from convtune.kernels.depthwise.conv2d import tiled as _tiled2d
from convtune.kernels.depthwise.conv2d import wgrad as _wgrad2d
from convtune.kernels.spec import KernelSpec, Preparer
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

Enumerator = Callable[[ConvProblem, MachineModel], Iterator[Any]]


def in_storage_dtypes(enumerate_plans: Enumerator, replan: Callable[..., Any]) -> Enumerator:
    """``enumerate_plans`` extended to float16 / bfloat16 problems: the configuration spaces are declared for
    float32, so a 16-bit problem takes its float32 twin's configurations that its own plan (``replan``) accepts —
    the same plans :func:`convtune.ops.depthwise.model_plan` chooses among, now also what the tuner measures."""
    def enumerate_any(problem: ConvProblem, machine: MachineModel) -> Iterator[Any]:
        if problem.dtype == "float32":
            return enumerate_plans(problem, machine)
        return _space.replanned(problem, machine, enumerate_plans(replace(problem, dtype="float32"), machine),
                                lambda twin: replan)

    return enumerate_any


def grid_size_2d(problem: ConvProblem) -> int:
    """Size of the 2-D tiled kernel's raw parameter grid (tiles × outputs per thread × planes), from its declared
    spaces (one per tile)."""
    return sum(s.grid_size() for s in _space.spaces_2d_tiled(problem))


def grid_size_2d_fast(problem: ConvProblem) -> int:
    """Size of the 2-D fast kernel's raw parameter grid (bands × VH × VW × planes × threads), from its declared
    space."""
    return _space.space_2d_fast(problem).grid_size()


def grid_size_2d_packed(problem: ConvProblem) -> int:
    """Size of the packed 2-D kernel's raw parameter grid (planes × VH × threads), from its declared space."""
    return _space.space_2d_packed(problem).grid_size()


_DW1D_DESCRIPTIONS = {
    "naive": "1-D causal depthwise, one thread per output, batch-fastest (strided) order",
    "coalesced": "1-D causal depthwise, one thread per output, time-fastest (coalesced) order",
    "shared": "1-D causal depthwise, rows × tile (+ halo) and w[c] staged in shared memory",
    "warp": "1-D causal depthwise, warp-tiled: rows of lanes_per_row lanes, V outputs per lane in registers, "
            "neighbours' inputs by warp shuffles (a shared-memory slice per warp when taps exceed 64)",
    "fast": "1-D causal depthwise, persistent blocks, register tiles along L, cp.async double buffering",
}


def _depthwise1d_spec(variant: str) -> KernelSpec:
    """The forward row of one 1-D depthwise variant (dgrad/wgrad run through convtune.ops.torch and analyze)."""
    config_class = CONFIG_CLASSES_1D[(variant, "fwd")]
    return KernelSpec(
        family=config_class.family, direction="fwd", source=_plan1d.SOURCES[variant], entry=f"dw1d_{variant}_fwd",
        config_class=config_class, supports=partial(_family1d.supports, variant=variant),
        enumerate_plans=in_storage_dtypes(_space.plans_enumerator(variant, "fwd"), _plan1d.plan), plan=_plan1d.plan,
        predict_s=lambda pl, machine: _model.predict_1d(pl, machine).time_s,
        traffic_words=_family1d.total_traffic_words, onchip_words=_family1d.onchip_words,
        bound_words=_shared.bound_words, grid_size=partial(_space.grid_size, variant=variant, path="fwd"),
        floor_work=_shared.floor_work, launcher=_family1d, algorithm="depthwise",
        description=_DW1D_DESCRIPTIONS[variant])


SPECS: tuple[KernelSpec, ...] = (
    *(_depthwise1d_spec(v) for v in VARIANTS_1D),
    KernelSpec(
        family="depthwise2d_tiled", direction="fwd", source=_tiled2d.SOURCE, entry=_tiled2d.ENTRY,
        config_class=Dw2dTiledFwdConfig, supports=_tiled2d.supports, enumerate_plans=_space.enumerate_plans_2d,
        plan=_tiled2d.plan, predict_s=lambda pl, machine: _model.predict_2d(pl, machine).time_s,
        traffic_words=_tiled2d.total_traffic_words, onchip_words=_tiled2d.onchip_words,
        bound_words=_shared.bound_words, grid_size=grid_size_2d, floor_work=_shared.floor_work, launcher=_tiled2d,
        algorithm="depthwise",
        description="2-D depthwise forward (groups = C = K), output tiles × planes per block, register sliding "
                    "window; any R×S ≤ 81 taps, stride, padding",
    ),
    KernelSpec(
        family="depthwise2d_fast", direction="fwd", source=_fast2d.SOURCE, entry=_fast2d.ENTRY,
        config_class=Dw2dFastFwdConfig, supports=_fast2d.supports,
        enumerate_plans=in_storage_dtypes(_space.enumerate_plans_2d_fast, _fast2d.plan),
        plan=_fast2d.plan, predict_s=lambda pl, machine: _model.predict_2d_fast(pl, machine).time_s,
        traffic_words=_fast2d.total_traffic_words, onchip_words=_fast2d.onchip_words,
        bound_words=_shared.bound_words, grid_size=grid_size_2d_fast, floor_work=_shared.floor_work,
        launcher=_fast2d, algorithm="depthwise",
        description="2-D depthwise forward (groups = C = K), bands of whole-width rows staged by cp.async, VH × VW "
                    "register items with float4 window reads",
    ),
    KernelSpec(
        family="depthwise2d_packed", direction="fwd", source=_packed2d.SOURCE, entry=_packed2d.ENTRY,
        config_class=Dw2dPackedFwdConfig, supports=_packed2d.supports,
        enumerate_plans=in_storage_dtypes(_space.enumerate_plans_2d_packed, _packed2d.plan), plan=_packed2d.plan,
        predict_s=lambda pl, machine: _model.predict_2d_packed(pl, machine).time_s,
        traffic_words=_packed2d.total_traffic_words, onchip_words=_packed2d.onchip_words,
        bound_words=_shared.bound_words, grid_size=grid_size_2d_packed, floor_work=_shared.floor_work,
        launcher=_packed2d, algorithm="depthwise",
        description="2-D depthwise forward for images up to 32 wide (groups = C = K): groups of whole planes copied "
                    "in and written out as contiguous stretches (16-byte cp.async, float4 stores), VH rows × Q "
                    "outputs per thread",
    ),
)

PREPARERS: dict[str, Preparer] = {
    **{f"depthwise1d_{v}.{path}": (_plan1d.plan, _launcher1d)
       for v in VARIANTS_1D for path in ("dgrad", "wgrad")},
    f"{configs.FusedBwdConfig.family}.{configs.FusedBwdConfig.direction}": (_fused.plan, _fused),
    "depthwise2d_fast.dgrad": (_dgrad2d.plan, _dgrad2d),
    "depthwise2d_fast.wgrad": (_wgrad2d.plan, _wgrad2d),
}
