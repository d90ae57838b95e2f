"""2-D depthwise forward, fast variant: plans, traffic model and launcher (family ``depthwise2d_fast``,
source ``dw2d_fast.cu``).

Shapes (contiguous; float32, or float16 / bfloat16 storage with fp32 sums, see
:mod:`~convtune.kernels.depthwise.dtypes`): x (N, C, H, W), w (C, 1, R, S), y (N, C, P, Q); groups = C,
any R×S (R·S ≤ 81), stride 1 or 2 (any stride works; the spaces use 1 and 2), any padding, dilation 1::

    y[n,c,p,q] = Σ_{r<R, s<S} w[c,0,r,s] · x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s]

Grid: ⌈N·C / planes⌉ · nbands blocks (band fastest), nbands = ⌈P / band_h⌉. Shared memory:
planes · IH · pitch floats, IH = (band_h − 1)·stride_h + R; image column w sits at shared column w + OFF
(OFF = pad_w, rounded up to 4 for 16-byte copies when W % 4 == 0). Items per block:
planes · (band_h / rows_per_thread) · ⌈Q / outputs_per_thread⌉, walked by ``threads`` threads.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig, InvalidInput
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.depthwise import family as _shared
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import Dw2dFastFwdConfig
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
    vw_two_rows,
)
from convtune.kernels.launch_geometry import round_regs, spans_inside
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
from convtune.kernels.search_space import SearchSpace
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "dw2d_fast.cu"
ENTRY = "dw2d_fast_fwd"
WARP = 32
MAX_ACC = 64        # VH·VW accumulators in registers
MAX_REGS = 255


@dataclass(frozen=True, slots=True)
class Dw2dFastPlan:
    problem: ConvProblem
    config: Dw2dFastFwdConfig
    in_rows: int        # IH
    pitch: int
    off: int            # shared column of image column 0
    vec: int            # 4: 16-byte copies, 1: 4-byte
    f4: bool            # float4 window reads
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
    def n_q(self) -> int:
        return -(-self.problem.Q // self.config.outputs_per_thread)

    @property
    def items(self) -> int:
        c = self.config
        return c.planes * (c.band_h // c.rows_per_thread) * self.n_q

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.H, p.W, p.P, p.Q, c.band_h, c.rows_per_thread,
                c.outputs_per_thread, c.planes, c.threads, self.pitch, self.off, self.vec)

    def wrapper(self, entry: str | None = None) -> str:
        t = cuda_type(self.problem)
        targs = ", ".join(str(a) for a in self.template_args())
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads}, {self.min_blocks})
{entry or ENTRY}(const {t}* __restrict__ x, const {t}* __restrict__ w, {t}* __restrict__ y, int NC, int C,
                 int nbands) {{
  convtune::dw::dw2d_fast_fwd_body<{t}, {targs}>(x, w, y, NC, C, nbands);
}}
"""

    def source(self) -> str:
        return _family_source() + self.wrapper()


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def window_reads(problem: ConvProblem, vw: int, f4: bool, off: int) -> tuple[int, int]:
    """(first shared column read by the item at q = 0 relative to q·stride_w, columns read per window):
    float4 reads start at DELTA − DELTA % 4 and cover ⌈(DELTA % 4 + WIN) / 4⌉ chunks; scalar reads cover WIN."""
    win = (vw - 1) * problem.stride_w + problem.S
    delta = off - problem.pad_w
    if f4:
        d4 = delta % 4
        return delta - d4, 4 * (-(-(d4 + win) // 4))
    return delta, win


def bank_cost(pitch: int, problem: ConvProblem, c: Dw2dFastFwdConfig, f4: bool, in_rows: int, off: int) -> int:
    """Shared-memory wavefronts of one window read of every warp of a block's first pass over its items: float4
    reads are served per quarter-warp (8 lanes; conflict-free when their 16-byte units differ modulo 8), scalar
    reads per warp (distinct words in one bank serialise)."""
    nq, nh = -(-problem.Q // c.outputs_per_thread), c.band_h // c.rows_per_thread
    start, _ = window_reads(problem, c.outputs_per_thread, f4, off)
    items = min(c.threads, c.planes * nh * nq)
    addrs = []
    for it in range(items):
        pl, rem = divmod(it, nh * nq)
        rg, qg = divmod(rem, nq)
        addrs.append((pl * in_rows + rg * c.rows_per_thread * problem.stride_h) * pitch
                     + qg * c.outputs_per_thread * problem.stride_w + start)
    cost = 0
    if f4:
        for q0 in range(0, len(addrs), 8):
            units = Counter((a // 4) % 8 for a in set(addrs[q0:q0 + 8]))
            cost += max(units.values())
    else:
        for w0 in range(0, len(addrs), WARP):
            banks = Counter(a % 32 for a in set(addrs[w0:w0 + WARP]))
            cost += max(banks.values())
    return cost


def regs_estimate(problem: ConvProblem, c: Dw2dFastFwdConfig, f4: bool) -> int:
    """R·S taps + VH·VW accumulators + the window (rounded to float4s) + 28 for addresses and indices."""
    _, cols = window_reads(problem, c.outputs_per_thread, f4, problem.pad_w if not f4 else 0)
    return problem.R * problem.S + c.rows_per_thread * c.outputs_per_thread + cols + 28


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The fast 2-D forward's space: bands up to the output height (plus P itself: whole planes) × rows and
    outputs per item × planes (several only while a block is small) × threads (plan: from one warp up to the
    block's items). :func:`plan` enforces the rules."""
    p = problem
    rules = (BAND_MULTIPLE, band_extent(p.P, "P", "output height"), accumulators(MAX_ACC, "accumulators "),
             vw_two_rows(p.Q, "Q"), THREADS_WARPS)
    return SearchSpace({"band_h": bands(FAST2D_BAND, p.P), "rows_per_thread": FAST2D_VH,
                        "outputs_per_thread": FAST2D_VW, "planes": FAST2D_PLANES, "threads": FAST2D_THREADS},
                       rules=rules, prune=(vw_extent(p.Q, "Q"), planes_small_blocks(p.Q)))


def plan(problem: ConvProblem, config: Dw2dFastFwdConfig, machine: MachineModel | None = None) -> Dw2dFastPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    p, c = problem, config
    check_dtype(p, STORAGE_DTYPES, "depthwise2d_fast")
    why = applies(p, STORAGE_DTYPES)
    if why:
        raise InvalidConfig("problem", f"depthwise2d_fast: {why}")
    if not isinstance(c, Dw2dFastFwdConfig):
        raise InvalidConfig("config", f"{c.key()} is not a depthwise2d_fast configuration")
    space(p).check(c)  # the rules: bands of whole items up to P, ≤ 64 accumulators, VW ≤ 2·Q, 32..1024 threads
    vec = 4 if p.W % 4 == 0 else 1
    off = -(-p.pad_w // vec) * vec
    f4 = (c.outputs_per_thread * p.stride_w) % 4 == 0
    in_rows = (c.band_h - 1) * p.stride_h + p.R
    nq = -(-p.Q // c.outputs_per_thread)
    start, cols = window_reads(p, c.outputs_per_thread, f4, off)
    need = max(off + p.W, (nq - 1) * c.outputs_per_thread * p.stride_w + start + cols)
    step = 4 if (f4 or vec == 4) else 1
    need = -(-need // step) * step
    pitch = min(range(need, need + 32, step), key=lambda pt: (bank_cost(pt, p, c, f4, in_rows, off), pt))
    smem_bytes = 4 * c.planes * in_rows * pitch
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        raise InvalidConfig("band_h", f"{smem_bytes} B of shared memory (planes·IH·pitch floats) exceed the "
                                      f"{limit} B per block")
    items = c.planes * (c.band_h // c.rows_per_thread) * nq
    if c.threads >= 2 * items and c.threads > WARP:
        raise InvalidConfig("threads", f"threads={c.threads} for {items} items per block: at least half idle")
    regs = regs_estimate(p, c, f4)
    if regs > MAX_REGS:
        raise InvalidConfig("outputs_per_thread", f"~{regs} registers per thread exceed {MAX_REGS}")
    min_blocks = max(1, min(16, 65536 // (c.threads * min(MAX_REGS, round_regs(regs + 24)))))
    nbands = -(-p.P // c.band_h)
    grid = -(-p.N * p.C // c.planes) * nbands
    if grid > 2**31 - 1:
        raise InvalidConfig("planes", f"{grid} blocks exceed the grid limit")
    return Dw2dFastPlan(p, c, in_rows, pitch, off, vec, f4, nbands, grid, smem_bytes, regs, min_blocks)


def traffic_words(pl: Dw2dFastPlan) -> dict[str, int]:
    """Elements the kernel requests from global memory (bytes: × the storage dtype's itemsize)::

        x = N·C · Σ_bands rows_in(band) · W,    rows_in(band) = |[band·TH·SH − pad_h, … + IH) ∩ [0, H)|
        w = R·S per item of a real plane with a real first row:  N·C · Σ_bands ⌈rows(band) / VH⌉ · ⌈Q / VW⌉ · R·S
        y = N·C·P·Q

    (zero-filled copies read nothing; rows(band) = output rows of the band inside [0, P)).
    """
    p, c = pl.problem, pl.config
    th, vh = c.band_h, c.rows_per_thread
    rows_in = spans_inside(pl.nbands, th * p.stride_h, -p.pad_h, pl.in_rows, p.H)
    groups = sum(-(-min(th, p.P - b * th) // vh) for b in range(pl.nbands))
    planes = p.N * p.C
    return {"x": planes * rows_in * p.W, "w": planes * groups * pl.n_q * p.R * p.S, "y": planes * p.P * p.Q}


def compile_plan(pl: Dw2dFastPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def prepare_plan(pl: Dw2dFastPlan, device: int = 0, kernel: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, w, y), the weights as they are (C, 1, R, S); x and y must
    start 16-byte aligned (the caller's job: a prepared launch checks nothing)."""
    p = pl.problem
    if kernel is None:
        with driver().use_device(device):
            kernel = compile_plan(pl)
    step = Launch(kernel, grid3(pl.grid), (pl.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.N * p.C, p.C, pl.nbands))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "w", "y"), steps=[step], kernels=kernel,
                          filters=FilterLayout("w (C, 1, R, S)", ("depthwise2d",)), output_shape=(p.N, p.C, p.P, p.Q))


def launch(pl: Dw2dFastPlan, kernel: LoadedKernel, x: Any, w: Any, y: Any, stream: Any | None = None) -> None:
    """Run on contiguous CuPy arrays of the problem's dtype (bfloat16: uint16 bits) x (N, C, H, W),
    w (C, 1, R, S), y (N, C, P, Q); allocates nothing; x and y must start 4-element aligned (16 bytes in fp32,
    8 in 16-bit storage) for the vector copies and stores.

    Raises:
        InvalidInput: an array of the wrong shape, dtype or layout.
        LaunchError: the launch failed.
    """
    p = pl.problem
    for name, array, shape in (("x", x, (p.N, p.C, p.H, p.W)), ("w", w, (p.C, 1, p.R, p.S)),
                               ("y", y, (p.N, p.C, p.P, p.Q))):
        check_array(name, array, shape, p.dtype)
    align = 4 * p.itemsize_bytes
    y_vector = p.Q % 4 == 0 and pl.config.outputs_per_thread % 4 == 0
    for name, array, vector in (("x", x, pl.vec == 4), ("y", y, y_vector)):
        if vector and array.data.ptr % align:
            raise InvalidInput(name, f"must start {align}-byte aligned for the 4-element copies (a view at an "
                                     f"offset: pass a copy)")
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(w), data_pointer(y)), stream_pointer(stream))


# ---- the registry row's callables and the launcher protocol (convtune.kernels.protocols.Launcher) -----------
def supports(problem: ConvProblem) -> bool:
    """Whether the kernel runs ``problem`` at all (:func:`applies`, shared with the tiled kernel), in every storage
    dtype (:data:`~convtune.kernels.depthwise.dtypes.STORAGE_DTYPES`: the tuner measures 16-bit problems too)."""
    return applies(problem, STORAGE_DTYPES) is None


def total_traffic_words(pl: Dw2dFastPlan) -> int:
    """Modelled global-memory words of one launch (loads + stores)."""
    return sum(traffic_words(pl).values())


def onchip_words(pl: Dw2dFastPlan) -> int:
    """Fast memory one block holds: shared memory, each thread's taps and VH × VW outputs, and one window."""
    p, c = pl.problem, pl.config
    window = ((c.rows_per_thread - 1) * p.stride_h + p.R) * ((c.outputs_per_thread - 1) * p.stride_w + p.S)
    return pl.smem_bytes // 4 + pl.threads * (p.R * p.S + c.rows_per_thread * c.outputs_per_thread) + window


def prepare_filters(pl: Dw2dFastPlan, w: Any) -> Any:
    """The filter operand :func:`launch` takes: w (C, 1, R, S) as it is."""
    return _shared.prepare_filters_2d(w, pl.problem.dtype)


def filters_key(pl: Dw2dFastPlan) -> tuple[str, ...]:
    """Every 2-D forward plan shares one filter operand."""
    return _shared.FILTERS_KEY_2D


def tolerance(pl: Dw2dFastPlan) -> float:
    return _shared.tolerance(pl)
