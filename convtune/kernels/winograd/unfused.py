"""Unfused Winograd F(m×m, 3×3) forward: input transform, α² batched GEMMs (tuned tiles), output transform.

Shapes (fp32, contiguous): x (N, C, H, W); U (α², Cp, Kp) from :func:`launcher.transform_filters`;
workspace V (α², Cp, Tp) and M (α², Kp, Tp); y (N, K, P, Q). T = N·⌈P/m⌉·⌈Q/m⌉ tiles, Tp = ⌈T/BT⌉·BT,
Cp = ⌈C/BC⌉·BC, Kp = ⌈K/BK⌉·BK. Kernels (``winograd_unfused.cu``):

1. ``winograd_input``  grid (⌈Tp/256⌉, Cp), 256 threads: V[ξ][c][t] = (Bᵀ d B)[ξ] (zero in the padding);
2. ``winograd_gemm``   grid (Tp/BT, Kp/BK, α²): M[ξ][k][t] = Σ_c U[ξ][c][k]·V[ξ][c][t];
3. ``winograd_output`` grid (⌈T/256⌉, K), 256 threads: y tile = Aᵀ M A, cropped to P×Q.

Global-memory traffic in words, exactly what the kernels request::

    input transform  N·C·Σ_tp rows(tp)·Σ_tq cols(tq)  loads  +  α²·Cp·Tp stores
    GEMM             (Tp/BT)·α²·Cp·Kp  +  (Kp/BK)·α²·Cp·Tp  loads  +  α²·Kp·Tp stores
    output transform α²·K·T loads  +  N·K·P·Q stores

(rows/cols as in :mod:`launcher`). The GEMM's re-reads mostly hit L2; the model prices them there.
Against the fused kernel this pays 2·(V + M) workspace traffic and three launches, and in exchange
transforms each input tile once (not once per BK block) and runs the GEMM with large register tiles.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.launch_geometry import round_regs, spans_inside
from convtune.kernels.prepared import (
    Launch,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    pointers,
    stream_pointer,
)
from convtune.kernels.search_space import Rule, Values
from convtune.kernels.winograd.launcher import TOLERANCE, transform_filters
from convtune.kernels.winograd.transforms import device_code
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "winograd_unfused.cu"
ENTRY = "winograd_gemm"                       # the tuned kernel; the transforms ride along in the same module
ENTRIES = ("winograd_input", "winograd_gemm", "winograd_output")
TRANSFORM_THREADS = 256
MAX_REGS = 255


def images_per_pass_field() -> Any:
    """The config field ``images_per_pass``: the three kernels run over the batch in passes of this many images (0:
    one pass), so that a pass's V and M stay in L2 between its kernels instead of a round trip to DRAM; left out of
    the config's key at 0 (the keys stored before the field existed); keyword-only, so that the fields a family adds
    after it keep their positions."""
    return field(default=0, kw_only=True, metadata={"min": 0, "key_omits_default": True})


#: V and M bytes a pass may hold: about 2/3 of the 50 MB L2 of an H100 or H200, whose rest holds the filters U and
#: the input and output streams (:func:`pass_image_choices`)
PASS_WORKSPACE_BYTES = 32 * 2**20
#: the :mod:`~convtune.kernels.experimental` name that puts the passes in the spaces: correct on an H100 (bit for bit
#: against one pass) but 1.23–1.76× slower there (benchmarks/results/winograd_passes_h100)
PASSES = "winograd_passes"


class SquareTiles:
    """Per-axis tile geometry of a Winograd config with fields m and alpha (m × m outputs from α × α inputs; the 1-D
    family overrides it): outputs per tile and transform points along H and W, and the points a tile transforms to
    (the GEMMs' batch)."""

    __slots__ = ()
    m: int

    @property
    def alpha(self) -> int:
        raise NotImplementedError

    @property
    def m_h(self) -> int:
        return self.m

    @property
    def m_w(self) -> int:
        return self.m

    @property
    def alpha_h(self) -> int:
        return self.alpha

    @property
    def alpha_w(self) -> int:
        return self.alpha

    @property
    def points(self) -> int:
        return self.alpha_h * self.alpha_w


@dataclass(frozen=True, slots=True)
class WinogradUnfusedConfig(SquareTiles, KernelConfig):
    """Tunable parameters of the unfused Winograd path (the transforms have fixed 256-thread blocks)."""

    family = "winograd_unfused"
    direction = "fwd"

    m: int = 4             # output tile m×m: F(2×2,3×3) or F(4×4,3×3)
    tile_k: int = 64       # BK: output channels per GEMM block
    tile_t: int = 128      # BT: tiles per GEMM block
    chunk_c: int = 8       # BC: input channels per pipeline stage
    thread_k: int = 8      # TK: output channels per thread (multiple of 4)
    thread_t: int = 8      # TT: tiles per thread (multiple of 4)
    stages: int = 3        # cp.async pipeline depth (2..4)
    images_per_pass: int = images_per_pass_field()   # 0: the whole batch in one pass (:func:`pass_images`)

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def threads(self) -> int:
        return (self.tile_k // self.thread_k) * (self.tile_t // self.thread_t)


@dataclass(frozen=True, slots=True)
class WinogradUnfusedPlan:
    """Everything derived from (problem, config): padded sizes, launch geometry, resources."""

    problem: ConvProblem
    config: WinogradUnfusedConfig
    tiles_p: int
    tiles_q: int
    tiles: int
    tp: int            # Tp: tiles padded to a multiple of BT
    cp: int
    kp: int
    smem_bytes: int    # the GEMM's (the transforms use none)
    regs_estimate: int

    @property
    def grid(self) -> tuple[int, int, int]:
        """The GEMM's grid (the transforms' grids: :meth:`input_grid`, :meth:`output_grid`)."""
        c = self.config
        return (self.tp // c.tile_t, self.kp // c.tile_k, c.points)

    @property
    def input_grid(self) -> tuple[int, int, int]:
        return (-(-self.tp // TRANSFORM_THREADS), self.cp, 1)

    @property
    def output_grid(self) -> tuple[int, int, int]:
        return (-(-self.tiles // TRANSFORM_THREADS), self.problem.K, 1)

    @property
    def blocks(self) -> int:
        """The GEMM's blocks in one (full) pass."""
        gx, gy, gz = self.grid
        return gx * gy * gz

    @property
    def passes(self) -> tuple[Pass, ...]:
        """The passes of the three kernels over the batch (:func:`pass_images` images each, the last the rest)."""
        return batch_passes(self.problem.N, pass_images(self.problem, self.config), self.tiles_p * self.tiles_q,
                            self.config.tile_t)

    def pass_grid(self, ps: Pass) -> tuple[int, int, int]:
        """The GEMM's grid over one pass's tiles (:attr:`grid`'s, with the pass's Tp)."""
        _, gy, gz = self.grid
        return (ps.tp // self.config.tile_t, gy, gz)

    @property
    def workspace_bytes(self) -> int:
        """V and M in fp32, for one pass (every pass reuses them)."""
        return 4 * self.config.points * self.tp * (self.cp + self.kp)

    def template_args(self) -> tuple[int, ...]:
        c = self.config
        return (c.tile_k, c.tile_t, c.chunk_c, c.thread_k, c.thread_t, c.stages)

    def filter_layout(self, device: int) -> Any:
        """The U layout and its transform launch (a family with another filter transform overrides it)."""
        from convtune.kernels.winograd import filters

        return filters.layout(self, device)

    def source(self) -> str:
        """Self-contained CUDA text: the F(m) transforms, the family source and the three entries."""
        c = self.config
        gemm = GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m) + entries_text(c.m, gemm)


#: the transforms' entries, around the GEMM's (``{gemm}``: :data:`GEMM_ENTRY` here; the TF32 family's its own)
ENTRIES_AROUND = """
extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_input(const float* __restrict__ x, float* __restrict__ V, int C, int H, int W, int pad_h, int pad_w,
               int tiles_p, int tiles_q, int tiles, int Cp, int Tp) {{
  convtune::winograd_input_body<{m}>(x, V, C, H, W, pad_h, pad_w, tiles_p, tiles_q, tiles, Cp, Tp);
}}
{gemm}extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_output(const float* __restrict__ Mi, float* __restrict__ y, int K, int P, int Q, int tiles_p, int tiles_q,
                int tiles, int Kp, int Tp) {{
  convtune::winograd_output_body<{m}>(Mi, y, K, P, Q, tiles_p, tiles_q, tiles, Kp, Tp);
}}
"""
GEMM_ENTRY = """extern "C" __global__ void __launch_bounds__({threads})
winograd_gemm(const float* __restrict__ U, const float* __restrict__ V, float* __restrict__ Mo, int Cp, int Kp,
              int Tp) {{
  convtune::winograd_gemm_body<{targs}>(U, V, Mo, Cp, Kp, Tp);
}}
"""


def entries_text(m: int, gemm: str) -> str:
    """The three ``extern "C"`` entries of an unfused plan: the F(m) transforms' around ``gemm`` (formatted)."""
    return ENTRIES_AROUND.format(transform_threads=TRANSFORM_THREADS, m=m, gemm=gemm)


@cache
def _family_source(m: int) -> str:
    return device_code(m) + kernel_text(SOURCE)


@dataclass(frozen=True, slots=True)
class Pass:
    """One pass of the three kernels: ``images`` images from image ``first``, their ``tiles`` tiles padded to
    ``tp`` (a multiple of BT)."""

    first: int
    images: int
    tiles: int
    tp: int


def pass_images(problem: ConvProblem, config: Any) -> int:
    """Images per pass: the config's ``images_per_pass`` where it is below N (0 or absent: the whole batch)."""
    n = getattr(config, "images_per_pass", 0)
    return n if 0 < n < problem.N else problem.N


@cache
def batch_passes(n: int, images: int, tiles_per_image: int, tile_t: int) -> tuple[Pass, ...]:
    """The passes over ``n`` images, ``images`` a pass (the last the rest), tiles padded to multiples of
    ``tile_t`` (cached: the model reads them for every plan it scores)."""
    out = []
    for first in range(0, n, images):
        count = min(images, n - first)
        tiles = count * tiles_per_image
        out.append(Pass(first, count, tiles, -(-tiles // tile_t) * tile_t))
    return tuple(out)


def pass_image_choices(problem: ConvProblem, alpha_h: int, alpha_w: int, m_h: int, m_w: int) -> tuple[int, ...]:
    """The images a pass of F(m, r) with α points (per axis) may hold: n, the largest power of two below N whose V
    and M, 4·α_h·α_w·n·⌈P/m_h⌉·⌈Q/m_w⌉·(C + K) bytes, fit :data:`PASS_WORKSPACE_BYTES`, and n/2 (fewer bytes in L2
    against twice the launches); none where the whole batch fits (one pass is already resident) or not even one
    image does."""
    p = problem
    per_image = 4 * alpha_h * alpha_w * -(-p.P // m_h) * -(-p.Q // m_w) * (p.C + p.K)
    if p.N * per_image <= PASS_WORKSPACE_BYTES or per_image > PASS_WORKSPACE_BYTES:
        return ()
    n = 1
    while 2 * n < p.N and 2 * n * per_image <= PASS_WORKSPACE_BYTES:
        n *= 2
    return (n // 2, n) if n > 1 else (n,)


def pass_rule(problem: ConvProblem, r: int, ms: Iterable[int]) -> tuple[Rule, tuple[int, ...]]:
    """The ``images_per_pass`` rule and values of a square-tile unfused F(m×m, r×r) family (``ms``: the m it may
    run): 0 (one pass) or one of the :func:`pass_image_choices` of the config's m. Experimental (:data:`PASSES`):
    until ``CONVTUNE_EXPERIMENTAL`` names it, the values are (0,) and the rule refuses any other value."""

    def choices(v: Values) -> tuple[int, ...]:
        alpha = v["m"] + r - 1
        return pass_image_choices(problem, alpha, alpha, v["m"], v["m"])

    values: tuple[int, ...] = (0,)
    if experimental.enabled(PASSES):
        values = tuple(sorted({0}.union(*(pass_image_choices(problem, m + r - 1, m + r - 1, m, m) for m in ms))))
    rule = Rule("images_per_pass", ("images_per_pass", "m"),
                lambda v: v["images_per_pass"] == 0 or (experimental.enabled(PASSES)
                                                         and v["images_per_pass"] in choices(v)),
                lambda v: f"images_per_pass={v['images_per_pass']}: allowed 0 (one pass) or, with "
                          f"{experimental.ENV}={PASSES}, {list(choices(v))} (power-of-two passes whose V and M "
                          f"fit {PASS_WORKSPACE_BYTES >> 20} MiB)", field="images_per_pass")
    return rule, values


def regs_estimate(config: WinogradUnfusedConfig) -> int:
    """Registers per thread of the GEMM ≈ TK·TT accumulators + TK + TT fragments + 30 for addresses."""
    c = config
    return c.thread_k * c.thread_t + c.thread_k + c.thread_t + 30


def padded_geometry(problem: ConvProblem, config: Any) -> tuple[int, int, int, int, int, int]:
    """(tiles_p, tiles_q, T, Tp, Cp, Kp) of a config with outputs per tile m_h × m_w (:class:`SquareTiles`), tile_t
    (BT), chunk_c (BC), tile_k (BK): T = n·⌈P/m_h⌉·⌈Q/m_w⌉ tiles of a pass of n = :func:`pass_images` images (the
    first pass: the last may hold fewer), Tp = ⌈T/BT⌉·BT, Cp = ⌈C/BC⌉·BC, Kp = ⌈K/BK⌉·BK (the GEMM runs without a
    bounds test).

    Raises:
        InvalidConfig: ``tile_k`` where the grid's y extent or C, K exceed 65535.
    """
    p, c = problem, config
    tiles_p, tiles_q = -(-p.P // c.m_h), -(-p.Q // c.m_w)   # m × m tiles, or the 1-D family's 1 × m / m × 1
    tiles = pass_images(p, c) * tiles_p * tiles_q
    tp = -(-tiles // c.tile_t) * c.tile_t
    cp_, kp = -(-p.C // c.chunk_c) * c.chunk_c, -(-p.K // c.tile_k) * c.tile_k
    if kp // c.tile_k > 65535 or p.K > 65535 or cp_ > 65535:
        raise InvalidConfig("tile_k", "grid too large: C, K and Kp/BK must be ≤ 65535")
    return tiles_p, tiles_q, tiles, tp, cp_, kp


def check_limits(threads: int, smem_bytes: int, regs: int, machine: MachineModel | None, regs_field: str) -> None:
    """The GEMM block's limits: ``regs`` (estimated per thread) ≤ :data:`MAX_REGS`, and on ``machine`` its shared
    memory per block and ``threads`` × the rounded registers per SM.

    Raises:
        InvalidConfig: ``regs_field`` (the field that sets the registers), ``chunk_c`` or ``threads``.
    """
    if regs > MAX_REGS:
        raise InvalidConfig(regs_field, f"~{regs} registers per thread exceed {MAX_REGS}")
    if machine is None:
        return
    if smem_bytes > machine.smem_per_block_bytes:
        raise InvalidConfig("chunk_c", f"{smem_bytes} B of shared memory exceed the "
                                       f"{machine.smem_per_block_bytes} B per block of {machine.name}")
    if threads * round_regs(regs) > machine.regs_per_sm:
        raise InvalidConfig("threads", f"{threads} threads × ~{round_regs(regs)} registers exceed the "
                                       f"{machine.regs_per_sm} registers of an SM")


def derive_plan(problem: ConvProblem, config: WinogradUnfusedConfig, machine: MachineModel | None = None,
                plan_class: type[WinogradUnfusedPlan] | None = None) -> WinogradUnfusedPlan:
    """The plan (a ``plan_class``: a family's subclass; default :class:`WinogradUnfusedPlan`) of a config that keeps
    the space's rules (:func:`plan` checks them first; the enumeration yields only such configs); refuses what breaks
    the register limit, ``machine``'s limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    tiles_p, tiles_q, tiles, tp, cp_, kp = padded_geometry(p, c)
    smem_bytes = 4 * c.stages * c.chunk_c * (c.tile_k + c.tile_t)
    regs = regs_estimate(c)
    check_limits(c.threads, smem_bytes, regs, machine, regs_field="thread_k")
    return (plan_class or WinogradUnfusedPlan)(p, c, tiles_p, tiles_q, tiles, tp, cp_, kp, smem_bytes, regs)


def enumerate_valid(problem: ConvProblem, machine: MachineModel, space: Any, config_class: type,
                    derive: Any) -> Iterator[Any]:
    """``derive(problem, config, machine)`` of every config of ``space`` (a :class:`SearchSpace`, whose rules the
    configs keep) that the derived geometry's limits (registers, shared memory, grid) do not refuse."""
    for values in space.configs():
        try:
            yield derive(problem, config_class(**values), machine)
        except InvalidConfig:
            continue


def traffic_words(pl: WinogradUnfusedPlan) -> dict[str, int]:
    """Words loaded/stored by the three kernels per the formula in the module docstring, summed over the plan's
    passes (each pass: its images' tiles, padded to its own Tp)."""
    p, c = pl.problem, pl.config
    a2 = c.points
    rows = spans_inside(pl.tiles_p, c.m_h, -p.pad_h, c.alpha_h, p.H)
    cols = spans_inside(pl.tiles_q, c.m_w, -p.pad_w, c.alpha_w, p.W)
    words = dict.fromkeys(("input", "v_store", "filter", "v_load", "m_store", "m_load", "output"), 0)
    for ps in pl.passes:
        words["input"] += ps.images * p.C * rows * cols
        words["v_store"] += a2 * pl.cp * ps.tp
        words["filter"] += (ps.tp // c.tile_t) * a2 * pl.cp * pl.kp
        words["v_load"] += (pl.kp // c.tile_k) * a2 * pl.cp * ps.tp
        words["m_store"] += a2 * pl.kp * ps.tp
        words["m_load"] += a2 * p.K * ps.tiles
        words["output"] += ps.images * p.K * p.P * p.Q
    return words


def total_traffic_words(pl: WinogradUnfusedPlan) -> int:
    return sum(traffic_words(pl).values())


def dram_words(pl: WinogradUnfusedPlan) -> int:
    """Compulsory words of the pipeline: x, U, V and M each written/read once, y written (V and M of every pass; a
    pass that stays in L2 moves less: the model prices it, :mod:`convtune.kernels.winograd.model`)."""
    t = traffic_words(pl)
    a2 = pl.config.points
    return t["input"] + 2 * t["v_store"] + a2 * pl.cp * pl.kp + t["m_store"] + t["m_load"] + t["output"]


def onchip_words(pl: WinogradUnfusedPlan) -> int:
    """Fast memory one GEMM block holds: every shared-memory stage plus the accumulator registers."""
    c = pl.config
    return pl.smem_bytes // 4 + c.thread_k * c.thread_t * c.threads


# ---- launching ----------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class UnfusedKernels:
    """The three loaded entries; ``resources`` are the GEMM's, ``compile_s`` their sum."""

    input: LoadedKernel
    gemm: LoadedKernel
    output: LoadedKernel

    @property
    def resources(self) -> Any:
        return self.gemm.resources

    @property
    def compile_s(self) -> float:
        return self.input.compile_s + self.gemm.compile_s + self.output.compile_s


def compile_plan(pl: WinogradUnfusedPlan) -> UnfusedKernels:
    text = pl.source()
    return UnfusedKernels(load_kernel(text, "winograd_input"), load_kernel(text, "winograd_gemm", pl.smem_bytes),
                          load_kernel(text, "winograd_output"))


@dataclass(frozen=True, slots=True)
class Workspace:
    """One fp32 buffer of :attr:`WinogradUnfusedPlan.workspace_bytes`: the transformed input V (α², Cp, Tp)
    from offset 0 and the GEMM output M (α², Kp, Tp) from byte :func:`m_offset_bytes`."""

    buffer: Any
    v: Any
    m: Any


def m_offset_bytes(pl: WinogradUnfusedPlan) -> int:
    """Byte offset of M in the workspace (right after V; a multiple of 16: Tp is a multiple of BT ≥ 4)."""
    return 4 * pl.config.points * pl.cp * pl.tp


def workspace(pl: WinogradUnfusedPlan) -> Workspace:
    """The plan's :attr:`~WinogradUnfusedPlan.workspace_bytes`: V, then M (``m`` is None where a plan keeps M on chip
    and its workspace is V alone)."""
    cp = cupy_module()
    a2 = pl.config.points
    buffer = cp.empty(pl.workspace_bytes // 4, dtype=cp.float32)
    v_words = a2 * pl.cp * pl.tp
    m = buffer[v_words:].reshape(a2, pl.kp, pl.tp) if buffer.size > v_words else None
    return Workspace(buffer, buffer[:v_words].reshape(a2, pl.cp, pl.tp), m)


@dataclass(frozen=True, slots=True)
class UnfusedFilters:
    """The filter operand of :func:`launch`: U (α², Cp, Kp) and the plan's workspace, kept together so
    repeated launches allocate nothing."""

    u: Any
    work: Workspace


def prepare_filters(pl: WinogradUnfusedPlan, w: Any) -> UnfusedFilters:
    return UnfusedFilters(transform_filters(w, pl.config.m, pl.cp, pl.kp), workspace(pl))


def filters_key(pl: WinogradUnfusedPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace depends on Tp)."""
    return ("winograd_unfused", pl.config.m, pl.cp, pl.kp, pl.tp)


def tolerance(pl: WinogradUnfusedPlan) -> float:
    return TOLERANCE[pl.config.m]


def prepare_plan(pl: WinogradUnfusedPlan, device: int = 0, kernels: UnfusedKernels | None = None) -> PreparedLaunch:
    """The three kernels of every pass (:attr:`WinogradUnfusedPlan.passes`) as one prepared launch: operands (x,
    filters = U, y, workspace = V then M, reused by each pass); a pass's kernels read and write its images (x and y
    from the pass's first image). The U layout is the plan's (:meth:`WinogradUnfusedPlan.filter_layout`)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    m_off = m_offset_bytes(pl)
    block = (TRANSFORM_THREADS, 1, 1)
    steps = []
    for ps in pl.passes:
        x_off, y_off = 4 * ps.first * p.C * p.H * p.W, 4 * ps.first * p.K * p.P * p.Q
        steps += [
            Launch(kernels.input, (-(-ps.tp // TRANSFORM_THREADS), pl.cp, 1), block, 0, pointers((0, x_off), (3, 0)),
                   (p.C, p.H, p.W, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, ps.tiles, pl.cp, ps.tp)),
            Launch(kernels.gemm, pl.pass_grid(ps), (c.threads, 1, 1), pl.smem_bytes, pointers(1, (3, 0), (3, m_off)),
                   (pl.cp, pl.kp, ps.tp)),
            Launch(kernels.output, (-(-ps.tiles // TRANSFORM_THREADS), p.K, 1), block, 0,
                   pointers((3, m_off), (2, y_off)),
                   (p.K, p.P, p.Q, pl.tiles_p, pl.tiles_q, ps.tiles, pl.kp, ps.tp)),
        ]
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=pl.workspace_bytes, filters=pl.filter_layout(device),
                          output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: WinogradUnfusedPlan, kernels: UnfusedKernels, x: Any, filters: UnfusedFilters, y: Any,
           stream: Any | None = None, prepare: Callable[[Any, int, Any], PreparedLaunch] | None = None) -> None:
    """Run the three kernels on contiguous float32 CuPy arrays (``filters`` from :func:`prepare_filters`);
    ``prepare``: a family's own prepared launch over this workspace and operands (default :func:`prepare_plan`).

    Raises:
        LaunchError: a launch failed.
    """
    prepared = cached_prepared(pl, kernels, prepare or prepare_plan)
    prepared((data_pointer(x), data_pointer(filters.u), data_pointer(y), data_pointer(filters.work.buffer)),
             stream_pointer(stream))
