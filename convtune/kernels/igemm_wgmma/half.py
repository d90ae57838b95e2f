"""Implicit-GEMM bfloat16 / float16 forward on Hopper's warpgroup MMA (family ``igemm_wgmma_half``, sm_90a).

The TF32 wgmma kernel's plan, space and model (:mod:`~convtune.kernels.igemm_wgmma.launcher`) over 16-bit elements:
a chunk of the reduction is ``chunk`` = 64, 32 or 16 channels of one tap (one swizzled row of 128, 64 or 32 bytes),
Cp = ⌈C/chunk⌉·chunk, KRp = R·S·Cp, a k-step is ``wgmma m64nNk16`` (fp32 accumulation, products exact), y rounded
once to the storage type. Any C: the channels past C are zero in the workspace and the filters (small chunks keep
that padding small: a stem's C = 3 pads to 16).

Folded taps (``row_taps = S``, stems: C ≤ 8): a chunk is one filter row, its shared-memory row holding the S taps
side by side, Cq = 2, 4 or 8 channels each (the smallest ≥ C:
:func:`~convtune.kernels.igemm_wgmma.launcher.fold_channels`), ``chunk`` ≥ S·Cq columns; Cp = Cq (the workspace's
channels), KRp = R·chunk, R chunks, one copy of 2·Cq bytes per pixel and tap. A 7×7 stem with C = 3 computes 7 chunks
of 32 columns (21 used) instead of 49 chunks of 16 (3 used).

Shapes: x (N, C, H, W), w (K, C, R, S) and y (N, K, P, Q) in the problem's dtype, as CuPy ``float16`` arrays or,
bfloat16 (which CuPy lacks), ``uint16`` arrays of the bits. The prepared launch: ``igemm_wgmma_to_nhwc_16`` (x → the
workspace: channels-last, Cp channels; folded taps: ``igemm_wgmma_to_nhwc_fold``, a thread per pixel), the GEMM
(into y; with a split reduction into an fp32 workspace zeroed first, by atomics), then for a split
``igemm_wgmma_f32_to_16`` (workspace → y). The filter operand (K, KRp) in (r, s, c) order is made once per weight
tensor by ``igemm_wgmma_pack``. The kernels are the TF32 family's templates (``igemm_wgmma_fwd.cu``) over 16-bit
storage.

Traffic, in 2-byte elements: layout, input and weight as the TF32 kernel's formula counts them in elements; y is
written once in 16 bits, or, split, added in fp32 (2 elements per value), zeroed, read and converted::

    output = N·K·P·Q                                              (splits = 1)
           = 2·splits·N·K·P·Q + 2·N·K·P·Q + 2·N·K·P·Q + N·K·P·Q   (zero, atomics, read, write; splits > 1)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.kernels.compile import cupy_module, load_kernel
from convtune.kernels.igemm import half as _mma_half
from convtune.kernels.igemm.half import HalfFilters, HalfKernels
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig, IgemmWgmmaFwdPlan, folded
from convtune.kernels.prepared import (
    FilterLayout,
    Launch,
    Memset,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)
from convtune.problem import ConvProblem

HALF_FAMILY = "igemm_wgmma_half"
SOURCE = _tf32.SOURCE
ENTRY = "igemm_wgmma_half_fwd"
TO_NHWC_ENTRY = "igemm_wgmma_to_nhwc_16"
CONVERT_ENTRY = "igemm_wgmma_f32_to_16"
CUDA_TYPES = {"bfloat16": "convtune::wg_bf16", "float16": "convtune::wg_f16"}
DTYPES = tuple(CUDA_TYPES)
CONVERT_THREADS = 256
#: relative error against the float64 convolution of the rounded inputs a config must meet: the 16-bit mma.sync
#: family's gates, whose derivation holds here (products exact, fp32 sums, y rounded once)
TOLERANCES = _mma_half.TOLERANCES


CHUNKS = (64, 32, 16)   # channels per chunk: shared-memory rows of 128, 64, 32 bytes
STAGES = _tf32.GENERAL_STAGES   # the general kernel's, every class
TRANSPOSE_PIXELS = 64   # the layout change's block: 64 pixels × 32 channels
TRANSPOSE_CHANNELS = 32


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalfFwdConfig(IgemmWgmmaFwdConfig):
    """The TF32 wgmma kernel's parameters (:class:`IgemmWgmmaFwdConfig`) with 16-bit chunks, for 16-bit problems."""

    family = HALF_FAMILY
    direction = "fwd"

    chunk: int = 64        # channels of one tap per reduction chunk (64, 32 or 16): Cp = ⌈C/chunk⌉·chunk
    # row_taps (the TF32 config's): 1, or S (folded: C ≤ 8, S·Cq ≤ chunk; stems)

    @property
    def row_bytes(self) -> int:
        return 2 * self.chunk


