"""Benchmarkers that take a while per answer — for tests that stop, cancel or kill workers mid-job.

``convtune worker --trial-delay-s S`` (and :func:`convtune.service.runner.benchmarker_factory`'s
``trial_delay_s``) answers replay and model trials through these; nothing else uses them.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker, ReplayTable, TrialResult


class _Delayed:
    """Mixin: each answer takes ``delay_s`` first, like a (very fast) GPU, so that tests can stop or kill
    workers mid-job."""

    delay_s: float = 0.0

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        time.sleep(self.delay_s)
        return super().measure(problem, plan)  # type: ignore[misc]


class DelayedReplayBenchmarker(_Delayed, ReplayBenchmarker):
    """:class:`ReplayBenchmarker` taking ``delay_s`` per answer."""

    def __init__(self, table: ReplayTable | str | Path, delay_s: float) -> None:
        super().__init__(table)
        self.delay_s = delay_s


class DelayedModelBenchmarker(_Delayed, ModelBenchmarker):
    """:class:`ModelBenchmarker` taking ``delay_s`` per answer."""

    def __init__(self, machine: MachineModel, delay_s: float) -> None:
        super().__init__(machine)
        self.delay_s = delay_s
