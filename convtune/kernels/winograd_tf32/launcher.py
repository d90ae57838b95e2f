"""Unfused Winograd F(m×m, 3×3) forward in the TF32 class (family ``winograd_unfused_tf32``): the fp32 path of
:mod:`convtune.kernels.winograd.unfused` — input transform, α² batched GEMMs, output transform, U from
:func:`convtune.kernels.winograd.launcher.transform_filters` — with the GEMMs on tensor cores
(``winograd_tc_gemm_body`` in ``winograd_unfused_tf32.cu``: mma.sync.m16n8k8 TF32, fp32 accumulation, each operand
rounded to nearest as it leaves shared memory); the transforms stay fp32.

Experimental: the family is registered but runs nothing until ``CONVTUNE_EXPERIMENTAL`` names it
(:mod:`convtune.kernels.experimental`) — its kernels have passed nvcc and a numpy emulation of their index maps, not
yet a GPU. Problems: what the Winograd paths run (3×3, stride 1, dilation 1) with ``math="tf32"``.

F(2×2, 3×3) only: the output transform amplifies the TF32 rounding of U and V. A float64 model of the rounding
(``benchmarks/winograd_tf32_accuracy.py``, C = K = 64, normal inputs) gives F(2×2) 4.9e-4 against direct TF32's
2.9e-4 (1.67×: within the class's gate of 2× cuDNN TF32's error), F(4×4) 2.0e-3 (7×; 4.9× even with U split into two
TF32 words), so F(4×4) is not in the space.

Shapes, workspace, launches and traffic are the unfused path's (:mod:`convtune.kernels.winograd.unfused`: V (α², Cp,
Tp), M (α², Kp, Tp); the three kernels; Tp = ⌈T/BT⌉·BT, Cp = ⌈C/BC⌉·BC, Kp = ⌈K/BK⌉·BK). The GEMM block: BK =
``tile_k`` output channels (a multiple of 16·``warps_k``) × BT = ``tile_t`` tiles (a multiple of 8·``warps_t``),
``warps_k`` × ``warps_t`` warps, BC = ``chunk_c`` channels per stage (a multiple of 8), ``stages`` deep. Shared
memory per stage 4·BC·(BK + 8 + BT + 8) bytes (rows padded for conflict-free fragment loads); registers ≈
BK·BT/threads accumulators + fragments + 40.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.prepared import PreparedLaunch, driver
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least
from convtune.kernels.winograd import unfused as _fp32
from convtune.kernels.winograd.launcher import applies
from convtune.kernels.winograd.transforms import POINTS, device_code
from convtune.kernels.winograd.unfused import (  # the fp32 path's workspace, filters and traffic serve unchanged
    SquareTiles,
    UnfusedFilters,
    UnfusedKernels,
    WinogradUnfusedPlan,
    check_limits,
    filters_key,
    images_per_pass_field,
    launch,  # given the kernels (this family's compile_plan), the fp32 path's prepared launch runs them
    m_offset_bytes,
    padded_geometry,
    pass_rule,
    prepare_filters,
    total_traffic_words,
    traffic_words,
    workspace,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["FAMILY", "SOURCE", "UnfusedFilters", "UnfusedKernels", "WinogradUnfusedTf32Config",
           "WinogradUnfusedTf32Plan", "compile_plan", "derive_plan", "enumerate_plans", "filters_key", "grid_size",
           "launch", "m_offset_bytes", "onchip_words", "plan", "prepare_filters", "prepare_plan", "space", "supports",
           "tolerance", "total_traffic_words", "traffic_words", "workspace"]

FAMILY = "winograd_unfused_tf32"
SOURCE = "winograd_unfused_tf32.cu"
ENTRY = "winograd_gemm_tc"
ROW_PAD_WORDS = 8          # shared rows of BK + 8 / BT + 8 words: ≡ 8 (mod 32), conflict-free fragment loads
#: Relative error (‖y − y64‖₂ / ‖y64‖₂) a config must meet: the TF32 families' gate (3e-3; the rounding model
#: predicts 4.9e-4 on normal inputs). The issue's gate (≤ 2× cuDNN TF32's error on the same inputs, ≈ 6e-4 there) is
#: stricter; the GPU tests assert it too.
TOLERANCE = {2: 3e-3}


@dataclass(frozen=True, slots=True)
class WinogradUnfusedTf32Config(SquareTiles, KernelConfig):
    """Tunable parameters of the TF32 unfused path (the transforms have fixed 256-thread blocks)."""

    family = FAMILY
    direction = "fwd"

    m: int = 2             # output tile m×m: F(2×2,3×3) (F(4×4) misses the TF32 accuracy gate)
    tile_k: int = 64       # BK: output channels per GEMM block (the MMA's M)
    tile_t: int = 128      # BT: tiles per GEMM block (the MMA's N)
    chunk_c: int = 16      # BC: input channels per pipeline stage (whole k8 steps)
    warps_k: int = 2       # warps along k: warp tile BK / warps_k (whole m16 rows)
    warps_t: int = 4       # warps along t: warp tile BT / warps_t (whole n8 columns)
    stages: int = 3        # cp.async pipeline depth (2..4)
    images_per_pass: int = images_per_pass_field()   # 0: the whole batch in one pass (the fp32 unfused path's passes)

    #: TF32 MMAs per term: 1 (this family), 3 in the strict-fp32 3xTF32 family (the GEMM body's PRODUCTS)
    products = 1

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def threads(self) -> int:
        return 32 * self.warps_k * self.warps_t

    @property
    def output_registers(self) -> int:
        """Registers per thread holding outputs past the GEMM's accumulators: none here (the 3xTF32 family's fused
        output transform holds m² per accumulator)."""
        return 0


@dataclass(frozen=True, slots=True)
class WinogradUnfusedTf32Plan(WinogradUnfusedPlan):
    """The unfused plan's geometry (:class:`WinogradUnfusedPlan`) with the tensor-core GEMM's template and entry."""

    @property
    def fused(self) -> bool:
        """Whether the output transform runs inside the GEMM kernel (the 3xTF32 family's ``fuse``): never here."""
        return False

    def traffic(self) -> dict[str, int]:
        """Words the launches move (:func:`convtune.kernels.winograd.unfused.traffic_words`; what the model prices)."""
        return traffic_words(self)

    def template_args(self) -> tuple[int, ...]:
        """winograd_tc_gemm_body's template arguments (PRODUCTS, last, only where it is not the default 1)."""
        c = cast(WinogradUnfusedTf32Config, self.config)
        return (c.tile_k, c.tile_t, c.chunk_c, c.warps_k, c.warps_t, c.stages) + ((c.products,) if c.products != 1
                                                                                  else ())

    def source(self) -> str:
        """Self-contained CUDA text: the F(m) transforms, the family source, the transforms' entries and the GEMM's."""
        c = self.config
        gemm = GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m) + _fp32.entries_text(c.m, gemm)


