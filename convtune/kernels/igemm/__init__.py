"""The implicit-GEMM tensor-core forward family (TF32 products, fp32 accumulation; ``math="tf32"`` problems).

``SPECS`` are the family's registry rows, the NCHW kernel, its channels-last variant ``igemm_nhwc``, its 1×1
variant ``igemm_1x1`` and the 16-bit ``igemm_half`` (bfloat16 / float16 problems; see
:mod:`convtune.kernels.registry`); their bound and floor are the direct
convolution's (the same MAC CDAG, any dataflow), the compute ceiling the class's (TF32).
"""

from __future__ import annotations

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.igemm import half as _half
from convtune.kernels.igemm import launcher as _igemm
from convtune.kernels.igemm import model as _igemm_model
from convtune.kernels.igemm import nhwc as _nhwc
from convtune.kernels.igemm import pointwise as _pointwise
from convtune.kernels.igemm import space as _igemm_space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="igemm", direction="fwd", source=_igemm.SOURCE, entry=_igemm.ENTRY,
        config_class=_igemm.IgemmFwdConfig, supports=_igemm.supports,
        enumerate_plans=_igemm_space.enumerate_plans, plan=_igemm_space.plan,
        predict_s=lambda pl, machine: _igemm_model.predict(pl, machine).time_s,
        traffic_words=_igemm.total_traffic_words,
        onchip_words=_igemm.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_igemm_space.grid_size, floor_work=direct_floor_work, launcher=_igemm,
        algorithm="igemm",
        description="implicit GEMM on tensor cores (mma.sync TF32, fp32 accumulation), fp32 NCHW, any stride/"
                    "padding/dilation, split reduction",
    ),
    KernelSpec(
        family="igemm_nhwc", direction="fwd", source=_igemm.SOURCE, entry=_igemm.NHWC_ENTRY,
        config_class=_nhwc.IgemmNhwcFwdConfig, supports=_nhwc.supports,
        enumerate_plans=lambda problem, machine: _igemm_space.enumerate_plans(problem, machine,
                                                                              _nhwc.IgemmNhwcFwdConfig),
        plan=_igemm_space.plan,
        predict_s=lambda pl, machine: _igemm_model.predict(pl, machine).time_s,
        traffic_words=_nhwc.total_traffic_words,
        onchip_words=_igemm.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_igemm_space.grid_size, floor_work=direct_floor_work, launcher=_nhwc,
        algorithm="igemm",
        description="implicit GEMM on tensor cores over an NHWC copy of x (16-byte A copies; C a multiple of 4), "
                    "TF32, fp32 accumulation, any stride/padding/dilation, split reduction",
    ),
    KernelSpec(
        family="igemm_1x1", direction="fwd", source=_igemm.SOURCE, entry=_igemm.VARIANTS["igemm_1x1"][0],
        config_class=_pointwise.IgemmPointwiseFwdConfig, supports=_pointwise.supports,
        enumerate_plans=lambda problem, machine: _igemm_space.enumerate_plans(problem, machine,
                                                                              _pointwise.IgemmPointwiseFwdConfig),
        plan=_igemm_space.plan,
        predict_s=lambda pl, machine: _igemm_model.predict(pl, machine).time_s,
        traffic_words=_pointwise.total_traffic_words,
        onchip_words=_igemm.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_igemm_space.grid_size, floor_work=direct_floor_work, launcher=_igemm,
        algorithm="igemm",
        description="1×1 implicit GEMM on tensor cores (stride 1, no padding, H·W a multiple of 4): 16-byte A copies "
                    "from NCHW x, TF32, fp32 accumulation, split reduction",
    ),
    KernelSpec(
        family=_half.HALF_FAMILY, direction="fwd", source=_igemm.SOURCE, entry=_half.ENTRY,
        config_class=_half.IgemmHalfFwdConfig, supports=_half.supports,
        enumerate_plans=_half.enumerate_plans, plan=_half.plan,
        # the TF32 model on the word view: one m16n8k16 per 8 words issues like one TF32 m16n8k8 (bf16's peak is
        # ~2× TF32's per element, the view has half the MACs), its memory terms in 4-byte words
        predict_s=lambda pl, machine: _igemm_model.predict(pl.view, machine).time_s,
        traffic_words=_half.total_traffic_elements,
        onchip_words=_half.onchip_elements,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_half.grid_size, floor_work=direct_floor_work, launcher=_half,
        algorithm="igemm",
        description="implicit GEMM on tensor cores for bfloat16 / float16 (mma.sync m16n8k16, fp32 accumulation) "
                    "over an NHWC copy of x (C a multiple of 8), any stride/padding/dilation, split reduction",
    ),
)
