"""2-D depthwise forward for small images, packed variant: plans, traffic model and launcher (family
``depthwise2d_packed``, source ``dw2d_packed.cu``).

Shapes (contiguous; float32, or float16 / bfloat16 storage with fp32 sums, see
:mod:`~convtune.kernels.depthwise.dtypes`): x (N, C, H, W), w (C, 1, R, S), y (N, C, P, Q); groups = C,
W ≤ 32 and Q ≤ 32 (a whole input row and a whole output row per item live in registers), any stride and
padding, dilation 1::

    y[n,c,p,q] = Σ_{r<R, s<S} w[c,0,r,s] · x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s]

Grid: ⌈N·C / planes⌉ blocks; block b owns planes [b·planes, (b + 1)·planes), i.e. the contiguous input stretch
of planes·H·W floats and output stretch of planes·P·Q floats. Shared memory: ⌈planes·H·W⌉₄ + planes·P·Q
floats (fp32 whatever the storage dtype: 16-bit inputs are converted while staged). Items per block:
planes · ⌈P / rows_per_thread⌉.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.depthwise import family as _shared
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import Dw2dPackedFwdConfig
from convtune.kernels.depthwise.conv2d.tiled import applies as applies_2d
from convtune.kernels.depthwise.dtypes import FP32_ONLY, STORAGE_DTYPES, check_dtype, cuda_type
from convtune.kernels.depthwise.values import PACKED2D_PLANES, PACKED2D_THREADS, PACKED2D_VH, THREADS_WARPS
from convtune.kernels.launch_geometry import round_regs
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

SOURCE = "dw2d_packed.cu"
ENTRY = "dw2d_packed_fwd"
WARP = 32
MAX_ROW = 32        # W and Q: a row lives in registers
MAX_ACC = 64        # rows_per_thread · Q accumulators
MAX_REGS = 255


def applies(problem: ConvProblem, dtypes: tuple[str, ...] = FP32_ONLY) -> str | None:
    """None when the packed kernel taking ``dtypes`` can run ``problem``, else why not."""
    why = applies_2d(problem, dtypes)
    if why:
        return why
    if problem.W > MAX_ROW or problem.Q > MAX_ROW:
        return f"W={problem.W}, Q={problem.Q}: the packed kernel takes images up to {MAX_ROW} wide"
    return None


@dataclass(frozen=True, slots=True)
class Dw2dPackedPlan:
    problem: ConvProblem
    config: Dw2dPackedFwdConfig
    row_groups: int     # ⌈P / rows_per_thread⌉ items per plane
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
    def items(self) -> int:
        return self.config.planes * self.row_groups

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (p.R, p.S, p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.H, p.W, p.P, p.Q, c.rows_per_thread,
                c.planes, c.threads)

    def wrapper(self, entry: str | None = None) -> str:
        t = cuda_type(self.problem)
        targs = ", ".join(str(a) for a in self.template_args())
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads}, {self.min_blocks})
{entry or ENTRY}(const {t}* __restrict__ x, const {t}* __restrict__ w, {t}* __restrict__ y, int NC, int C) {{
  convtune::dw::dw2d_packed_fwd_body<{t}, {targs}>(x, w, y, NC, C);
}}
"""

    def source(self) -> str:
        return _family_source() + self.wrapper()


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def regs_estimate(problem: ConvProblem, c: Dw2dPackedFwdConfig) -> int:
    """R·S taps + rows_per_thread·Q accumulators + one input row (W) + 24 for addresses and indices."""
    return problem.R * problem.S + c.rows_per_thread * problem.Q + problem.W + 24


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The packed 2-D forward's space (images up to 32 wide): planes per block × output rows per item (up to
    P) × threads (plan: from one warp up to the block's items). :func:`plan` enforces the rules."""
    p = problem
    rules = (
        Rule("rows_extent", ("rows_per_thread",), lambda v: 1 <= v["rows_per_thread"] <= p.P,
             f"rows_per_thread={{rows_per_thread}}: allowed 1..P={p.P}"),
        Rule("row_accumulators", ("rows_per_thread",), lambda v: v["rows_per_thread"] * p.Q <= MAX_ACC,
             lambda v: f"rows_per_thread·Q = {v['rows_per_thread'] * p.Q} accumulators exceed {MAX_ACC}: "
                       f"allowed 1..{max(1, MAX_ACC // p.Q)}"),
        THREADS_WARPS,
    )
    return SearchSpace({"planes": PACKED2D_PLANES, "rows_per_thread": PACKED2D_VH, "threads": PACKED2D_THREADS},
                       rules=rules)


def plan(problem: ConvProblem, config: Dw2dPackedFwdConfig, machine: MachineModel | None = None) -> Dw2dPackedPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    p, c = problem, config
    check_dtype(p, STORAGE_DTYPES, "depthwise2d_packed")
    why = applies(p, STORAGE_DTYPES)
    if why:
        raise InvalidConfig("problem", f"depthwise2d_packed: {why}")
    if not isinstance(c, Dw2dPackedFwdConfig):
        raise InvalidConfig("config", f"{c.key()} is not a depthwise2d_packed configuration")
    space(p).check(c)  # the rules: 1..P rows per item, ≤ 64 accumulators (rows·Q), 32..1024 threads
    row_groups = -(-p.P // c.rows_per_thread)
    items = c.planes * row_groups
    if c.threads >= 2 * items and c.threads > WARP:
        raise InvalidConfig("threads", f"threads={c.threads} for {items} items per block: at least half idle")
    in_words = -(-c.planes * p.H * p.W // 4) * 4
    smem_bytes = 4 * (in_words + c.planes * p.P * p.Q)
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        raise InvalidConfig("planes", f"{smem_bytes} B of shared memory (planes·(H·W + P·Q) floats) exceed the "
                                      f"{limit} B per block")
    regs = regs_estimate(p, c)
    if regs > MAX_REGS:
        raise InvalidConfig("rows_per_thread", f"~{regs} registers per thread exceed {MAX_REGS}")
    min_blocks = max(1, min(16, 65536 // (c.threads * min(MAX_REGS, round_regs(regs + 24)))))
    grid = -(-p.N * p.C // c.planes)
    if grid > 2**31 - 1:
        raise InvalidConfig("planes", f"{grid} blocks exceed the grid limit")
    return Dw2dPackedPlan(p, c, row_groups, grid, smem_bytes, regs, min_blocks)


def traffic_words(pl: Dw2dPackedPlan) -> dict[str, int]:
    """Elements the kernel requests from global memory (bytes: × the storage dtype's itemsize): every input
    and output element once, R·S taps per item::

        x = N·C·H·W,    w = N·C · ⌈P / rows_per_thread⌉ · R·S,    y = N·C·P·Q
    """
    p = pl.problem
    planes = p.N * p.C
    return {"x": planes * p.H * p.W, "w": planes * pl.row_groups * p.R * p.S, "y": planes * p.P * p.Q}


def compile_plan(pl: Dw2dPackedPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def prepare_plan(pl: Dw2dPackedPlan, device: int = 0, kernel: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, w, y), the weights as they are (C, 1, R, S)."""
    p = pl.problem
    if kernel is None:
        with driver().use_device(device):
            kernel = compile_plan(pl)
    step = Launch(kernel, grid3(pl.grid), (pl.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2), (p.N * p.C, p.C))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "w", "y"), steps=[step], kernels=kernel,
                          filters=FilterLayout("w (C, 1, R, S)", ("depthwise2d",)), output_shape=(p.N, p.C, p.P, p.Q))


def launch(pl: Dw2dPackedPlan, kernel: LoadedKernel, x: Any, w: Any, y: Any, stream: Any | None = None) -> None:
    """Run on contiguous CuPy arrays of the problem's dtype (bfloat16: uint16 bits) x (N, C, H, W),
    w (C, 1, R, S), y (N, C, P, Q); allocates nothing.

    Raises:
        InvalidInput: an array of the wrong shape, dtype or layout.
        LaunchError: the launch failed.
    """
    p = pl.problem
    for name, array, shape in (("x", x, (p.N, p.C, p.H, p.W)), ("w", w, (p.C, 1, p.R, p.S)),
                               ("y", y, (p.N, p.C, p.P, p.Q))):
        check_array(name, array, shape, p.dtype)
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(w), data_pointer(y)), stream_pointer(stream))


# ---- the registry row's callables and the launcher protocol (convtune.kernels.protocols.Launcher) -----------
def supports(problem: ConvProblem) -> bool:
    """Whether the kernel runs ``problem`` at all (:func:`applies`), in every storage dtype."""
    return applies(problem, STORAGE_DTYPES) is None


def total_traffic_words(pl: Dw2dPackedPlan) -> int:
    """Modelled global-memory words of one launch (loads + stores)."""
    return sum(traffic_words(pl).values())


def onchip_words(pl: Dw2dPackedPlan) -> int:
    """Fast memory one block holds: shared memory plus each thread's taps, VH output rows and input row."""
    p, c = pl.problem, pl.config
    return pl.smem_bytes // 4 + pl.threads * (p.R * p.S + c.rows_per_thread * p.Q + p.W)


def prepare_filters(pl: Dw2dPackedPlan, w: Any) -> Any:
    """The filter operand :func:`launch` takes: w (C, 1, R, S) as it is."""
    return _shared.prepare_filters_2d(w, pl.problem.dtype)


def filters_key(pl: Dw2dPackedPlan) -> tuple[str, ...]:
    """Every 2-D forward plan shares one filter operand."""
    return _shared.FILTERS_KEY_2D


def tolerance(pl: Dw2dPackedPlan) -> float:
    return _shared.tolerance(pl)
