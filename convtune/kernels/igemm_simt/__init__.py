"""The implicit-GEMM forward family on the CUDA cores (strict fp32): every dense float32 convolution as one GEMM
over all output pixels of all images, the im2col rows gathered on the fly.

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); its bound and floor are the direct
convolution's, its filters the direct family's packed weights.
"""

from __future__ import annotations

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.igemm_simt import launcher as _launcher
from convtune.kernels.igemm_simt import model as _model
from convtune.kernels.igemm_simt import space as _space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="igemm_simt", direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.IgemmSimtFwdConfig, supports=_launcher.supports,
        enumerate_plans=_space.enumerate_plans, plan=_space.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_space.grid_size, floor_work=direct_floor_work, launcher=_launcher,
        description="implicit GEMM on the CUDA cores (strict fp32 FMAs): any filter, stride, padding and "
                    "dilation as one GEMM over every output pixel of every image, im2col rows gathered into "
                    "shared memory, 8×8 register tiles, split reduction",
        # KernelSpec.choice_s, fitted on the H200 wide suite against direct, pointwise and unfused Winograd (left as
        # shipped): the direct model is ~2× optimistic where this family wins (strided stems), and this one misses
        # ~12 µs of fixed cost on tiny maps
        choice_scale=0.5, choice_offset_s=12e-6,
        # the calibration holds in strict float32 only; in TF32 the model alone took three stems from the tensor-core
        # families, which measured faster through the op on the H100 (kernel × cuDNN TF32, the untuned op with this
        # family in the choice and without it: LeNet conv1 0.74 → 1.19, ENet initial 1.11 → 1.37, MobileNetV2 stem
        # 1.32 → 1.42; benchmarks/results/igemm_simt_h200/tf32_choice_ab_h100)
        untuned_classes=("float32",),
    ),
)
