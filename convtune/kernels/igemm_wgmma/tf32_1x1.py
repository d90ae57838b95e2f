"""1×1 TF32 forward on Hopper's warpgroup MMA straight from NCHW x (family ``igemm_wgmma_1x1``, sm_90a).

Problems: float32 with TF32 allowed (``math="tf32"``), 1×1 filters, stride 1, no padding, H·W a multiple of 4 (a copy
is 4 pixels of one channel, 16 bytes, never straddling images). The GEMM is the general kernel's (rows M = N·H·W
pixels, columns the K output channels, the reduction over C in chunks of 32): the filters are B (K-major, packed
(K, Cp) TF32-rounded by ``igemm_wgmma_pack``, Cp = ⌈C/32⌉·32, shared with the general TF32 plans of the problem),
x is A read from NCHW itself — no layout change, no workspace. TF32 wgmma reads shared-memory operands K-major only
and x's pixels are contiguous per channel, so A goes through registers: a stage holds [32 channels][BM + 8 pixels]
words, each k-step's fragments are read from it and rounded to TF32 (cvt.rna, as cuDNN rounds), then
``wgmma m64nNk8`` takes A from registers and B by descriptor. ``igemm_wgmma_fwd.cu`` (``A_NCHW``) states the layouts;
the epilogue is the general kernel's (coalesced NCHW pixel pairs; a split adds into y, zeroed first, by atomics).

Grid: (⌈N·H·W / tile_m⌉, ⌈K / tile_n⌉, splits), ``tile_m = 64 · warpgroups · m_blocks`` pixels.

Traffic, in words (a copy past C or past the last pixel is zero-filled and reads nothing)::

    input  = ⌈K/tile_n⌉ · C · N·H·W
    weight = ⌈N·H·W/tile_m⌉ · ⌈K/tile_n⌉·tile_n · Cp      (rows ≥ K counted: the tile's whole width, an upper bound)
    output = splits · N·K·H·W (+ N·K·H·W zeroing when split)
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, load_kernel
from convtune.kernels.igemm.nhwc import NhwcFilters
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdPlan, WgmmaConfig
from convtune.kernels.prepared import (
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
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

FAMILY = "igemm_wgmma_1x1"
ENTRY = "igemm_wgmma_1x1_fwd"
PIXELS_PER_COPY = 4        # one 16-byte copy: 4 pixels of one channel
A_ROW_PAD = 8              # words past the tile's pixels in each channel row of A (conflict-free fragment reads)
TOLERANCE = _tf32.TOLERANCE


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1FwdConfig(WgmmaConfig):
    """The wgmma kernels' tile parameters (:class:`WgmmaConfig`): ``tile_n`` output channels, ``64 · warpgroups ·
    m_blocks`` pixels."""

    family = FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """TF32 (float32, ``math="tf32"``), groups = 1, 1×1 filters, stride 1, no padding, H·W a multiple of 4."""
    p = problem
    return (_tf32.supports(p) and p.R == p.S == p.stride_h == p.stride_w == 1 and p.pad_h == p.pad_w == 0
            and (p.H * p.W) % PIXELS_PER_COPY == 0)


def regs_estimate(config: WgmmaConfig) -> int:
    """The general kernel's estimate (:func:`~convtune.kernels.igemm_wgmma.launcher.regs_estimate`) + the A fragments
    held in registers, 16 per m64 block: over 9 configs ptxas used 90–218 registers, this estimate 51 below to 12
    above (the unrolled epilogue of 128-column tiles with one warpgroup costs most)."""
    return _tf32.regs_estimate(config) + 16 * config.m_blocks


def smem_bytes(config: WgmmaConfig) -> int:
    """stages · (32 · (BM + 8) · 4 + BN · 128) + 1024: A's channel rows of pixels, B's 128-byte rows, alignment."""
    a_bytes = _tf32.CHUNK * (config.tile_m + A_ROW_PAD) * 4
    return config.stages * (a_bytes + config.tile_n * _tf32.CHUNK_BYTES) + 1024


@dataclass(frozen=True, slots=True)
class IgemmWgmma1x1Plan(IgemmWgmmaFwdPlan):
    """The general plan's geometry (chunks of 32 channels, Cp = ⌈C/32⌉·32) with the A_NCHW source."""

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in self.template_args())
        return _tf32._family_source() + _WRAPPER.format(threads=c.threads, min_blocks=self.min_blocks, targs=targs)


