"""1×1 bfloat16 / float16 forward on Hopper's warpgroup MMA, persistent, filters resident in shared memory (family
``igemm_wgmma_half_1x1_resident``).

The GEMM and problems are ``igemm_wgmma_half_1x1``'s (:mod:`~convtune.kernels.igemm_wgmma.half_1x1`: per image
Y_n (K × H·W) = W (K × C) · X_n (C × H·W), x read N-major straight from NCHW, no layout change). What differs is the
walk: about one block per SM (``persistent_blocks`` = min(pixel tiles, resident blocks · SMs / row tiles)) copies
its ``tile_m`` filter rows over all Cp = ⌈C/64⌉·64 channels into shared memory once, then walks the pixel tiles
blockIdx.x, blockIdx.x + gridDim.x, … with one ring of ``stages`` x stages running across tiles, so a tile's
epilogue overlaps the next tile's first copies. It pays where the first kernel's blocks run only a few chunks
(C ≤ ~512): each of them fills its pipeline and drains its epilogue unhidden and re-reads its filter rows (the
yolov3 52×52 head, C = 256, K = 255: 44 MB of filter reads against 11 MB of x). No split. The filters must fit:
shared memory = Cp·tile_m·2 (filters) + stages·tile_n·128 (ring) + tile_m·(tile_n + 8)·2 (staged tile) + 8·tile_n
(pixel offsets) + 1024 (alignment) ≤ the block limit (227 KB on the H200: C ≤ 256 with 256 rows, ≤ 640 with 64).

Grid: (persistent_blocks, ⌈K / tile_m⌉, 1). ``igemm_wgmma_half_1x1_resident.cu`` states the layouts.

Traffic, in 2-byte elements (a copy past C or past the last pixel is zero-filled and reads nothing)::

    input  = ⌈K/tile_m⌉ · C · N·H·W
    weight = persistent_blocks · ⌈K/tile_m⌉·tile_m · Cp     (each block's rows once; rows ≥ K counted)
    output = N·K·H·W
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any, ClassVar

from convtune.errors import InvalidConfig
from convtune.kernels.compile import cupy_module, kernel_text, load_kernel
from convtune.kernels.igemm.half import HalfFilters, HalfKernels
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1 as _half_1x1
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma.half_1x1 import IgemmWgmmaHalf1x1Plan
from convtune.kernels.igemm_wgmma.launcher import WgmmaConfig
from convtune.kernels.igemm_wgmma.persistent import (
    PersistentWalk,
    check_resident,
    persistent_blocks,
    pixel_indices_fit,
    predict_walk_s,
)
from convtune.kernels.prepared import (
    Launch,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

FAMILY = "igemm_wgmma_half_1x1_resident"
SOURCE = "igemm_wgmma_half_1x1_resident.cu"
ENTRY = "igemm_wgmma_half_1x1_resident_fwd"
TOLERANCES = _half.TOLERANCES


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1ResidentFwdConfig(WgmmaConfig):
    """The wgmma tile parameters (:class:`WgmmaConfig`): ``tile_n`` pixels, ``64 · warpgroups · m_blocks`` output
    channels (the resident filter rows), ``stages`` of the x ring; ``splits`` is always 1."""

    family = FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """The 16-bit 1×1 family's problems (1×1, stride 1, no padding, H·W a multiple of 4) whose pixel indices, a tile
    past the last pixel included, fit the kernel's 32-bit arithmetic (N·H·W + 256 < 2³¹)."""
    p = problem
    return _half_1x1.supports(p) and pixel_indices_fit(p)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1ResidentPlan(PersistentWalk, IgemmWgmmaHalf1x1Plan):
    """The 1×1 plan with the persistent grid's width: ``persistent_blocks`` blocks per row tile (the GEMM is
    transposed: ``m_tiles`` tiles of output channels) walk the ``n_tiles`` pixel tiles; ``chunks_per_split`` stays
    Cp/64 (one tile's chunks). ``entry``: the kernel's entry point in :meth:`source` (a variant with its own
    source names its own)."""

    entry: ClassVar[str] = ENTRY
    persistent_blocks: int = 1

    @property
    def pixel_tiles(self) -> int:
        return self.n_tiles

    @property
    def resident_tiles(self) -> int:
        return self.m_tiles

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (*self.template_args(), _half_1x1.pixels_per_copy(self.problem),
                                           self.chunks))
        return _family_source() + _WRAPPER.format(threads=c.threads, targs=targs,
                                                  t=_half.CUDA_TYPES[self.problem.dtype])


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_half_1x1_resident_fwd(const {t}* __restrict__ x, const {t}* __restrict__ filt, {t}* __restrict__ y,
                                  int C, int HW, int K, int NP, int Cp, int n_tiles) {{
  convtune::igemm_wgmma_half_1x1_resident_body<{t}, {targs}>(x, filt, y, C, HW, K, NP, Cp, n_tiles);
}}
extern "C" __global__ void igemm_wgmma_pack(const {t}* __restrict__ w, {t}* __restrict__ filt, int K, int C, int R,
                                            int S, int Cp) {{
  convtune::igemm_wgmma_pack_body(w, filt, K, C, R, S, Cp);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def smem_bytes(problem: ConvProblem, config: WgmmaConfig) -> int:
    """Cp·tile_m·2 (resident filters) + stages·tile_n·128 (x ring) + tile_m·(tile_n + 8)·2 (staged tile) +
    8·tile_n (pixel offsets) + 1024 (alignment to the swizzle's period)."""
    c = config
    return (_tf32.padded_channels(problem, c) * c.tile_m * 2 + c.stages * c.tile_n * 128
            + c.tile_m * (c.tile_n + 8) * 2 + 8 * c.tile_n + 1024)


def regs_estimate(config: WgmmaConfig) -> int:
    """Accumulators + 48: the ring's copies are the 1×1 kernel's, the filters' copy loop runs once."""
    return config.accumulators + 48


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmmaHalf1x1ResidentPlan:
    """The launch plan: the 1×1 geometry, this kernel's shared memory (:func:`smem_bytes`) and the persistent grid
    (``machine``'s SMs, else :data:`DEFAULT_SMS`).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit (``splits`` other than 1; shared memory
            over the block limit names ``m_blocks``: fewer resident rows, or ``stages``).
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs bfloat16 / float16 1×1 convolutions (stride 1, no padding, "
                                       f"H·W a multiple of 4, N·H·W + 256 < 2^31); got {p.key()}")
    smem, regs = smem_bytes(p, config), regs_estimate(config)
    check_resident(FAMILY, config, smem, _tf32.padded_channels(p, config) * config.tile_m * 2, "Cp·tile_m·2",
                   "m_blocks", "fewer rows (m_blocks, warpgroups) or stages", machine)
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmmaHalf1x1ResidentPlan, transposed=True, smem=smem, regs=regs)
    assert isinstance(pl, IgemmWgmmaHalf1x1ResidentPlan)
    return replace(pl, persistent_blocks=persistent_blocks(pl.n_tiles, pl.m_tiles, config.threads, smem, regs,
                                                           machine))


# ---- traffic and model ----------------------------------------------------------------------------------------
def traffic_elements(pl: IgemmWgmmaHalf1x1ResidentPlan) -> dict[str, int]:
    """Elements (2 bytes) the kernel requests (module docstring)."""
    p, c = pl.problem, pl.config
    return {
        "input": pl.m_tiles * p.C * p.N * p.H * p.W,
        "weight": pl.persistent_blocks * pl.m_tiles * c.tile_m * pl.cp,
        "output": p.output_elements,
    }


def total_traffic_elements(pl: IgemmWgmmaHalf1x1ResidentPlan) -> int:
    return sum(traffic_elements(pl).values())


def onchip_elements(pl: IgemmWgmmaHalf1x1ResidentPlan) -> int:
    return _half.onchip_elements(pl)


def predict_s(pl: IgemmWgmmaHalf1x1ResidentPlan, machine: MachineModel) -> float:
    """The wgmma model (:mod:`~convtune.kernels.igemm_wgmma.model`) of the walk: one wave of ``persistent_blocks``
    blocks, each running its tiles' chunks (``tiles_per_block`` · Cp/64) through one pipeline."""
    return predict_walk_s(pl, machine, traffic_elements)


# ---- launching ----------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmmaHalf1x1ResidentPlan) -> HalfKernels:
    """The GEMM alone (no layout change, no split's conversion)."""
    return HalfKernels(None, load_kernel(pl.source(), pl.entry, dynamic_smem_bytes=pl.smem_bytes), None)


def workspace_bytes(pl: IgemmWgmmaHalf1x1ResidentPlan) -> int:
    """None: no layout change, no split."""
    return 0


def gemm_arguments(pl: IgemmWgmmaHalf1x1ResidentPlan) -> tuple[int, ...]:
    p = pl.problem
    return (p.C, p.H * p.W, p.K, p.N * p.H * p.W, pl.cp, pl.n_tiles)


def prepare_plan(pl: IgemmWgmmaHalf1x1ResidentPlan, device: int = 0,
                 kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  gemm_arguments(pl))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          workspace_bytes=0, filters=_half.filter_layout(pl, device), output_shape=(p.N, p.K, p.H, p.W))


def prepare_filters(pl: IgemmWgmmaHalf1x1ResidentPlan, w: Any) -> HalfFilters:
    """w (K, C, 1, 1) 16-bit CuPy (bfloat16 as uint16 bits) → the packed filters (K, Cp), shared with the other
    16-bit wgmma families' packing; no workspace."""
    cp = cupy_module()
    return HalfFilters(_tf32.pack_filters(_half.filter_layout(pl, driver().get_device()), w, cp.uint16), None)


def filters_key(pl: IgemmWgmmaHalf1x1ResidentPlan) -> tuple[Any, ...]:
    p = pl.problem
    return (pl.config.family, p.dtype, p.K, p.C)


def launch(pl: IgemmWgmmaHalf1x1ResidentPlan, kernels: HalfKernels, x: Any, filters: HalfFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous 16-bit CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y)), stream_pointer(stream))


def tolerance(pl: IgemmWgmmaHalf1x1ResidentPlan) -> float:
    return TOLERANCES[pl.problem.dtype]
