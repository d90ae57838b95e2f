"""1×1 TF32 forward on Hopper's warpgroup MMA, persistent, filters resident, fed by the TMA from a producer warpgroup
(family ``igemm_wgmma_1x1_tma``, sm_90a).

The GEMM is ``igemm_wgmma_1x1_resident``'s (:mod:`~convtune.kernels.igemm_wgmma.tf32_1x1_resident`: rows M = pixels,
columns the K output channels, x read from NCHW into registers and rounded to TF32, the packed filters (K, Cp)
TF32-rounded and resident, about one block per SM and column tile walking the pixel tiles). What differs is who
copies and how the tile leaves: one thread of a producer warpgroup issues the TMA boxes of a chunk (32 channels ×
``tile_m`` pixels of one image, as ``tile_m``/32 boxes of 32 × 32) up to ``stages`` chunks ahead, across tiles and
epilogues; the ``warpgroups`` consumer warpgroups wait on the stage's mbarrier, read their fragments, hand the stage
back and issue the MMAs (no copy instruction, no block-wide barrier in their loop); the epilogue stores from the
accumulators (no staged tile, so 128 filter rows of C = 256 fit next to a 128-pixel ring). Why: the resident kernel
at the yolov3 52×52 head issues every 3.7 cycles with no warp eligible 73% of cycles and 26% of DRAM's bandwidth
(``benchmarks/results/igemm_wgmma_h200/six_families_h100/ncu_yolov3_tf32``); the 16-bit TMA kernel took that head
from 16.8 to 14.8 µs in bf16.

Pixel tiles do not straddle images (a TMA box is one image's rows): image n has TPI = ⌈H·W / tile_m⌉ tiles (the last
zero-filled past H·W), ``m_tiles`` = N · TPI. Problems: the resident family's with C a multiple of 32 (a box of 32
channel rows stays in one image). Shared memory = Cp·tile_n·4 (filters) + stages·tile_m·128 (ring) + 128
(mbarriers) + 1024 (alignment). Threads: 128 · (warpgroups + 1).

Grid: (persistent_blocks, ⌈K / tile_n⌉, 1). ``igemm_wgmma_1x1_tma.cu`` states the layouts.

Traffic, in words (a box past H·W or past K reads nothing)::

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
from convtune.kernels.igemm_wgmma import tf32_1x1_resident as _resident
from convtune.kernels.igemm_wgmma.launcher import TMA_BARRIER_BYTES, WgmmaConfig, tma_regs_estimate
from convtune.kernels.igemm_wgmma.persistent import check_resident, persistent_blocks, predict_walk_s
from convtune.kernels.igemm_wgmma.tf32_1x1_resident import IgemmWgmma1x1ResidentPlan
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
from convtune.kernels.tensor_map import TiledMap
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

FAMILY = "igemm_wgmma_1x1_tma"
SOURCE = "igemm_wgmma_1x1_tma.cu"
ENTRY = "igemm_wgmma_1x1_tma_fwd"
#: channels of one chunk (a 128-byte row of TF32 words) and pixels of one TMA box (128 bytes, the swizzle span)
CHUNK_CHANNELS = 32
BOX_PIXELS = 32
SWIZZLE_BYTES = 128
#: accumulators + the two A register sets (m_blocks·tile_n/2 + 32·m_blocks) a consumer thread may hold: 160 compiled
#: without spills within the 232 registers setmaxnreg gives the consumers (tile_n 256 × m_blocks 1); 192 (tile_n 128 ×
#: m_blocks 2) spilled 140 bytes
MAX_OPERAND_REGS = 160


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1TmaFwdConfig(WgmmaConfig):
    """The wgmma tile parameters (:class:`WgmmaConfig`): ``tile_n`` output channels (the resident filter rows),
    ``64 · warpgroups · m_blocks`` pixels (split among the consumer warpgroups), ``stages`` of the x ring; ``splits``
    is always 1. A producer warpgroup comes on top of the ``warpgroups`` consumers."""

    family = FAMILY
    direction = "fwd"

    @property
    def threads(self) -> int:
        """128 per consumer warpgroup and 128 for the producer."""
        return 128 * (self.warpgroups + 1)


def supports(problem: ConvProblem) -> bool:
    """The resident family's problems with C a multiple of 32 (module docstring)."""
    return _resident.supports(problem) and problem.C % CHUNK_CHANNELS == 0


