"""1×1 bfloat16 / float16 forward on Hopper's warpgroup MMA, persistent, filters resident, fed by the TMA from a
producer warpgroup (family ``igemm_wgmma_half_1x1_tma``).

The GEMM is ``igemm_wgmma_half_1x1_resident``'s (:mod:`~convtune.kernels.igemm_wgmma.half_1x1_resident`: per image
Y_n (K × H·W) = W (K × C) · X_n (C × H·W), about one block per SM and row tile holding its ``tile_m`` filter rows over
all C channels, x read N-major straight from NCHW). What differs is who copies: one thread of a producer warpgroup
issues a TMA box per chunk (64 channels × ``tile_n`` pixels of one image) up to ``stages`` chunks ahead, across tiles
and epilogues, and the ``warpgroups`` consumer warpgroups only wait on the stage's mbarrier, issue the MMAs and store
(no copy instruction and no block-wide barrier in their loop). Why: Nsight Compute on the resident kernel at the yolov3
52×52 head found two warps a scheduler with none eligible 61% of cycles and DRAM at 23–32% of peak
(``benchmarks/results/igemm_wgmma_h200/resident_1x1/stages3_h100/ncu.txt``), its copies issued by the same threads
that wait for them.

A TMA box is one image's rows, so pixel tiles do not straddle images: image n has TPI = ⌈H·W / tile_n⌉ tiles (the
last zero-filled past H·W), ``n_tiles`` = N · TPI. Problems: the resident family's with C a multiple of 64 (a box of
64 channel rows stays in one image) and H·W a multiple of 8 (the map's row pitch a multiple of 16 bytes; 16-byte
stores). Shared memory = Cp·tile_m·2 (filters) + stages·tile_n·128 (ring) + tile_m·(tile_n + 8)·2 (staged tile) +
128 (mbarriers) + 1024 (alignment). Threads: 128 · (warpgroups + 1).

Grid: (persistent_blocks, ⌈K / tile_m⌉, 1). ``igemm_wgmma_half_1x1_tma.cu`` states the layouts.

Traffic, in 2-byte elements (a box past H·W or past K reads nothing)::

    input  = ⌈K/tile_m⌉ · C · N·H·W
    weight = persistent_blocks · ⌈K/tile_m⌉·tile_m · Cp     (each block's rows once; rows ≥ K counted)
    output = N·K·H·W
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import Any, ClassVar

from convtune.errors import InvalidConfig
from convtune.kernels.compile import kernel_text
from convtune.kernels.igemm.half import HalfKernels
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1_resident as _resident
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma.half_1x1_resident import IgemmWgmmaHalf1x1ResidentPlan
from convtune.kernels.igemm_wgmma.launcher import TMA_BARRIER_BYTES, WgmmaConfig, tma_regs_estimate
from convtune.kernels.igemm_wgmma.persistent import check_resident, persistent_blocks, predict_walk_s
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

FAMILY = "igemm_wgmma_half_1x1_tma"
SOURCE = "igemm_wgmma_half_1x1_tma.cu"
ENTRY = "igemm_wgmma_half_1x1_tma_fwd"
TOLERANCES = _half.TOLERANCES
#: channels of one chunk (a 128-byte row of 16-bit elements) and pixels of one TMA box (128 bytes, the swizzle span)
CHUNK_CHANNELS = 64
BOX_PIXELS = 64
SWIZZLE_BYTES = 128


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1TmaFwdConfig(WgmmaConfig):
    """The wgmma tile parameters (:class:`WgmmaConfig`): ``tile_n`` pixels, ``64 · warpgroups · m_blocks`` output
    channels (the resident filter rows, split among the consumer warpgroups), ``stages`` of the x ring; ``splits`` is
    always 1. A producer warpgroup comes on top of the ``warpgroups`` consumers."""

    family = FAMILY
    direction = "fwd"

    @property
    def threads(self) -> int:
        """128 per consumer warpgroup and 128 for the producer."""
        return 128 * (self.warpgroups + 1)


def supports(problem: ConvProblem) -> bool:
    """The resident family's problems with C a multiple of 64 and H·W a multiple of 8 (module docstring)."""
    p = problem
    return _resident.supports(p) and p.C % CHUNK_CHANNELS == 0 and (p.H * p.W) % 8 == 0


