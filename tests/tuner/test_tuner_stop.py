"""Every stop criterion of the search loop, each stored as the run's stop reason (SQLite, replayed H200)."""

from __future__ import annotations

import math

from sqlalchemy import Engine
from tuner_samples import PROBLEM, config_keys, run_measurements, run_row

from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ReplayBenchmarker
from convtune.tuner.prune import Candidate
from convtune.tuner.tune import BATCH, STOP_CODES, _stop_check, _stop_reason, tune


def _finished_with(engine: Engine, run_id: int, reason: str, trials: int) -> None:
    run = run_row(engine, run_id)
    assert (run.status, run.stop_reason, run.trials_done) == ("finished", reason, trials)
    assert len(run_measurements(engine, run_id)) == trials


def test_trial_budget(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    result = tune(PROBLEM, replay, sqlite_engine, budget_trials=3, warm_start=2)
    assert result.trials == 3 and result.stop_reason == "trial budget (3) reached"
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 3)


class FakeClock:
    """Seconds that move only when told: pruning and each trial take what the test says, no wall clock."""

    def __init__(self, step_s: float = 0.0) -> None:
        self.now = 1000.0
        self.step_s = step_s  # added at every reading

    def __call__(self) -> float:
        self.now += self.step_s
        return self.now


class _Timed(ReplayBenchmarker):
    """A replay benchmarker whose every answer takes ``trial_s`` of the fake clock."""

    def __init__(self, replay: ReplayBenchmarker, clock: FakeClock, trial_s: float) -> None:
        self.__dict__.update(replay.__dict__)
        self.clock, self.trial_s = clock, trial_s

    def measure(self, problem: object, plan: object):  # type: ignore[override]
        self.clock.now += self.trial_s
        return super().measure(problem, plan)


def _slow_pruning(monkeypatch, clock: FakeClock, seconds: float) -> None:
    """Pruning takes ``seconds`` of the fake clock (it really takes milliseconds)."""
    from convtune.tuner import tune as tune_module

    real = tune_module.prune

    def prune(*args, **kwargs):
        readings = []

        def slow() -> float:  # read twice by prune(): at its start, then `seconds` later at its end
            clock.now += seconds if readings else 0.0
            readings.append(clock.now)
            return clock.now
        kwargs["clock"] = slow
        return real(*args, **kwargs)

    monkeypatch.setattr(tune_module, "prune", prune)


def test_time_budget_is_search_time_after_pruning(sqlite_engine: Engine, replay: ReplayBenchmarker,
                                                  monkeypatch) -> None:
    """Pruning takes 100 s of a 10 s budget: the budget is search time, so trials of 3 s run until 10 s of
    search have passed (4 trials: 3, 6, 9, then 12 >= 10), after the warm start of 2."""
    clock = FakeClock()
    _slow_pruning(monkeypatch, clock, 100.0)
    bench = _Timed(replay, clock, 3.0)
    result = tune(PROBLEM, bench, sqlite_engine, budget_s=10.0, warm_start=2, clock=clock)
    assert result.stop_code == "budget_s" and result.stop_reason == "time budget (10 s) reached"
    assert result.trials == 4 == len(bench.measured)
    assert result.pruning_s == 100.0 and result.search_s >= 12.0
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 4)
    assert run_row(sqlite_engine, result.run_id).pruning_s == 100.0  # stored apart from the search


def test_time_budget_measures_the_whole_warm_start(sqlite_engine: Engine, replay: ReplayBenchmarker,
                                                   monkeypatch) -> None:
    """A budget smaller than one trial: the warm start (8 best predictions) is measured all the same (a job
    never ends before its warm start), then the budget stops the run cleanly."""
    clock = FakeClock()
    _slow_pruning(monkeypatch, clock, 50.0)
    bench = _Timed(replay, clock, 5.0)
    result = tune(PROBLEM, bench, sqlite_engine, budget_s=1e-6, warm_start=8, clock=clock)
    assert result.trials == 8 and len(bench.measured) == 8
    assert result.stop_code == "budget_s" and result.stop_reason == "time budget (1e-06 s) reached"
    assert result.best_config is not None and result.time_ms > 0 and result.floor_ms > 0
    _finished_with(sqlite_engine, result.run_id, result.stop_reason, 8)
    with session_scope(sqlite_engine) as session:
        assert repo.find_best_config(session, problem_key=PROBLEM) is not None
        assert repo.pruning_stage_counts(session, result.run_id)["kept"] > 0  # decisions are stored all the same


def test_no_warm_start_still_measures_one_trial(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    clock = FakeClock()
    bench = _Timed(replay, clock, 5.0)
    result = tune(PROBLEM, bench, sqlite_engine, budget_s=1e-6, warm_start=0, clock=clock)
    assert result.trials == 1 and result.stop_code == "budget_s"


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
    result = tune(PROBLEM, bench, sqlite_engine, budget_s=1e-6, warm_start=4, clock=FakeClock(step_s=1.0))
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


def test_stop_codes() -> None:
    floor = 0.1e-3
    assert _stop_check(5, 5, 99.0, 10.0, 9, 3, floor * 1e3, floor, 0.05)[0] == "budget_trials"
    assert _stop_check(4, 5, 10.0, 10.0, 9, 3, 0.1, floor, 0.05)[0] == "budget_s"
    assert _stop_check(4, 5, 10.0, 10.0, 9, 3, 0.1, floor, 0.05, time_may_stop=False)[0] == "patience"
    assert _stop_check(4, 5, 1.0, 10.0, 2, 3, 0.104, floor, 0.05)[0] == "floor"
    assert _stop_check(4, 5, 1.0, 10.0, 2, 3, 0.106, floor, 0.05) == ("", "")
    assert {"budget_trials", "budget_s", "patience", "floor", "target", "exhausted"} <= set(STOP_CODES)


def test_stop_reason_order_and_thresholds() -> None:
    floor = 1e-4
    assert _stop_reason(0, 5, 0.0, 10.0, 0, 3, math.inf, floor, 0.05) == ""
    assert _stop_reason(5, 5, 99.0, 10.0, 9, 3, floor * 1e3, floor, 0.05) == "trial budget (5) reached"
    assert _stop_reason(4, 5, 10.0, 10.0, 9, 3, 0.1, floor, 0.05) == "time budget (10 s) reached"
    assert _stop_reason(4, 5, 1.0, 10.0, 3, 3, 0.1, floor, 0.05) == "no improvement in 3 trials"
    assert _stop_reason(4, 5, 1.0, 10.0, 2, 3, 0.104, floor, 0.05) == "best time within 5% of the bound's floor time"
    assert _stop_reason(4, 5, 1.0, 10.0, 2, 3, 0.106, floor, 0.05) == ""
