"""The pointwise (1×1) forward family: one GEMM over every output pixel of every image.

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); its bound and floor are the direct
convolution's.
"""

from __future__ import annotations

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.pointwise import launcher as _pointwise
from convtune.kernels.pointwise import model as _pointwise_model
from convtune.kernels.pointwise import space as _pointwise_space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="pointwise", direction="fwd", source=_pointwise.SOURCE, entry=_pointwise.ENTRY,
        config_class=_pointwise.PointwiseFwdConfig, supports=_pointwise.supports,
        enumerate_plans=_pointwise_space.enumerate_plans, plan=_pointwise_space.plan,
        predict_s=lambda pl, machine: _pointwise_model.predict(pl, machine).time_s,
        traffic_words=_pointwise.total_traffic_words,
        onchip_words=_pointwise.onchip_words,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_pointwise_space.grid_size, floor_work=direct_floor_work, launcher=_pointwise,
        description="1×1 convolution (pad 0, any stride) as one GEMM over every output pixel of every image, fp32 "
                    "NCHW, 8×8 register tiles, split-C",
    ),
)
