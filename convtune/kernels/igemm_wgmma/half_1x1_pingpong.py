"""1×1 bfloat16 / float16 forward on Hopper's warpgroup MMA, persistent, filters resident in shared memory, with
``warpgroups`` consumer warpgroups taking turns over the block's pixel tiles (family ``igemm_wgmma_half_1x1_pingpong``).

The GEMM, problems and walk are ``igemm_wgmma_half_1x1_resident``'s (:mod:`~convtune.kernels.igemm_wgmma.
half_1x1_resident`: per image Y_n (K × H·W) = W (K × C) · X_n (C × H·W), about one block per SM and row tile holding
its ``tile_m`` filter rows over all Cp = ⌈C/64⌉·64 channels, walking pixel tiles b, b + gridDim.x, …). What differs:
each warpgroup covers all ``tile_m`` = 64·``m_blocks`` rows (not a share of them) and runs its own tiles — warpgroup
w the block's tiles w, w + WG, … — through its own ring of ``stages`` x stages, so one warpgroup's epilogue and copy
waits overlap another's MMAs and an SM keeps WG·(stages − 2) chunks of x in flight where the resident kernel keeps
stages − 2. The epilogue stores from registers (no staged tile). Shared memory = Cp·tile_m·2 (filters) +
WG·stages·tile_n·128 (rings) + 1024 (alignment) ≤ the block limit.

Grid: (persistent_blocks, ⌈K / tile_m⌉, 1). ``igemm_wgmma_half_1x1_pingpong.cu`` states the layouts.

Traffic, in 2-byte elements (the resident kernel's; a copy past C or past the last pixel reads nothing)::

    input  = ⌈K/tile_m⌉ · C · N·H·W
    weight = persistent_blocks · ⌈K/tile_m⌉·tile_m · Cp
    output = N·K·H·W
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from functools import cache
from typing import ClassVar

from convtune.errors import InvalidConfig
from convtune.kernels.compile import kernel_text
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1 as _half_1x1
from convtune.kernels.igemm_wgmma import half_1x1_resident as _resident
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma.half_1x1_resident import IgemmWgmmaHalf1x1ResidentPlan
from convtune.kernels.igemm_wgmma.launcher import WgmmaConfig
from convtune.kernels.igemm_wgmma.persistent import (
    check_resident,
    persistent_blocks,
    predict_walk_s,
)
from convtune.kernels.launch_geometry import round_regs
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

FAMILY = "igemm_wgmma_half_1x1_pingpong"
SOURCE = "igemm_wgmma_half_1x1_pingpong.cu"
ENTRY = "igemm_wgmma_half_1x1_pingpong_fwd"
TOLERANCES = _half.TOLERANCES


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1PingpongFwdConfig(WgmmaConfig):
    """The wgmma tile parameters (:class:`WgmmaConfig`) read as: ``tile_n`` pixels, ``64 · m_blocks`` output channels
    (the resident filter rows, every warpgroup all of them), ``warpgroups`` consumer warpgroups taking turns over the
    tiles, ``stages`` per warpgroup's ring; ``splits`` is always 1."""

    family = FAMILY
    direction = "fwd"

    @property
    def tile_m(self) -> int:
        return 64 * self.m_blocks


#: the resident family's problems (:func:`~convtune.kernels.igemm_wgmma.half_1x1_resident.supports`)
supports = _resident.supports
#: the resident kernel's estimate: the same copies, a register epilogue in place of the staged one
regs_estimate = _resident.regs_estimate


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1PingpongPlan(IgemmWgmmaHalf1x1ResidentPlan):
    """The resident kernel's plan (its persistent grid and walk); only the source and its entry differ."""

    entry: ClassVar[str] = ENTRY

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (*self.template_args(), _half_1x1.pixels_per_copy(self.problem),
                                           self.chunks))
        return _family_source() + _WRAPPER.format(threads=c.threads, targs=targs,
                                                  t=_half.CUDA_TYPES[self.problem.dtype])


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_half_1x1_pingpong_fwd(const {t}* __restrict__ x, const {t}* __restrict__ filt, {t}* __restrict__ y,
                                  int C, int HW, int K, int NP, int Cp, int n_tiles) {{
  convtune::igemm_wgmma_half_1x1_pingpong_body<{t}, {targs}>(x, filt, y, C, HW, K, NP, Cp, n_tiles);
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
    """Cp·tile_m·2 (resident filters) + warpgroups·stages·tile_n·128 (one x ring per warpgroup) + 1024 (alignment
    to the swizzle's period)."""
    c = config
    return _tf32.padded_channels(problem, c) * c.tile_m * 2 + c.warpgroups * c.stages * c.tile_n * 128 + 1024


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmmaHalf1x1PingpongPlan:
    """The launch plan: the 1×1 geometry, this kernel's shared memory (:func:`smem_bytes`) and the persistent grid
    (``machine``'s SMs, else :data:`DEFAULT_SMS`).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit (``splits`` other than 1; shared memory
            over the block limit names ``m_blocks``: fewer resident rows, or ``stages``; registers a block cannot
            hold name ``warpgroups``).
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs bfloat16 / float16 1×1 convolutions (stride 1, no padding, "
                                       f"H·W a multiple of 4, N·H·W + 256 < 2^31); got {p.key()}")
    smem, regs = smem_bytes(p, config), regs_estimate(config)
    check_resident(FAMILY, config, smem, _tf32.padded_channels(p, config) * config.tile_m * 2, "Cp·tile_m·2",
                   "m_blocks", "fewer rows (m_blocks) or stages, or fewer warpgroups", machine)
    if machine is not None and config.threads * round_regs(regs) > machine.regs_per_sm:
        raise InvalidConfig("warpgroups", f"{config.warpgroups} warpgroups of ~{regs} registers per thread "
                                          f"({config.accumulators} of them accumulators) exceed the "
                                          f"{machine.regs_per_sm} registers of an SM of {machine.name}")
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmmaHalf1x1PingpongPlan, transposed=True, smem=smem, regs=regs)
    assert isinstance(pl, IgemmWgmmaHalf1x1PingpongPlan)
    return replace(pl, persistent_blocks=persistent_blocks(pl.n_tiles, pl.m_tiles, config.threads, smem, regs,
                                                           machine))


# ---- traffic and model ----------------------------------------------------------------------------------------
#: the resident kernel's request count, on-chip words, arguments, workspace (none), filter packing and tolerance:
#: the warpgroups split a block's tiles, not what it reads or how it is called
traffic_elements = _resident.traffic_elements
total_traffic_elements = _resident.total_traffic_elements
onchip_elements = _resident.onchip_elements
workspace_bytes = _resident.workspace_bytes
gemm_arguments = _resident.gemm_arguments
prepare_filters = _resident.prepare_filters
tolerance = _resident.tolerance


def predict_s(pl: IgemmWgmmaHalf1x1PingpongPlan, machine: MachineModel) -> float:
    """The wgmma model (:mod:`~convtune.kernels.igemm_wgmma.model`) of the walk: one wave of ``persistent_blocks``
    blocks, the busiest warpgroup running ⌈``tiles_per_block`` / warpgroups⌉ tiles' chunks through its pipeline."""
    return predict_walk_s(pl, machine, traffic_elements, concurrent_tiles=pl.config.warpgroups)


# ---- launching: the resident kernel's (one launch of x, filters, y; compiled by the plan's source and entry) ------
compile_plan = _resident.compile_plan
prepare_plan = _resident.prepare_plan
filters_key = _resident.filters_key
launch = _resident.launch
