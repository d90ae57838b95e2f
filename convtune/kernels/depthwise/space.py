"""Configuration spaces of the depthwise kernels for one problem and machine, declared as data.

Each space is one or more :class:`~convtune.kernels.search_space.SearchSpace` s (values + named rules), whose
configs are chained in order where one product cannot express the shape (the warp weight gradient's two
designs, the 2-D tiled kernel's list of tiles). ``rules`` restate the pure-config checks of the kernel's plan
function (``vec=4`` needs ``L % 4 == 0``, bands a multiple of the rows per item, …); ``prune`` are the search's own
rules (tiles far larger than the sequence: a segment of G·V ≥ 2·L or a chunk of 32·V ≥ 2·L only idles lanes;
several planes per block only for small blocks). The plan functions
(:func:`~convtune.kernels.depthwise.conv1d.plan.plan`, :func:`~convtune.kernels.depthwise.conv1d.fused.plan`,
``conv2d.{tiled,fast,packed,dgrad,wgrad}.plan``) stay the validity check of the derived geometry (resource limits
of the machine, shapes the variant cannot take): ``enumerate_plans*`` yield what they accept of ``configs()``.

The 2-D grid sizes are the product of the declared values; the 1-D grid sizes, as they always were, count the
1-D grid after its declared rules (the inline skips of the hand-written loops). Weight-gradient spaces include
both modes; callers that need bitwise-repeatable results keep ``mode == MODE_DETERMINISTIC``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache

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
from convtune.kernels.depthwise.conv2d.dgrad import space as space_2d_dgrad
from convtune.kernels.depthwise.conv2d.fast import Dw2dFastPlan
from convtune.kernels.depthwise.conv2d.fast import plan as plan_2d_fast
from convtune.kernels.depthwise.conv2d.fast import space as space_2d_fast
from convtune.kernels.depthwise.conv2d.packed import Dw2dPackedPlan
from convtune.kernels.depthwise.conv2d.packed import applies as applies_packed
from convtune.kernels.depthwise.conv2d.packed import plan as plan_2d_packed
from convtune.kernels.depthwise.conv2d.packed import space as space_2d_packed
from convtune.kernels.depthwise.conv2d.tiled import Dw2dPlan, applies
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.kernels.depthwise.conv2d.tiled import spaces as spaces_2d_tiled
from convtune.kernels.depthwise.conv2d.wgrad import Dw2dWgradPlan
from convtune.kernels.depthwise.conv2d.wgrad import plan as plan_2d_wgrad
from convtune.kernels.depthwise.conv2d.wgrad import space as space_2d_wgrad
from convtune.kernels.search_space import Rule, SearchSpace, Values
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
FUSED_ROWS = (32, 64, 128, 256)
FUSED_BLOCKS_PER_SM = (1, 2, 3, 4)
WGRAD_MODES = tuple(sorted(MODES))


def _with_extent(values: tuple[int, ...], extent: int, multiple: int = 1) -> tuple[int, ...]:
    """``values`` up to ``extent``, plus ``extent`` rounded up to ``multiple`` when it is smaller than the largest
    (a tile exactly as long as the sequence)."""
    top = -(-extent // multiple) * multiple
    out = {v for v in values if v <= top}
    if top < max(values):
        out.add(top)
    return tuple(sorted(out or {min(values)}))


def _chained_configs(spaces: tuple[SearchSpace, ...]) -> Iterator[dict[str, int]]:
    for s in spaces:
        yield from s.configs()


# ---- shared rules -------------------------------------------------------------------------------------------

def _vec_aligned(p: ConvProblem) -> Rule:
    """``vec=4`` (16-byte copies) needs rows of a multiple of 4 floats (restated by the 1-D fast and fused plans)."""
    return Rule("vec_aligned", ("vec",), lambda v: v["vec"] != 4 or p.W % 4 == 0,
                f"vec=4 needs L % 4 == 0 (16-byte aligned rows), got L={p.W}")


def _segment_extent(p: ConvProblem) -> Rule:
    """A warp segment of G·V outputs twice the row only idles lanes (segments of ≤ 2 outputs always kept)."""
    def ok(v: Values) -> bool:
        seg = v["lanes_per_row"] * v["outputs_per_lane"]
        return seg < 2 * p.W or seg <= 2
    return Rule("segment_extent", ("outputs_per_lane", "lanes_per_row"), ok,
                f"a segment of lanes_per_row·outputs_per_lane outputs is ≥ 2·L={2 * p.W} (and > 2)")


_BAND_MULTIPLE = Rule("band_multiple", ("band_h", "rows_per_thread"), lambda v: v["band_h"] % v["rows_per_thread"] == 0,
                      "band_h={band_h} must be a multiple of rows_per_thread={rows_per_thread}", field="band_h")


def _vw_extent(width: int, name: str) -> Rule:
    """Outputs per item no wider than the row they cover (``name`` = ``width``), one output always kept."""
    return Rule("vw_extent", ("outputs_per_thread",),
                lambda v: v["outputs_per_thread"] <= width or v["outputs_per_thread"] == 1,
                f"outputs_per_thread={{outputs_per_thread}} exceeds {name}={width}")


def _planes_small_blocks(width: int) -> Rule:
    """Several planes (batch entries) per block only while a block has fewer than 64 items per plane pair."""
    def ok(v: Values) -> bool:
        per_plane = v["band_h"] // v["rows_per_thread"] * -(-width // v["outputs_per_thread"])
        return v["planes"] == 1 or per_plane * (v["planes"] // 2) < 64
    return Rule("planes_small_blocks", ("band_h", "rows_per_thread", "outputs_per_thread", "planes"), ok,
                "planes={planes}: several planes per block only while a block has < 64 items per plane pair",
                field="planes")


# ---- 1-D ----------------------------------------------------------------------------------------------------

@cache
def spaces_1d(problem: ConvProblem, variant: str, path: str) -> tuple[SearchSpace, ...]:
    """The space of the 1-D ``variant`` and ``path``, as spaces whose configs are chained in order (one, but for
    the warp weight gradient: its rows design, then its register design, design=2)."""
    p = problem
    modes: dict[str, tuple[int, ...]] = {"mode": WGRAD_MODES} if path == "wgrad" else {}
    if variant in ("naive", "coalesced"):
        return (SearchSpace({"threads": THREADS, **modes}),)
    if variant == "shared":
        return (SearchSpace({"rows": _with_extent(SHARED_ROWS, p.N), "tile_l": _with_extent(SHARED_TILE, p.W),
                             "threads": SHARED_THREADS, **modes}),)
    if variant == "warp" and path == "wgrad":
        chunk_extent = Rule("chunk_extent", ("outputs_per_lane",),
                            lambda v: v["outputs_per_lane"] == 1 or 32 * v["outputs_per_lane"] < 2 * p.W,
                            f"a chunk of 32·outputs_per_lane = 32·{{outputs_per_lane}} outputs is ≥ 2·L={2 * p.W}")
        rows_design = SearchSpace(
            {"warps": WARPS, "outputs_per_lane": OUTPUTS_PER_LANE, **modes, "rows": _with_extent(WARP_WGRAD_ROWS, p.N),
             "lanes_per_row": (32,), "design": (1,)},
            prune=(chunk_extent,))
        register_design = SearchSpace(
            {"warps": WARPS, "outputs_per_lane": WARP_V, "lanes_per_row": WARP_LANES, **modes, "rows": (1,),
             "design": (2,)},
            prune=(_segment_extent(p),))
        return rows_design, register_design
    if variant == "warp":
        return (SearchSpace({"warps": WARPS, "outputs_per_lane": WARP_V, "lanes_per_row": WARP_LANES},
                            prune=(_segment_extent(p),)),)
    if variant == "fast":
        return (SearchSpace({"rows": FAST_ROWS, "tile_l": _with_extent(FAST_TILE, p.W, 4), "lanes_per_row": FAST_LANES,
                             "stages": FAST_STAGES, "vec": FAST_VEC, "blocks_per_sm": FAST_BLOCKS_PER_SM, **modes},
                            rules=(_vec_aligned(p),)),)
    raise InvalidConfig("variant", f"{variant!r}: allowed {', '.join(VARIANTS_1D)}")


def _raw_configs(problem: ConvProblem, variant: str, path: str) -> Iterator[KernelConfig]:
    cls: Callable[..., KernelConfig] = CONFIG_CLASSES_1D[(variant, path)]
    for values in _chained_configs(spaces_1d(problem, variant, path)):
        yield cls(**values)


def _check_variant_path(variant: str, path: str) -> None:
    if variant not in VARIANTS_1D:
        raise InvalidConfig("variant", f"{variant!r}: allowed {', '.join(VARIANTS_1D)}")
    if path not in PATHS:
        raise InvalidConfig("path", f"{path!r}: allowed {', '.join(PATHS)}")


def _runs_1d(problem: ConvProblem) -> bool:
    return problem.causal and problem.dtype == "float32" and problem.dil_w == 1


def enumerate_plans(problem: ConvProblem, machine: MachineModel, variant: str,
                    path: str) -> Iterator[Depthwise1dPlan]:
    """Every valid plan of the 1-D ``variant`` (naive … fast) and ``path`` (fwd, dgrad, wgrad)."""
    _check_variant_path(variant, path)
    if not _runs_1d(problem):
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
    """Size of the 1-D grid of one (variant, path) before the plan's checks: the declared values, less what the
    declared rules leave out (as the 1-D grids were always counted)."""
    return sum(1 for _ in _chained_configs(spaces_1d(problem, variant, path)))


@cache
def space_fused(problem: ConvProblem) -> SearchSpace:
    """The fused 1-D backward's space: rows × stages × vec × blocks per SM × both modes."""
    return SearchSpace({"rows": FUSED_ROWS, "stages": FAST_STAGES, "vec": FAST_VEC,
                        "blocks_per_sm": FUSED_BLOCKS_PER_SM, "mode": WGRAD_MODES},
                       rules=(_vec_aligned(problem),))


