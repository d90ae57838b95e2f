"""The provisional answer for a problem nothing was measured for: the analytic model's fastest config.

Ranking a family's whole space takes one to a few seconds for a new shape, so answers are cached per
(problem, machine); the cache is bounded.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache

from convtune.kernels.config import KernelConfig
from convtune.kernels.registry import model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.analysis import floor_time_s

CACHE_SIZE = 4096


@dataclass(frozen=True, slots=True)
class Prediction:
    """The model's best configuration of a problem on a machine, with its predicted time and the floor."""

    machine: str
    config: KernelConfig
    time_ms: float
    floor_ms: float

    @property
    def efficiency(self) -> float:
        return self.floor_ms / self.time_ms if self.time_ms > 0 else 0.0


@lru_cache(maxsize=CACHE_SIZE)
def predict(problem: ConvProblem, machine: MachineModel) -> Prediction | None:
    """The fastest predicted configuration over every family that can run ``problem`` (ties: the smaller
    config key, as the tuner's ranking), or ``None`` when no family has a valid configuration."""
    specs = specs_for(problem)
    best = model_fastest(problem, machine, specs)
    if best is None:
        return None
    floor_s = min(floor_time_s(problem, machine, spec) for spec in specs)
    return Prediction(machine.name, best[1], best[0] * 1e3, floor_s * 1e3)


@lru_cache(maxsize=CACHE_SIZE)
def floor_ms(problem: ConvProblem, machine: MachineModel) -> float | None:
    """The lowest floor time over the families that can run ``problem``, or ``None`` when none can."""
    specs = specs_for(problem)
    return min(floor_time_s(problem, machine, spec) for spec in specs) * 1e3 if specs else None
