"""Unfused Winograd F(m×m, r×r) for 3×3, 5×5 and 7×7 filters at strict fp32 accuracy with the α² GEMMs on TF32
tensor cores by 3xTF32 (family ``winograd_unfused_3xtf32``, :mod:`.launcher`). It shares the fp32 unfused families'
transforms, workspace, traffic, Winograd CDAG bound and floor (any r), and the TF32 Winograd family's GEMM and model
(three MMAs per term). Experimental: registered, but its ``supports`` is off until ``CONVTUNE_EXPERIMENTAL`` names it.
"""

from __future__ import annotations

from convtune.kernels.spec import KernelSpec
from convtune.kernels.winograd_3xtf32 import launcher as _launcher
from convtune.kernels.winograd_large import bound_words, floor_work_of
from convtune.kernels.winograd_tf32 import model as _model
from convtune.problem import ConvProblem


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """Per F(m) the family provides for the problem's r: FLOPs and the Winograd CDAG bound (any r)."""
    return floor_work_of(problem, s_words, _launcher.POINTS.get(problem.R, {}))


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.Winograd3xTf32Config, supports=_launcher.supports,
        enumerate_plans=_launcher.enumerate_plans, plan=_launcher.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_launcher.grid_size, floor_work=floor_work, launcher=_launcher, algorithm="winograd",
        description="unfused Winograd F(2×2)/F(4×4) of 3×3 and 5×5 filters, F(2×2,7×7), at strict fp32 accuracy: "
                    "fp32 transforms, α² GEMMs on TF32 tensor cores by 3xTF32 (three mma.sync per term on split "
                    "operands)",
    ),
)
