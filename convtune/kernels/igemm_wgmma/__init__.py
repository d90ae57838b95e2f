"""The implicit-GEMM forward families on Hopper's warpgroup MMA (wgmma; sm_90a, compute capability 9.0 only):
``igemm_wgmma`` for ``math="tf32"`` problems (x moved to a TF32-rounded channels-last copy first, counted in the time;
both operands from swizzled shared memory) and ``igemm_wgmma_half`` for bfloat16 / float16 problems (the same kernel
template over 16-bit elements, :mod:`~convtune.kernels.igemm_wgmma.half`) with its 1×1 sibling
``igemm_wgmma_half_1x1`` (x read as it is, NCHW: :mod:`~convtune.kernels.igemm_wgmma.half_1x1`), and the TF32 1×1
family ``igemm_wgmma_1x1`` (x read from NCHW into registers: :mod:`~convtune.kernels.igemm_wgmma.tf32_1x1`).

``igemm_wgmma_half_1x1_resident`` and ``igemm_wgmma_1x1_resident`` are the 16-bit and TF32 1×1 families' persistent
variants with the filter rows resident in shared memory (:mod:`~convtune.kernels.igemm_wgmma.half_1x1_resident`,
:mod:`~convtune.kernels.igemm_wgmma.tf32_1x1_resident`); ``igemm_wgmma_half_1x1_pingpong`` is the 16-bit one with
two or three warpgroups taking turns over the tiles (:mod:`~convtune.kernels.igemm_wgmma.half_1x1_pingpong`), opt-in
through ``CONVTUNE_EXPERIMENTAL`` (measured slower than the resident family), and ``igemm_wgmma_half_1x1_tma`` the
16-bit one fed by TMA from a producer warpgroup (:mod:`~convtune.kernels.igemm_wgmma.half_1x1_tma`: tuned, not
chosen untuned until calibrated).

``igemm_wgmma_n96`` and ``igemm_wgmma_half_n96`` are the general kernel with column tiles of 96 or 192 output
channels (:mod:`~convtune.kernels.igemm_wgmma.n96`), for K = 96, 192, 384, 576, ...

``SPECS`` are the families' registry rows (see :mod:`convtune.kernels.registry`); their bound and floor are the
direct convolution's (the same MAC CDAG, any dataflow), the compute ceiling the class's.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any

from convtune.kernels import experimental
from convtune.kernels.direct import direct_bound_words, direct_floor_work
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1 as _half_1x1
from convtune.kernels.igemm_wgmma import half_1x1_pingpong as _pingpong
from convtune.kernels.igemm_wgmma import half_1x1_resident as _resident
from convtune.kernels.igemm_wgmma import half_1x1_tma as _tma1x1
from convtune.kernels.igemm_wgmma import launcher as _launcher
from convtune.kernels.igemm_wgmma import model as _model
from convtune.kernels.igemm_wgmma import n96 as _n96
from convtune.kernels.igemm_wgmma import space as _space
from convtune.kernels.igemm_wgmma import tf32_1x1 as _tf32_1x1
from convtune.kernels.igemm_wgmma import tf32_1x1_resident as _tf32_resident
from convtune.kernels.igemm_wgmma import tf32_1x1_tma as _tf32_tma
from convtune.kernels.spec import KernelSpec
from convtune.problem import ConvProblem


def _bound_words(pl: Any, s_words: int) -> float:
    return direct_bound_words(pl.problem, s_words)


def _pingpong_opted_in(problem: ConvProblem) -> bool:
    return experimental.enabled(_pingpong.FAMILY) and _pingpong.supports(problem)


def _row(family: str, source: str, entry: str, config_class: type, supports: Callable[[ConvProblem], bool],
         launcher: Any, traffic_words: Callable[[Any], int], onchip_words: Callable[[Any], int],
         traffic: Callable[[Any], dict[str, int]], description: str, choice_scale: float = 1.0,
         choice_classes: tuple[str, ...] = ("tf32",),
         predict_s: Callable[[Any, Any], float] | None = None,
         untuned_classes: tuple[str, ...] | None = None) -> KernelSpec:
    """A wgmma family's row: the shared space (by family name), plan and model (with the family's request count
    ``traffic``, or the family's own ``predict_s``), the direct convolution's bound and floor."""
    return KernelSpec(
        family=family, direction="fwd", source=source, entry=entry, config_class=config_class, supports=supports,
        enumerate_plans=partial(_space.enumerate_plans, family=family), plan=_space.plan,
        predict_s=predict_s or (lambda pl, machine: _model.predict(pl, machine, traffic).time_s),
        traffic_words=traffic_words, onchip_words=onchip_words, bound_words=_bound_words,
        grid_size=partial(_space.grid_size, family=family), floor_work=direct_floor_work, launcher=launcher,
        algorithm="igemm", choice_scale=choice_scale, choice_classes=choice_classes, description=description,
        untuned_classes=untuned_classes)


SPECS: tuple[KernelSpec, ...] = (
    _row("igemm_wgmma", _launcher.SOURCE, _launcher.ENTRY, _launcher.IgemmWgmmaFwdConfig, _launcher.supports,
         _launcher, _launcher.total_traffic_words, _launcher.onchip_words, _launcher.traffic_words,
         "implicit GEMM on Hopper's warpgroup MMA (wgmma TF32, both operands from swizzled shared memory, fp32 "
         "accumulation) over a TF32-rounded channels-last copy of x (16-byte copies of 32/16/8-channel rows; C ≤ 4: "
         "a filter row's taps folded into one chunk), any stride/padding/dilation, split reduction; sm_90 only",
         # the untuned choice across the TF32 families: this model's time × 2^-0.25, fitted leave-one-shape-out on
         # the H200 wide suite (benchmarks/results/igemm_wgmma_h200/family_choice_model_v2: 1.133 → 1.123 held out)
         choice_scale=2 ** -0.25),
    _row(_half.HALF_FAMILY, _half.SOURCE, _half.ENTRY, _half.IgemmWgmmaHalfFwdConfig, _half.supports, _half,
         _half.total_traffic_elements, _half.onchip_elements, _launcher.traffic_words,
         "implicit GEMM on Hopper's warpgroup MMA for bfloat16 / float16 (wgmma m64nNk16, both operands from "
         "swizzled shared memory, fp32 accumulation, y rounded once) over a channels-last copy of x (16-byte copies "
         "of 64/32/16-channel rows; any C), any stride/padding/dilation, split reduction; sm_90 only",
         # the untuned choice across the 16-bit families: × 2^-0.75, fitted leave-one-shape-out on half_v5 (public
         # and wide; benchmarks/results/igemm_wgmma_h200/family_choice_model_v2: 1.087 → 1.055 held out)
         choice_scale=2 ** -0.75, choice_classes=("bfloat16", "float16")),
    _row(_half_1x1.FAMILY, _half_1x1.SOURCE, _half_1x1.ENTRY, _half_1x1.IgemmWgmmaHalf1x1FwdConfig,
         _half_1x1.supports, _half_1x1, _half_1x1.total_traffic_elements, _half_1x1.onchip_elements,
         _half_1x1.traffic_elements,
         "1×1 bfloat16 / float16 on Hopper's warpgroup MMA straight from NCHW x (no layout change): filters "
         "K-major, x N-major (wgmma imm-trans-b), 128-byte swizzles, 4-byte pixel-pair stores, split reduction; "
         "stride 1, no padding, H·W a multiple of 4; sm_90 only",
         # no calibration (× 1): a refit of both 16-bit wgmma scales on the current tables (unified_v3 wide +
         # unified_v4, family_choice_v4_bf16) gives × 2^-0.5 here and keeps the held-out regret at 1.137
         choice_classes=("bfloat16", "float16")),
    _row(_resident.FAMILY, _resident.SOURCE, _resident.ENTRY, _resident.IgemmWgmmaHalf1x1ResidentFwdConfig,
         _resident.supports, _resident, _resident.total_traffic_elements, _resident.onchip_elements,
         _resident.traffic_elements,
         "1×1 bfloat16 / float16 on Hopper's warpgroup MMA, persistent: about one block per SM holds its filter rows "
         "(all of C) in shared memory and walks the pixel tiles with one copy ring across tiles (epilogues overlap "
         "the next tile's copies), x N-major straight from NCHW; stride 1, no padding, H·W a multiple of 4, filter "
         "rows within shared memory; sm_90 only",
         # the untuned choice across the 16-bit families: × 2^-0.5, so that it wins the model's ties with the first 1×1
         # kernel (both at the DRAM floor) and beats the general kernel's × 2^-0.75 where it measured faster: on the
         # 14 shapes of benchmarks/suites/conv1x1.json (H100, in sample) the choice's geomean regret 1.619 (× 1) →
         # 1.097 (benchmarks/results/igemm_wgmma_h200/resident_1x1)
         choice_scale=2 ** -0.5, choice_classes=("bfloat16", "float16"), predict_s=_resident.predict_s),
    # opt-in (CONVTUNE_EXPERIMENTAL): GPU-verified, but slower than the resident family wherever measured (the yolov3
    # head 19.2–22.9 µs against 16.7 on an H100, benchmarks/results/igemm_wgmma_h200/pingpong_1x1), so the untuned op,
    # the tuner and the service leave it alone unless asked; explicit configs run without it
    _row(_pingpong.FAMILY, _pingpong.SOURCE, _pingpong.ENTRY, _pingpong.IgemmWgmmaHalf1x1PingpongFwdConfig,
         _pingpong_opted_in, _pingpong, _pingpong.total_traffic_elements, _pingpong.onchip_elements,
         _pingpong.traffic_elements,
         "1×1 bfloat16 / float16 on Hopper's warpgroup MMA, persistent, filters resident: two or three warpgroups "
         "share one copy of the block's filter rows (all of C) and take turns over its pixel tiles, each with its own "
         "copy ring, so one's epilogue and copy waits overlap another's MMAs; x N-major straight from NCHW, stores "
         "from registers; stride 1, no padding, H·W a multiple of 4, filter rows within shared memory; sm_90 only",
         choice_scale=2 ** -0.5, choice_classes=("bfloat16", "float16"), predict_s=_pingpong.predict_s),
    # chosen untuned where it runs: GPU-verified (102 cases); × 2^-0.75 (its model is the resident kernel's walk, so it
    # wins that family's × 2^-0.5 on every shape it takes): on the 14 shapes of benchmarks/suites/conv1x1.json (H100,
    # benchmarks/results/igemm_wgmma_h200/tma_1x1_h100/conv1x1_bf16) the untuned choice's geomean regret 1.067 → 1.056
    # held out (the yolov3 52×52 head 1.16 → 1.02; the ResNet-50 layers within 4% either way), the fit's scale
    # (family_choice_calibration.py --fit igemm_wgmma_half_1x1_tma)
    _row(_tma1x1.FAMILY, _tma1x1.SOURCE, _tma1x1.ENTRY, _tma1x1.IgemmWgmmaHalf1x1TmaFwdConfig, _tma1x1.supports,
         _tma1x1, _tma1x1.total_traffic_elements, _tma1x1.onchip_elements, _tma1x1.traffic_elements,
         "1×1 bfloat16 / float16 on Hopper's warpgroup MMA, persistent, filters resident, warp-specialised: one "
         "producer thread copies x (64-channel × 64-pixel boxes of one image) and the filter rows by TMA up to "
         "`stages` chunks ahead across tiles, the consumer warpgroups wait on mbarriers, MMA and store (staged "
         "16-byte NCHW stores); stride 1, no padding, C a multiple of 64, H·W of 8; sm_90 only",
         choice_scale=2 ** -0.75, choice_classes=("bfloat16", "float16"), predict_s=_tma1x1.predict_s),
    _row(_tf32_1x1.FAMILY, _launcher.SOURCE, _tf32_1x1.ENTRY, _tf32_1x1.IgemmWgmma1x1FwdConfig, _tf32_1x1.supports,
         _tf32_1x1, _tf32_1x1.total_traffic_words, _launcher.onchip_words, _tf32_1x1.traffic_words,
         "1×1 TF32 on Hopper's warpgroup MMA straight from NCHW x (no layout change): x's channel rows of pixels "
         "copied 16 bytes at a time, read into registers and rounded to TF32 (wgmma with A in registers), filters "
         "K-major by descriptor, the general kernel's NCHW epilogue, split reduction; stride 1, no padding, H·W a "
         "multiple of 4; sm_90 only",
         # the wgmma model's scale (igemm_wgmma's): fitted on every shape of unified_v2 for this family too (×0.841);
         # it breaks the models' ties at the DRAM floor of memory-bound 1×1 layers in favour of this family, which
         # measured faster than igemm_1x1 on all four 1×1 shapes of the suites (family_choice_tf32)
         choice_scale=2 ** -0.25),
    _row(_tf32_resident.FAMILY, _tf32_resident.SOURCE, _tf32_resident.ENTRY,
         _tf32_resident.IgemmWgmma1x1ResidentFwdConfig, _tf32_resident.supports, _tf32_resident,
         _tf32_resident.total_traffic_words, _launcher.onchip_words, _tf32_resident.traffic_words,
         "1×1 TF32 on Hopper's warpgroup MMA, persistent: about one block per SM and column tile holds its filter "
         "rows (all of C, TF32-rounded) in shared memory and walks the pixel tiles with one x ring across tiles; x "
         "read from NCHW into two alternating register sets and rounded to TF32 (wgmma with A in registers), 16-byte "
         "NCHW stores of a staged tile; stride 1, no padding, H·W a multiple of 4, filter rows within shared memory; "
         "sm_90 only",
         # the 16-bit resident family's choice scale (× 2^-0.5, fitted there on the 14 conv1x1 shapes); not yet fitted
         # on TF32 measurements of this family
         choice_scale=2 ** -0.5, predict_s=_tf32_resident.predict_s),
    # GPU-verified (64 cases on an H100); × 2^-0.5, the resident family's scale, fitted on the 14 conv1x1 shapes in TF32
    # (family_choice_calibration.py --fit igemm_wgmma_1x1_tma on resident_1x1_tf32/v1 and tma_1x1_tf32_h100: the
    # untuned choice's geomean regret 1.070 → 1.053 held out, worst 1.29 → 1.15)
    _row(_tf32_tma.FAMILY, _tf32_tma.SOURCE, _tf32_tma.ENTRY, _tf32_tma.IgemmWgmma1x1TmaFwdConfig,
         _tf32_tma.supports, _tf32_tma, _tf32_tma.total_traffic_words, _launcher.onchip_words,
         _tf32_tma.traffic_words,
         "1×1 TF32 on Hopper's warpgroup MMA, persistent, filters resident (all of C, TF32-rounded), warp-specialised: "
         "one producer thread copies x (32-channel × 32-pixel boxes of one image) and the filter rows by TMA up to "
         "`stages` chunks ahead across tiles; the consumer warpgroups wait on mbarriers, read x into registers "
         "rounded to TF32 (wgmma with A in registers), hand the stage back, MMA and store from the accumulators; "
         "stride 1, no padding, C a multiple of 32, H·W of 4; sm_90 only",
         choice_scale=2 ** -0.5, predict_s=_tf32_tma.predict_s),
    # chosen untuned (198 GPU cases pass on an H100): × 2^-0.5, the general family's model with its tiles favoured by
    # 2^-0.25, fitted by family_choice_calibration.py --fit igemm_wgmma_n96 --machine h100 on the H100 TF32 tables and
    # benchmarks/results/igemm_wgmma_h200/n96_h100 (the 13 shapes it takes): the untuned choice's geomean regret
    # 1.109 → 1.072 (max 1.80 → 1.41; AlexNet conv2 1.63 → 1.00, Inception-v3 mixed6c 1.32–1.42 → 1.00–1.02, ZFNet
    # conv1 1.55–1.80 → 1.00–1.01, SSD300 conf 1.30 → 1.08; the two mixed7b 1×3/3×1 layers 1.02 → 1.06–1.07)
    _row(_n96.FAMILY, _n96.SOURCE, _launcher.ENTRY, _n96.IgemmWgmmaN96FwdConfig, _launcher.supports, _launcher,
         _launcher.total_traffic_words, _launcher.onchip_words, _launcher.traffic_words,
         "the igemm_wgmma kernel (TF32) with column tiles of 96 or 192 output channels (wgmma m64n96 / m64n192): "
         "K = 96, 192, 288, 576, ... without the zero rows of a power-of-two tile; any stride/padding/dilation, "
         "split reduction; sm_90 only",
         choice_scale=2 ** -0.5),
    # chosen untuned: × 2^-0.75, the general 16-bit family's scale (its model unchanged); on the H100 bf16 tables and
    # n96_h100 the untuned choice's geomean regret 1.117 → 1.104 with no shape worse (AlexNet conv2 1.64 → 1.00, SSD300
    # conf 1.31 → 1.00); × 2^-1 fitted lower (1.099) but moved the mixed7b layers 1.05–1.16 → 1.40–1.43
    _row(_n96.HALF_FAMILY, _n96.SOURCE, _half.ENTRY, _n96.IgemmWgmmaHalfN96FwdConfig, _half.supports, _half,
         _half.total_traffic_elements, _half.onchip_elements, _launcher.traffic_words,
         "the igemm_wgmma_half kernel (bfloat16 / float16) with column tiles of 96 or 192 output channels (wgmma "
         "m64n96k16 / m64n192k16): K = 96, 192, 288, 576, ... without the zero rows of a power-of-two tile; any "
         "stride/padding/dilation, split reduction; sm_90 only",
         choice_scale=2 ** -0.75, choice_classes=("bfloat16", "float16")),
)
