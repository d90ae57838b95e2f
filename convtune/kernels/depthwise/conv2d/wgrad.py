"""2-D depthwise weight gradient (family ``depthwise2d_fast``, direction ``wgrad``, source ``dw2d_wgrad.cu``):
plan, traffic model and launcher.

Shapes (contiguous): x (N, C, H, W), dy (N, C, P, Q), dw (C, 1, R, S); any R×S (R·S ≤ 81), any stride, any
padding, dilation 1; float32, float16 or bfloat16 storage with fp32 sums (partials and atomics in fp32; a
16-bit atomic plan adds into an fp32 workspace of C × R·S floats converted by the reduction kernel)::

    dw[c,0,r,s] = Σ_{n,p,q} dy[n,c,p,q] · x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s]

Grid: C · ⌈N / planes⌉ · ⌈P / band_h⌉ blocks (band fastest, then batch group, then channel); a block sums
one channel over ``planes`` batch entries and one band of dy rows, leaving one partial of R·S floats
(deterministic: slot (ng·nbands + bd)·C + c of the [slices, C, R·S] workspace, then the shared reduction
kernel) or R·S atomic adds into the zeroed dw. Shared memory: max(itemsize · (⌈planes·IH·pitch⌉₄ +
planes·band_h·dpitch), 4 · warps · R·S) bytes (the dy band starts on a 4-element boundary).
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.depthwise import wgrad_launch
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import MODE_ATOMIC, Dw2dFastWgradConfig
from convtune.kernels.depthwise.conv1d.plan import REDUCE_ENTRY, reduce_source
from convtune.kernels.depthwise.conv2d.fast import MAX_ACC, MAX_REGS, window_reads
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
    WGRAD_MODES,
    accumulators,
    band_extent,
    bands,
    mode_rule,
    planes_small_blocks,
    vw_extent,
    vw_two_rows,
)
from convtune.kernels.launch_geometry import round_regs, spans_inside
from convtune.kernels.prepared import (
    FilterLayout,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    stream_pointer,
)
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "dw2d_wgrad.cu"
ENTRY = "dw2d_fast_wgrad"
WARP = 32


@dataclass(frozen=True, slots=True)
class Dw2dWgradPlan:
    problem: ConvProblem
    config: Dw2dFastWgradConfig
    in_rows: int      # IH
    pitch: int
    off: int
    vec: int
    dpitch: int
    dvec: int
    nbands: int
    n_groups: int     # ⌈N / planes⌉
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
    def taps(self) -> int:
        return self.problem.R * self.problem.S

    @property
    def atomic(self) -> bool:
        return self.config.mode == MODE_ATOMIC

    @property
    def deterministic(self) -> bool:
        return not self.atomic

    @property
    def slices(self) -> int:
        return self.n_groups * self.nbands

    @property
    def slots(self) -> int:
        return self.slices * self.problem.C

    @property
    def atomic_workspace(self) -> bool:
        """An atomic plan of 16-bit storage: its sums go to an fp32 workspace [C, R·S], not into dw."""
        return self.atomic and self.problem.dtype != "float32"

    @property
    def workspace_words(self) -> int:
        if self.deterministic:
            return self.slots * self.taps
        return self.problem.C * self.taps if self.atomic_workspace else 0

    @property
    def needs_reduce(self) -> bool:
        return self.deterministic or self.atomic_workspace

    @property
    def reduce_grid(self) -> int:
        return -(-self.problem.C * self.taps // WARP)

    def template_args(self) -> tuple[int | str, ...]:
        p, c = self.problem, self.config
        return (p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.H, p.W, p.P, p.Q, c.band_h, c.rows_per_thread,
                c.outputs_per_thread, c.planes, c.threads, self.pitch, self.off, self.vec, self.dpitch, self.dvec,
                "true" if self.atomic else "false")

    def wrapper(self, entry: str | None = None) -> str:
        targs = ", ".join(str(a) for a in self.template_args())
        t = cuda_type(self.problem)
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads}, {self.min_blocks})
{entry or ENTRY}(const {t}* __restrict__ x, const {t}* __restrict__ dy, float* __restrict__ out, int N, int C,
                 int nbands, int nng) {{
  convtune::dw::dw2d_wgrad_body<{targs}, {t}>(x, dy, out, N, C, nbands, nng);
}}
"""

    def source(self) -> str:
        return _family_source() + self.wrapper()

    def reduce_source(self) -> str:
        return reduce_source(self.problem.dtype)


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The 2-D weight gradient's space, both modes: bands over the output height P × rows and outputs per item
    × batch entries per block (several only while a block is small) × threads × mode. :func:`plan` enforces the
    rules."""
    p = problem
    rules = (
        mode_rule(),
        BAND_MULTIPLE,
        band_extent(p.P, "P", "output height"),
        Rule("planes_batch", ("planes",), lambda v: v["planes"] <= p.N,
             f"planes={{planes}} exceeds the batch N={p.N}: allowed 1..{p.N}"),
        accumulators(MAX_ACC),
        vw_two_rows(p.Q, "Q"),
        THREADS_WARPS,
    )
    return SearchSpace({"band_h": bands(FAST2D_BAND, p.P), "rows_per_thread": FAST2D_VH,
                        "outputs_per_thread": FAST2D_VW, "planes": FAST2D_PLANES, "threads": FAST2D_THREADS,
                        "mode": WGRAD_MODES},
                       rules=rules, prune=(vw_extent(p.Q, "Q"), planes_small_blocks(p.Q)))


def plan(problem: ConvProblem, config: Dw2dFastWgradConfig, machine: MachineModel | None = None) -> Dw2dWgradPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    p, c = problem, config
    check_dtype(p, STORAGE_DTYPES, "depthwise2d_fast wgrad")
    why = applies(p, STORAGE_DTYPES)
    if why:
        raise InvalidConfig("problem", f"depthwise2d_fast wgrad: {why}")
    if not isinstance(c, Dw2dFastWgradConfig):
        raise InvalidConfig("config", f"{c.key()} is not a depthwise2d_fast wgrad configuration")
    space(p).check(c)  # the rules: mode, bands up to P, planes ≤ N, ≤ 64 accumulators, VW ≤ 2·Q, threads
    vec = 4 if p.W % 4 == 0 else 1
    off = -(-p.pad_w // vec) * vec
    f4 = (c.outputs_per_thread * p.stride_w) % 4 == 0
    in_rows = (c.band_h - 1) * p.stride_h + p.R
    nq = -(-p.Q // c.outputs_per_thread)
    start, cols = window_reads(p, c.outputs_per_thread, f4, off)
    need = max(off + p.W, (nq - 1) * c.outputs_per_thread * p.stride_w + start + cols)
    step = 4 if (f4 or vec == 4) else 1
    pitch = -(-need // step) * step
    dvec = 4 if p.Q % 4 == 0 else 1
    dstep = 4 if (dvec == 4 or c.outputs_per_thread % 4 == 0) else 1
    dpitch = -(-nq * c.outputs_per_thread // dstep) * dstep
    staging = -(-c.planes * in_rows * pitch // 4) * 4 + c.planes * c.band_h * dpitch
    smem_bytes = max(p.itemsize_bytes * staging, 4 * (c.threads // WARP) * p.R * p.S)
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        raise InvalidConfig("band_h", f"{smem_bytes} B of shared memory exceed the {limit} B per block")
    items = c.planes * (c.band_h // c.rows_per_thread) * nq
    if c.threads >= 2 * items and c.threads > WARP:
        raise InvalidConfig("threads", f"threads={c.threads} for {items} items per block: at least half idle")
    regs = 2 * p.R * p.S + c.rows_per_thread * c.outputs_per_thread + cols + 24
    if regs > MAX_REGS:
        raise InvalidConfig("outputs_per_thread", f"~{regs} registers per thread exceed {MAX_REGS}")
    min_blocks = max(1, min(16, 65536 // (c.threads * min(MAX_REGS, round_regs(regs + 24)))))
    nbands = -(-p.P // c.band_h)
    n_groups = -(-p.N // c.planes)
    grid = p.C * n_groups * nbands
    if grid > 2**31 - 1:
        raise InvalidConfig("planes", f"{grid} blocks exceed the grid limit")
    return Dw2dWgradPlan(p, c, in_rows, pitch, off, vec, dpitch, dvec, nbands, n_groups, grid, smem_bytes, regs,
                         min_blocks)


def traffic_words(pl: Dw2dWgradPlan) -> dict[str, int]:
    """Words requested from global memory::

        x  = N·C · Σ_bands |[band·TH·SH − pad_h, … + IH) ∩ [0, H)| · W;   dy = N·C·P·Q
        deterministic: partials = blocks·R·S, reduce_read = slots·R·S, dw = C·R·S
        atomic: atomics = blocks·R·S, dw_zero = C·R·S
        atomic, 16-bit storage: atomics = blocks·R·S, ws_zero = reduce_read = dw = C·R·S
    """
    p, c = pl.problem, pl.config
    rows_in = spans_inside(pl.nbands, c.band_h * p.stride_h, -p.pad_h, pl.in_rows, p.H)
    planes = p.N * p.C
    words = {"x": planes * rows_in * p.W, "dy": planes * p.P * p.Q}
    if pl.atomic_workspace:
        words.update(atomics=pl.grid * pl.taps, ws_zero=p.C * pl.taps, reduce_read=p.C * pl.taps, dw=p.C * pl.taps)
    elif pl.atomic:
        words.update(atomics=pl.grid * pl.taps, dw_zero=p.C * pl.taps)
    else:
        words.update(partials=pl.grid * pl.taps, reduce_read=pl.slots * pl.taps, dw=p.C * pl.taps)
    return words


@dataclass(frozen=True, slots=True)
class Dw2dWgradKernels:
    main: LoadedKernel
    reduce: LoadedKernel | None = None


def compile_plan(pl: Dw2dWgradPlan) -> Dw2dWgradKernels:
    main = load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)
    reduce = load_kernel(pl.reduce_source(), REDUCE_ENTRY) if pl.needs_reduce else None
    return Dw2dWgradKernels(main, reduce)


def allocate_workspace(pl: Dw2dWgradPlan) -> Any:
    return wgrad_launch.allocate_workspace(pl)


def prepare_plan(pl: Dw2dWgradPlan, device: int = 0, kernels: Dw2dWgradKernels | None = None) -> PreparedLaunch:
    """The weight gradient as a prepared launch: operands (x, dy, dw), then ``workspace`` (fp32,
    ``4·workspace_words`` bytes) when the plan needs one; the sequence of :mod:`.wgrad_launch`."""
    p = pl.problem
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    ws = 3 if pl.workspace_words else None
    steps = wgrad_launch.steps(pl, kernels, (0, 1), 2, ws, (p.N, p.C, pl.nbands, pl.n_groups),
                               (pl.slices, pl.slots, p.C, pl.taps, pl.taps), dw_bytes=4 * p.C * pl.taps)
    return PreparedLaunch(plan=pl, device=device, operands=("x", "dy", "dw") + (("workspace",) if ws else ()),
                          steps=steps, kernels=kernels, workspace_bytes=4 * pl.workspace_words,
                          filters=FilterLayout("dw (C, 1, R, S)", ("depthwise2d",)), output_shape=(p.C, 1, p.R, p.S))


def launch(pl: Dw2dWgradPlan, kernels: Dw2dWgradKernels, x: Any, dy: Any, dw: Any, workspace: Any | None = None,
           stream: Any | None = None) -> None:
    """dw (C, 1, R, S) from x (N, C, H, W) and dy (N, C, P, Q), contiguous CuPy arrays of the storage dtype
    (bfloat16 as ``uint16`` bits).

    Raises:
        InvalidInput: an array of the wrong shape, dtype or layout, or a short workspace.
        LaunchError: the launch failed.
    """
    p = pl.problem
    for name, array, shape in (("x", x, (p.N, p.C, p.H, p.W)), ("dy", dy, (p.N, p.C, p.P, p.Q)),
                               ("dw", dw, (p.C, 1, p.R, p.S))):
        check_array(name, array, shape, p.dtype)
    ptrs = [data_pointer(x), data_pointer(dy), data_pointer(dw)]
    if pl.workspace_words:
        ptrs.append(data_pointer(wgrad_launch.checked_workspace(pl, workspace)))
    cached_prepared(pl, kernels, prepare_plan)(ptrs, stream_pointer(stream))