GEMM_ENTRY = """extern "C" __global__ void __launch_bounds__({threads})
winograd_gemm_tc(const float* __restrict__ U, const float* __restrict__ V, float* __restrict__ Mo, int Cp, int Kp,
                 int Tp) {{
  convtune::winograd_tc_gemm_body<{targs}>(U, V, Mo, Cp, Kp, Tp);
}}
"""


@cache
def _family_source(m: int) -> str:
    return device_code(m) + kernel_text(SOURCE)


#: the smallest map (input and output, either axis) the family takes. On the H200 every random problem whose error
#: exceeded twice cuDNN TF32's (5 of 240, 2.02–2.33×) had an input or output axis below it — inputs of 2×2 padded to
#: outputs of 2×2..6×6, an output of 4×3 — maps where the transformed tiles are mostly padding and Winograd saves
#: nothing (wino_tc_v1 in benchmarks/results/igemm_wgmma_h200)
MIN_MAP = 4


def map_too_small(problem: ConvProblem) -> str | None:
    """Why the input or output map is too small for this family (None if it is not)."""
    p = problem
    if min(p.H, p.W, p.P, p.Q) >= MIN_MAP:
        return None
    return f"an input map of {p.H}×{p.W} and output map of {p.P}×{p.Q}: H, W, P and Q must be ≥ {MIN_MAP}"


def supports(problem: ConvProblem) -> bool:
    """TF32-class problems the Winograd paths run whose input and output maps are at least :data:`MIN_MAP` a side,
    once the family is enabled (:mod:`convtune.kernels.experimental`)."""
    return (experimental.enabled(FAMILY) and problem.math == "tf32" and applies(problem) is None
            and map_too_small(problem) is None)


