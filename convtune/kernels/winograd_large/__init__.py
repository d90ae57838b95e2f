"""Unfused Winograd F(m×m, r×r) forward for large filters (family ``winograd_unfused_large``, :mod:`.launcher`): 5×5
and 7×7 filters, stride 1, dilation 1, fp32. It shares the 3×3 unfused path's GEMM, workspace, traffic formula and
performance model (:func:`convtune.kernels.winograd.model.predict_unfused`, which holds for any α), and the Winograd
CDAG bound with pre-transformed filters (:func:`convtune.bounds.winograd.winograd_cdag_bound`, any r).
"""

from __future__ import annotations

from collections.abc import Iterable
from functools import lru_cache

from convtune.bounds.winograd import winograd_cdag_bound, winograd_shape
from convtune.kernels.spec import KernelSpec
from convtune.kernels.winograd import model as _wino_model
from convtune.kernels.winograd_large import launcher as _launcher
from convtune.problem import ConvProblem


@lru_cache(maxsize=4096)
def bound_words(problem: ConvProblem, s_words: int, m: int) -> float:
    """The Winograd CDAG bound of F(m×m, r×r) with pre-transformed filters (the kernels read U, not g)."""
    return winograd_cdag_bound(problem, s_words, m, pretransformed_filters=True).words


def floor_work_of(problem: ConvProblem, s_words: int, ms: Iterable[int]) -> list[tuple[str, float, float]]:
    """Per F(m) of ``ms`` (for the problem's r): 2·α²·K·C·T multiply-add FLOPs (transforms excluded: a lower bound)
    and the CDAG bound."""
    r = problem.R
    return [(f"F({m}x{m},{r}x{r})", 2.0 * winograd_shape(problem, m).multiplications, bound_words(problem, s_words, m))
            for m in sorted(ms)]


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """:func:`floor_work_of` the F(m) this family provides for the problem's r."""
    return floor_work_of(problem, s_words, _launcher.POINTS.get(problem.R, {}))


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.WinogradLargeConfig, supports=_launcher.supports,
        enumerate_plans=_launcher.enumerate_plans, plan=_launcher.plan,
        predict_s=lambda pl, machine: _wino_model.predict_unfused(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_launcher.grid_size, floor_work=floor_work, launcher=_launcher, algorithm="winograd",
        description="unfused Winograd F(2×2,5×5)/F(4×4,5×5)/F(2×2,7×7): input transform, α² batched GEMMs (tuned "
                    "tiles), output transform; 5×5 and 7×7 stride 1",
    ),
)
