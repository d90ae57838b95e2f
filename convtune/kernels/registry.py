"""One table of kernel families: (family, direction) -> KernelSpec.

A spec names the CUDA source (beside its launcher), the ``extern "C"`` entry, the config class, and
the functions the tuner needs to treat every family alike:

* ``enumerate_plans(problem, machine)`` — every valid plan (config + derived launch geometry);
* ``plan(problem, config, machine)`` — validate one config (raises ``InvalidConfig``);
* ``predict_s(plan, machine)`` — the analytic model's time, for ranking only;
* ``traffic_words(plan)`` — modelled global-memory words (loads + stores) of one launch;
* ``bound_words(plan, s_words)`` — the I/O lower bound of the plan's algorithm for fast memory S;
* ``floor_work(problem, s_words)`` — (FLOPs, bound words) of the family's algorithm at its best setting
  (direct: non-padding MACs; Winograd: α² multiplications per tile, the m with the lower floor is
  chosen by the caller through :func:`convtune.tuner.efficiency.floor_time_s`; depthwise: the causal or
  non-padding MACs and the depthwise bound), for floor times;
* ``supports(problem)`` — whether the family can run the problem at all;
* ``launcher`` — the module that runs a plan on the GPU: ``compile_plan(plan)``,
  ``prepare_filters(plan, w)`` (packed or transformed weights, shared by plans with equal
  ``filters_key(plan)``), ``launch(plan, kernel, x, filters, y, stream)`` and ``tolerance(plan)``; every
  family module also has ``prepare(problem, config, device)`` / ``prepare_plan(plan, device, kernels)`` returning
  the plan's :class:`~convtune.kernels.prepared.PreparedLaunch` (what ``launch`` itself runs, and what the ops
  call by data pointers; :func:`convtune.kernels.prepared.prepare` dispatches on the config's kind).

Adding a family adds a folder under ``kernels/`` and one row here. The depthwise rows (one forward row per
1-D variant and one for the 2-D kernel) share :mod:`convtune.kernels.depthwise.family` as launcher.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache, partial
from types import ModuleType
from typing import Any

from convtune.bounds.direct import direct_lower_bound
from convtune.bounds.winograd import winograd_cdag_bound, winograd_shape
from convtune.errors import InvalidConfig
from convtune.kernels.compile import kernel_text, source_hash
from convtune.kernels.config import KernelConfig
from convtune.kernels.depthwise import family as _dw
from convtune.kernels.depthwise import model as _dw_model
from convtune.kernels.depthwise import space as _dw_space
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    VARIANTS_1D,
    Dw2dFastFwdConfig,
    Dw2dPackedFwdConfig,
    Dw2dTiledFwdConfig,
)
from convtune.kernels.depthwise.conv1d import plan as _dw_plan1d
from convtune.kernels.depthwise.conv2d import fast as _dw_plan2d_fast
from convtune.kernels.depthwise.conv2d import packed as _dw_plan2d_packed
from convtune.kernels.depthwise.conv2d import tiled as _dw_plan2d
from convtune.kernels.direct import launcher as _direct
from convtune.kernels.direct import model as _direct_model
from convtune.kernels.direct import space as _direct_space
from convtune.kernels.pointwise import launcher as _pointwise
from convtune.kernels.pointwise import model as _pointwise_model
from convtune.kernels.pointwise import space as _pointwise_space
from convtune.kernels.winograd import launcher as _wino
from convtune.kernels.winograd import model as _wino_model
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _wino_unfused
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class KernelSpec:
    family: str
    direction: str
    source: str                   # path under convtune/kernels
    entry: str                    # extern "C" entry of the generated wrapper
    config_class: type[KernelConfig]
    supports: Callable[[ConvProblem], bool]
    enumerate_plans: Callable[[ConvProblem, MachineModel], Iterable[Any]]
    plan: Callable[..., Any]  # (problem, the family's own config class, machine) -> plan
    predict_s: Callable[[Any, MachineModel], float]
    traffic_words: Callable[[Any], int]
    onchip_words: Callable[[Any], int]                  # fast memory one block holds (smem + accumulators)
    bound_words: Callable[[Any, int], float]            # the plan's algorithm's I/O lower bound for S words
    grid_size: Callable[[ConvProblem], int]             # size of the raw parameter grid before validity checks
    floor_work: Callable[[ConvProblem, int], list[tuple[str, float, float]]]  # [(variant, flops, bound words)]
    launcher: ModuleType                                # compile_plan, prepare_filters, filters_key, launch, tolerance
    algorithm: str = "direct"                           # what convtune.conv2d(algorithm=...) calls it
    description: str = ""

    @property
    def kind(self) -> str:
        return f"{self.family}.{self.direction}"

    def source_sha256(self) -> str:
        """Kernel version: SHA-256 of the family's source with its includes expanded."""
        return source_hash(kernel_text(self.source))


def _direct_supports(problem: ConvProblem) -> bool:
    return problem.groups == 1 and problem.dtype == "float32" and not problem.causal


