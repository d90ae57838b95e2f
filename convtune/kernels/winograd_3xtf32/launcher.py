"""Unfused Winograd F(m×m, r×r) forward for 3×3, 5×5 and 7×7 filters at strict fp32 accuracy, GEMMs on TF32 tensor
cores by 3xTF32 (family ``winograd_unfused_3xtf32``).

Why: the unfused Winograd paths run their α² batched GEMMs on the CUDA cores in strict fp32 — AlexNet conv2 spends
134.5 of 239.6 µs there on an H100 (71% of the fp32 FMA peak; cuDNN fp32's FFT takes 183). Splitting each GEMM operand
v into two TF32 words, hi = rna(v) and lo = rna(v − hi), and accumulating lo·hi + hi·lo + hi·hi on the TF32 tensor
cores (three mma.sync per term) runs the GEMM at a third of the TF32 rate — above the fp32 FMA rate — with the
products' error at fp32's order. A float64 model of the dataflow (``benchmarks/winograd_3xtf32_accuracy.py``, C = K =
64, normal inputs) gives 1.24–1.70× the fp32 GEMM's error: F(2×2,3×3) 1.5e-7, F(4×4,3×3) 7.8e-7, F(2×2,5×5) 8.7e-7,
F(4×4,5×5) 2.4e-6, F(2×2,7×7) 3.1e-6, each ≥ 40× inside :data:`TOLERANCE` (the fp32 unfused families' gates,
shared). One TF32 product would give 4.9e-4–7.2e-3: not a strict-fp32 result.

Dataflow, workspace, filters, launches and traffic are the fp32 unfused path's (input transform, GEMMs, output
transform; U from the Winograd filter transform, shared with the fp32 family of the same r); the transforms are the
large-filter family's (``winograd_unfused_r.cu``, templated on r: 3 gives the 3×3 path's F(m, 3)); the GEMM is
``winograd_tc_gemm_body`` of the TF32 family with PRODUCTS = 3 (``winograd_unfused_tf32.cu``), so the config is that
family's GEMM block (BK = ``tile_k`` × BT = ``tile_t``, BC = ``chunk_c``, ``warps_k`` × ``warps_t`` warps,
``stages``) plus ``r``. Problems: what the fp32 Winograd paths take (3×3, 5×5 or 7×7, stride 1, dilation 1, float32
storage) in the strict fp32 and TF32 classes (a strict result serves the looser class).

On by default since its GPU tests passed (H100, 2026-12-07: 1770 cases, unfused and fused, each within the fp32
gate and ≤ 4× the fp32 family's error on the same inputs; benchmarks/results/winograd_3xtf32_h100): the untuned choice
takes it where its model is the least (with TF32_MMA_FRACTION fitted on those timings), the tuner measures it beside
the fp32 families.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from fractions import Fraction
from functools import cache
from typing import Any, cast

from convtune.kernels import experimental
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.prepared import (
    Launch,
    PreparedLaunch,
    driver,
    grid3,
    pointers,
)
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.kernels.winograd import launcher as _wino3
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _fp32
from convtune.kernels.winograd.transforms import POINTS_BY_R, cook_toom, device_code, float_literal
from convtune.kernels.winograd.unfused import (  # the unfused path's workspace (V alone when fused) and filters
    UnfusedFilters,
    UnfusedKernels,
    m_offset_bytes,
    prepare_filters,
    workspace,
)
from convtune.kernels.winograd_large import launcher as _large
from convtune.kernels.winograd_tf32 import launcher as _tc
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["FAMILY", "POINTS", "SOURCE", "TOLERANCE", "FusedKernels", "UnfusedFilters", "UnfusedKernels",
           "Winograd3xTf32Config", "Winograd3xTf32Plan", "applies", "compile_plan", "derive_plan", "enumerate_plans",
           "filters_key", "grid_size", "launch", "m_offset_bytes", "onchip_words", "plan", "prepare_filters",
           "prepare_plan", "space", "supports", "tolerance", "total_traffic_words", "traffic_words", "workspace"]

FAMILY = "winograd_unfused_3xtf32"
SOURCE = "winograd_unfused_r_3xtf32.cu"
ENTRY = _tc.ENTRY
#: the filter sizes and, per size, the output tiles m: the fp32 unfused families' (3×3: F(2), F(4); 5×5, 7×7)
POINTS = {3: POINTS_BY_R[3], **_large.POINTS}
#: relative error against float64 a config must meet, per (m, r): the fp32 unfused families' gates (module docstring)
TOLERANCE = {**{(m, 3): tol for m, tol in _wino3.TOLERANCE.items()}, **_large.TOLERANCE}
PRODUCTS = 3


@dataclass(frozen=True, slots=True)
class Winograd3xTf32Config(_tc.WinogradUnfusedTf32Config):
    """The TF32 family's GEMM block and pipeline, F(m×m, r×r) with the problem's r (3, 5 or 7; not searched)."""

    family = FAMILY
    direction = "fwd"
    products = PRODUCTS

    r: int = 5
    fuse: int = field(default=0, metadata={"min": 0})   # 1: GEMMs and output transform in one kernel (M stays on
                                                       # chip); 0: the unfused path's three kernels

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    @property
    def output_registers(self) -> int:
        """The fused kernel's outputs per thread: m² for each of its 4·MI·NI accumulators (0 unfused)."""
        return _fused_outputs(self.to_dict()) if self.fuse else 0