def tiles_per_image(problem: ConvProblem, config: WgmmaConfig) -> int:
    """TPI = ⌈H·W / tile_m⌉: a tile holds pixels of one image."""
    return -(-problem.H * problem.W // config.tile_m)


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1TmaPlan(IgemmWgmma1x1ResidentPlan):
    """The resident kernel's plan with ``m_tiles`` = N · TPI (tiles within one image) and this kernel's source."""

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (c.tile_n, c.m_blocks, c.warpgroups, c.stages, self.chunks))
        return _family_source() + _WRAPPER.format(threads=c.threads, targs=targs)


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_1x1_tma_fwd(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y,
                        int C, int HW, int K, int TPI, int n_tiles,
                        const __grid_constant__ convtune::TmaDesc map_x,
                        const __grid_constant__ convtune::TmaDesc map_f) {{
  convtune::igemm_wgmma_1x1_tma_body<{targs}>(&map_x, &map_f, y, C, HW, K, TPI, n_tiles);
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
    """Cp·tile_n·4 (resident filters) + stages·tile_m·128 (x ring) + 128 (mbarriers) + 1024 (alignment to the
    swizzle's period)."""
    c = config
    return (_tf32.padded_channels(problem, c) * c.tile_n * 4 + c.stages * c.tile_m * 128 + TMA_BARRIER_BYTES
            + 1024)


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmma1x1TmaPlan:
    """The launch plan: the TF32 1×1 geometry with tiles within one image, this kernel's shared memory
    (:func:`smem_bytes`) and the persistent grid (``machine``'s SMs, else the default 132).

    Raises:
        InvalidConfig: ``problem`` outside :func:`supports`; ``splits`` other than 1; more accumulator and A registers
            than :data:`MAX_OPERAND_REGS` or shared memory over the block limit name ``tile_n`` (fewer resident rows, a
            smaller pixel tile or fewer ``stages``).
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs TF32 1×1 convolutions (math='tf32', stride 1, no padding) "
                                       f"with C a multiple of {CHUNK_CHANNELS} and H·W of 4; got {p.key()}")
    operand_regs = config.accumulators + 32 * config.m_blocks
    if operand_regs > MAX_OPERAND_REGS:
        raise InvalidConfig("tile_n", f"m_blocks·tile_n/2 + 32·m_blocks = {operand_regs} accumulator and A registers "
                                      f"per consumer thread exceed {MAX_OPERAND_REGS} (ptxas spills): a smaller tile_n "
                                      "or m_blocks")
    smem, regs = smem_bytes(p, config), tma_regs_estimate(config.threads)
    check_resident(FAMILY, config, smem, _tf32.padded_channels(p, config) * config.tile_n * 4, "Cp·tile_n·4",
                   "tile_n", "fewer rows (tile_n), a smaller pixel tile or fewer stages", machine)
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmma1x1TmaPlan, smem=smem, regs=regs)
    assert isinstance(pl, IgemmWgmma1x1TmaPlan)
    m_tiles = p.N * tiles_per_image(p, config)
    return replace(pl, m_tiles=m_tiles, persistent_blocks=persistent_blocks(m_tiles, pl.n_tiles, config.threads,
                                                                            smem, regs, machine))


# ---- traffic and model: the resident kernel's requests (tiles within images change no count) -------------------------
traffic_words = _resident.traffic_words
total_traffic_words = _resident.total_traffic_words
prepare_filters = _resident.prepare_filters
filters_key = _resident.filters_key
tolerance = _resident.tolerance


def predict_s(pl: IgemmWgmma1x1TmaPlan, machine: MachineModel) -> float:
    """The resident kernel's model of the walk (one pipeline a block, ``tiles_per_block`` · Cp/32 chunks)."""
    return predict_walk_s(pl, machine, traffic_words)


# ---- launching ----------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmma1x1TmaPlan) -> LoadedKernel:
    """The GEMM alone (no layout change, no workspace), as the single-kernel families return it."""
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def gemm_arguments(pl: IgemmWgmma1x1TmaPlan) -> tuple[int, ...]:
    p = pl.problem
    return (p.C, p.H * p.W, p.K, tiles_per_image(p, pl.config), pl.m_tiles)


def tensor_maps(pl: IgemmWgmma1x1TmaPlan) -> tuple[tuple[int, TiledMap], ...]:
    """x (operand 0) as N·C rows of H·W pixels in boxes of 32 pixels × 32 channels; the packed filters (operand 1,
    K rows of Cp) in boxes of tile_n rows × 32 channels; both with the 128-byte swizzle."""
    p, c = pl.problem, pl.config
    x = TiledMap("float32", p.H * p.W, p.N * p.C, BOX_PIXELS, CHUNK_CHANNELS, SWIZZLE_BYTES)
    filters = TiledMap("float32", pl.cp, p.K, CHUNK_CHANNELS, c.tile_n, SWIZZLE_BYTES)
    return ((0, x), (1, filters))


def prepare_plan(pl: IgemmWgmma1x1TmaPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch, x and the filters through their tensor maps."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2), gemm_arguments(pl),
                  tensor_maps(pl))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          workspace_bytes=0, filters=_tf32.filter_layout(pl, device), output_shape=(p.N, p.K, p.H, p.W))


def launch(pl: IgemmWgmma1x1TmaPlan, kernels: LoadedKernel, x: Any, filters: NhwcFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed or the driver refused a tensor map.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y)), stream_pointer(stream))