def _winograd_supports(problem: ConvProblem) -> bool:
    return _wino.applies(problem) is None


@lru_cache(maxsize=4096)
def _direct_bound_words(problem: ConvProblem, s_words: int) -> float:
    return direct_lower_bound(problem, s_words).words


def _direct_floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    return [("direct", 2.0 * problem.macs_nonpad, _direct_bound_words(problem, s_words))]


def _winograd_floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """Per F(m): 2·α²·K·C·T multiply-add FLOPs (transforms excluded: a lower bound) and the CDAG bound."""
    return [(f"F({m}x{m},3x3)", 2.0 * winograd_shape(problem, m).multiplications,
             _winograd_bound_words(problem, s_words, m)) for m in _wino_space.M]


@lru_cache(maxsize=4096)
def _winograd_bound_words(problem: ConvProblem, s_words: int, m: int) -> float:
    """The Winograd CDAG bound with pre-transformed filters (both Winograd paths read U, not g)."""
    return winograd_cdag_bound(problem, s_words, m, pretransformed_filters=True).words


REGISTRY: dict[tuple[str, str], KernelSpec] = {
    ("direct", "fwd"): KernelSpec(
        family="direct", direction="fwd", source=_direct.SOURCE, entry=_direct.ENTRY,
        config_class=_direct.DirectFwdConfig, supports=_direct_supports,
        enumerate_plans=_direct_space.enumerate_plans, plan=_direct.plan,
        predict_s=lambda pl, machine: _direct_model.predict(pl, machine).time_s,
        traffic_words=_direct.total_traffic_words,
        onchip_words=_direct.onchip_words,
        bound_words=lambda pl, s_words: _direct_bound_words(pl.problem, s_words),
        grid_size=_direct_space.grid_size, floor_work=_direct_floor_work, launcher=_direct,
        description="output-stationary direct convolution, fp32 NCHW, any stride/padding/dilation, split-C",
    ),
    ("pointwise", "fwd"): KernelSpec(
        family="pointwise", direction="fwd", source=_pointwise.SOURCE, entry=_pointwise.ENTRY,
        config_class=_pointwise.PointwiseFwdConfig, supports=_pointwise.supports,
        enumerate_plans=_pointwise_space.enumerate_plans, plan=_pointwise.plan,
        predict_s=lambda pl, machine: _pointwise_model.predict(pl, machine).time_s,
        traffic_words=_pointwise.total_traffic_words,
        onchip_words=_pointwise.onchip_words,
        bound_words=lambda pl, s_words: _direct_bound_words(pl.problem, s_words),
        grid_size=_pointwise_space.grid_size, floor_work=_direct_floor_work, launcher=_pointwise,
        description="1×1 convolution (pad 0, any stride) as one GEMM over every output pixel of every image, fp32 "
                    "NCHW, 8×8 register tiles, split-C",
    ),
    ("winograd", "fwd"): KernelSpec(
        family="winograd", direction="fwd", source=_wino.SOURCE, entry=_wino.ENTRY,
        config_class=_wino.WinogradFwdConfig, supports=_winograd_supports,
        enumerate_plans=_wino_space.enumerate_plans, plan=_wino.plan,
        predict_s=lambda pl, machine: _wino_model.predict_fused(pl, machine).time_s,
        traffic_words=_wino.total_traffic_words,
        onchip_words=_wino.onchip_words,
        bound_words=lambda pl, s_words: _winograd_bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_wino_space.grid_size, floor_work=_winograd_floor_work, launcher=_wino, algorithm="winograd",
        description="fused Winograd F(2×2,3×3)/F(4×4,3×3): input transform, α² GEMMs and output transform in "
                    "one kernel; 3×3 stride 1",
    ),
    ("winograd_unfused", "fwd"): KernelSpec(
        family="winograd_unfused", direction="fwd", source=_wino_unfused.SOURCE, entry=_wino_unfused.ENTRY,
        config_class=_wino_unfused.WinogradUnfusedConfig, supports=_winograd_supports,
        enumerate_plans=_wino_space.enumerate_unfused_plans, plan=_wino_unfused.plan,
        predict_s=lambda pl, machine: _wino_model.predict_unfused(pl, machine).time_s,
        traffic_words=_wino_unfused.total_traffic_words,
        onchip_words=_wino_unfused.onchip_words,
        bound_words=lambda pl, s_words: _winograd_bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_wino_space.unfused_grid_size, floor_work=_winograd_floor_work, launcher=_wino_unfused,
        algorithm="winograd",
        description="unfused Winograd F(2×2,3×3)/F(4×4,3×3): input transform, α² batched GEMMs (tuned tiles), "
                    "output transform; 3×3 stride 1",
    ),
}


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
        family=config_class.family, direction="fwd", source=_dw_plan1d.SOURCES[variant], entry=f"dw1d_{variant}_fwd",
        config_class=config_class, supports=_dw.supports_1d,
        enumerate_plans=_dw_space.plans_enumerator(variant, "fwd"), plan=_dw_plan1d.plan,
        predict_s=lambda pl, machine: _dw_model.predict_1d(pl, machine).time_s,
        traffic_words=_dw.traffic_words, onchip_words=_dw.onchip_words, bound_words=_dw.bound_words,
        grid_size=partial(_dw_space.grid_size, variant=variant, path="fwd"),
        floor_work=_dw.floor_work, launcher=_dw, algorithm="depthwise", description=_DW1D_DESCRIPTIONS[variant])