@dataclass(frozen=True, slots=True)
class Winograd3xTf32Plan(_tc.WinogradUnfusedTf32Plan):
    """The unfused geometry; the large family's F(m, r) transforms around the 3xTF32 GEMM entry, or (``fuse``) the
    input transform and the fused GEMM + output transform kernel, whose grid has no frequency axis and whose
    workspace is V alone."""

    @property
    def fused(self) -> bool:
        return bool(cast(Winograd3xTf32Config, self.config).fuse)

    def traffic(self) -> dict[str, int]:
        """The unfused path's words; fused, M is neither stored nor loaded."""
        words = _fp32.traffic_words(self)
        if self.fused:
            words["m_store"] = words["m_load"] = 0
        return words

    @property
    def grid(self) -> tuple[int, int, int]:
        """The GEMM's grid; fused, one block per (BT tiles, BK channels) walks every frequency."""
        gx, gy, gz = super(Winograd3xTf32Plan, self).grid
        return (gx, gy, 1) if self.fused else (gx, gy, gz)

    @property
    def workspace_bytes(self) -> int:
        """V and M in fp32; fused, V alone."""
        if self.fused:
            return 4 * self.config.points * self.tp * self.cp
        return super(Winograd3xTf32Plan, self).workspace_bytes

    def template_args(self) -> tuple[int, ...]:
        """The GEMM body's template arguments, or (fused) winograd_fused_out_body's: m, r, then the GEMM block's."""
        c = cast(Winograd3xTf32Config, self.config)
        if self.fused:
            return (c.m, c.r, c.tile_k, c.tile_t, c.chunk_c, c.warps_k, c.warps_t, c.stages)
        return _tc.WinogradUnfusedTf32Plan.template_args(self)

    def source(self) -> str:
        """Self-contained CUDA text: the F(m, r) transforms and fold table, the family source and the entries (the
        three unfused ones, or the input transform's and the fused kernel's)."""
        c = cast(Winograd3xTf32Config, self.config)
        if self.fused:
            targs = ", ".join(str(a) for a in self.template_args())
            return _family_source(c.m, c.r) + FUSED_ENTRIES.format(
                transform_threads=_fp32.TRANSFORM_THREADS, m=c.m, r=c.r, threads=c.threads, targs=targs)
        gemm = _tc.GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m, c.r) + _large.ENTRIES_AROUND.format(
            transform_threads=_fp32.TRANSFORM_THREADS, m=c.m, r=c.r, gemm=gemm)


FUSED_ENTRY = "winograd_fused_out"
FUSED_ENTRIES = """
extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_input(const float* __restrict__ x, float* __restrict__ V, int C, int H, int W, int pad_h, int pad_w,
               int tiles_p, int tiles_q, int tiles, int Cp, int Tp) {{
  convtune::winograd_input_body_r<{m}, {r}>(x, V, C, H, W, pad_h, pad_w, tiles_p, tiles_q, tiles, Cp, Tp);
}}
extern "C" __global__ void __launch_bounds__({threads})
winograd_fused_out(const float* __restrict__ U, const float* __restrict__ V, float* __restrict__ y, int Cp, int Kp,
                   int Tp, int K, int P, int Q, int tiles_p, int tiles_q, int tiles) {{
  convtune::winograd_fused_out_body<{targs}>(U, V, y, Cp, Kp, Tp, K, P, Q, tiles_p, tiles_q, tiles);
}}
"""


