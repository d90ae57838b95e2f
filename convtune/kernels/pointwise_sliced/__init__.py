"""The sliced pointwise (1×1) forward family: small GEMMs (batch-1 heads, 7×7 and 14×14 maps) in one launch, the
reduction over input channels split across the warps of a block instead of across blocks; float32, bfloat16 and
float16 storage with fp32 sums.

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); its bound and floor are the direct
convolution's. GPU-verified (223 cases against float64 and cuDNN on an H100, 2026-12-06:
``benchmarks/results/sliced_h100``). The untuned choice considers it in strict float32 only (``untuned_classes``): on
the 13 fp32 shapes of that run its shipped model, compared as it is against the other families' calibrated ones,
lowers the untuned choice's geometric-mean regret from 1.48 to 1.19 (worst 2.46 → 1.60) and raises it on none
(``benchmarks/family_choice_calibration.py --machine h100 --fit pointwise_sliced``; the families measured there were
igemm_simt, pointwise and this one, not direct); in the 16-bit classes 3 shapes
were measured, too few to calibrate it against the wgmma families, and in TF32 the tensor-core families won them all.
The tuner measures it in every class.
"""

from __future__ import annotations

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.pointwise_sliced import launcher as _launcher
from convtune.kernels.pointwise_sliced import space as _space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.PointwiseSlicedFwdConfig, supports=_launcher.supports,
        enumerate_plans=_space.enumerate_plans, plan=_space.plan, predict_s=_launcher.predict_s,
        traffic_words=_launcher.total_traffic_words, onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_space.grid_size, floor_work=direct_floor_work, launcher=_launcher, algorithm="direct",
        untuned_classes=("float32",),
        description="1×1 convolution (pad 0, any stride) for small GEMMs, float32 / bfloat16 / float16 NCHW with "
                    "fp32 sums: the channel reduction split across a block's thread groups and summed in shared "
                    "memory (one launch, no workspace, no atomics)",
    ),
)
