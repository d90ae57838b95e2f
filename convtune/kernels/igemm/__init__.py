"""The implicit-GEMM tensor-core forward family (TF32 products, fp32 accumulation; ``math="tf32"`` problems).

``SPECS`` are the family's registry rows, the NCHW kernel, its channels-last variant ``igemm_nhwc``, its 1×1
variant ``igemm_1x1``, the 16-bit ``igemm_half`` and its 1×1 variant ``igemm_half_1x1`` (bfloat16 / float16
problems; see :mod:`convtune.kernels.registry`); their bound and floor are the direct
convolution's (the same MAC CDAG, any dataflow), the compute ceiling the class's (TF32, or the 16-bit dtype's).
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.igemm import half as _half
from convtune.kernels.igemm import launcher as _igemm
from convtune.kernels.igemm import model as _igemm_model
from convtune.kernels.igemm import nhwc as _nhwc
from convtune.kernels.igemm import pointwise as _pointwise
from convtune.kernels.igemm import space as _igemm_space
from convtune.kernels.spec import KernelSpec
from convtune.problem import ConvProblem


def _bound_words(pl: Any, s_words: int) -> float:
    return direct_bound_words(pl.problem, s_words)


def _tf32_row(config_class: type[_igemm.IgemmFwdConfig], supports: Callable[[ConvProblem], bool],
              traffic_words: Callable[[Any], int], launcher: Any, description: str) -> KernelSpec:
    """A TF32 family's row: the shared space (by config class), plan, model, on-chip words, bound and floor."""
    return KernelSpec(
        family=config_class.family, direction="fwd", source=_igemm.SOURCE,
        entry=_igemm.VARIANTS[config_class.family][0], config_class=config_class, supports=supports,
        enumerate_plans=partial(_igemm_space.enumerate_plans, config_class=config_class), plan=_igemm_space.plan,
        predict_s=lambda pl, machine: _igemm_model.predict(pl, machine).time_s,
        traffic_words=traffic_words, onchip_words=_igemm.onchip_words, bound_words=_bound_words,
        grid_size=_igemm_space.grid_size, floor_work=direct_floor_work, launcher=launcher, algorithm="igemm",
        description=description)


def _half_row(config_class: type[_igemm.IgemmFwdConfig], supports: Callable[[ConvProblem], bool],
              description: str) -> KernelSpec:
    """A 16-bit family's row (:mod:`convtune.kernels.igemm.half`, one module for both): its source and entry by
    family, plans and grid on the word view, the TF32 model on the view's plan."""
    family = config_class.family
    return KernelSpec(
        family=family, direction="fwd", source=_half.SOURCES[family], entry=_half.ENTRIES[family][0],
        config_class=config_class, supports=supports,
        enumerate_plans=partial(_half.enumerate_plans, family=family), plan=_half.plan,
        # the TF32 model on the word view: one m16n8k16 per 8 words issues like one TF32 m16n8k8 (bf16's peak is
        # ~2× TF32's per element, the view has half the MACs), its memory terms in 4-byte words
        predict_s=lambda pl, machine: _igemm_model.predict(pl.view, machine).time_s,
        traffic_words=_half.total_traffic_elements, onchip_words=_half.onchip_elements, bound_words=_bound_words,
        grid_size=partial(_half.grid_size, family=family), floor_work=direct_floor_work, launcher=_half,
        algorithm="igemm", description=description)


SPECS: tuple[KernelSpec, ...] = (
    _tf32_row(_igemm.IgemmFwdConfig, _igemm.supports, _igemm.total_traffic_words, _igemm,
              "implicit GEMM on tensor cores (mma.sync TF32, fp32 accumulation), fp32 NCHW, any stride/"
              "padding/dilation, split reduction"),
    _tf32_row(_nhwc.IgemmNhwcFwdConfig, _nhwc.supports, _nhwc.total_traffic_words, _nhwc,
              "implicit GEMM on tensor cores over an NHWC copy of x (16-byte A copies; C a multiple of 4), "
              "TF32, fp32 accumulation, any stride/padding/dilation, split reduction"),
    _tf32_row(_pointwise.IgemmPointwiseFwdConfig, _pointwise.supports, _pointwise.total_traffic_words, _igemm,
              "1×1 implicit GEMM on tensor cores (stride 1, no padding, H·W a multiple of 4): 16-byte A copies "
              "from NCHW x, TF32, fp32 accumulation, split reduction"),
    _half_row(_half.IgemmHalfFwdConfig, _half.supports,
              "implicit GEMM on tensor cores for bfloat16 / float16 (mma.sync m16n8k16, fp32 accumulation) over an "
              "NHWC copy of x (C a multiple of 8), any stride/padding/dilation, split reduction"),
    _half_row(_half.IgemmHalfPointwiseFwdConfig, _half.supports_1x1,
              "1×1 implicit GEMM on tensor cores for bfloat16 / float16 (stride 1, no padding, H·W a multiple of 8): "
              "16-byte A copies straight from NCHW x, ldmatrix.trans fragments, split reduction"),
)
