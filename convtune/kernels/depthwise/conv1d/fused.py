"""Fused 1-D causal depthwise backward: plan, traffic model and launcher (family ``depthwise1d_fused``,
source ``dw1d_fused.cu``).

One pass over x and dy (B, C, L) with lag-order taps w (C, K) (``w[c, 0]`` multiplies the current sample)::

    dx[b,c,s] = Σ_{j<K, s+j<L} w[c,j] · dy[b,c,s+j]          dx: (B, C, L)
    dw[c,j]   = Σ_b Σ_{t=j}^{L−1} dy[b,c,t] · x[b,c,t−j]     dw: (C, K), 0 for j ≥ L

One thread per whole row (L ≤ 64; TL = L rounded up to 4 values in registers), KE = min(K, L) taps.
Deterministic mode writes ``slices`` × C × KE partials (slot p·C + c; the grid's idle slots write zeros)
summed by the shared reduction kernel; atomic mode zeroes dw and adds each thread's sums. Dtypes: float32,
float16, bfloat16 storage with fp32 sums (:mod:`~convtune.kernels.depthwise.dtypes`); a 16-bit atomic plan
adds into an fp32 workspace of C × K floats that the reduction kernel converts into dw.

Words requested (zero-filled copies read nothing; bytes: :func:`~convtune.kernels.depthwise.dtypes.
stream_bytes`, partials and atomics in fp32)::

    x = dy = dx = N = B·C·L;   w = KE per thread with a real first row = min(NR, grid·RB)·KE
    deterministic: partials grid·RB·KE, reduce reads slots·KE, dw C·K;  atomic: min(NR, grid·RB)·KE
    atomics + C·K zeroing (16-bit storage: of the fp32 workspace, then C·K reads of it and C·K dw stores)
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, load_kernel
from convtune.kernels.depthwise import wgrad_launch
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import MODE_ATOMIC, FusedBwdConfig
from convtune.kernels.depthwise.conv1d.plan import (
    DEFAULT_SMS,
    MAX_FAST_TAPS,
    MAX_FAST_TILE,
    REDUCE_ENTRY,
    _check_smem,
    _family_source,
    check_problem,
    fast_pitch,
    persistent_grid,
    reduce_source,
)
from convtune.kernels.depthwise.dtypes import STORAGE_DTYPES, cuda_type
from convtune.kernels.depthwise.values import (
    FAST_STAGES,
    FAST_VEC,
    FUSED_BLOCKS_PER_SM,
    FUSED_ROWS,
    WGRAD_MODES,
    allowed,
    block_threads,
    mode_rule,
    vec_aligned,
)
from convtune.kernels.launch_geometry import round_regs
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

SOURCE = "dw1d_fused.cu"
ENTRY = "dw1d_fused_bwd"
WARP = 32


@dataclass(frozen=True, slots=True)
class FusedPlan:
    problem: ConvProblem
    config: FusedBwdConfig
    ke: int
    tile_l: int
    pitch: int
    grid: int
    smem_bytes: int
    min_blocks: int
    regs_estimate: int

    B = property(lambda self: self.problem.N)
    C = property(lambda self: self.problem.C)
    L = property(lambda self: self.problem.W)
    K = property(lambda self: self.problem.S)

    @property
    def rows(self) -> int:
        return self.problem.N * self.problem.C

    @property
    def threads(self) -> int:
        return self.config.rows

    @property
    def atomic(self) -> bool:
        return self.config.mode == MODE_ATOMIC

    @property
    def deterministic(self) -> bool:
        return not self.atomic

    @property
    def slots(self) -> int:
        return self.grid * self.config.rows

    @property
    def slices(self) -> int:
        return -(-self.slots // self.C)

    @property
    def atomic_workspace(self) -> bool:
        """An atomic plan of 16-bit storage: its sums go to an fp32 workspace, not into dw."""
        return self.atomic and self.problem.dtype != "float32"

    @property
    def workspace_words(self) -> int:
        if self.deterministic:
            return self.slices * self.C * self.ke
        return self.C * self.K if self.atomic_workspace else 0

    @property
    def needs_reduce(self) -> bool:
        return self.deterministic or self.atomic_workspace

    @property
    def ngroups(self) -> int:
        return -(-self.rows // self.config.rows)

    @property
    def reduce_grid(self) -> int:
        return -(-self.C * self.K // WARP)

    @property
    def entry(self) -> str:
        return ENTRY

    def template_args(self) -> tuple[int | str, ...]:
        """FastTraits<PATH_WGRAD, KE, TL, TPR = 1, RB, VEC, HALO = false, STAGES, PITCH, ATOMIC> (the storage
        type follows as the last argument in :meth:`wrapper`)."""
        c = self.config
        return (2, self.ke, self.tile_l, 1, c.rows, c.vec, "false", c.stages, self.pitch,
                "true" if self.atomic else "false")

    def wrapper(self, entry: str | None = None) -> str:
        targs = ", ".join(str(a) for a in self.template_args())
        t = cuda_type(self.problem)
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads}, {self.min_blocks})
{entry or ENTRY}(const {t}* __restrict__ x, const {t}* __restrict__ dy, const {t}* __restrict__ w,
                 {t}* __restrict__ dx, float* __restrict__ dw, int NR, int C, int L, int K, int ngroups) {{
  using namespace convtune::dw;
  fused_bwd_body<FastTraits<{targs}, {t}>>(x, dy, w, dx, dw, NR, C, L, K, ngroups);
}}
"""

    def source(self) -> str:
        return _family_source(SOURCE) + self.wrapper()

    def reduce_source(self) -> str:
        return reduce_source(self.problem.dtype)


