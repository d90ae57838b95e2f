"""2-D depthwise input gradient (family ``depthwise2d_fast``, direction ``dgrad``, source ``dw2d_dgrad.cu``):
plan, traffic model and launcher.

Shapes (contiguous): dy (N, C, P, Q), w (C, 1, R, S), dx (N, C, H, W); any R×S (R·S ≤ 81), any stride, any
padding, dilation 1; float32, float16 or bfloat16 storage with fp32 sums (shared memory holds the storage type:
``itemsize`` bytes per staged element)::

    dx[n,c,h,w] = Σ_{r,s} w[c,0,r,s] · dy[n, c, (h + pad_h − r)/stride_h, (w + pad_w − s)/stride_w]

over the taps whose numerators are multiples of the strides and whose quotients lie inside P×Q (the
adjoint of the forward). Grid: ⌈N·C / planes⌉ · ⌈H / band_h⌉ blocks (band fastest). An item's dy rows
are h0/stride_h + e, E0 ≤ e < E0 + NE, with e = (pad_h + v − r)/stride_h over the (v, r) pairs whose
numerator the stride divides (columns likewise: F0, NF); a band stages IHD = (band_h − VH)/stride_h + NE
dy rows per plane, at shared column q + OFF (OFF = max(0, −F0) rounded up to the copy width).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import Dw2dFastDgradConfig
from convtune.kernels.depthwise.conv2d.fast import MAX_ACC, MAX_REGS
from convtune.kernels.depthwise.conv2d.tiled import applies
from convtune.kernels.depthwise.dtypes import STORAGE_DTYPES, check_dtype, cuda_type
from convtune.kernels.depthwise.values import (
    BAND_MULTIPLE,
    FAST2D_BAND,
    FAST2D_PLANES,
    FAST2D_THREADS,
    FAST2D_VH,
    FAST2D_VW,
    THREADS_WARPS,
    accumulators,
    band_extent,
    bands,
    planes_small_blocks,
    vw_extent,
)
from convtune.kernels.launch_geometry import round_regs, span_inside
from convtune.kernels.prepared import (
    FilterLayout,
    Launch,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "dw2d_dgrad.cu"
ENTRY = "dw2d_fast_dgrad"
WARP = 32


def phase_span(pad: int, v_count: int, taps: int, stride: int) -> tuple[int, int]:
    """(E0, NE): the smallest quotient (pad + v − r)/stride over v < v_count, r < taps with the stride dividing
    the numerator, and the number of quotients from it to the largest."""
    qs = [(pad + v - r) // stride for v in range(v_count) for r in range(taps) if (pad + v - r) % stride == 0]
    return min(qs), max(qs) - min(qs) + 1


@dataclass(frozen=True, slots=True)
class Dw2dDgradPlan:
    problem: ConvProblem
    config: Dw2dFastDgradConfig
    e0: int
    ne: int
    f0: int
    nf: int
    in_rows: int      # IHD
    pitch: int
    off: int
    vec: int
    f4: bool
    nbands: int
    grid: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def threads(self) -> int:
        return self.config.threads

    @property
    def entry(self) -> str:
        return ENTRY

    @property
    def n_w(self) -> int:
        return -(-self.problem.W // self.config.outputs_per_thread)

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.H, p.W, p.P, p.Q, c.band_h, c.rows_per_thread,
                c.outputs_per_thread, c.planes, c.threads, self.pitch, self.off, self.vec, self.e0, self.ne, self.f0,
                self.nf)

    def wrapper(self, entry: str | None = None) -> str:
        targs = ", ".join(str(a) for a in self.template_args())
        t = cuda_type(self.problem)
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads}, {self.min_blocks})
{entry or ENTRY}(const {t}* __restrict__ dy, const {t}* __restrict__ w, {t}* __restrict__ dx, int NC, int C,
                 int nbands) {{
  convtune::dw::dw2d_dgrad_body<{targs}, {t}>(dy, w, dx, NC, C, nbands);
}}
"""

    def source(self) -> str:
        return _family_source() + self.wrapper()


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The 2-D input gradient's space: bands over the input height H (plus H, and H rounded up to the stride) ×
    rows and columns per item (multiples of the strides) × planes × threads. :func:`plan` enforces the rules."""
    p = problem
    sh, sw = p.stride_h, p.stride_w
    rules = (
        Rule("rows_stride", ("rows_per_thread",), lambda v: v["rows_per_thread"] % sh == 0,
             f"rows_per_thread={{rows_per_thread}} must be a multiple of stride_h={sh}"),
        Rule("outputs_stride", ("outputs_per_thread",), lambda v: v["outputs_per_thread"] % sw == 0,
             f"outputs_per_thread={{outputs_per_thread}} must be a multiple of stride_w={sw}"),
        BAND_MULTIPLE,
        band_extent(p.H, "H", "input height"),
        accumulators(MAX_ACC),
        THREADS_WARPS,
    )
    return SearchSpace({"band_h": bands(FAST2D_BAND, p.H, -(-p.H // sh) * sh), "rows_per_thread": (*FAST2D_VH, 8),
                        "outputs_per_thread": FAST2D_VW, "planes": FAST2D_PLANES, "threads": FAST2D_THREADS},
                       rules=rules, prune=(vw_extent(p.W, "W"), planes_small_blocks(p.W)))


def plan(problem: ConvProblem, config: Dw2dFastDgradConfig, machine: MachineModel | None = None) -> Dw2dDgradPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    p, c = problem, config
    check_dtype(p, STORAGE_DTYPES, "depthwise2d_fast dgrad")
    why = applies(p, STORAGE_DTYPES)
    if why:
        raise InvalidConfig("problem", f"depthwise2d_fast dgrad: {why}")
    if not isinstance(c, Dw2dFastDgradConfig):
        raise InvalidConfig("config", f"{c.key()} is not a depthwise2d_fast dgrad configuration")
    space(p).check(c)  # the rules: whole stride phases per item, bands up to H, ≤ 64 accumulators, threads
    sh, sw = p.stride_h, p.stride_w
    e0, ne = phase_span(p.pad_h, c.rows_per_thread, p.R, sh)
    f0, nf = phase_span(p.pad_w, c.outputs_per_thread, p.S, sw)
    vec = 4 if p.Q % 4 == 0 else 1
    off = -(-max(0, -f0) // vec) * vec
    qstep = c.outputs_per_thread // sw
    f4 = qstep % 4 == 0
    start = f0 + off
    d4 = start % 4 if f4 else 0
    read = 4 * (-(-(d4 + nf) // 4)) if f4 else nf
    n_w = -(-p.W // c.outputs_per_thread)
    need = max(off + p.Q, (n_w - 1) * qstep + start - d4 + read)
    step = 4 if (f4 or vec == 4) else 1
    pitch = -(-need // step) * step
    if step == 1 and pitch % 2 == 0:
        pitch += 1  # scalar reads of consecutive row groups: an odd pitch spreads the banks
    in_rows = (c.band_h - c.rows_per_thread) // sh + ne
    smem_bytes = p.itemsize_bytes * c.planes * in_rows * pitch
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        raise InvalidConfig("band_h", f"{smem_bytes} B of shared memory exceed the {limit} B per block")
    items = c.planes * (c.band_h // c.rows_per_thread) * n_w
    if c.threads >= 2 * items and c.threads > WARP:
        raise InvalidConfig("threads", f"threads={c.threads} for {items} items per block: at least half idle")
    regs = p.R * p.S + c.rows_per_thread * c.outputs_per_thread + read + 28
    if regs > MAX_REGS:
        raise InvalidConfig("outputs_per_thread", f"~{regs} registers per thread exceed {MAX_REGS}")
    min_blocks = max(1, min(16, 65536 // (c.threads * min(MAX_REGS, round_regs(regs + 24)))))
    nbands = -(-p.H // c.band_h)
    grid = -(-p.N * p.C // c.planes) * nbands
    if grid > 2**31 - 1:
        raise InvalidConfig("planes", f"{grid} blocks exceed the grid limit")
    return Dw2dDgradPlan(p, c, e0, ne, f0, nf, in_rows, pitch, off, vec, f4, nbands, grid, smem_bytes, regs,
                         min_blocks)


def traffic_words(pl: Dw2dDgradPlan) -> dict[str, int]:
    """Words requested from global memory::

        dy = N·C · Σ_bands |[band·TH/SH + E0, … + IHD) ∩ [0, P)| · Q
        w  = R·S per item of a real plane whose first row h0 < H:  N·C · Σ_bands ⌈rows(band) / VH⌉ · ⌈W / VW⌉ · R·S
        dx = N·C·H·W
    """
    p, c = pl.problem, pl.config
    th, vh = c.band_h, c.rows_per_thread
    rows_in = sum(span_inside(b * th // p.stride_h + pl.e0, pl.in_rows, p.P) for b in range(pl.nbands))
    groups = sum(-(-min(th, p.H - b * th) // vh) for b in range(pl.nbands))
    planes = p.N * p.C
    return {"dy": planes * rows_in * p.Q, "w": planes * groups * pl.n_w * p.R * p.S, "dx": planes * p.H * p.W}


def compile_plan(pl: Dw2dDgradPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def prepare_plan(pl: Dw2dDgradPlan, device: int = 0, kernel: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (dy, w, dx)."""
    p = pl.problem
    if kernel is None:
        with driver().use_device(device):
            kernel = compile_plan(pl)
    step = Launch(kernel, grid3(pl.grid), (pl.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.N * p.C, p.C, pl.nbands))
    return PreparedLaunch(plan=pl, device=device, operands=("dy", "w", "dx"), steps=[step], kernels=kernel,
                          filters=FilterLayout("w (C, 1, R, S)", ("depthwise2d",)), output_shape=(p.N, p.C, p.H, p.W))


def launch(pl: Dw2dDgradPlan, kernel: LoadedKernel, dy: Any, w: Any, dx: Any, stream: Any | None = None) -> None:
    """dx (N, C, H, W) from dy (N, C, P, Q) and w (C, 1, R, S), contiguous CuPy arrays of the storage dtype
    (bfloat16 as ``uint16`` bits); allocates nothing.

    Raises:
        InvalidInput: an array of the wrong shape, dtype or layout.
        LaunchError: the launch failed.
    """
    p = pl.problem
    for name, array, shape in (("dy", dy, (p.N, p.C, p.P, p.Q)), ("w", w, (p.C, 1, p.R, p.S)),
                               ("dx", dx, (p.N, p.C, p.H, p.W))):
        check_array(name, array, shape, p.dtype)
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(dy), data_pointer(w), data_pointer(dx)), stream_pointer(stream))
