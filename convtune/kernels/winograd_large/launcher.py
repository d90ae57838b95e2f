"""Unfused Winograd F(m×m, r×r) forward for large filters (family ``winograd_unfused_large``): 5×5 and 7×7, stride 1,
dilation 1, fp32 — the 3×3 unfused path's dataflow with α = m + r − 1: input transform, α² batched GEMMs (the same
tuned SGEMM), output transform.

Why: a 5×5 layer has 25 MACs per output and channel; F(4×4, 5×5) needs α²/m² = 4 multiplications (6.25× fewer),
F(2×2, 5×5) 9 (2.8×); a 7×7 layer 49, F(2×2, 7×7) 16 (3.1×). cuDNN fp32 runs AlexNet's conv2 (5×5, 27×27 maps) at
167 "TFLOP/s" of direct work — a reduced-multiplication algorithm — where the direct and implicit-GEMM families reach
about 32.

Config: the 3×3 unfused path's fields (m, the GEMM's tiles and pipeline) and ``r``, the filter size its transforms are
built for (the problem's R = S; a rule). Shapes (fp32, contiguous): x (N, C, H, W); w (K, C, r, r) -> U (α², Cp, Kp)
(:func:`~convtune.kernels.winograd.launcher.transform_filters`, or the filter kernel); workspace V (α², Cp, Tp) and
M (α², Kp, Tp); y (N, K, P, Q), P = H + 2·pad_h − (r − 1). Tiles T = N·⌈P/m⌉·⌈Q/m⌉, Tp = ⌈T/BT⌉·BT, Cp = ⌈C/BC⌉·BC,
Kp = ⌈K/BK⌉·BK. Traffic in words, exactly what the kernels request: :func:`convtune.kernels.winograd.unfused.
traffic_words` (its formula holds for any α). Kernels: ``winograd_unfused_r.cu`` (the transforms with r a template
parameter; the GEMM is ``winograd_unfused.cu``'s, included, so the 3×3 families' sources and versions are untouched).

Accuracy (relative error ‖y − y64‖₂ / ‖y64‖₂): an fp32 emulation of this dataflow (C = K = 64, normal inputs) gives
8.4e-7 for F(2×2, 5×5), 2.2e-6 for F(4×4, 5×5) and 2.9e-6 for F(2×2, 7×7), against 7.7e-7 for F(4×4, 3×3), which
measured 1.1e-6–2.9e-6 on the H200 under the 3×3 family's gate of 1e-4; :data:`TOLERANCE` keeps that gate's margin.
F(4×4, 7×7) would emulate at ≥ 4.5e-5: not provided.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import cast

from convtune.kernels import experimental
from convtune.kernels.compile import kernel_text
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _fp32
from convtune.kernels.winograd.transforms import POINTS_BY_R, device_code
from convtune.kernels.winograd.unfused import (  # the 3×3 path's workspace, launches and traffic serve unchanged
    UnfusedFilters,
    UnfusedKernels,
    WinogradUnfusedConfig,
    WinogradUnfusedPlan,
    compile_plan,
    launch,
    m_offset_bytes,
    onchip_words,
    prepare_filters,
    prepare_plan,
    total_traffic_words,
    traffic_words,
    workspace,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = [
    "FAMILY",
    "SOURCE",
    "TOLERANCE",
    "UnfusedFilters",
    "UnfusedKernels",
    "WinogradLargeConfig",
    "WinogradLargePlan",
    "applies",
    "compile_plan",
    "derive_plan",
    "enumerate_plans",
    "filters_key",
    "grid_size",
    "launch",
    "m_offset_bytes",
    "onchip_words",
    "plan",
    "prepare_filters",
    "prepare_plan",
    "space",
    "supports",
    "tolerance",
    "total_traffic_words",
    "traffic_words",
    "workspace",
]

FAMILY = "winograd_unfused_large"
SOURCE = "winograd_unfused_r.cu"
ENTRY = "winograd_gemm"
#: the filter sizes and, per size, the output tiles m the family provides
POINTS = {r: POINTS_BY_R[r] for r in (5, 7)}
#: relative error against float64 a config must meet to be measured or served, per (m, r) (module docstring)
TOLERANCE = {(2, 5): 5e-5, (4, 5): 2e-4, (2, 7): 2e-4}


@dataclass(frozen=True, slots=True)
class WinogradLargeConfig(WinogradUnfusedConfig):
    """The 3×3 unfused path's tunable parameters (m, the GEMM's tiles and pipeline) and the filter size r of
    F(m×m, r×r) (the problem's; not searched)."""

    family = FAMILY
    direction = "fwd"

    r: int = 5

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1


@dataclass(frozen=True, slots=True)
class WinogradLargePlan(WinogradUnfusedPlan):
    """The unfused plan's geometry with the F(m, r) transforms' entries."""

    def source(self) -> str:
        """Self-contained CUDA text: the F(m, r) transforms, the family source and the three entries."""
        c = cast(WinogradLargeConfig, self.config)
        gemm = _fp32.GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m, c.r) + ENTRIES_AROUND.format(transform_threads=_fp32.TRANSFORM_THREADS, m=c.m,
                                                                r=c.r, gemm=gemm)


