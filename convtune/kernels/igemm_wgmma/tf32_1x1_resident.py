"""1×1 TF32 forward on Hopper's warpgroup MMA, persistent, filters resident in shared memory (family
``igemm_wgmma_1x1_resident``, sm_90a).

The GEMM and problems are ``igemm_wgmma_1x1``'s (:mod:`~convtune.kernels.igemm_wgmma.tf32_1x1`: rows M = N·H·W
pixels, columns the K output channels, x read from NCHW into registers and rounded to TF32, the filters packed
(K, Cp) TF32-rounded, Cp = ⌈C/32⌉·32, shared with the other TF32 wgmma plans). What differs is the walk: about one
block per SM and column tile (``persistent_blocks`` = min(pixel tiles, resident blocks · SMs / column tiles)) copies
its ``tile_n`` filter rows over all Cp channels into shared memory once, then walks the pixel tiles blockIdx.x,
blockIdx.x + gridDim.x, … with one x ring of ``stages`` stages running across tiles (a tile's epilogue overlaps the
next tile's first copies), and two A register sets alternate so a chunk's fragments are read while the chunk
before is in the tensor cores. It pays where the first kernel's blocks run only a few chunks (C ≤ ~512): each of
them fills its pipeline and drains its epilogue unhidden (the yolov3 52×52 head, C = 256, K = 255). No split. The
filters must fit: shared memory = Cp·tile_n·4 (filters) + stages·32·(tile_m + 8)·4 (ring) + tile_n·(tile_m + 4)·4
(staged tile) + 2·tile_m (pixel-group offsets) + 1024 (alignment) ≤ the block limit (227 KB on the H100 / H200:
C ≤ 256 with 128 filter rows and 64 pixels, ≤ 640 with 64 rows).

Grid: (persistent_blocks, ⌈K / tile_n⌉, 1). ``igemm_wgmma_1x1_resident.cu`` states the layouts.

Traffic, in words (a copy past C or past the last pixel is zero-filled and reads nothing)::

    input  = ⌈K/tile_n⌉ · C · N·H·W
    weight = persistent_blocks · ⌈K/tile_n⌉·tile_n · Cp     (each block's rows once; rows ≥ K counted)
    output = N·K·H·W
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.igemm.nhwc import NhwcFilters
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma import tf32_1x1 as _tf32_1x1
from convtune.kernels.igemm_wgmma.launcher import WgmmaConfig
from convtune.kernels.igemm_wgmma.persistent import (
    PersistentWalk,
    check_resident,
    persistent_blocks,
    pixel_indices_fit,
    predict_walk_s,
)
from convtune.kernels.igemm_wgmma.tf32_1x1 import IgemmWgmma1x1Plan
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

FAMILY = "igemm_wgmma_1x1_resident"
SOURCE = "igemm_wgmma_1x1_resident.cu"
ENTRY = "igemm_wgmma_1x1_resident_fwd"
A_ROW_PAD = 8       # words past the tile's pixels in each channel row of the x ring (conflict-free fragment reads)
TILE_ROW_PAD = 4    # words past the tile's pixels in each channel row of the staged tile


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1ResidentFwdConfig(WgmmaConfig):
    """The wgmma tile parameters (:class:`WgmmaConfig`): ``tile_n`` output channels (the resident filter rows),
    ``64 · warpgroups · m_blocks`` pixels, ``stages`` of the x ring; ``splits`` is always 1."""

    family = FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """The TF32 1×1 family's problems (1×1, stride 1, no padding, H·W a multiple of 4) whose pixel indices, a tile
    past the last pixel included, fit the kernel's 32-bit arithmetic (N·H·W + 256 < 2³¹)."""
    p = problem
    return _tf32_1x1.supports(p) and pixel_indices_fit(p)


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1ResidentPlan(PersistentWalk, IgemmWgmma1x1Plan):
    """The TF32 1×1 plan with the persistent grid's width: ``persistent_blocks`` blocks per column tile walk the
    ``m_tiles`` pixel tiles; ``chunks_per_split`` stays Cp/32 (one tile's chunks)."""

    persistent_blocks: int = 1

    @property
    def pixel_tiles(self) -> int:
        return self.m_tiles

    @property
    def resident_tiles(self) -> int:
        return self.n_tiles

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (c.tile_n, c.m_blocks, c.warpgroups, c.stages, self.chunks))
        return _family_source() + _WRAPPER.format(threads=c.threads, targs=targs)


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_1x1_resident_fwd(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y,
                             int C, int HW, int K, int NP, int n_tiles) {{
  convtune::igemm_wgmma_1x1_resident_body<{targs}>(x, reinterpret_cast<const convtune::wg_tf32*>(filt), y, C, HW, K,
                                                   NP, n_tiles);
}}
extern "C" __global__ void igemm_wgmma_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C,
                                            int R, int S, int Cp) {{
  convtune::igemm_wgmma_pack_body<convtune::wg_tf32, 0, 32>(reinterpret_cast<const convtune::wg_tf32*>(w),
                                                           reinterpret_cast<convtune::wg_tf32*>(filt), K, C, R, S,
                                                           Cp);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def smem_bytes(problem: ConvProblem, config: WgmmaConfig) -> int:
    """Cp·tile_n·4 (resident filters) + stages·32·(tile_m + 8)·4 (x ring) + tile_n·(tile_m + 4)·4 (staged tile) +
    2·tile_m (pixel-group offsets) + 1024 (alignment to the swizzle's period)."""
    c = config
    return (_tf32.padded_channels(problem, c) * c.tile_n * 4 + c.stages * _tf32.CHUNK * (c.tile_m + A_ROW_PAD) * 4
            + c.tile_n * (c.tile_m + TILE_ROW_PAD) * 4 + 2 * c.tile_m + 1024)


def regs_estimate(config: WgmmaConfig) -> int:
    """Accumulators + the two A register sets (2 · 16 per m64 block) + 64 (addresses, descriptors, the ring's
    copies): over 9 configs ptxas used 108–204 registers, this estimate 20 below to 20 above."""
    return config.accumulators + 32 * config.m_blocks + 64


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmma1x1ResidentPlan:
    """The launch plan: the TF32 1×1 geometry, this kernel's shared memory (:func:`smem_bytes`) and the persistent
    grid (``machine``'s SMs, else :data:`DEFAULT_SMS`).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit (``splits`` other than 1; shared memory
            over the block limit names ``tile_n``: fewer resident rows, a smaller pixel tile or fewer ``stages``).
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs TF32 1×1 convolutions (math='tf32', stride 1, no padding, "
                                       f"H·W a multiple of 4, N·H·W + 256 < 2^31); got {p.key()}")
    smem, regs = smem_bytes(p, config), regs_estimate(config)
    check_resident(FAMILY, config, smem, _tf32.padded_channels(p, config) * config.tile_n * 4, "Cp·tile_n·4",
                   "tile_n", "fewer rows (tile_n), a smaller pixel tile or fewer stages", machine)
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmma1x1ResidentPlan, smem=smem, regs=regs)
    assert isinstance(pl, IgemmWgmma1x1ResidentPlan)
    return replace(pl, persistent_blocks=persistent_blocks(pl.m_tiles, pl.n_tiles, config.threads, smem, regs,
                                                           machine))


# ---- traffic and model ----------------------------------------------------------------------------------------
def traffic_words(pl: IgemmWgmma1x1ResidentPlan) -> dict[str, int]:
    """Words the kernel requests (module docstring)."""
    p, c = pl.problem, pl.config
    return {
        "input": pl.n_tiles * p.C * p.N * p.H * p.W,
        "weight": pl.persistent_blocks * pl.n_tiles * c.tile_n * pl.cp,
        "output": p.output_elements,
    }


def total_traffic_words(pl: IgemmWgmma1x1ResidentPlan) -> int:
    return sum(traffic_words(pl).values())


def predict_s(pl: IgemmWgmma1x1ResidentPlan, machine: MachineModel) -> float:
    """The wgmma model (:mod:`~convtune.kernels.igemm_wgmma.model`) of the walk: one wave of ``persistent_blocks``
    blocks per column tile, each running its tiles' chunks (``tiles_per_block`` · Cp/32) through one pipeline."""
    return predict_walk_s(pl, machine, traffic_words)


# ---- launching ----------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmma1x1ResidentPlan) -> LoadedKernel:
    """The GEMM alone (no layout change, no workspace), as the single-kernel families return it."""
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def gemm_arguments(pl: IgemmWgmma1x1ResidentPlan) -> tuple[int, ...]:
    p = pl.problem
    return (p.C, p.H * p.W, p.K, p.N * p.H * p.W, pl.m_tiles)


def prepare_plan(pl: IgemmWgmma1x1ResidentPlan, device: int = 0,
                 kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2), gemm_arguments(pl))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          workspace_bytes=0, filters=_tf32.filter_layout(pl, device), output_shape=(p.N, p.K, p.H, p.W))


#: w (K, C, 1, 1) float32 → the packed filters (K, Cp), TF32-rounded: the first TF32 1×1 family's packing
prepare_filters = _tf32_1x1.prepare_filters
#: plans with equal keys share packed filters: the general TF32 plans' (K, Cp) layout
filters_key = _tf32.layout_key


def launch(pl: IgemmWgmma1x1ResidentPlan, kernels: LoadedKernel, x: Any, filters: NhwcFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y)), stream_pointer(stream))


#: the TF32 wgmma families' tolerance
tolerance = _tf32_1x1.tolerance
