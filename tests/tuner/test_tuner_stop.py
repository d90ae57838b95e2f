"""Every stop criterion of the search loop, each stored as the run's stop reason (SQLite, replayed H200)."""

from __future__ import annotations

import math

from sqlalchemy import Engine
from tuner_samples import PROBLEM, config_keys, run_measurements, run_row

from convtune.storage import repository as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ReplayBenchmarker
from convtune.tuner.prune import Candidate
from convtune.tuner.tune import BATCH, _stop_reason, tune


def _finished_with(engine: Engine, run_id: int, reason: str, trials: int) -> None:
    run = run_row(engine, run_id)
    assert (run.status, run.stop_reason, run.trials_done) == ("finished", reason, trials)
    assert len(run_measurements(engine, run_id)) == trials


def test_trial_budget(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    result = tune(PROBLEM, replay, sqlite_engine, budget_trials=3, warm_start=2)
    assert result.trials == 3 and result.stop_reason == "trial budget (3) reached"
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 3)


def test_time_budget_measures_the_first_trial(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    """Pruning alone outlasts a tiny budget; the first trial is measured all the same (a job never ends
    with nothing measured because start-up ate its budget), then the budget stops the run cleanly."""
    result = tune(PROBLEM, replay, sqlite_engine, budget_s=1e-6)
    assert result.trials == 1 and len(replay.measured) == 1
    assert result.stop_reason == "time budget (1e-06 s) reached"
    assert result.best_config is not None and result.time_ms > 0 and result.floor_ms > 0
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 1)
    with session_scope(sqlite_engine) as session:
        assert repo.find_best_config(session, problem_key=PROBLEM) is not None
        assert repo.pruning_stage_counts(session, result.run_id)["kept"] > 0  # decisions are stored all the same


class _Prefetching(ReplayBenchmarker):
    """A replay benchmarker that pretends to pre-compile (as the GPU one does): the loop asks batches."""

    def __init__(self, replay: ReplayBenchmarker) -> None:
        self.__dict__.update(replay.__dict__)
        self.prefetched: list[int] = []

    def prefetch(self, problem: object, plans: list[object]) -> None:
        self.prefetched.append(len(plans))


def test_time_budget_measures_a_compiled_batch_whole(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    """With a pre-compiling benchmarker the budget is checked between batches: the first batch (warm
    start) is measured whole, and nothing more is asked."""
    bench = _Prefetching(replay)
    result = tune(PROBLEM, bench, sqlite_engine, budget_s=1e-6, warm_start=4)
    assert bench.prefetched == [BATCH]
    assert result.trials == BATCH == len(bench.measured)
    assert result.stop_reason == "time budget (1e-06 s) reached"
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, BATCH)


def test_patience(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    patience = 3
    result = tune(PROBLEM, replay, sqlite_engine, patience=patience, budget_trials=200)
    assert result.stop_reason == f"no improvement in {patience} trials"
    assert patience < result.trials < 200
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, result.trials)
    times = [m.median_ms for m in run_measurements(sqlite_engine, result.run_id)]
    best_before = min(times[:-patience])
    assert all(t >= best_before for t in times[-patience:])  # the last `patience` trials did not improve
    running = math.inf  # ... and no earlier stretch of `patience` trials went without improvement
    since = 0
    for t in times[:-patience]:
        since = 0 if t < running else since + 1
        running = min(running, t)
        assert since < patience


def test_epsilon_of_the_floor_time(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    """The measured times are 2-3x the floor; an epsilon of 10 calls the first ok trial good enough."""
    result = tune(PROBLEM, replay, sqlite_engine, epsilon=10.0)
    assert result.trials == 1
    assert result.stop_reason == "best time within 1000% of the bound's floor time"
    assert result.time_ms <= result.floor_ms * 11
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 1)


def test_every_surviving_configuration_evaluated(sqlite_engine: Engine, replay: ReplayBenchmarker,
                                                 replayable: list[Candidate]) -> None:
    result = tune(PROBLEM, replay, sqlite_engine, budget_trials=1000, patience=1000, sampler="random")
    assert result.stop_reason == "every surviving configuration was evaluated"
    assert result.trials == len(replayable) == len(replay.measured)
    stored = config_keys(sqlite_engine, run_measurements(sqlite_engine, result.run_id))
    assert sorted(stored) == sorted(c.key for c in replayable)  # each exactly once
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, len(replayable))
    assert result.best_config is not None


def test_stop_reason_order_and_thresholds() -> None:
    floor = 1e-4
    assert _stop_reason(0, 5, 0.0, 10.0, 0, 3, math.inf, floor, 0.05) == ""
    assert _stop_reason(5, 5, 99.0, 10.0, 9, 3, floor * 1e3, floor, 0.05) == "trial budget (5) reached"
    assert _stop_reason(4, 5, 10.0, 10.0, 9, 3, 0.1, floor, 0.05) == "time budget (10 s) reached"
    assert _stop_reason(4, 5, 1.0, 10.0, 3, 3, 0.1, floor, 0.05) == "no improvement in 3 trials"
    assert _stop_reason(4, 5, 1.0, 10.0, 2, 3, 0.104, floor, 0.05) == "best time within 5% of the bound's floor time"
    assert _stop_reason(4, 5, 1.0, 10.0, 2, 3, 0.106, floor, 0.05) == ""