REGISTRY.update({(f"depthwise1d_{v}", "fwd"): _depthwise1d_spec(v) for v in VARIANTS_1D})
REGISTRY[("depthwise2d_tiled", "fwd")] = KernelSpec(
    family="depthwise2d_tiled", direction="fwd", source=_dw_plan2d.SOURCE, entry=_dw_plan2d.ENTRY,
    config_class=Dw2dTiledFwdConfig, supports=_dw.supports_2d, enumerate_plans=_dw_space.enumerate_plans_2d,
    plan=_dw_plan2d.plan, predict_s=lambda pl, machine: _dw_model.predict_2d(pl, machine).time_s,
    traffic_words=_dw.traffic_words, onchip_words=_dw.onchip_words, bound_words=_dw.bound_words,
    grid_size=_dw.grid_size_2d, floor_work=_dw.floor_work, launcher=_dw, algorithm="depthwise",
    description="2-D depthwise forward (groups = C = K), output tiles × planes per block, register sliding window; "
                "any R×S ≤ 81 taps, stride, padding",
)
REGISTRY[("depthwise2d_fast", "fwd")] = KernelSpec(
    family="depthwise2d_fast", direction="fwd", source=_dw_plan2d_fast.SOURCE, entry=_dw_plan2d_fast.ENTRY,
    config_class=Dw2dFastFwdConfig, supports=_dw.supports_2d, enumerate_plans=_dw_space.enumerate_plans_2d_fast,
    plan=_dw_plan2d_fast.plan, predict_s=lambda pl, machine: _dw_model.predict_2d_fast(pl, machine).time_s,
    traffic_words=_dw.traffic_words, onchip_words=_dw.onchip_words, bound_words=_dw.bound_words,
    grid_size=_dw.grid_size_2d_fast, floor_work=_dw.floor_work, launcher=_dw, algorithm="depthwise",
    description="2-D depthwise forward (groups = C = K), bands of whole-width rows staged by cp.async, VH × VW "
                "register items with float4 window reads",
)
REGISTRY[("depthwise2d_packed", "fwd")] = KernelSpec(
    family="depthwise2d_packed", direction="fwd", source=_dw_plan2d_packed.SOURCE, entry=_dw_plan2d_packed.ENTRY,
    config_class=Dw2dPackedFwdConfig, supports=_dw.supports_2d_packed,
    enumerate_plans=_dw_space.enumerate_plans_2d_packed, plan=_dw_plan2d_packed.plan,
    predict_s=lambda pl, machine: _dw_model.predict_2d_packed(pl, machine).time_s,
    traffic_words=_dw.traffic_words, onchip_words=_dw.onchip_words, bound_words=_dw.bound_words,
    grid_size=_dw.grid_size_2d_packed, floor_work=_dw.floor_work, launcher=_dw, algorithm="depthwise",
    description="2-D depthwise forward for images up to 32 wide (groups = C = K): groups of whole planes copied in "
                "and written out as contiguous stretches (16-byte cp.async, float4 stores), VH rows × Q outputs "
                "per thread",
)


def get_spec(family: str, direction: str = "fwd") -> KernelSpec:
    """The registered spec; raises InvalidConfig naming the allowed families."""
    try:
        return REGISTRY[(family, direction)]
    except KeyError:
        allowed = ", ".join(f"{f}.{d}" for f, d in REGISTRY)
        raise InvalidConfig("family", f"{family}.{direction} is not registered: allowed {allowed}") from None


def specs_for(problem: ConvProblem, families: Iterable[str] | None = None) -> list[KernelSpec]:
    """Forward specs that can run ``problem`` (optionally restricted to ``families``)."""
    wanted = set(families) if families is not None else None
    return [spec for (family, direction), spec in REGISTRY.items()
            if direction == "fwd" and (wanted is None or family in wanted) and spec.supports(problem)]


def model_fastest(problem: ConvProblem, machine: MachineModel,
                  specs: Iterable[KernelSpec]) -> tuple[float, KernelConfig] | None:
    """(predicted seconds, config) of the configuration the specs' models predict fastest for ``problem``
    (ties: the smaller config key, as the tuner's ranking); None when no spec has a valid configuration."""
    best: tuple[float, str, KernelConfig] | None = None
    for spec in specs:
        for pl in spec.enumerate_plans(problem, machine):
            candidate = (spec.predict_s(pl, machine), pl.config.key(), pl.config)
            if best is None or candidate[:2] < best[:2]:
                best = candidate
    return (best[0], best[2]) if best is not None else None