def fold_coefficients(m: int, r: int) -> list[list[list[Fraction]]]:
    """coef[ξ][i][j] = Aᵀ[i][a]·Aᵀ[j][b] for ξ = a·α + b (exact): Y = Aᵀ M A = Σ_ξ coef[ξ] · M_ξ, the output transform
    as the fused kernel applies it one frequency at a time."""
    at = cook_toom(m, r)[0]
    alpha = m + r - 1
    return [[[at[i][a] * at[j][b] for j in range(m)] for i in range(m)]
            for a in range(alpha) for b in range(alpha)]


def fold_table(m: int, r: int) -> str:
    """``wino_fold_coef`` (:func:`fold_coefficients`) as a ``__constant__`` array of float literals."""
    rows = ",\n".join("  {" + ", ".join("{" + ", ".join(float_literal(v) for v in row) + "}" for row in xi) + "}"
                      for xi in fold_coefficients(m, r))
    alpha = m + r - 1
    return f"__constant__ float wino_fold_coef[{alpha * alpha}][{m}][{m}] = {{\n{rows}}};\n"


@cache
def _family_source(m: int, r: int) -> str:
    return device_code(m, r) + fold_table(m, r) + kernel_text(SOURCE)


def applies(problem: ConvProblem) -> str | None:
    """Why the family cannot run ``problem`` (None when it can): the 3×3 Winograd paths' or the large family's."""
    p = problem
    if p.R == p.S == 3:
        return _wino3.applies(p)
    why = _large.applies(p)
    return why.replace("square 5×5 or 7×7", "square 3×3, 5×5 or 7×7") if why else None


def supports(problem: ConvProblem) -> bool:
    """The fp32 Winograd paths' problems (:func:`applies`)."""
    return applies(problem) is None


