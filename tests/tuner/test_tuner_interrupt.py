"""A benchmarker that raises (a bug, a lost database) or a Ctrl-C during the search: the run is closed as
failed or cancelled, every trial finished before is kept, and a later tune picks up from there."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, config_keys, run_measurements, run_row

from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayBenchmarker, TrialResult
from convtune.tuner.prune import Candidate
from convtune.tuner.tune import tune


class RaisingReplay(ReplayBenchmarker):
    """Raises ``exc`` instead of answering the ``at``-th measurement (0-based)."""

    def __init__(self, table: Any, at: int, exc: BaseException) -> None:
        super().__init__(table)
        self.at, self.exc, self.calls = at, exc, 0

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        self.calls += 1
        if self.calls == self.at + 1:
            raise self.exc
        return super().measure(problem, plan)


@pytest.mark.parametrize(("exc", "status"), [(RuntimeError("driver went away"), "failed"),
                                             (KeyboardInterrupt(), "cancelled")], ids=["error", "ctrl-c"])
def test_an_exception_closes_the_run_and_keeps_the_finished_trials(sqlite_engine: Engine, replay_table: Any,
                                                                   replayable: list[Candidate],
                                                                   exc: BaseException, status: str) -> None:
    bench = RaisingReplay(replay_table, at=2, exc=exc)
    with pytest.raises(type(exc)):
        tune(PROBLEM, bench, sqlite_engine, budget_trials=10)
    run_id = 1  # a fresh database: the first run
    run = run_row(sqlite_engine, run_id)
    assert run.status == status and run.finished_at is not None and run.trials_done == 2
    assert run.stop_reason.startswith(type(exc).__name__)
    assert config_keys(sqlite_engine, run_measurements(sqlite_engine, run_id)) == [c.key for c in replayable[:2]]


def test_the_interrupted_trial_is_not_left_running_and_is_measured_later(sqlite_engine: Engine, replay_table: Any,
                                                                         replayable: list[Candidate]) -> None:
    with pytest.raises(RuntimeError):
        tune(PROBLEM, RaisingReplay(replay_table, at=2, exc=RuntimeError("boom")), sqlite_engine, budget_trials=10)
    retry = ReplayBenchmarker(replay_table)
    result = tune(PROBLEM, retry, sqlite_engine, budget_trials=1000, patience=1000, sampler="random")
    assert result.stop_reason == "every surviving configuration was evaluated"
    assert replayable[2].key in {key for _, key in retry.measured}  # the interrupted config is not lost
    assert len(retry.measured) == len(replayable) - 2  # nothing measured twice either
    study = optuna.load_study(study_name=run_row(sqlite_engine, result.run_id).study_name,
                              storage=sqlite_engine.url.render_as_string(hide_password=False))
    assert optuna.trial.TrialState.RUNNING not in [t.state for t in study.trials]
