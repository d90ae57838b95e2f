"""The direct convolution on the CUDA cores for bfloat16 / float16 (family ``direct_half``): few-channel layers
with short reductions (C ≤ 16, C·R·S ≤ 64: 3×3 stems, LeNet's first layer) with fp32 accumulation, any stride,
padding and dilation, x and w read as they are (one launch).

``SPECS`` is the family's registry row (see :mod:`convtune.kernels.registry`); its bound and floor are the direct
convolution's.
"""

from __future__ import annotations

from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.direct_half import launcher as _launcher
from convtune.kernels.direct_half import space as _space
from convtune.kernels.spec import KernelSpec

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family=_launcher.FAMILY, direction="fwd", source=_launcher.SOURCE, entry=_launcher.ENTRY,
        config_class=_launcher.DirectHalfFwdConfig, supports=_launcher.supports,
        enumerate_plans=_space.enumerate_plans, plan=_space.plan, predict_s=_launcher.predict_s,
        traffic_words=_launcher.total_traffic_elements, onchip_words=_launcher.onchip_elements,
        bound_words=lambda pl, s_words: direct_bound_words(pl.problem, s_words),
        grid_size=_space.grid_size, floor_work=direct_floor_work, launcher=_launcher, algorithm="direct",
        choice_classes=("bfloat16", "float16"),
        description="direct convolution on the CUDA cores for bfloat16 / float16 few-channel layers (C ≤ 16, "
                    "C·R·S ≤ 64: 3×3 stems): fp32 filters in shared memory, a thread's PT outputs × KB channels in "
                    "fp32 registers, each input row span read once per tap row, x and w as they are (one launch)",
    ),
)
