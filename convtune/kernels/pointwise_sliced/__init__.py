"""The sliced pointwise (1×1) forward family: small GEMMs (batch-1 heads, 7×7 and 14×14 maps) in one launch, the
reduction over input channels split across the warps of a block instead of across blocks; float32, bfloat16 and
float16 storage with fp32 sums.

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); its bound and floor are the direct
convolution's. GPU-verified (223 cases against float64 and cuDNN on an H100, 2026-12-06:
``benchmarks/results/sliced_h100``). Its model is not yet calibrated against the other families', so the untuned
choice leaves it out (``chosen_untuned=False``); the tuner measures it like any family.
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
        chosen_untuned=False,
        description="1×1 convolution (pad 0, any stride) for small GEMMs, float32 / bfloat16 / float16 NCHW with "
                    "fp32 sums: the channel reduction split across a block's thread groups and summed in shared "
                    "memory (one launch, no workspace, no atomics)",
    ),
)
