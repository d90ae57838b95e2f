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
        # the untuned choice across the 16-bit families: × 2^-0.75, igemm_wgmma_half's scale (its model under-predicts
        # folded stems more than this one under-predicts its own): on the six-family bf16 tables the choice's geomean
        # regret 1.106 → 1.095 (H200, where it was chosen) and 1.108 → 1.096 (H100), the stems table 1.328 → 1.271; the
        # one choice it moves is the MobileNetV2 stem b64, regret 2.09 → 1.21 (H200), 2.11 → 1.19 (H100)
        # (benchmarks/results/igemm_wgmma_h200/six_families_h200/README.md)
        choice_classes=("bfloat16", "float16"), choice_scale=2 ** -0.75,
        description="direct convolution on the CUDA cores for bfloat16 / float16 few-channel layers (C ≤ 16, "
                    "C·R·S ≤ 64: 3×3 stems): fp32 filters in shared memory, a thread's PT outputs × KB channels in "
                    "fp32 registers, each input row span read once per tap row, x and w as they are (one launch)",
    ),
)
