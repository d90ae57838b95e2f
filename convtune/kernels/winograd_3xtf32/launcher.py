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

Experimental: registered, runs nothing until ``CONVTUNE_EXPERIMENTAL`` names it (:mod:`convtune.kernels.experimental`):
its kernels have passed nvcc (no spills) and the CPU checks, not yet a GPU.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from typing import Any, cast

from convtune.kernels import experimental
from convtune.kernels.compile import kernel_text
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.kernels.winograd import launcher as _wino3
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _fp32
from convtune.kernels.winograd.transforms import POINTS_BY_R, device_code
from convtune.kernels.winograd.unfused import (  # the unfused path's workspace, filters and traffic serve unchanged
    UnfusedFilters,
    UnfusedKernels,
    launch,
    m_offset_bytes,
    prepare_filters,
    total_traffic_words,
    traffic_words,
    workspace,
)
from convtune.kernels.winograd_large import launcher as _large
from convtune.kernels.winograd_tf32 import launcher as _tc
from convtune.kernels.winograd_tf32.launcher import (  # its module, its GEMM entry; the plan's source() is ours
    compile_plan,
    prepare_plan,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["FAMILY", "POINTS", "SOURCE", "TOLERANCE", "UnfusedFilters", "UnfusedKernels", "Winograd3xTf32Config",
           "Winograd3xTf32Plan", "applies", "compile_plan", "derive_plan", "enumerate_plans", "filters_key",
           "grid_size", "launch", "m_offset_bytes", "onchip_words", "plan", "prepare_filters", "prepare_plan", "space",
           "supports", "tolerance", "total_traffic_words", "traffic_words", "workspace"]

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

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1


@dataclass(frozen=True, slots=True)
class Winograd3xTf32Plan(_tc.WinogradUnfusedTf32Plan):
    """The unfused geometry; the large family's F(m, r) transforms around the 3xTF32 GEMM entry."""

    def source(self) -> str:
        """Self-contained CUDA text: the F(m, r) transforms, the family source and the three entries."""
        c = cast(Winograd3xTf32Config, self.config)
        gemm = _tc.GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m, c.r) + _large.ENTRIES_AROUND.format(
            transform_threads=_fp32.TRANSFORM_THREADS, m=c.m, r=c.r, gemm=gemm)


@cache
def _family_source(m: int, r: int) -> str:
    return device_code(m, r) + kernel_text(SOURCE)


def applies(problem: ConvProblem) -> str | None:
    """Why the family cannot run ``problem`` (None when it can): the 3×3 Winograd paths' or the large family's."""
    p = problem
    if p.R == p.S == 3:
        return _wino3.applies(p)
    why = _large.applies(p)
    return why.replace("square 5×5 or 7×7", "square 3×3, 5×5 or 7×7") if why else None


def supports(problem: ConvProblem) -> bool:
    """The fp32 Winograd paths' problems, once the family is enabled (:mod:`convtune.kernels.experimental`)."""
    return experimental.enabled(FAMILY) and applies(problem) is None


def derive_plan(problem: ConvProblem, config: Winograd3xTf32Config,
                machine: MachineModel | None = None) -> Winograd3xTf32Plan:
    """The plan of a config that keeps the space's rules; refuses what breaks the register limit, ``machine``'s
    limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    return cast(Winograd3xTf32Plan, _tc.derive_plan(problem, config, machine, Winograd3xTf32Plan))


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The TF32 family's GEMM values, rules and pruning under this family's problem and m rules (:data:`POINTS`), and
    r (the problem's filter size)."""
    p = problem
    points = POINTS.get(p.R, {})
    rules = (*_wino_space.problem_rules(p, applies(p), points, f"F(m×m,{p.R}×{p.S}) 3xTF32"),
             Rule("r", ("r",), lambda v: v["r"] == p.R, f"r={{r}}: the filter is {p.R}×{p.S}"),
             *_tc.gemm_rules())
    values = {"m": tuple(sorted(points)) or (2,), "r": (p.R,), **_tc.GEMM_VALUES}
    return SearchSpace(values, rules, _tc.gemm_prune(p))


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
    """Fast memory one GEMM block holds: every shared-memory stage plus the BK × BT accumulators."""
    return _tc.onchip_words(pl)


def filters_key(pl: Winograd3xTf32Plan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result: U and the workspace are the fp32 unfused
    family's of the same r (3×3: ``winograd_unfused``; 5×5, 7×7: ``winograd_unfused_large``), whose keys these are."""
    c = cast(Winograd3xTf32Config, pl.config)
    return _fp32.filters_key(pl) if c.r == 3 else (_large.FAMILY, c.m, c.r, pl.cp, pl.kp, pl.tp)


def tolerance(pl: Any) -> float:
    return TOLERANCE[(pl.config.m, pl.config.r)]