def mma_tiles(config: WinogradUnfusedTf32Config) -> tuple[int, int]:
    """(MI, NI): m16 × n8 MMAs per warp and k8 step."""
    c = config
    return c.tile_k // c.warps_k // 16, c.tile_t // c.warps_t // 8


def smem_bytes(config: WinogradUnfusedTf32Config) -> int:
    c = config
    return 4 * c.stages * c.chunk_c * (c.tile_k + ROW_PAD_WORDS + c.tile_t + ROW_PAD_WORDS)


def regs_estimate(config: WinogradUnfusedTf32Config) -> int:
    """4·MI·NI accumulators + 4·MI + 2·NI fragment words (twice that with 3xTF32's lo words) + 40 for addresses and
    the pipeline (ptxas on sm_90: 64–208 registers against 88–200 estimated on six tiles of this family), + the
    config's :attr:`~WinogradUnfusedTf32Config.output_registers`."""
    mi, ni = mma_tiles(config)
    words = 2 if config.products == 3 else 1
    return 4 * mi * ni + words * (4 * mi + 2 * ni) + 40 + config.output_registers


def derive_plan(problem: ConvProblem, config: WinogradUnfusedTf32Config, machine: MachineModel | None = None,
                plan_class: type[WinogradUnfusedTf32Plan] | None = None) -> WinogradUnfusedTf32Plan:
    """The plan of a config that keeps the space's rules (:func:`plan` checks them first); refuses what breaks the
    register limit, ``machine``'s limits or the grid's. ``plan_class``: a family built on this GEMM (the 3xTF32 one).

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    c = config
    tiles_p, tiles_q, tiles, tp, cp_, kp = padded_geometry(problem, c)
    smem, regs = smem_bytes(c), regs_estimate(c)
    check_limits(c.threads, smem, regs, machine, regs_field="tile_t")
    # the fp32 plan's geometry reads m, tile_k, tile_t, chunk_c, stages, alpha and threads, which this config has
    return (plan_class or WinogradUnfusedTf32Plan)(problem, cast(Any, c), tiles_p, tiles_q, tiles, tp, cp_, kp, smem,
                                                   regs)


def onchip_words(pl: WinogradUnfusedTf32Plan) -> int:
    """Fast memory one GEMM block holds: every shared-memory stage plus the BK × BT accumulators."""
    return pl.smem_bytes // 4 + pl.config.tile_k * pl.config.tile_t


# ---- the space -----------------------------------------------------------------------------------------------
M = (2,)    # F(2×2) only: F(4×4) misses the class's accuracy gate (module docstring)
TILE_K = (32, 64, 128)
TILE_T = (64, 128, 256)
CHUNK_C = (8, 16, 32)
WARPS = (1, 2, 4)
STAGES = (2, 3, 4)
MIN_THREADS, MAX_THREADS = 64, 256


def _tiles(p: ConvProblem, m: int) -> int:
    return p.N * -(-p.P // m) * -(-p.Q // m)


def _threads(v: Values) -> int:
    return 32 * v["warps_k"] * v["warps_t"]


#: the GEMM's values (the m values are each family's)
GEMM_VALUES: dict[str, tuple[int, ...]] = {"tile_k": TILE_K, "tile_t": TILE_T, "chunk_c": CHUNK_C, "warps_k": WARPS,
                                           "warps_t": WARPS, "stages": STAGES}


def gemm_rules() -> tuple[Rule, ...]:
    """The tensor-core GEMM block's rules (whole m16n8 MMAs per warp, padded shared rows, the pipeline)."""
    return (
        Rule("warps_k", ("tile_k", "warps_k"), lambda v: v["tile_k"] % (16 * v["warps_k"]) == 0,
             "tile_k={tile_k} must be a multiple of 16·warps_k (warps_k={warps_k})"),
        Rule("warps_t", ("tile_t", "warps_t"), lambda v: v["tile_t"] % (8 * v["warps_t"]) == 0,
             "tile_t={tile_t} must be a multiple of 8·warps_t (warps_t={warps_t})"),
        Rule("tiles", ("tile_k", "tile_t"), lambda v: v["tile_k"] % 32 == 0 and v["tile_t"] % 32 == 0,
             "tile_k={tile_k} and tile_t={tile_t} must be multiples of 32 (padded shared rows)", field="tile_k"),
        Rule("chunk_c", ("chunk_c",), lambda v: v["chunk_c"] % 8 == 0 and v["chunk_c"] <= 32,
             "chunk_c={chunk_c}: a multiple of 8 up to 32"),
        Rule("stages", ("stages",), lambda v: 2 <= v["stages"] <= 4, "stages={stages}: allowed 2..4"),
    )


