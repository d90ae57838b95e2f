"""A toy kernel family outside convtune, model-only: what a plugin family needs and nothing more.

It registers itself through the entry point in ``convtune_toy-0.dist-info/entry_points.txt``
(``[convtune.families] toy = convtune_toy``); ``tests/kernels/test_family_plugin.py`` puts this folder on
PYTHONPATH and tunes it with ``convtune tune --families toy --backend model``. Its one tuning parameter, ``block``,
only changes the modelled time; it has no launcher of its own (``launcher`` is this module, whose functions
refuse to run).
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.config import KernelConfig
from convtune.kernels.spec import KernelSpec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

BLOCKS = (1, 2, 4, 8)


@dataclass(frozen=True, slots=True)
class ToyFwdConfig(KernelConfig):
    family = "toy"
    direction = "fwd"
    block: int = 1


@dataclass(frozen=True, slots=True)
class ToyPlan:
    """A plan: the problem, the config and a launch geometry (convtune.kernels.protocols.Plan)."""

    problem: ConvProblem
    config: ToyFwdConfig
    threads: int = 32
    smem_bytes: int = 0
    regs_estimate: int = 16


def supports(problem: ConvProblem) -> bool:
    return problem.groups == 1 and not problem.causal


def plan(problem: ConvProblem, config: ToyFwdConfig, machine: MachineModel | None = None) -> ToyPlan:
    if config.block not in BLOCKS:
        raise InvalidConfig("block", f"{config.block} is not one of {BLOCKS}")
    return ToyPlan(problem, config, threads=32 * config.block)


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[ToyPlan]:
    return (plan(problem, ToyFwdConfig(block=b), machine) for b in BLOCKS)


def traffic_words(pl: ToyPlan) -> int:
    p = pl.problem
    return p.input_elements + p.weight_elements + p.output_elements


def predict_s(pl: ToyPlan, machine: MachineModel) -> float:
    return 1e-5 * (1.0 + 1.0 / pl.config.block)


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    return [("toy", 2.0 * problem.macs_nonpad, float(problem.input_elements + problem.output_elements))]


def _refuse(*args: Any) -> Any:
    raise InvalidConfig("config", "the toy family is model-only")


compile_plan = prepare_filters = filters_key = launch = tolerance = prepare_plan = _refuse

SPECS: tuple[KernelSpec, ...] = (
    KernelSpec(
        family="toy", direction="fwd", source="toy_fwd.cu", entry="toy_fwd", config_class=ToyFwdConfig,
        supports=supports, enumerate_plans=enumerate_plans, plan=plan, predict_s=predict_s,
        traffic_words=traffic_words, onchip_words=lambda pl: pl.threads,
        bound_words=lambda pl, s_words: float(pl.problem.input_elements + pl.problem.output_elements),
        grid_size=lambda problem: len(BLOCKS), floor_work=floor_work,
        launcher=sys.modules[__name__], description="toy family (tests): model only",
        source_dirs=(Path(__file__).resolve().parent,),
    ),
)
