"""Implicit-GEMM TF32 forward on Hopper's warpgroup MMA (wgmma, sm_90a): config, resources, traffic, launches; the
plan, resources and traffic the 16-bit families (:mod:`~convtune.kernels.igemm_wgmma.half`, ``half_1x1``) share.

One kernel template serves TF32 and 16-bit storage (``igemm_wgmma_fwd.cu``, which states the layouts): a chunk of the
reduction is ``chunk`` channels of one tap, one swizzled shared-memory row of 128, 64 or 32 bytes (TF32: 32, 16 or 8
channels), Cp = ⌈C/chunk⌉·chunk, KRp = R·S·Cp. Folded taps (``row_taps = S``, stems: C ≤ 4 for TF32): a chunk is one
filter row, its S taps side by side, Cq = 1, 2 or 4 channels a pixel (copies of 4, 8 or 16 bytes); Cp = Cq,
KRp = R·chunk.

Shapes (fp32, contiguous): x (N, C, H, W); y (N, K, P, Q).
The prepared launch is two kernels (three with a split's zeroing of y) and a workspace of N·H·W·Cp floats:
``igemm_wgmma_to_nhwc`` (x → workspace: channels-last, TF32-rounded, zero-padded channels; folded taps:
``igemm_wgmma_to_nhwc_fold``, a thread per pixel), then ``igemm_wgmma_fwd`` (workspace, filters → y; a split adds
into y with fp32 atomics); its time includes the layout change, as a caller with NCHW tensors pays it. The filter
operand (K, KRp), (r, s, c) order, TF32-rounded, is made once per weight tensor by ``igemm_wgmma_pack``.

Grid: (⌈M/BM⌉, ⌈K/BN⌉, splits) with M = N·P·Q, BM = 64 · warpgroups · m_blocks, 128 · warpgroups threads.

``tma = 1`` (not with folded taps): the same GEMM fed by the Tensor Memory Accelerator, warp-specialised
(``igemm_wgmma_tma.cuh``): a producer warpgroup (128 more threads) whose one thread issues per chunk an im2col box
of the workspace (BM output pixels × ch channels of one tap) and a tile of the filters into the stage the consumers
released; the warpgroups only wait, multiply and release. The maps (:func:`tensor_maps`) are encoded per operand
pointer at the call. The im2col box needs |padding| and |padding − dilation·(kernel − 1)| within the driver's
corner range and strides ≤ 8 (:func:`convtune.kernels.tensor_map.im2col_limits`). Same traffic.

Traffic, in words, what the kernels request (a copy whose tap meets padding is zero-filled and reads nothing)::

    layout = N·C·H·W + N·H·W·Cp                      (the layout change reads x, writes the workspace)
    input  = ⌈K/BN⌉ · Cp · Σ_{n,p,q} taps(p, q)       = ⌈K/BN⌉ · Cp · (macs_nonpad / (K·C))
    weight = ⌈M/BM⌉ · ⌈K/BN⌉·BN · KRp                (rows ≥ K are zero-filled: counted as requested, read nothing;
                                                       counted here as the tile's whole width, an upper bound)
    output = splits · N·K·P·Q (+ N·K·P·Q zeroing when split)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.igemm.nhwc import NhwcFilters, NhwcKernels
from convtune.kernels.launch_geometry import checked_min_blocks
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
from convtune.kernels.tensor_map import Im2colMap, TensorMap, TiledMap
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "igemm_wgmma_fwd.cu"
ENTRY = "igemm_wgmma_fwd"
TO_NHWC_ENTRY = "igemm_wgmma_to_nhwc"
TO_NHWC_FOLD_ENTRY = "igemm_wgmma_to_nhwc_fold"   # folded taps' workspace: a thread per pixel (every class)
PACK_ENTRY = "igemm_wgmma_pack"                    # the filter operand (every class)
CHUNK_BYTES = 128          # the largest chunk of the reduction: one 128-byte swizzled row of one tap
CHUNK = 32                 # TF32 words per 128-byte chunk (the 16-bit family's: 64 elements; see chunk_elements)
CHUNKS = (32, 16, 8)       # TF32 channels per chunk: shared-memory rows of 128, 64, 32 bytes
GENERAL_STAGES = (3, 4, 6)  # the general kernel's stages, every class (3: two blocks of 128 × 128 tiles per SM)
TRANSPOSE_TILE = 32
TRANSPOSE_THREADS = 256
FOLD_TRANSPOSE_THREADS = 256   # the folded layout change: pixels per block
PACK_THREADS = 256
#: bytes of a folded pixel's channels in the workspace: one cp.async of 4, 8 or 16 bytes (Cq = bytes / element size:
#: 1, 2, 4 TF32 channels; 2, 4, 8 16-bit ones)
FOLD_BYTES = (4, 8, 16)
#: the compute capability whose arch-specific target (sm_90a) the kernel is built for
COMPUTE_CAPABILITY = (9, 0)


@dataclass(frozen=True, slots=True)
class WgmmaConfig(KernelConfig):
    """The tile parameters every wgmma family shares (no family of its own: the families subclass it)."""

    tile_n: int = 128      # BN: output channels per block, the wgmma's N (64, 128 or 256)
    m_blocks: int = 2      # MI: m64 row blocks per warpgroup
    warpgroups: int = 1    # WG: warpgroups per block (128 threads each), splitting BM
    stages: int = 4        # shared-memory stages (loads run stages − 2 chunks ahead)
    splits: int = 1        # reduction split across blocks (atomic adds when > 1)

    @property
    def tile_m(self) -> int:
        return 64 * self.warpgroups * self.m_blocks

    @property
    def threads(self) -> int:
        return 128 * self.warpgroups

    @property
    def compute_threads(self) -> int:
        """Threads holding accumulators: the warpgroups' (a TMA producer warpgroup holds none)."""
        return 128 * self.warpgroups

    @property
    def accumulators(self) -> int:
        """fp32 accumulator registers per thread: MI · BN / 2."""
        return self.m_blocks * self.tile_n // 2

    @property
    def row_bytes(self) -> int:
        """Bytes of one swizzled shared-memory row (one chunk of the reduction): 128 unless a family says otherwise."""
        return CHUNK_BYTES