def gemm_prune(problem: ConvProblem) -> tuple[Rule, ...]:
    """The search's pruning: BK no larger than the next power of two of K, BT than that of the tile count, 64..256
    threads."""
    p = problem
    max_k = max(32, pow2_at_least(p.K))
    return (
        Rule("tile_k_extent", ("tile_k",), lambda v: v["tile_k"] <= max_k, f"tile_k={{tile_k}} exceeds {max_k}"),
        Rule("tile_t_extent", ("m", "tile_t"), lambda v: v["tile_t"] <= max(64, pow2_at_least(_tiles(p, v["m"]))),
             lambda v: f"tile_t={v['tile_t']} exceeds {max(64, pow2_at_least(_tiles(p, v['m'])))}"),
        Rule("threads_searched", ("warps_k", "warps_t"), lambda v: MIN_THREADS <= _threads(v) <= MAX_THREADS,
             lambda v: f"{_threads(v)} threads: searched {MIN_THREADS}..{MAX_THREADS}", field="threads"),
    )


@experimental.cached_per_names
def space(problem: ConvProblem) -> SearchSpace:
    """The values, the kernel's rules (:func:`plan` enforces them) and the search's pruning (:func:`gemm_prune`)."""
    p = problem
    why = applies(p) or map_too_small(p)
    pass_rule_3x3, pass_values = pass_rule(p, 3, M)
    rules = (
        Rule("problem", (), lambda v: why is None and p.math == "tf32",
             f"the TF32 Winograd path runs math='tf32' problems Winograd takes; got math={p.math!r}"
             + (f", {why}" if why else ""), field="problem"),
        Rule("m", ("m",), lambda v: v["m"] in M and v["m"] in POINTS,
             f"m={{m}}: allowed {list(M)} (F(4×4) misses the TF32 accuracy gate)"),
        *gemm_rules(),
        pass_rule_3x3,
    )
    return SearchSpace({"m": M, **GEMM_VALUES, "images_per_pass": pass_values}, rules, gemm_prune(p))


def grid_size(problem: ConvProblem) -> int:
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradUnfusedTf32Plan]:
    """Every valid (config, plan) for ``problem`` on ``machine``."""
    for values in space(problem).configs():
        try:
            yield derive_plan(problem, WinogradUnfusedTf32Config(**values), machine)
        except InvalidConfig:  # a limit of the derived geometry (registers, shared memory, grid)
            continue


def plan(problem: ConvProblem, config: WinogradUnfusedTf32Config,
         machine: MachineModel | None = None) -> WinogradUnfusedTf32Plan:
    """Validate ``config`` for ``problem`` (:func:`space`'s rules, then the derived geometry's limits).

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)


# ---- launching ---------------------------------------------------------------------------------------------
def compile_plan(pl: WinogradUnfusedTf32Plan) -> UnfusedKernels:
    """The fp32 transforms and the tensor-core GEMM, from one module (``prepare_plan`` launches them as the fp32
    path's: the GEMM step takes the config's threads and the plan's shared memory)."""
    text = pl.source()
    return UnfusedKernels(load_kernel(text, "winograd_input"), load_kernel(text, ENTRY, pl.smem_bytes),
                          load_kernel(text, "winograd_output"))


def prepare_plan(pl: WinogradUnfusedTf32Plan, device: int = 0, kernels: UnfusedKernels | None = None) -> PreparedLaunch:
    """The fp32 path's prepared launch (:func:`convtune.kernels.winograd.unfused.prepare_plan`: operands x,
    filters = U, y, workspace = V then M) over this family's kernels (:func:`compile_plan`)."""
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    return _fp32.prepare_plan(pl, device, kernels)


def tolerance(pl: Any) -> float:
    return TOLERANCE[pl.config.m]