def supports(problem: ConvProblem) -> bool:
    """bfloat16 / float16 storage (``math="ieee"``), groups = 1, not causal; any channel count."""
    p = problem
    return p.dtype in DTYPES and p.math == "ieee" and p.groups == 1 and not p.causal


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalfPlan(IgemmWgmmaFwdPlan):
    """The TF32 plan's geometry (``cp``, ``krp`` in elements, chunks of 64 channels) with the 16-bit source."""

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus ``extern "C"`` entries for this plan's dtype."""
        fields = self._wrapper_fields() | {"t": CUDA_TYPES[self.problem.dtype]}
        gemm = _GEMM_TMA if _tf32.uses_tma(self.config) else _GEMM
        return self.family_source() + gemm.format(**fields) + _WRAPPER.format(**fields)


_GEMM = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
igemm_wgmma_half_fwd(const {t}* __restrict__ xt, const {t}* __restrict__ filt, {t}* __restrict__ y,
                     float* __restrict__ ysplit, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH,
                     int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {{
  convtune::igemm_wgmma_fwd_body<{t}, {targs}>(xt, filt, y, ysplit, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW,
                                               KRp, chunks_per_split);
}}
"""
# the TMA GEMM: the same pointers and ints (xt, filt reach the kernel through the maps), then the two tensor maps
_GEMM_TMA = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_half_fwd(const {t}* __restrict__ xt, const {t}* __restrict__ filt, {t}* __restrict__ y,
                     float* __restrict__ ysplit, int N, int Cp, int H, int W, int K, int P, int Q, int S, int SH,
                     int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split,
                     const __grid_constant__ convtune::TmaDesc map_a,
                     const __grid_constant__ convtune::TmaDesc map_b) {{
  convtune::igemm_wgmma_tma_body<{t}, {tma_targs}>(&map_a, &map_b, y, ysplit, N, Cp, K, P, Q, S, SH, SW, PH, PW, DH,
                                                   DW, KRp, chunks_per_split);
}}
"""
_WRAPPER = """
extern "C" __global__ void __launch_bounds__(256)
igemm_wgmma_to_nhwc_16(const {t}* __restrict__ x, {t}* __restrict__ xt, int C, int HW, int Cp) {{
  convtune::igemm_wgmma_to_nhwc_16_body(x, xt, C, HW, Cp);
}}
extern "C" __global__ void __launch_bounds__(256)
igemm_wgmma_to_nhwc_fold(const {t}* __restrict__ x, {t}* __restrict__ xt, int C, int HW) {{
  convtune::igemm_wgmma_to_nhwc_fold_body<{t}, {fq_or_2}>(x, xt, C, HW);
}}
extern "C" __global__ void igemm_wgmma_pack(const {t}* __restrict__ w, {t}* __restrict__ filt, int K, int C, int R,
                                            int S, int Cp) {{
  convtune::igemm_wgmma_pack_body<{t}, {fq}, {ch}>(w, filt, K, C, R, S, Cp);
}}
extern "C" __global__ void igemm_wgmma_f32_to_16(const float* __restrict__ ws, {t}* __restrict__ y, int n) {{
  convtune::igemm_wgmma_f32_to_16_body(ws, y, n);
}}
"""


_family_source = _tf32._family_source


# ---- traffic ------------------------------------------------------------------------------------------------
def traffic_elements(pl: IgemmWgmmaHalfPlan) -> dict[str, int]:
    """Elements (2 bytes) the kernels request (module docstring)."""
    elements = _tf32.traffic_words(pl)
    out = pl.problem.output_elements
    elements["output"] = (2 * pl.splits_launched * out + 5 * out) if pl.splits_launched > 1 else out
    return elements


def total_traffic_elements(pl: IgemmWgmmaHalfPlan) -> int:
    return sum(traffic_elements(pl).values())


def onchip_elements(pl: IgemmWgmmaFwdPlan) -> int:
    """Fast memory one block holds, in 2-byte elements: every shared-memory stage plus the fp32 accumulators."""
    return pl.smem_bytes // 2 + 2 * pl.config.accumulators * pl.config.compute_threads


# ---- launching ----------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmmaHalfPlan) -> HalfKernels:
    """The layout change, the GEMM and the split's conversion (the 16-bit mma.sync family's kernel triple)."""
    text = pl.source()
    return HalfKernels(load_kernel(text, to_nhwc_entry(pl)),
                       load_kernel(text, ENTRY, dynamic_smem_bytes=pl.smem_bytes), load_kernel(text, CONVERT_ENTRY))


def to_nhwc_entry(pl: IgemmWgmmaHalfPlan) -> str:
    """The layout change: a thread per pixel into FQ channels (folded taps), else blocks of 64 pixels × 32
    channels."""
    return _tf32.TO_NHWC_FOLD_ENTRY if folded(pl.config) else TO_NHWC_ENTRY


def nhwc_bytes(pl: IgemmWgmmaHalfPlan) -> int:
    """The workspace's first part: x channels-last with Cp channels (2 bytes an element; a multiple of 128)."""
    p = pl.problem
    return 2 * p.N * p.H * p.W * pl.cp


def workspace_bytes(pl: IgemmWgmmaHalfPlan) -> int:
    """x channels-last (:func:`nhwc_bytes`), then for a split the fp32 output."""
    return nhwc_bytes(pl) + (4 * pl.problem.output_elements if pl.splits_launched > 1 else 0)


def layout_key(pl: IgemmWgmmaFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share packed filters: (K, KRp) in (r, s, c) order depends on the chunk through Cp;
    folded (rows of ``chunk`` columns s·Cq + c) on the chunk and Cq."""
    p = pl.problem
    return (HALF_FAMILY, p.dtype, p.K, p.C, p.R, p.S, pl.krp, getattr(pl, "fold_channels", 0))


def filter_layout(pl: IgemmWgmmaFwdPlan, device: int) -> FilterLayout:
    """The filters (K, KRp) in (r, s, c) order, 16-bit, and (built on first use) their packing launch."""
    p = pl.problem
    return _tf32.pack_layout(pl, device, _tf32.PACK_ENTRY, _tf32.layout_name(pl, p.dtype), layout_key(pl),
                             p.K * pl.krp)


def to_nhwc_grid(pl: IgemmWgmmaHalfPlan) -> tuple[int, int, int]:
    """The layout change's grid: blocks of 64 pixels × 32 channels of every image (folded: 256 pixels of an image,
    images along y)."""
    p = pl.problem
    if folded(pl.config):
        return _tf32.fold_grid(pl)
    return (-(-p.H * p.W // TRANSPOSE_PIXELS), -(-pl.cp // TRANSPOSE_CHANNELS), p.N)


def prepare_plan(pl: IgemmWgmmaHalfPlan, device: int = 0, kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y, workspace): the layout change into the workspace, the GEMM; a split zeroes the fp32
    output after x's copy in the workspace, adds into it, converts it into y."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    assert kernels.transpose is not None
    x_bytes = nhwc_bytes(pl)
    steps: list[Any] = [Launch(kernels.transpose, to_nhwc_grid(pl), (_tf32.to_nhwc_threads(pl), 1, 1), 0,
                               pointers(0, 3),
                               _tf32.to_nhwc_arguments(pl))]
    gemm_args = _tf32.gemm_arguments(pl)
    n = p.output_elements
    if pl.splits_launched > 1:
        steps.append(Memset(3, 4 * n, x_bytes))
    steps.append(Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes,
                        pointers(3, 1, 2, (3, x_bytes)), gemm_args, _tf32.tensor_maps(pl)))
    if pl.splits_launched > 1:
        steps.append(Launch(kernels.convert, grid3(min(-(-n // CONVERT_THREADS), 4096)), (CONVERT_THREADS, 1, 1), 0,
                            pointers((3, x_bytes), 2), (n,)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=workspace_bytes(pl), filters=filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.P, p.Q))


def shared_workspace_bytes(pl: IgemmWgmmaHalfPlan) -> int:
    """The workspace of :func:`prepare_filters`: x channels-last and the fp32 output of a split, whatever this
    plan's split (plans with equal :func:`filters_key` share it)."""
    return nhwc_bytes(pl) + 4 * pl.problem.output_elements


def prepare_filters(pl: IgemmWgmmaHalfPlan, w: Any) -> HalfFilters:
    """w (K, C, R, S) 16-bit CuPy (bfloat16 as uint16 bits) → the packed filters and a workspace."""
    cp = cupy_module()
    filt = _tf32.pack_filters(filter_layout(pl, driver().get_device()), w, cp.uint16)
    return HalfFilters(filt, cp.empty(shared_workspace_bytes(pl) // 4, dtype=cp.float32))


def filters_key(pl: IgemmWgmmaHalfPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace covers x and fp32 y)."""
    p = pl.problem
    return (*layout_key(pl), p.N * p.H * p.W * pl.cp, p.output_elements)


def launch(pl: IgemmWgmmaHalfPlan, kernels: HalfKernels, x: Any, filters: HalfFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernels on contiguous 16-bit CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y), data_pointer(filters.work)),
             stream_pointer(stream))


def tolerance(pl: IgemmWgmmaHalfPlan) -> float:
    return TOLERANCES[pl.problem.dtype]
