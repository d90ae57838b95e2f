"""A replay benchmarker that dies or hangs on purpose — it exists for testing recovery.

:class:`FaultyReplayBenchmarker` answers like :class:`~convtune.tuner.benchmark.ReplayBenchmarker`,
except for the configurations it is told to fail on: for a key in ``crash_on`` the process ends at
once with ``os._exit`` (no cleanup, no reply: what an illegal-address fault or a ``SIGKILL`` looks like
to the parent), and for a key in ``hang_on`` it never answers (what a kernel stuck in an endless loop
looks like). Run it inside :class:`~convtune.tuner.trial_process.SubprocessBenchmarker` through the factory
``"convtune.testing.faulty_benchmarker:FaultyReplayBenchmarker"``; never in the tuner's own process.
"""

from __future__ import annotations

import os
import time
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable, TrialResult

#: Exit status of a simulated crash (the number a ``SIGKILL`` carries).
CRASH_EXIT_CODE = 9


class FaultyReplayBenchmarker(ReplayBenchmarker):
    """A :class:`ReplayBenchmarker` that crashes the process or hangs on chosen configurations.

    Args:
        table_path: the replay table (a path, or a loaded :class:`ReplayTable`).
        crash_on: config keys whose ``measure`` ends the process with ``os._exit(exit_code)``.
        hang_on: config keys whose ``measure`` sleeps forever.
        exit_code: the exit status of a simulated crash.

    Example:
        >>> SubprocessBenchmarker("convtune.testing.faulty_benchmarker:FaultyReplayBenchmarker",
        ...                       {"table_path": "tests/data/replay_h200_vs_cudnn.json.gz",
        ...                        "crash_on": [key]}, timeout_s=5, backend="replay")
    """

    def __init__(self, table_path: ReplayTable | str | Path, crash_on: Iterable[str] = (),
                 hang_on: Iterable[str] = (), exit_code: int = CRASH_EXIT_CODE) -> None:
        super().__init__(table_path)
        self.crash_on = frozenset(crash_on)
        self.hang_on = frozenset(hang_on)
        self.exit_code = exit_code

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        key = plan.config.key()
        if key in self.crash_on:
            os._exit(self.exit_code)
        if key in self.hang_on:
            while True:
                time.sleep(3600)
        return super().measure(problem, plan)
