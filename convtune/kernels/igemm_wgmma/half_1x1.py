"""1×1 bfloat16 / float16 forward on Hopper's warpgroup MMA straight from NCHW x (family ``igemm_wgmma_half_1x1``).

Problems: 1×1 filters, stride 1, no padding, H·W a multiple of 4 (a copy is 8 pixels of one image, 16 bytes, or
where H·W is not a multiple of 8 — a 14×14 map — 4 pixels, 8 bytes). The GEMM
per image is Y_n (K × H·W) = W (K × C) · X_n (C × H·W): rows M = K output channels (A = the filters, K-major, packed
(K, Cp) by the 16-bit family's ``igemm_wgmma_pack``, Cp = ⌈C/64⌉·64), columns = the N·H·W pixels (B = x itself,
N-major: no layout change, no workspace unless split), the reduction over C in chunks of 64. ``tile_n`` counts pixels,
``64 · warpgroups · m_blocks`` output channels. ``igemm_wgmma_half_1x1.cu`` states the layouts.

Grid: (⌈N·H·W / tile_n⌉, ⌈K / tile_m⌉, splits).

Traffic, in 2-byte elements (a copy past C or past the last pixel is zero-filled and reads nothing)::

    input  = ⌈K/tile_m⌉ · C · N·H·W
    weight = ⌈N·H·W/tile_n⌉ · ⌈K/tile_m⌉·tile_m · Cp      (rows ≥ K counted: the tile's whole height, an upper bound)
    output = N·K·H·W  (split: 2·splits·out + 5·out, as the 16-bit family's)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import cupy_module, kernel_text, load_kernel
from convtune.kernels.igemm.half import HalfFilters, HalfKernels
from convtune.kernels.igemm_wgmma import half as _half
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

FAMILY = "igemm_wgmma_half_1x1"
SOURCE = "igemm_wgmma_half_1x1.cu"
ENTRY = "igemm_wgmma_half_1x1_fwd"
PIXELS_PER_COPY = (8, 4)   # pixels of one B copy: 16 bytes, or 8 where H·W is 4 mod 8
TOLERANCES = _half.TOLERANCES


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1FwdConfig(WgmmaConfig):
    """The wgmma kernels' tile parameters (:class:`WgmmaConfig`) with ``tile_n`` counting pixels and the rows
    (``64 · warpgroups · m_blocks``) output channels."""

    family = FAMILY
    direction = "fwd"


def supports(problem: ConvProblem) -> bool:
    """bfloat16 / float16, groups = 1, 1×1 filters, stride 1, no padding, H·W a multiple of 4."""
    p = problem
    return (_half.supports(p) and p.R == p.S == p.stride_h == p.stride_w == 1 and p.pad_h == p.pad_w == 0
            and (p.H * p.W) % min(PIXELS_PER_COPY) == 0)


def pixels_per_copy(problem: ConvProblem) -> int:
    """PIX: the most pixels of one channel a B copy can take without straddling images (8, else 4)."""
    return next(n for n in PIXELS_PER_COPY if (problem.H * problem.W) % n == 0)


@dataclass(frozen=True, slots=True)
class IgemmWgmmaHalf1x1Plan(IgemmWgmmaFwdPlan):
    """The wgmma plan's fields with the GEMM transposed: ``m_tiles`` = ⌈K/tile_m⌉ output-channel tiles, ``n_tiles``
    = ⌈N·H·W/tile_n⌉ pixel tiles; the grid puts the pixel tiles first."""

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.n_tiles, self.m_tiles, self.splits_launched)

    def source(self) -> str:
        c = self.config
        targs = ", ".join(str(a) for a in (*self.template_args(), pixels_per_copy(self.problem)))
        return _family_source() + _WRAPPER.format(threads=c.threads, min_blocks=self.min_blocks, targs=targs,
                                                  t=_half.CUDA_TYPES[self.problem.dtype])


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
igemm_wgmma_half_1x1_fwd(const {t}* __restrict__ x, const {t}* __restrict__ filt, {t}* __restrict__ y,
                         float* __restrict__ ysplit, int C, int HW, int K, int NP, int Cp, int chunks_per_split) {{
  convtune::igemm_wgmma_half_1x1_body<{t}, {targs}>(x, filt, y, ysplit, C, HW, K, NP, Cp, chunks_per_split);
}}
extern "C" __global__ void igemm_wgmma_pack(const {t}* __restrict__ w, {t}* __restrict__ filt, int K, int C, int R,
                                            int S, int Cp) {{
  convtune::igemm_wgmma_pack_body(w, filt, K, C, R, S, Cp);
}}
extern "C" __global__ void igemm_wgmma_f32_to_16(const float* __restrict__ ws, {t}* __restrict__ y, int n) {{
  convtune::igemm_wgmma_f32_to_16_body(ws, y, n);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def derive_plan(problem: ConvProblem, config: WgmmaConfig,
                machine: MachineModel | None = None) -> IgemmWgmmaHalf1x1Plan:
    """The launch plan (grid limits, ``machine``'s shared memory and registers, compute capability 9.0 only).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p = problem
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs bfloat16 / float16 1×1 convolutions (stride 1, no padding, "
                                       f"H·W a multiple of 4); got {p.key()}")
    pl = _tf32.derive_plan(p, config, machine, IgemmWgmmaHalf1x1Plan, transposed=True)
    assert isinstance(pl, IgemmWgmmaHalf1x1Plan)
    return pl


# ---- traffic ------------------------------------------------------------------------------------------------
def traffic_elements(pl: IgemmWgmmaHalf1x1Plan) -> dict[str, int]:
    """Elements (2 bytes) the kernel requests (module docstring)."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    return {
        "input": pl.m_tiles * p.C * p.N * p.H * p.W,
        "weight": pl.n_tiles * pl.m_tiles * c.tile_m * pl.cp,
        "output": (2 * pl.splits_launched * out + 5 * out) if pl.splits_launched > 1 else out,
    }


def total_traffic_elements(pl: IgemmWgmmaHalf1x1Plan) -> int:
    return sum(traffic_elements(pl).values())


def onchip_elements(pl: IgemmWgmmaHalf1x1Plan) -> int:
    return _half.onchip_elements(pl)


# ---- launching ----------------------------------------------------------------------------------------------
def compile_plan(pl: IgemmWgmmaHalf1x1Plan) -> HalfKernels:
    """The GEMM and the split's conversion (no layout change)."""
    text = pl.source()
    return HalfKernels(None, load_kernel(text, ENTRY, dynamic_smem_bytes=pl.smem_bytes),
                       load_kernel(text, _half.CONVERT_ENTRY))


def workspace_bytes(pl: IgemmWgmmaHalf1x1Plan) -> int:
    """The fp32 output of a split; none otherwise."""
    return 4 * pl.problem.output_elements if pl.splits_launched > 1 else 0


def gemm_arguments(pl: IgemmWgmmaHalf1x1Plan) -> tuple[int, ...]:
    p = pl.problem
    return (p.C, p.H * p.W, p.K, p.N * p.H * p.W, pl.cp, pl.chunks_per_split)


def prepare_plan(pl: IgemmWgmmaHalf1x1Plan, device: int = 0, kernels: HalfKernels | None = None) -> PreparedLaunch:
    """Operands (x, filters, y[, workspace]): the GEMM into y; a split zeroes the fp32 workspace, adds into it and
    converts it into y."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    n = p.output_elements
    if pl.splits_launched > 1:
        steps: list[Any] = [
            Memset(3, 4 * n),
            Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2, 3),
                   gemm_arguments(pl)),
            Launch(kernels.convert, grid3(min(-(-n // _half.CONVERT_THREADS), 4096)), (_half.CONVERT_THREADS, 1, 1),
                   0, pointers(3, 2), (n,)),
        ]
        operands: tuple[str, ...] = ("x", "filters", "y", "workspace")
    else:   # the split pointer is never written: y stands in for it
        steps = [Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2, 2),
                        gemm_arguments(pl))]
        operands = ("x", "filters", "y")
    return PreparedLaunch(plan=pl, device=device, operands=operands, steps=steps, kernels=kernels,
                          workspace_bytes=workspace_bytes(pl), filters=_half.filter_layout(pl, device),
                          output_shape=(p.N, p.K, p.H, p.W))


def prepare_filters(pl: IgemmWgmmaHalf1x1Plan, w: Any) -> HalfFilters:
    """w (K, C, 1, 1) 16-bit CuPy (bfloat16 as uint16 bits) → the packed filters (K, Cp) and the fp32 workspace a
    split needs."""
    cp = cupy_module()
    filt = _tf32.pack_filters(_half.filter_layout(pl, driver().get_device()), w, cp.uint16)
    return HalfFilters(filt, cp.empty(pl.problem.output_elements, dtype=cp.float32))


def filters_key(pl: IgemmWgmmaHalf1x1Plan) -> tuple[Any, ...]:
    p = pl.problem
    return (FAMILY, p.dtype, p.K, p.C, p.output_elements)


def launch(pl: IgemmWgmmaHalf1x1Plan, kernels: HalfKernels, x: Any, filters: HalfFilters, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous 16-bit CuPy arrays (``filters`` from :func:`prepare_filters`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare_plan)
    ptrs = (data_pointer(x), data_pointer(filters.filt), data_pointer(y))
    prepared((*ptrs, data_pointer(filters.work)) if workspace_bytes(pl) else ptrs, stream_pointer(stream))


def tolerance(pl: IgemmWgmmaHalf1x1Plan) -> float:
    return TOLERANCES[pl.problem.dtype]