def derive_plan(problem: ConvProblem, config: Winograd3xTf32Config,
                machine: MachineModel | None = None) -> Winograd3xTf32Plan:
    """The plan of a config that keeps the space's rules; refuses what breaks the register limit, ``machine``'s
    limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    return cast(Winograd3xTf32Plan, _tc.derive_plan(problem, config, machine, Winograd3xTf32Plan))


@experimental.cached_per_names
def space(problem: ConvProblem) -> SearchSpace:
    """The TF32 family's GEMM values, rules and pruning under this family's problem and m rules (:data:`POINTS`), and
    r (the problem's filter size)."""
    p = problem
    points = POINTS.get(p.R, {})
    passes, pass_values = _fp32.pass_rule(p, p.R, tuple(points))
    rules = (*_wino_space.problem_rules(p, applies(p), points, f"F(m×m,{p.R}×{p.S}) 3xTF32"),
             Rule("r", ("r",), lambda v: v["r"] == p.R, f"r={{r}}: the filter is {p.R}×{p.S}"),
             *_tc.gemm_rules(),
             passes,
             Rule("fuse", ("fuse", "m", "tile_k", "tile_t", "warps_k", "warps_t", "images_per_pass"),
                  lambda v: v["fuse"] in (0, 1) and (not v["fuse"] or (_fused_outputs(v) <= MAX_FUSED_OUTPUTS
                                                                       and v["images_per_pass"] == 0)),
                  lambda v: f"fuse={v['fuse']}: 0 or 1, and fused a thread's m² outputs per accumulator "
                            f"({_fused_outputs(v)}) must stay ≤ {MAX_FUSED_OUTPUTS} registers and the batch run in "
                            f"one pass (images_per_pass={v['images_per_pass']})", field="fuse"))
    values = {"m": tuple(sorted(points)) or (2,), "r": (p.R,), **_tc.GEMM_VALUES, "images_per_pass": pass_values,
              "fuse": (0, 1)}
    return SearchSpace(values, rules, _tc.gemm_prune(p))


#: the fused kernel's output registers per thread at most (4·MI·NI·m²: two m16n8 tiles at F(4×4))
MAX_FUSED_OUTPUTS = 128


def _fused_outputs(v: Any) -> int:
    """4·MI·NI·m²: a thread's m² outputs for each of its accumulators (``v``: a config's values)."""
    mi, ni = v["tile_k"] // v["warps_k"] // 16, v["tile_t"] // v["warps_t"] // 8
    return 4 * mi * ni * v["m"] * v["m"]


def grid_size(problem: ConvProblem) -> int:
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[Winograd3xTf32Plan]:
    """Every valid (config, plan) of the family for ``problem`` on ``machine``."""
    return _fp32.enumerate_valid(problem, machine, space(problem), Winograd3xTf32Config, derive_plan)


def plan(problem: ConvProblem, config: Winograd3xTf32Config,
         machine: MachineModel | None = None) -> Winograd3xTf32Plan:
    """Validate ``config`` for ``problem`` (:func:`space`'s rules, then the derived geometry's limits).

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)


def onchip_words(pl: Winograd3xTf32Plan) -> int:
    """Fast memory one GEMM block holds: every shared-memory stage plus the BK × BT accumulators (and, fused, the
    m² outputs of each)."""
    c = cast(Winograd3xTf32Config, pl.config)
    return _tc.onchip_words(pl) + c.output_registers * c.threads


def traffic_words(pl: Winograd3xTf32Plan) -> dict[str, int]:
    """:meth:`Winograd3xTf32Plan.traffic`: the unfused path's words, without M's when fused."""
    return pl.traffic()


def total_traffic_words(pl: Winograd3xTf32Plan) -> int:
    return sum(traffic_words(pl).values())


def filters_key(pl: Winograd3xTf32Plan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result: U and the workspace are the fp32 unfused
    family's of the same r (3×3: ``winograd_unfused``; 5×5, 7×7: ``winograd_unfused_large``), whose keys these are;
    fused plans' workspace (V alone) is their own."""
    c = cast(Winograd3xTf32Config, pl.config)
    if pl.fused:
        return (FAMILY, "fused", c.m, c.r, pl.cp, pl.kp, pl.tp)
    return _fp32.filters_key(pl) if c.r == 3 else (_large.FAMILY, c.m, c.r, pl.cp, pl.kp, pl.tp)


# ---- launching: the unfused plans are the TF32 family's three launches; a fused plan runs two ------------------
@dataclass(frozen=True, slots=True)
class FusedKernels:
    """The input transform and the fused GEMM + output transform; ``resources`` are the fused kernel's."""

    input: LoadedKernel
    gemm: LoadedKernel

    @property
    def resources(self) -> Any:
        return self.gemm.resources

    @property
    def compile_s(self) -> float:
        return self.input.compile_s + self.gemm.compile_s


def compile_plan(pl: Winograd3xTf32Plan) -> UnfusedKernels | FusedKernels:
    """The plan's entries from one module (:meth:`Winograd3xTf32Plan.source`)."""
    if not pl.fused:
        return _tc.compile_plan(pl)
    text = pl.source()
    return FusedKernels(load_kernel(text, "winograd_input"), load_kernel(text, FUSED_ENTRY, pl.smem_bytes))


def prepare_plan(pl: Winograd3xTf32Plan, device: int = 0, kernels: Any = None) -> PreparedLaunch:
    """The prepared launch: operands (x, filters = U, y, workspace = V, then M unfused). Unfused: the TF32 family's
    three launches; fused: the input transform, then the fused kernel reading U and V and writing y."""
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    if not pl.fused:
        return _tc.prepare_plan(pl, device, kernels)
    p, c = pl.problem, pl.config
    steps = [
        Launch(kernels.input, grid3(pl.input_grid), (_fp32.TRANSFORM_THREADS, 1, 1), 0, pointers(0, (3, 0)),
               (p.C, p.H, p.W, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, pl.tiles, pl.cp, pl.tp)),
        Launch(kernels.gemm, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(1, (3, 0), 2),
               (pl.cp, pl.kp, pl.tp, p.K, p.P, p.Q, pl.tiles_p, pl.tiles_q, pl.tiles)),
    ]
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y", "workspace"), steps=steps,
                          kernels=kernels, workspace_bytes=pl.workspace_bytes, filters=pl.filter_layout(device),
                          output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: Winograd3xTf32Plan, kernels: Any, x: Any, filters: UnfusedFilters, y: Any,
           stream: Any | None = None) -> None:
    """The unfused path's :func:`~convtune.kernels.winograd.unfused.launch` over this family's prepared launch."""
    _fp32.launch(pl, kernels, x, filters, y, stream, prepare=prepare_plan)


def tolerance(pl: Any) -> float:
    return TOLERANCE[(pl.config.m, pl.config.r)]
