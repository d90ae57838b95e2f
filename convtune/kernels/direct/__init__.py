"""Direct convolution family: output-stationary tiles staged through shared memory.

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); the bound and floor helpers are
shared with the pointwise family, which runs the same algorithm as one GEMM.
"""

from __future__ import annotations

from functools import lru_cache

from convtune.bounds.direct import direct_lower_bound
from convtune.kernels.direct import launcher as _direct
from convtune.kernels.direct import model as _direct_model
from convtune.kernels.direct import space as _direct_space
from convtune.kernels.spec import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def supports(problem: ConvProblem) -> bool:
    """Dense (groups 1), float32, not causal."""
    return problem.groups == 1 and problem.dtype == "float32" and not problem.causal


@lru_cache(maxsize=4096)
def direct_bound_words(problem: ConvProblem, s_words: int) -> float:
    """The direct convolution's I/O lower bound in words for fast memory ``s_words``."""
    return direct_lower_bound(problem, s_words).words


def direct_model_floor_s(problem: ConvProblem, machine: MachineModel) -> float:
    """A lower bound on the direct model's time of every plan (:func:`convtune.kernels.direct.model.predict_launch`:
    max(issue, L2, DRAM) + atomics + launch overhead): its issue term counts one warp FFMA per 32 MACs of at least the
    non-padding MACs at ``fp32_peak / 64`` warp-instructions a second, its DRAM term is the compulsory bytes at
    copy bandwidth, and every launch pays ``LAUNCH_OVERHEAD_S``."""
    issue_s = 2.0 * problem.macs_nonpad / machine.fp32_peak_flops_per_s
    dram_s = problem.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    return max(issue_s, dram_s) + _direct_model.LAUNCH_OVERHEAD_S


def direct_floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """One variant: the non-padding MACs' FLOPs and the direct bound."""
    return [("direct", 2.0 * problem.macs_nonpad, direct_bound_words(problem, s_words))]


SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="direct", direction="fwd", source=_direct.SOURCE, entry=_direct.ENTRY,
        config_class=_direct.DirectFwdConfig, supports=supports,
        enumerate_plans=_direct_space.enumerate_plans, plan=_direct_space.plan,
        predict_s=lambda pl, machine: _direct_model.predict(pl, machine).time_s,
        traffic_words=_direct.total_traffic_words,
        onchip_words=_direct.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_direct_space.grid_size, floor_work=direct_floor_work, launcher=_direct,
        floor_s=direct_model_floor_s,
        description="output-stationary direct convolution, fp32 NCHW, any stride/padding/dilation, split-C",
        # strict float32 only in the untuned choice: under TF32 its model (not calibrated against the TF32 families)
        # chose it on 6 of the 55 public and wide shapes on the H100, and the tuned TF32 config measured 1.18–2.56×
        # faster on every one (mobilenetv2_stem_b64: 202.9 against 79.2 µs, benchmarks/results/igemm_wgmma_h200/
        # tma_1x1_tf32_h100/calls_tf32); still chosen where no TF32 family runs, and tuned in every class
        untuned_classes=("float32",),
    ),
)