def enumerate_plans_fused(problem: ConvProblem, machine: MachineModel) -> Iterator[FusedPlan]:
    """Every valid plan of the fused 1-D backward (rows, stages, vec, blocks per SM, both modes)."""
    if not _runs_1d(problem):
        return
    for values in space_fused(problem).configs():
        try:
            yield plan_fused(problem, FusedBwdConfig(**values), machine)
        except InvalidConfig:
            continue


# ---- 2-D ----------------------------------------------------------------------------------------------------

def enumerate_plans_2d(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPlan]:
    """Every valid plan of the 2-D tiled forward kernel (see :func:`spaces_2d_tiled`)."""
    if applies(problem) is not None:
        return
    for values in _chained_configs(spaces_2d_tiled(problem)):
        try:
            yield plan_2d(problem, Dw2dTiledFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_fast(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dFastPlan]:
    """Every valid plan of the fast 2-D forward kernel (see :func:`space_2d_fast`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_fast(problem).configs():
        try:
            yield plan_2d_fast(problem, Dw2dFastFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_packed(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPackedPlan]:
    """Every valid plan of the packed 2-D forward kernel (see :func:`space_2d_packed`)."""
    if applies_packed(problem) is not None:
        return
    for values in space_2d_packed(problem).configs():
        try:
            yield plan_2d_packed(problem, Dw2dPackedFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_dgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dDgradPlan]:
    """Every valid plan of the 2-D input-gradient kernel (see :func:`space_2d_dgrad`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_dgrad(problem).configs():
        try:
            yield plan_2d_dgrad(problem, Dw2dFastDgradConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_wgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dWgradPlan]:
    """Every valid plan of the 2-D weight-gradient kernel (see :func:`space_2d_wgrad`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_wgrad(problem).configs():
        try:
            yield plan_2d_wgrad(problem, Dw2dFastWgradConfig(**values), machine)
        except InvalidConfig:
            continue
