"""Enumeration of the depthwise kernels' configuration spaces for one problem and machine.

Each space is declared once, as data (values + named rules + pruning rules, one or more
:class:`~convtune.kernels.search_space.SearchSpace` s chained in order where one product cannot express the shape:
the warp weight gradient's two designs, the 2-D tiled kernel's list of tiles), next to the plan function that
enforces its rules: :func:`~convtune.kernels.depthwise.conv1d.plan.spaces` (1-D, re-exported as
:func:`spaces_1d`), :func:`~convtune.kernels.depthwise.conv1d.fused.space` (:func:`space_fused`) and
``conv2d.{tiled,fast,packed,dgrad,wgrad}.space`` (:func:`spaces_2d_tiled`, :func:`space_2d_fast`, …); the values
they share live in :mod:`~convtune.kernels.depthwise.values`. Each plan function calls ``space.check(config)``
and then checks what needs the derived geometry (resource limits of the machine, shapes the variant cannot take):
``enumerate_plans*`` yield what it accepts of ``configs()``. ``prune`` are the search's own rules (tiles far larger
than the sequence: a segment of G·V ≥ 2·L or a chunk of 32·V ≥ 2·L only idles lanes; several planes per block only
for small blocks).

The 2-D grid sizes are the product of the declared values; the 1-D grid sizes, as they always were, count the
1-D grid after its declared rules (the inline skips of the hand-written loops). Weight-gradient spaces include
both modes; callers that need bitwise-repeatable results keep ``mode == MODE_DETERMINISTIC``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.config import KernelConfig
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    PATHS,
    VARIANTS_1D,
    Dw2dFastDgradConfig,
    Dw2dFastFwdConfig,
    Dw2dFastWgradConfig,
    Dw2dPackedFwdConfig,
    Dw2dTiledFwdConfig,
    FusedBwdConfig,
)
from convtune.kernels.depthwise.conv1d.fused import FusedPlan
from convtune.kernels.depthwise.conv1d.fused import plan as plan_fused
from convtune.kernels.depthwise.conv1d.fused import space as space_fused
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan, plan
from convtune.kernels.depthwise.conv1d.plan import spaces as spaces_1d
from convtune.kernels.depthwise.conv2d.dgrad import Dw2dDgradPlan
from convtune.kernels.depthwise.conv2d.dgrad import plan as plan_2d_dgrad
from convtune.kernels.depthwise.conv2d.dgrad import space as space_2d_dgrad
from convtune.kernels.depthwise.conv2d.fast import Dw2dFastPlan
from convtune.kernels.depthwise.conv2d.fast import plan as plan_2d_fast
from convtune.kernels.depthwise.conv2d.fast import space as space_2d_fast
from convtune.kernels.depthwise.conv2d.packed import Dw2dPackedPlan
from convtune.kernels.depthwise.conv2d.packed import applies as applies_packed
from convtune.kernels.depthwise.conv2d.packed import plan as plan_2d_packed
from convtune.kernels.depthwise.conv2d.packed import space as space_2d_packed
from convtune.kernels.depthwise.conv2d.tiled import Dw2dPlan, applies
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.kernels.depthwise.conv2d.tiled import spaces as spaces_2d_tiled
from convtune.kernels.depthwise.conv2d.wgrad import Dw2dWgradPlan
from convtune.kernels.depthwise.conv2d.wgrad import plan as plan_2d_wgrad
from convtune.kernels.depthwise.conv2d.wgrad import space as space_2d_wgrad
from convtune.kernels.depthwise.values import chained_configs as _chained_configs
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = [
    "enumerate_plans", "enumerate_plans_2d", "enumerate_plans_2d_dgrad", "enumerate_plans_2d_fast",
    "enumerate_plans_2d_packed", "enumerate_plans_2d_wgrad", "enumerate_plans_fused", "grid_size", "plan",
    "plans_enumerator", "replanned", "space_2d_dgrad", "space_2d_fast", "space_2d_packed", "space_2d_wgrad",
    "space_fused", "spaces_1d", "spaces_2d_tiled",
]


def replanned(problem: ConvProblem, machine: MachineModel, twins: Iterable[Any],
              plan_of: Callable[[Any], Callable[..., Any] | None]) -> Iterator[Any]:
    """The plans of a float16 / bfloat16 ``problem`` from its float32 twin's plans ``twins``: the spaces are declared
    for float32, so each twin's configuration is re-validated by the 16-bit plan function ``plan_of(twin)`` (None: a
    kernel without 16-bit storage), and those it refuses are skipped."""
    for twin in twins:
        replan = plan_of(twin)
        if replan is None:
            continue
        try:
            yield replan(problem, twin.config, machine)
        except InvalidConfig:
            continue


# ---- 1-D ----------------------------------------------------------------------------------------------------

def _raw_configs(problem: ConvProblem, variant: str, path: str) -> Iterator[KernelConfig]:
    cls: Callable[..., KernelConfig] = CONFIG_CLASSES_1D[(variant, path)]
    for values in _chained_configs(spaces_1d(problem, variant, path)):
        yield cls(**values)


def _check_variant_path(variant: str, path: str) -> None:
    if variant not in VARIANTS_1D:
        raise InvalidConfig("variant", f"{variant!r}: allowed {', '.join(VARIANTS_1D)}")
    if path not in PATHS:
        raise InvalidConfig("path", f"{path!r}: allowed {', '.join(PATHS)}")


def _runs_1d(problem: ConvProblem) -> bool:
    return problem.causal and problem.dtype == "float32" and problem.dil_w == 1


def enumerate_plans(problem: ConvProblem, machine: MachineModel, variant: str,
                    path: str) -> Iterator[Depthwise1dPlan]:
    """Every valid plan of the 1-D ``variant`` (naive … fast) and ``path`` (fwd, dgrad, wgrad)."""
    _check_variant_path(variant, path)
    if not _runs_1d(problem):
        return
    for config in _raw_configs(problem, variant, path):
        try:
            yield plan(problem, config, machine)
        except InvalidConfig:
            continue


def plans_enumerator(variant: str, path: str) -> Callable[[ConvProblem, MachineModel], Iterator[Depthwise1dPlan]]:
    """``enumerate_plans`` bound to one (variant, path): the shape the registry's rows take."""
    return lambda problem, machine: enumerate_plans(problem, machine, variant, path)