@dataclass(frozen=True, slots=True)
class IgemmWgmmaFwdConfig(WgmmaConfig):
    """Tunable parameters of the wgmma TF32 forward kernel (see the module docstring): the tiles and the chunk."""

    family = "igemm_wgmma"
    direction = "fwd"

    chunk: int = 32        # channels of one tap per reduction chunk (TF32: 32, 16 or 8): Cp = ⌈C/chunk⌉·chunk
    row_taps: int = 1      # taps of a filter row per chunk: 1, or S (folded: C ≤ 4, S·Cq ≤ chunk; stems)
    # 1: both operands by TMA (im2col / tile maps) from a producer warpgroup (igemm_wgmma_tma.cuh); 0: cp.async
    tma: int = field(default=0, metadata={"min": 0})

    @property
    def row_bytes(self) -> int:
        return 4 * self.chunk

    @property
    def threads(self) -> int:
        """128 per warpgroup, and 128 for the TMA producer warpgroup."""
        return 128 * (self.warpgroups + self.tma)


def supports(problem: ConvProblem) -> bool:
    """Float32 storage with TF32 arithmetic allowed (``math="tf32"``), groups = 1, not causal."""
    p = problem
    return p.dtype == "float32" and p.math == "tf32" and p.groups == 1 and not p.causal


def chunk_elements(problem: ConvProblem, config: WgmmaConfig | None = None) -> int:
    """Channels per chunk: one shared-memory row of the storage type (``config.chunk``; without a config 128 bytes:
    32 TF32 words, 64 16-bit elements)."""
    return (config.row_bytes if config is not None else CHUNK_BYTES) // problem.itemsize_bytes