def tiles_per_image(problem: ConvProblem, config: WgmmaConfig) -> int:
    """TPI = ⌈H·W / tile_n⌉: a tile holds pixels of one image."""
    return -(-problem.H * problem.W // config.tile_n)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1TmaPlan(IgemmWgmmaHalf1x1ResidentPlan):
    """The resident kernel's plan with ``n_tiles`` = N · TPI (tiles within one image) and this kernel's source."""

    entry: ClassVar[str] = ENTRY

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (*self.template_args(), self.chunks))
        return _family_source() + _WRAPPER.format(threads=c.threads, targs=targs,
                                                  t=_half.CUDA_TYPES[self.problem.dtype])


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_half_1x1_tma_fwd(const {t}* __restrict__ x, const {t}* __restrict__ filt, {t}* __restrict__ y,
                             int C, int HW, int K, int TPI, int n_tiles,
                             const __grid_constant__ convtune::TmaDesc map_x,
                             const __grid_constant__ convtune::TmaDesc map_f) {{
  convtune::igemm_wgmma_half_1x1_tma_body<{t}, {targs}>(&map_x, &map_f, y, C, HW, K, TPI, n_tiles);
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
    """Cp·tile_m·2 (resident filters) + stages·tile_n·128 (x ring) + tile_m·(tile_n + 8)·2 (staged tile) + 128
    (mbarriers) + 1024 (alignment to the swizzle's period)."""
    c = config
    return (_tf32.padded_channels(problem, c) * c.tile_m * 2 + c.stages * c.tile_n * 128
            + c.tile_m * (c.tile_n + 8) * 2 + TMA_BARRIER_BYTES + 1024)


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmmaHalf1x1TmaPlan:
    """The launch plan: the 1×1 geometry with tiles within one image, this kernel's shared memory
    (:func:`smem_bytes`) and the persistent grid (``machine``'s SMs, else the default 132).

    Raises:
        InvalidConfig: ``problem`` outside :func:`supports`; ``splits`` other than 1; shared memory over the block
            limit names ``m_blocks`` (fewer resident rows, or ``stages``).
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs bfloat16 / float16 1×1 convolutions (stride 1, no padding) "
                                       f"with C a multiple of {CHUNK_CHANNELS} and H·W a multiple of 8; got {p.key()}")
    smem, regs = smem_bytes(p, config), tma_regs_estimate(config.threads)
    check_resident(FAMILY, config, smem, _tf32.padded_channels(p, config) * config.tile_m * 2, "Cp·tile_m·2",
                   "m_blocks", "fewer rows (m_blocks, warpgroups) or stages", machine)
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmmaHalf1x1TmaPlan, transposed=True, smem=smem, regs=regs)
    assert isinstance(pl, IgemmWgmmaHalf1x1TmaPlan)
    n_tiles = p.N * tiles_per_image(p, config)
    return replace(pl, n_tiles=n_tiles, persistent_blocks=persistent_blocks(n_tiles, pl.m_tiles, config.threads,
                                                                            smem, regs, machine))


# ---- traffic and model: the resident kernel's requests (tiles within images change no count) -------------------------
traffic_elements = _resident.traffic_elements
total_traffic_elements = _resident.total_traffic_elements
onchip_elements = _resident.onchip_elements
workspace_bytes = _resident.workspace_bytes
prepare_filters = _resident.prepare_filters
filters_key = _resident.filters_key
tolerance = _resident.tolerance


def predict_s(pl: IgemmWgmmaHalf1x1TmaPlan, machine: MachineModel) -> float:
    """The resident kernel's model of the walk (one pipeline a block, ``tiles_per_block`` · Cp/64 chunks)."""
    return predict_walk_s(pl, machine, traffic_elements)


# ---- launching ----------------------------------------------------------------------------------------------
compile_plan = _resident.compile_plan


def gemm_arguments(pl: IgemmWgmmaHalf1x1TmaPlan) -> tuple[int, ...]:
    p = pl.problem
    return (p.C, p.H * p.W, p.K, tiles_per_image(p, pl.config), pl.n_tiles)


def tensor_maps(pl: IgemmWgmmaHalf1x1TmaPlan) -> tuple[tuple[int, TiledMap], ...]:
    """x (operand 0) as N·C rows of H·W pixels in boxes of 64 pixels × 64 channels; the packed filters (operand 1,
    K rows of Cp) in boxes of tile_m rows × 64 channels; both with the 128-byte swizzle."""
    p, c = pl.problem, pl.config
    x = TiledMap(p.dtype, p.H * p.W, p.N * p.C, BOX_PIXELS, CHUNK_CHANNELS, SWIZZLE_BYTES)
    filters = TiledMap(p.dtype, pl.cp, p.K, CHUNK_CHANNELS, c.tile_m, SWIZZLE_BYTES)
    return ((0, x), (1, filters))


def prepare_plan(pl: IgemmWgmmaHalf1x1TmaPlan, device: int = 0, kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch, x and the filters through their tensor maps."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  gemm_arguments(pl), tensor_maps(pl))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          workspace_bytes=0, filters=_half.filter_layout(pl, device), output_shape=(p.N, p.K, p.H, p.W))


def launch(pl: IgemmWgmmaHalf1x1TmaPlan, kernels: HalfKernels, x: Any, filters: Any, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous 16-bit CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed or the driver refused a tensor map.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y)), stream_pointer(stream))