def grid_size(problem: ConvProblem, variant: str, path: str) -> int:
    """Size of the 1-D grid of one (variant, path) before the plan's checks: the declared values, less what the
    declared rules leave out (as the 1-D grids were always counted)."""
    return sum(1 for _ in _chained_configs(spaces_1d(problem, variant, path)))


def enumerate_plans_fused(problem: ConvProblem, machine: MachineModel) -> Iterator[FusedPlan]:
    """Every valid plan of the fused 1-D backward (rows, stages, vec, blocks per SM, both modes)."""
    if not _runs_1d(problem):
        return
    for values in space_fused(problem).configs():
        try:
            yield plan_fused(problem, FusedBwdConfig(**values), machine)
        except InvalidConfig:
            continue


# ---- 2-D ----------------------------------------------------------------------------------------------------

def enumerate_plans_2d(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPlan]:
    """Every valid plan of the 2-D tiled forward kernel (see :func:`spaces_2d_tiled`)."""
    if applies(problem) is not None:
        return
    for values in _chained_configs(spaces_2d_tiled(problem)):
        try:
            yield plan_2d(problem, Dw2dTiledFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_fast(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dFastPlan]:
    """Every valid plan of the fast 2-D forward kernel (see :func:`space_2d_fast`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_fast(problem).configs():
        try:
            yield plan_2d_fast(problem, Dw2dFastFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_packed(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dPackedPlan]:
    """Every valid plan of the packed 2-D forward kernel (see :func:`space_2d_packed`)."""
    if applies_packed(problem) is not None:
        return
    for values in space_2d_packed(problem).configs():
        try:
            yield plan_2d_packed(problem, Dw2dPackedFwdConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_dgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dDgradPlan]:
    """Every valid plan of the 2-D input-gradient kernel (see :func:`space_2d_dgrad`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_dgrad(problem).configs():
        try:
            yield plan_2d_dgrad(problem, Dw2dFastDgradConfig(**values), machine)
        except InvalidConfig:
            continue


def enumerate_plans_2d_wgrad(problem: ConvProblem, machine: MachineModel) -> Iterator[Dw2dWgradPlan]:
    """Every valid plan of the 2-D weight-gradient kernel (see :func:`space_2d_wgrad`)."""
    if applies(problem) is not None:
        return
    for values in space_2d_wgrad(problem).configs():
        try:
            yield plan_2d_wgrad(problem, Dw2dFastWgradConfig(**values), machine)
        except InvalidConfig:
            continue