def fold_channels(problem: ConvProblem) -> int:
    """Cq: a folded pixel's channels in the workspace, the fewest of 4, 8 or 16 bytes (:data:`FOLD_BYTES`) that hold
    C (TF32: 1, 2, 4; 16-bit: 2, 4, 8); 0 where C is more (no fold)."""
    return next((q for q in (b // problem.itemsize_bytes for b in FOLD_BYTES) if q >= problem.C), 0)


def folded(config: WgmmaConfig | None) -> bool:
    """Whether a general config folds a filter row's taps into one chunk (``row_taps`` > 1; the 1×1 family's
    configs have no such field)."""
    return getattr(config, "row_taps", 1) > 1


def _fold_channels(problem: ConvProblem, config: WgmmaConfig | None) -> int:
    """Cq of a config that folds a filter row's taps into one chunk, else 0."""
    return fold_channels(problem) if folded(config) else 0


def padded_channels(problem: ConvProblem, config: WgmmaConfig | None = None) -> int:
    """Cp = ⌈C/ch⌉·ch with ch = :func:`chunk_elements`: the channels of one tap in the workspace and the filters
    (folded taps: Cq, the workspace's channels)."""
    cq = _fold_channels(problem, config)
    if cq:
        return cq
    ch = chunk_elements(problem, config)
    return -(-problem.C // ch) * ch


def padded_reduction(problem: ConvProblem, config: WgmmaConfig | None = None) -> int:
    """KRp = R·S·Cp (elements of the storage type; folded taps: R·ch, one chunk per filter row)."""
    if _fold_channels(problem, config):
        return problem.R * chunk_elements(problem, config)
    return problem.R * problem.S * padded_channels(problem, config)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: WgmmaConfig
    cp: int
    krp: int
    m_tiles: int
    n_tiles: int
    chunks: int
    chunks_per_split: int
    splits_launched: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.m_tiles, self.n_tiles, self.splits_launched)

    @property
    def blocks(self) -> int:
        return self.m_tiles * self.n_tiles * self.splits_launched

    def template_args(self) -> tuple[int, ...]:
        c = self.config
        return (c.tile_n, c.m_blocks, c.warpgroups, c.stages)

    @property
    def fold_channels(self) -> int:
        """FQ of the kernel: Cq when the config folds taps, else 0."""
        return self.cp if folded(self.config) else 0

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus ``extern "C"`` entries for this plan (TF32)."""
        c = self.config
        gemm = _GEMM_TMA if uses_tma(c) else _GEMM
        return self.family_source() + gemm.format(**self._wrapper_fields()) + _WRAPPER.format(**self._wrapper_fields())

    def family_source(self) -> str:
        """The kernel templates' text (``igemm_wgmma_fwd.cu``, includes expanded) the entries instantiate."""
        return _family_source()

    def _wrapper_fields(self) -> dict[str, Any]:
        c = self.config
        return {"threads": c.threads, "min_blocks": self.min_blocks,
                "targs": ", ".join(str(a) for a in (*self.template_args(), c.row_bytes, self.fold_channels)),
                "tma_targs": ", ".join(str(a) for a in (*self.template_args(), c.row_bytes)),
                "fq": self.fold_channels, "fq_or_1": self.fold_channels or 1, "fq_or_2": self.fold_channels or 2,
                "ch": chunk_elements(self.problem, c)}


# TF32: float32 arrays, the kernels' storage type convtune::wg_tf32 (the same bits); a split adds into y itself
_GEMM = """
using convtune_tf32 = convtune::wg_tf32;
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
igemm_wgmma_fwd(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp,
                int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp,
                int chunks_per_split) {{
  convtune::igemm_wgmma_fwd_body<convtune_tf32, {targs}>(
      reinterpret_cast<const convtune_tf32*>(xt), reinterpret_cast<const convtune_tf32*>(filt),
      reinterpret_cast<convtune_tf32*>(y), y, N, Cp, H, W, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp, chunks_per_split);
}}
"""
# the TMA GEMM: the same pointers and ints (xt, filt reach the kernel through the maps), then the two tensor maps
_GEMM_TMA = """
using convtune_tf32 = convtune::wg_tf32;
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_fwd(const float* __restrict__ xt, const float* __restrict__ filt, float* __restrict__ y, int N, int Cp,
                int H, int W, int K, int P, int Q, int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp,
                int chunks_per_split, const __grid_constant__ convtune::TmaDesc map_a,
                const __grid_constant__ convtune::TmaDesc map_b) {{
  convtune::igemm_wgmma_tma_body<convtune_tf32, {tma_targs}>(&map_a, &map_b, reinterpret_cast<convtune_tf32*>(y), y,
                                                            N, Cp, K, P, Q, S, SH, SW, PH, PW, DH, DW, KRp,
                                                            chunks_per_split);
}}
"""
_WRAPPER = """
extern "C" __global__ void __launch_bounds__(256)
igemm_wgmma_to_nhwc(const float* __restrict__ x, float* __restrict__ xt, int C, int HW, int Cp) {{
  convtune::igemm_wgmma_to_nhwc_body(x, xt, C, HW, Cp);
}}
extern "C" __global__ void __launch_bounds__(256)
igemm_wgmma_to_nhwc_fold(const float* __restrict__ x, float* __restrict__ xt, int C, int HW) {{
  convtune::igemm_wgmma_to_nhwc_fold_body<convtune_tf32, {fq_or_1}>(reinterpret_cast<const convtune_tf32*>(x),
                                                                   reinterpret_cast<convtune_tf32*>(xt), C, HW);
}}
extern "C" __global__ void igemm_wgmma_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C,
                                            int R, int S, int Cp) {{
  convtune::igemm_wgmma_pack_body<convtune_tf32, {fq}, {ch}>(reinterpret_cast<const convtune_tf32*>(w),
                                                            reinterpret_cast<convtune_tf32*>(filt), K, C, R, S, Cp);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


#: dynamic shared memory the TMA kernel adds after the stages: its 2·stages mbarriers (igemm_wgmma_tma.cuh)
TMA_BARRIER_BYTES = 128
#: the TMA kernel's consumer registers after setmaxnreg (igemm_wgmma_tma.cuh TMA_CONSUMER_REGS)
TMA_CONSUMER_REGS = 232


def uses_tma(config: WgmmaConfig | None) -> bool:
    """Whether a config's operands come by TMA (``tma`` = 1; families without the field: no)."""
    return getattr(config, "tma", 0) == 1


def smem_bytes(config: WgmmaConfig) -> int:
    """stages · (BM + BN) · row bytes + 1024 for aligning the tiles to the swizzle's period (≤ 1024 bytes), + the TMA
    kernel's barriers."""
    barriers = TMA_BARRIER_BYTES if uses_tma(config) else 0
    return config.stages * (config.tile_m + config.tile_n) * config.row_bytes + 1024 + barriers


def tma_regs_estimate(threads: int) -> int:
    """Registers per thread of a warp-specialised TMA kernel under ``__launch_bounds__(threads, 1)``: ptxas takes what
    one block may, up to the consumers' count after setmaxnreg."""
    return min(TMA_CONSUMER_REGS, 65536 // threads // 8 * 8)


def regs_estimate(config: WgmmaConfig) -> int:
    """Registers per thread ≈ accumulators + 4 per A row a thread copies (base, corner, flag) + 40.

    From ptxas on sm_90a (CUDA 13) over the prototype's 16 configs: 80 (MI·BN/2 = 32) to 208 (128), within ~16 of
    this estimate (ptxas rounds up to multiples of 8). Folded taps (``row_taps`` > 1): 8 threads per row (tap slots)
    and the loop over a slot's taps, + 24: over 8 folded 16-bit configs ptxas used 95–223, the estimate −22..+17.
    TMA: one block per SM, the launch count what one block may hold up to the consumers' (ptxas: 168 with two
    consumer warpgroups, 232 with one; the producer hands its registers to them by setmaxnreg)."""
    if uses_tma(config):
        return tma_regs_estimate(config.threads)
    fold = folded(config)
    a_rows = config.tile_m * (8 if fold else config.row_bytes // 16) // config.threads
    return config.accumulators + 4 * a_rows + 40 + (24 if fold else 0)


def derive_plan(problem: ConvProblem, config: WgmmaConfig, machine: MachineModel | None = None,
                plan_class: type[IgemmWgmmaFwdPlan] | None = None, transposed: bool = False,
                smem: int | None = None, regs: int | None = None) -> IgemmWgmmaFwdPlan:
    """The launch plan of a config that keeps the space's rules; refuses what breaks ``machine``'s limits (shared
    memory, registers, a machine other than compute capability 9.0) or the grid's. ``plan_class`` is the family's
    plan (its source text); the 16-bit and 1×1 families pass their own. ``transposed``: the GEMM's rows are the K output
    channels and its columns the N·P·Q pixels (the 16-bit 1×1 kernel; its grid puts the pixel tiles first).
    ``smem``, ``regs``: the family's shared memory per block and register estimate where they differ from
    :func:`smem_bytes`'s and :func:`regs_estimate`'s.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    if machine is not None and tuple(machine.compute_capability) != COMPUTE_CAPABILITY:
        raise InvalidConfig("problem", f"wgmma kernels are built for sm_90a; {machine.name} is "
                                       f"sm_{machine.compute_capability[0]}{machine.compute_capability[1]}")
    cp, krp = padded_channels(p, c), padded_reduction(p, c)
    chunks = krp // chunk_elements(p, c)
    per_split = -(-chunks // c.splits)
    launched = -(-chunks // per_split)
    pixels = p.N * p.P * p.Q
    rows, cols = (p.K, pixels) if transposed else (pixels, p.K)
    m_tiles, n_tiles = -(-rows // c.tile_m), -(-cols // c.tile_n)
    (x_tiles, y_tiles), y_field = ((n_tiles, m_tiles), "m_blocks") if transposed else ((m_tiles, n_tiles), "tile_n")
    if x_tiles > 2**31 - 1 or y_tiles > 65535:
        raise InvalidConfig(y_field, f"grid ({x_tiles}, {y_tiles}, {launched}) exceeds the CUDA grid limits")
    smem = smem if smem is not None else smem_bytes(c)
    regs = regs if regs is not None else regs_estimate(c)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem, regs, machine, "stages", "m_blocks")
    return (plan_class or IgemmWgmmaFwdPlan)(p, c, cp, krp, m_tiles, n_tiles, chunks, per_split, launched, smem,
                                             regs, min_blocks)


# ---- analytic traffic ---------------------------------------------------------------------------------
def traffic_words(pl: IgemmWgmmaFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernels per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    pixel_taps = p.macs_nonpad // (p.K * p.C)     # Σ over output pixels of the taps that meet x
    return {
        "layout": p.N * p.C * p.H * p.W + p.N * p.H * p.W * pl.cp,
        "input": pl.n_tiles * pl.cp * pixel_taps,
        "weight": pl.m_tiles * pl.n_tiles * c.tile_n * pl.krp,
        "output": out * pl.splits_launched + (out if pl.splits_launched > 1 else 0),
    }


def total_traffic_words(pl: IgemmWgmmaFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: IgemmWgmmaFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.compute_threads


def workspace_bytes(pl: IgemmWgmmaFwdPlan) -> int:
    """x in channels-last with Cp channels: 4·N·H·W·Cp bytes."""
    p = pl.problem
    return 4 * p.N * p.H * p.W * pl.cp


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmmaFwdPlan) -> NhwcKernels:
    """The layout change and the GEMM (the pair the mma.sync NHWC variant launches too)."""
    text = pl.source()
    to_nhwc = TO_NHWC_FOLD_ENTRY if folded(pl.config) else TO_NHWC_ENTRY
    return NhwcKernels(load_kernel(text, to_nhwc), load_kernel(text, ENTRY, dynamic_smem_bytes=pl.smem_bytes))


def to_nhwc_grid(pl: IgemmWgmmaFwdPlan) -> tuple[int, int, int]:
    """Blocks of 32 pixels × 32 channels of every image; folded taps: 256 pixels of an image, images along y."""
    p = pl.problem
    if folded(pl.config):
        return fold_grid(pl)
    return (-(-p.H * p.W // TRANSPOSE_TILE), -(-pl.cp // TRANSPOSE_TILE), p.N)


def fold_grid(pl: IgemmWgmmaFwdPlan) -> tuple[int, int, int]:
    """The folded layout change's grid (every class): a thread per pixel, :data:`FOLD_TRANSPOSE_THREADS` pixels of
    one image per block, images along y."""
    p = pl.problem
    return (-(-p.H * p.W // FOLD_TRANSPOSE_THREADS), p.N, 1)


def to_nhwc_threads(pl: IgemmWgmmaFwdPlan) -> int:
    """The layout change's block: a thread per pixel (folded taps, every class), else 256 threads."""
    return FOLD_TRANSPOSE_THREADS if folded(pl.config) else TRANSPOSE_THREADS


def to_nhwc_arguments(pl: IgemmWgmmaFwdPlan) -> tuple[int, ...]:
    """(C, H·W, Cp), folded (C, H·W) (every class)."""
    p = pl.problem
    return (p.C, p.H * p.W) if folded(pl.config) else (p.C, p.H * p.W, pl.cp)


def tensor_maps(pl: IgemmWgmmaFwdPlan) -> tuple[tuple[int, TensorMap], ...]:
    """The TMA GEMM's maps (every class; none without ``tma``): x channels-last at the workspace's start (operand 3)
    in im2col boxes of BM output pixels × ch channels, the packed filters (operand 1, K rows of KRp) in tiles of BN
    rows × ch; both with the row's swizzle."""
    if not uses_tma(pl.config):
        return ()
    p, c = pl.problem, pl.config
    ch = chunk_elements(p, c)
    x = Im2colMap(p.dtype, p.N, p.H, p.W, pl.cp, (-p.pad_w, -p.pad_h),
                  (p.pad_w - p.dil_w * (p.S - 1), p.pad_h - p.dil_h * (p.R - 1)), p.stride_w, p.stride_h, ch,
                  c.tile_m, c.row_bytes)
    return ((3, x), (1, TiledMap(p.dtype, pl.krp, p.K, ch, c.tile_n, c.row_bytes)))


def gemm_arguments(pl: IgemmWgmmaFwdPlan) -> tuple[int, ...]:
    p = pl.problem
    return (p.N, pl.cp, p.H, p.W, p.K, p.P, p.Q, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w,
            pl.krp, pl.chunks_per_split)


def pack_layout(pl: IgemmWgmmaFwdPlan, device: int, entry: str, name: str, key: tuple[Any, ...],
                elements: int) -> FilterLayout:
    """The filters (K, KRp) in (r, s, c) order made by the plan source's packing ``entry`` (one thread per element,
    arguments K, C, R, S, Cp), built on first use; ``elements`` of the storage type, ``FilterLayout.words`` counting
    them in float32 words (TF32: one each; 16-bit: two each, KRp is even)."""
    p = pl.problem
    words = elements * p.itemsize_bytes // 4

    def make_prep() -> PreparedLaunch:
        with driver().use_device(device):
            pack = load_kernel(pl.source(), entry)
        step = Launch(pack, grid3(-(-elements // PACK_THREADS)), (PACK_THREADS, 1, 1), 0, pointers(0, 1),
                      (p.K, p.C, p.R, p.S, pl.cp))
        return PreparedLaunch(plan=pl, device=device, operands=("w", "filters"), steps=[step], kernels=pack,
                              output_shape=(p.K, pl.krp), kind=entry)

    return FilterLayout(name, key, words, make_prep)


def layout_name(pl: IgemmWgmmaFwdPlan, kind: str) -> str:
    """The packed filters' description: ``kind`` (K, KRp) in (r, s, c) order, or folded rows of one filter row."""
    if folded(pl.config):
        return f"{kind} (K, R·chunk={pl.krp}), columns s·{pl.cp} + c of filter row r"
    return f"{kind} (K, R·S·Cp={pl.krp}), (r, s, c) order"


def filter_layout(pl: IgemmWgmmaFwdPlan, device: int) -> FilterLayout:
    """The filters (K, KRp), TF32-rounded, and (built on first use) their packing launch."""
    return pack_layout(pl, device, PACK_ENTRY, layout_name(pl, "TF32"), layout_key(pl), pl.problem.K * pl.krp)


def layout_key(pl: IgemmWgmmaFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share packed filters: (K, KRp) in (r, s, c) order depends on the chunk through Cp;
    folded (rows of ``chunk`` columns s·Cq + c) on the chunk and Cq."""
    p = pl.problem
    return (IgemmWgmmaFwdConfig.family, p.K, p.C, p.R, p.S, pl.krp, pl.fold_channels)


def prepare_plan(pl: IgemmWgmmaFwdPlan, device: int = 0, kernels: NhwcKernels | None = None) -> PreparedLaunch:
    """The layout change and the GEMM as one prepared launch: operands (x, filters, y, workspace = x channels-last);
    a split reduction zeroes y before the GEMM (atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = [Launch(kernels.transpose, to_nhwc_grid(pl), (to_nhwc_threads(pl), 1, 1), 0, pointers(0, 3),
                               to_nhwc_arguments(pl))]
    if pl.splits_launched > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(3, 1, 2),
                        gemm_arguments(pl), tensor_maps(pl)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=workspace_bytes(pl), filters=filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.P, p.Q))


def pack_filters(layout: FilterLayout, w: Any, dtype: Any) -> Any:
    """``layout``'s packing launch run on w (CuPy) into a new array of ``layout.words`` float32 words, viewed as
    ``dtype`` (the wgmma families' filter operands: TF32 words, or 16-bit elements two to a word)."""
    cp = cupy_module()
    filt = cp.empty(layout.words, dtype=cp.float32).view(dtype)
    prep = layout.prep
    assert prep is not None
    prep((data_pointer(cp.ascontiguousarray(w)), data_pointer(filt)), stream_pointer(None))
    return filt


def prepare_filters(pl: IgemmWgmmaFwdPlan, w: Any) -> NhwcFilters:
    """w (K, C, R, S) float32 CuPy → the packed filters and a workspace for x in channels-last."""
    cp = cupy_module()
    filt = pack_filters(filter_layout(pl, driver().get_device()), w, cp.float32)
    return NhwcFilters(filt, cp.empty(workspace_bytes(pl) // 4, dtype=cp.float32))


def filters_key(pl: IgemmWgmmaFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace is sized by x)."""
    p = pl.problem
    return (*layout_key(pl), p.N * p.H * p.W * pl.cp)


def launch(pl: IgemmWgmmaFwdPlan, kernels: NhwcKernels, x: Any, filters: NhwcFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernels on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y), data_pointer(filters.work)),
             stream_pointer(stream))


#: relative error against float64 a config must meet: the TF32 family's (both operands rounded to 10-bit
#: mantissas, fp32 accumulation), as the mma.sync family (convtune.kernels.igemm.launcher.TOLERANCE)
TOLERANCE = 3e-3


def tolerance(pl: IgemmWgmmaFwdPlan) -> float:
    return TOLERANCE