ENTRIES_AROUND = """
extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_input(const float* __restrict__ x, float* __restrict__ V, int C, int H, int W, int pad_h, int pad_w,
               int tiles_p, int tiles_q, int tiles, int Cp, int Tp) {{
  convtune::winograd_input_body_r<{m}, {r}>(x, V, C, H, W, pad_h, pad_w, tiles_p, tiles_q, tiles, Cp, Tp);
}}
{gemm}extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_output(const float* __restrict__ Mi, float* __restrict__ y, int K, int P, int Q, int tiles_p, int tiles_q,
                int tiles, int Kp, int Tp) {{
  convtune::winograd_output_body_r<{m}, {r}>(Mi, y, K, P, Q, tiles_p, tiles_q, tiles, Kp, Tp);
}}
"""


@cache
def _family_source(m: int, r: int) -> str:
    return device_code(m, r) + kernel_text(SOURCE)


def applies(problem: ConvProblem) -> str | None:
    """Why the family cannot run ``problem`` (None when it can)."""
    p = problem
    if p.groups != 1 or p.causal:
        return "groups=1 2-D convolutions only"
    if p.dtype != "float32":
        return f"float32 only, got {p.dtype}"
    if p.R != p.S or p.R not in POINTS:
        return f"square {' or '.join(f'{r}×{r}' for r in POINTS)} filters only, got {p.R}×{p.S}"
    if (p.stride_h, p.stride_w) != (1, 1) or (p.dil_h, p.dil_w) != (1, 1):
        return "stride 1 and dilation 1 only"
    return None


def supports(problem: ConvProblem) -> bool:
    return applies(problem) is None


def derive_plan(problem: ConvProblem, config: WinogradLargeConfig,
                machine: MachineModel | None = None) -> WinogradLargePlan:
    """The plan of a config that keeps the space's rules; refuses what breaks the register limit, ``machine``'s
    limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    return cast(WinogradLargePlan, _fp32.derive_plan(problem, config, machine, WinogradLargePlan))


@experimental.cached_per_names
def space(problem: ConvProblem) -> SearchSpace:
    """The 3×3 unfused path's GEMM space under this family's rules: the problem (5×5 or 7×7, stride 1), m (the tiles
    provided for the problem's filter size) and r (the problem's filter size)."""
    p = problem
    rules = (*_wino_space.problem_rules(p, applies(p), POINTS.get(p.R, {}), f"F(m×m,{p.R}×{p.S})"),
             Rule("r", ("r",), lambda v: v["r"] == p.R, f"r={{r}}: the filter is {p.R}×{p.S}"))
    return _wino_space.unfused_space_with(p, rules, {"r": (p.R,)}, r=p.R)


def grid_size(problem: ConvProblem) -> int:
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradLargePlan]:
    """Every valid (config, plan) of the family for ``problem`` on ``machine``."""
    return _fp32.enumerate_valid(problem, machine, space(problem), WinogradLargeConfig, derive_plan)


def plan(problem: ConvProblem, config: WinogradLargeConfig,
         machine: MachineModel | None = None) -> WinogradLargePlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then the derived geometry's limits) and
    derive the plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)


def filters_key(pl: WinogradLargePlan) -> tuple[object, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace depends on Tp)."""
    c = cast(WinogradLargeConfig, pl.config)
    return (FAMILY, c.m, c.r, pl.cp, pl.kp, pl.tp)


def tolerance(pl: WinogradLargePlan) -> float:
    c = cast(WinogradLargeConfig, pl.config)
    return TOLERANCE[(c.m, c.r)]
