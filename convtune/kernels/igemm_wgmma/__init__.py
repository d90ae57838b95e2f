"""The implicit-GEMM forward families on Hopper's warpgroup MMA (wgmma with both operands from swizzled shared
memory; sm_90a, compute capability 9.0 only): ``igemm_wgmma`` for ``math="tf32"`` problems (x moved to a TF32-rounded
channels-last copy first, counted in the time) and ``igemm_wgmma_half`` for bfloat16 / float16 problems (the same
kernel over 16-bit elements, :mod:`~convtune.kernels.igemm_wgmma.half`) with its 1×1 sibling
``igemm_wgmma_half_1x1`` (x read as it is, NCHW: :mod:`~convtune.kernels.igemm_wgmma.half_1x1`).

``SPECS`` are the families' registry rows (see :mod:`convtune.kernels.registry`); their bound and floor are the
direct convolution's (the same MAC CDAG, any dataflow), the compute ceiling the class's.
"""

from __future__ import annotations

from functools import partial

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1 as _half_1x1
from convtune.kernels.igemm_wgmma import launcher as _launcher
from convtune.kernels.igemm_wgmma import model as _model
from convtune.kernels.igemm_wgmma import space as _space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="igemm_wgmma", direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.IgemmWgmmaFwdConfig, supports=_launcher.supports,
        enumerate_plans=_space.enumerate_plans, plan=_space.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_space.grid_size, floor_work=direct_floor_work, launcher=_launcher, algorithm="igemm",
        # the untuned choice across the TF32 families: this model's time × 2^-0.25, fitted leave-one-shape-out on the
        # H200 wide suite (benchmarks/results/igemm_wgmma_h200/family_choice_model_v2: regret 1.133 → 1.123 held out)
        choice_scale=2 ** -0.25,
        description="implicit GEMM on Hopper's warpgroup MMA (wgmma TF32, both operands from 128-byte-swizzled "
                    "shared memory, fp32 accumulation) over a TF32-rounded channels-last copy of x (16-byte copies "
                    "of 32-channel rows), any stride/padding/dilation, split reduction; sm_90 only",
    ),
    KernelSpec(
        family=_half.HALF_FAMILY, direction="fwd", source=_half.SOURCE, entry=_half.ENTRY,
        config_class=_half.IgemmWgmmaHalfFwdConfig, supports=_half.supports,
        enumerate_plans=partial(_space.enumerate_plans, family=_half.HALF_FAMILY), plan=_space.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine).time_s,
        traffic_words=_half.total_traffic_elements,
        onchip_words=_half.onchip_elements,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=partial(_space.grid_size, family=_half.HALF_FAMILY), floor_work=direct_floor_work,
        launcher=_half, algorithm="igemm",
        # the untuned choice across the 16-bit families: × 2^-0.75, fitted leave-one-shape-out on half_v5 (public and
        # wide; benchmarks/results/igemm_wgmma_h200/family_choice_model_v2: regret 1.087 → 1.055 held out)
        choice_scale=2 ** -0.75,
        description="implicit GEMM on Hopper's warpgroup MMA for bfloat16 / float16 (wgmma m64nNk16, both operands "
                    "from 128-byte-swizzled shared memory, fp32 accumulation, y rounded once) over a channels-last "
                    "copy of x (16-byte copies of 64-channel rows; any C), any stride/padding/dilation, split "
                    "reduction; sm_90 only",
    ),
    KernelSpec(
        family=_half_1x1.FAMILY, direction="fwd", source=_half_1x1.SOURCE, entry=_half_1x1.ENTRY,
        config_class=_half_1x1.IgemmWgmmaHalf1x1FwdConfig, supports=_half_1x1.supports,
        enumerate_plans=partial(_space.enumerate_plans, family=_half_1x1.FAMILY), plan=_space.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine, _half_1x1.traffic_elements).time_s,
        traffic_words=_half_1x1.total_traffic_elements,
        onchip_words=_half_1x1.onchip_elements,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=partial(_space.grid_size, family=_half_1x1.FAMILY), floor_work=direct_floor_work,
        launcher=_half_1x1, algorithm="igemm",
        description="1×1 bfloat16 / float16 on Hopper's warpgroup MMA straight from NCHW x (no layout change): "
                    "filters K-major, x N-major (wgmma imm-trans-b), 128-byte swizzles, 4-byte pixel-pair stores, "
                    "split reduction; stride 1, no padding, H·W a multiple of 8; sm_90 only",
    ),
)
