"""Unfused 1-D Winograd F(m, r) along one axis for 1×r and r×1 filters (family ``winograd_unfused_1d``,
:mod:`.launcher`): r = 3, 5, 7, stride 1, dilation 1, fp32. It shares the 2-D unfused path's GEMM, workspace, traffic
formula and performance model (:func:`convtune.kernels.winograd.model.predict_unfused`, which reads the config's
``points`` = α here).

Bound: the problem's compulsory words (every used input and weight read once, every output written once; padding-aware,
:attr:`~convtune.problem.ConvProblem.compulsory_elements`), a lower bound on every schedule of every algorithm. The
2-D Winograd CDAG reuse term is not carried over: its conditions are stated for α × α tiles.

The untuned choice considers it in strict float32 (``untuned_classes``). Measured through the op without a database
on an H100 (``benchmarks/results/wide_h100/untuned_1d_winograd``): the models pick it on the four 7-tap Inception-v3
layers, 2.00–2.62× cuDNN fp32 kernel time (0.77–1.21× with the direct / implicit-GEMM choices before, on an H200).
"""

from __future__ import annotations

from convtune.kernels.spec import KernelSpec
from convtune.kernels.winograd import model as _wino_model
from convtune.kernels.winograd.transforms import POINTS_1D
from convtune.kernels.winograd_1d import launcher as _launcher
from convtune.problem import ConvProblem


def bound_words(problem: ConvProblem) -> float:
    """|In_used| + |W_used| + |Out| (module docstring)."""
    return float(problem.compulsory_elements)


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """Per 1-D F(m, r): 2·α·K·C·T multiply-add FLOPs (transforms excluded: a lower bound) and the bound."""
    axis = _launcher.filter_axis(problem)
    if axis is None or axis[0] not in POINTS_1D:
        return []
    r, along_w = axis
    out = []
    for m in sorted(POINTS_1D[r]):
        m_h, m_w = (1, m) if along_w else (m, 1)
        tiles = problem.N * -(-problem.P // m_h) * -(-problem.Q // m_w)
        out.append((f"F({m},{r})", 2.0 * (m + r - 1) * problem.K * problem.C * tiles, bound_words(problem)))
    return out


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.Winograd1dConfig, supports=_launcher.supports,
        enumerate_plans=_launcher.enumerate_plans, plan=_launcher.plan,
        predict_s=lambda pl, machine: _wino_model.predict_unfused(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem),
        grid_size=_launcher.grid_size, floor_work=floor_work, launcher=_launcher, algorithm="winograd",
        description="unfused 1-D Winograd F(m,r) along one axis for 1×r / r×1 filters (r = 3, 5, 7): input "
                    "transform, α batched GEMMs (tuned tiles), output transform; stride 1",
        untuned_classes=("float32",),
    ),
)
