"""Winograd F(m×m, 3×3) forward families: fused (:mod:`.launcher`) and unfused (:mod:`.unfused`); the unfused path
with TF32 tensor-core GEMMs is its own package, :mod:`convtune.kernels.winograd_tf32`.

``SPECS`` holds both registry rows (see :mod:`convtune.kernels.registry`), which share one bound (the Winograd CDAG
bound with pre-transformed filters) and one floor.
"""

from __future__ import annotations

from functools import lru_cache

from convtune.bounds.winograd import winograd_cdag_bound, winograd_shape
from convtune.kernels.spec import KernelSpec
from convtune.kernels.winograd import launcher as _wino
from convtune.kernels.winograd import model as _wino_model
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _wino_unfused
from convtune.problem import ConvProblem


def supports(problem: ConvProblem) -> bool:
    """What both Winograd paths run (:func:`~convtune.kernels.winograd.launcher.applies`)."""
    return _wino.applies(problem) is None


@lru_cache(maxsize=4096)
def bound_words(problem: ConvProblem, s_words: int, m: int) -> float:
    """The Winograd CDAG bound with pre-transformed filters (both Winograd paths read U, not g)."""
    return winograd_cdag_bound(problem, s_words, m, pretransformed_filters=True).words


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """Per F(m): 2·α²·K·C·T multiply-add FLOPs (transforms excluded: a lower bound) and the CDAG bound."""
    return [(f"F({m}x{m},3x3)", 2.0 * winograd_shape(problem, m).multiplications,
             bound_words(problem, s_words, m)) for m in _wino_space.M]


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="winograd", direction="fwd", source=_wino.SOURCE, entry=_wino.ENTRY,
        config_class=_wino.WinogradFwdConfig, supports=supports,
        enumerate_plans=_wino_space.enumerate_plans, plan=_wino_space.plan,
        predict_s=lambda pl, machine: _wino_model.predict_fused(pl, machine).time_s,
        traffic_words=_wino.total_traffic_words,
        onchip_words=_wino.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_wino_space.grid_size, floor_work=floor_work, launcher=_wino, algorithm="winograd",
        description="fused Winograd F(2×2,3×3)/F(4×4,3×3): input transform, α² GEMMs and output transform in "
                    "one kernel; 3×3 stride 1",
    ),
    KernelSpec(
        family="winograd_unfused", direction="fwd", source=_wino_unfused.SOURCE, entry=_wino_unfused.ENTRY,
        config_class=_wino_unfused.WinogradUnfusedConfig, supports=supports,
        enumerate_plans=_wino_space.enumerate_unfused_plans, plan=_wino_space.plan_unfused,
        predict_s=lambda pl, machine: _wino_model.predict_unfused(pl, machine).time_s,
        traffic_words=_wino_unfused.total_traffic_words,
        onchip_words=_wino_unfused.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_wino_space.unfused_grid_size, floor_work=floor_work, launcher=_wino_unfused,
        algorithm="winograd",
        description="unfused Winograd F(2×2,3×3)/F(4×4,3×3): input transform, α² batched GEMMs (tuned tiles), "
                    "output transform; 3×3 stride 1",
    ),
)
