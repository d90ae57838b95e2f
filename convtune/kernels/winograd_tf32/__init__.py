"""Unfused Winograd F(2×2, 3×3) forward in the TF32 class (family ``winograd_unfused_tf32``): the fp32 unfused path's
transforms with the α² batched GEMMs on tensor cores (:mod:`.launcher`, :mod:`.model`). Experimental: registered, but
its ``supports`` is off until ``CONVTUNE_EXPERIMENTAL`` names it (:mod:`convtune.kernels.experimental`). It shares the
Winograd families' bound and floor (:mod:`convtune.kernels.winograd`).
"""

from __future__ import annotations

from convtune.kernels.spec import KernelSpec
from convtune.kernels.winograd import bound_words, floor_work
from convtune.kernels.winograd_tf32 import launcher as _launcher
from convtune.kernels.winograd_tf32 import model as _model

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.WinogradUnfusedTf32Config, supports=_launcher.supports,
        enumerate_plans=_launcher.enumerate_plans, plan=_launcher.plan,
        predict_s=lambda pl, machine: _model.predict(pl, machine).time_s,
        traffic_words=_launcher.total_traffic_words,
        onchip_words=_launcher.onchip_words,
        bound_words=lambda pl, s_words: bound_words(pl.problem, s_words, pl.config.m),
        grid_size=_launcher.grid_size, floor_work=floor_work, launcher=_launcher, algorithm="winograd",
        description="unfused Winograd F(2×2,3×3) in the TF32 class: fp32 transforms, α² batched GEMMs on tensor "
                    "cores (mma.sync TF32); 3×3 stride 1; experimental (CONVTUNE_EXPERIMENTAL)",
    ),
)