_WRAPPER = """
using convtune_tf32 = convtune::wg_tf32;
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
igemm_wgmma_1x1_fwd(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C,
                    int HW, int K, int KRp, int chunks_per_split) {{
  // x as A from NCHW: the Cp argument carries C; a 1x1 problem is P = 1, Q = H*W, stride 1, no padding
  convtune::igemm_wgmma_fwd_body<convtune_tf32, {targs}, 128, 0, true>(
      reinterpret_cast<const convtune_tf32*>(x), reinterpret_cast<const convtune_tf32*>(filt),
      reinterpret_cast<convtune_tf32*>(y), y, N, C, 1, HW, K, 1, HW, 1, 1, 1, 0, 0, 1, 1, KRp, chunks_per_split);
}}
extern "C" __global__ void igemm_wgmma_pack(const float* __restrict__ w, float* __restrict__ filt, int K, int C,
                                            int R, int S, int Cp) {{
  convtune::igemm_wgmma_pack_body<convtune_tf32, 0, 32>(reinterpret_cast<const convtune_tf32*>(w),
                                                       reinterpret_cast<convtune_tf32*>(filt), K, C, R, S, Cp);
}}
"""


def derive_plan(problem: ConvProblem, config: WgmmaConfig, machine: MachineModel | None = None) -> IgemmWgmma1x1Plan:
    """The launch plan (grid limits, ``machine``'s shared memory and registers, compute capability 9.0 only).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs TF32 1×1 convolutions (math='tf32', stride 1, no padding, "
                                       f"H·W a multiple of {PIXELS_PER_COPY}); got {p.key()}")
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmma1x1Plan, smem=smem_bytes(config),
                           regs=regs_estimate(config))
    assert isinstance(pl, IgemmWgmma1x1Plan)
    return pl


# ---- traffic --------------------------------------------------------------------------------------------------
def traffic_words(pl: IgemmWgmma1x1Plan) -> dict[str, int]:
    """Words the kernel requests (module docstring): no layout change."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    return {
        "input": pl.n_tiles * p.C * p.N * p.H * p.W,
        "weight": pl.m_tiles * pl.n_tiles * c.tile_n * pl.cp,
        "output": out * pl.splits_launched + (out if pl.splits_launched > 1 else 0),
    }


def total_traffic_words(pl: IgemmWgmma1x1Plan) -> int:
    return sum(traffic_words(pl).values())


# ---- launching ------------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmma1x1Plan) -> LoadedKernel:
    """The GEMM alone (no layout change), as the single-kernel families return it."""
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def gemm_arguments(pl: IgemmWgmma1x1Plan) -> tuple[int, ...]:
    p = pl.problem
    return (p.N, p.C, p.H * p.W, p.K, pl.krp, pl.chunks_per_split)


def prepare_plan(pl: IgemmWgmma1x1Plan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): the GEMM into y; a split zeroes y first and adds into it."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = [Memset(2, 4 * p.output_elements)] if pl.splits_launched > 1 else []
    steps.append(Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                        gemm_arguments(pl)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=steps, kernels=kernels,
                          workspace_bytes=0, filters=_tf32.filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.H, p.W))


def prepare_filters(pl: IgemmWgmma1x1Plan, w: Any) -> NhwcFilters:
    """w (K, C, 1, 1) float32 CuPy → the packed filters (K, Cp), TF32-rounded (no workspace)."""
    cp = cupy_module()
    filt = _tf32.pack_filters(_tf32.filter_layout(pl, driver().get_device()), w, cp.float32)
    return NhwcFilters(filt, None)


#: plans with equal keys share packed filters: the general TF32 plans' (K, Cp) layout
filters_key = _tf32.layout_key


def launch(pl: IgemmWgmma1x1Plan, kernels: LoadedKernel, x: Any, filters: NhwcFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.filt), data_pointer(y)), stream_pointer(stream))


def tolerance(pl: IgemmWgmma1x1Plan) -> float:
    return TOLERANCE