def regs_estimate(tile_l: int, ke: int) -> int:
    """TL dy values + KE taps + KE sums + 24."""
    return tile_l + 2 * ke + 24


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The fused 1-D backward's space: rows × stages × vec × blocks per SM × both modes. :func:`plan` enforces
    the rules (the problem's: rows of at most 64 samples, at most 64 taps; the config's)."""
    p = problem
    ke = min(p.S, p.W)
    rules = (
        mode_rule(),
        Rule("fused_length", (), lambda v: p.W <= MAX_FAST_TILE,
             f"fused backward: L={p.W} exceeds {MAX_FAST_TILE} (one thread per whole row)", field="problem"),
        Rule("fused_taps", (), lambda v: ke <= MAX_FAST_TAPS,
             f"fused backward: min(K, L)={ke} taps exceed {MAX_FAST_TAPS}", field="problem"),
        block_threads("rows"),
        allowed("stages", (1, 2), "1 or 2"),
        allowed("vec", (1, 4), "1 or 4"),
        vec_aligned(p),
        Rule("blocks_per_sm", ("blocks_per_sm",), lambda v: 1 <= v["blocks_per_sm"] <= 16,
             "blocks_per_sm={blocks_per_sm}: allowed 1..16"),
    )
    return SearchSpace({"rows": FUSED_ROWS, "stages": FAST_STAGES, "vec": FAST_VEC,
                        "blocks_per_sm": FUSED_BLOCKS_PER_SM, "mode": WGRAD_MODES}, rules=rules)


def plan(problem: ConvProblem, config: FusedBwdConfig, machine: MachineModel | None = None) -> FusedPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    check_problem(problem, STORAGE_DTYPES, "depthwise1d_fused")
    c, p = config, problem
    if not isinstance(c, FusedBwdConfig):
        raise InvalidConfig("config", f"{c.key()} is not a depthwise1d_fused configuration")
    space(p).check(c)  # the rules: mode, L ≤ 64 and ≤ 64 taps, rows, stages, vec (aligned), blocks per SM
    ke = min(p.S, p.W)
    tl = -(-p.W // 4) * 4
    pitch = fast_pitch(tl, c.rows, 1, tl)
    smem_bytes = p.itemsize_bytes * c.stages * 2 * c.rows * pitch
    _check_smem(smem_bytes, machine, "rows")
    regs = regs_estimate(tl, ke)
    if machine is not None:
        if c.rows * round_regs(regs) * c.blocks_per_sm > machine.regs_per_sm:
            raise InvalidConfig("blocks_per_sm", f"{c.blocks_per_sm} blocks × {c.rows} threads × "
                                                 f"~{round_regs(regs)} registers exceed the {machine.regs_per_sm} "
                                                 "registers of an SM")
        if c.blocks_per_sm * (smem_bytes + machine.smem_reserved_per_block_bytes) > machine.smem_per_sm_bytes:
            raise InvalidConfig("blocks_per_sm", f"{c.blocks_per_sm} blocks × {smem_bytes} B of shared memory "
                                                 f"exceed the {machine.smem_per_sm_bytes} B of an SM")
    elif 65536 // (c.rows * c.blocks_per_sm) < regs:
        raise InvalidConfig("blocks_per_sm", f"{c.blocks_per_sm} blocks × {c.rows} threads leave fewer than "
                                             f"~{regs} registers per thread")
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    rows = p.N * p.C
    grid = persistent_grid(-(-rows // c.rows), c.rows, p.C, sms * c.blocks_per_sm)
    return FusedPlan(p, c, ke, tl, pitch, grid, smem_bytes, c.blocks_per_sm, regs)


def traffic_words(pl: FusedPlan) -> dict[str, int]:
    """Requested global words of one call (module docstring)."""
    n = pl.rows * pl.L
    real = min(pl.rows, pl.grid * pl.config.rows)
    words = {"x": n, "dy": n, "w": real * pl.ke, "dx": n}
    if pl.atomic_workspace:
        words.update(atomics=real * pl.ke, ws_zero=pl.C * pl.K, reduce_read=pl.C * pl.K, dw=pl.C * pl.K)
    elif pl.atomic:
        words.update(atomics=real * pl.ke, dw_zero=pl.C * pl.K)
    else:
        words.update(partials=pl.slots * pl.ke, reduce_read=pl.slots * pl.ke, dw=pl.C * pl.K)
    return words


def issued_macs(pl: FusedPlan) -> int:
    """Multiply-adds issued: per row Σ_s min(KE, TL − s) for dx and the same count for dw (zeros past L
    included when TL > L)."""
    per_row = sum(min(pl.ke, pl.tile_l - s) for s in range(pl.tile_l))
    return 2 * pl.rows * per_row


@dataclass(frozen=True, slots=True)
class FusedKernels:
    main: LoadedKernel
    reduce: LoadedKernel | None = None


def compile_plan(pl: FusedPlan) -> FusedKernels:
    main = load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)
    reduce = load_kernel(pl.reduce_source(), REDUCE_ENTRY) if pl.needs_reduce else None
    return FusedKernels(main, reduce)


def allocate_workspace(pl: FusedPlan) -> Any:
    return wgrad_launch.allocate_workspace(pl)


def prepare_plan(pl: FusedPlan, device: int = 0, kernels: FusedKernels | None = None) -> PreparedLaunch:
    """The fused backward as a prepared launch: operands (x, dy, w, dx, dw), then ``workspace`` (fp32,
    ``4·workspace_words`` bytes) when the plan needs one; w in lag order (C, K)."""
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    ws = 5 if pl.workspace_words else None
    steps = wgrad_launch.steps(pl, kernels, (0, 1, 2, 3), 4, ws, (pl.rows, pl.C, pl.L, pl.K, pl.ngroups),
                               (pl.slices, pl.slots, pl.C, pl.K, pl.ke), dw_bytes=4 * pl.C * pl.K)
    return PreparedLaunch(plan=pl, device=device,
                          operands=("x", "dy", "w", "dx", "dw") + (("workspace",) if ws else ()), steps=steps,
                          kernels=kernels, workspace_bytes=4 * pl.workspace_words,
                          filters=FilterLayout("lag-order taps (C, K)", ("depthwise1d_lag",)),
                          output_shape=(pl.B, pl.C, pl.L))


def launch(pl: FusedPlan, kernels: FusedKernels, x: Any, dy: Any, w: Any, dx: Any, dw: Any,
           workspace: Any | None = None, stream: Any | None = None) -> None:
    """dx (B, C, L) and dw (C, K) from x, dy (B, C, L) and w (C, K), all C-contiguous CuPy arrays of the
    problem's storage dtype (bfloat16 as ``uint16`` bits).

    Raises:
        InvalidInput: an array of the wrong type, dtype, shape or layout, or a short workspace.
        LaunchError: the launch failed.
    """
    tensor, weight = (pl.B, pl.C, pl.L), (pl.C, pl.K)
    for name, array, shape in (("x", x, tensor), ("dy", dy, tensor), ("w", w, weight), ("dx", dx, tensor),
                               ("dw", dw, weight)):
        check_array(name, array, shape, pl.problem.dtype)
    ptrs = [data_pointer(a) for a in (x, dy, w, dx, dw)]
    if pl.workspace_words:
        ptrs.append(data_pointer(wgrad_launch.checked_workspace(pl, workspace)))
    cached_prepared(pl, kernels, prepare_plan)(ptrs, stream_pointer(stream))
