"""Fault tolerance: trials in a restartable child process that crashes (os._exit, SIGKILL) or hangs.

The child runs :class:`~convtune.testing.faulty_benchmarker.FaultyReplayBenchmarker`, which answers from the H200
replay table except for the configurations it is told to die or hang on.
"""

from __future__ import annotations

import os
import signal
import time
from collections.abc import Iterator

import optuna
import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, REPLAY_PATH, config_keys, run_measurements, run_row

from convtune.testing import faulty_benchmarker
from convtune.testing.faulty_benchmarker import CRASH_EXIT_CODE, FaultyReplayBenchmarker
from convtune.tuner.benchmark import ReplayTable
from convtune.tuner.prune import Candidate
from convtune.tuner.trial_process import SubprocessBenchmarker, WorkerDied
from convtune.tuner.tune import tune

FACTORY = "convtune.testing.faulty_benchmarker:FaultyReplayBenchmarker"
TIMEOUT_S = 2.0

def _worker(crash_on: list[str] = (), hang_on: list[str] = ()) -> SubprocessBenchmarker:  # type: ignore[assignment]
    return SubprocessBenchmarker(FACTORY, {"table_path": str(REPLAY_PATH), "crash_on": list(crash_on),
                                           "hang_on": list(hang_on)},
                                 timeout_s=TIMEOUT_S, start_timeout_s=60, backend="replay")


@pytest.fixture
def faulty(replayable: list[Candidate]) -> Iterator[SubprocessBenchmarker]:
    bench = _worker(crash_on=[replayable[1].key], hang_on=[replayable[2].key])
    try:
        yield bench
    finally:
        bench.close()


def test_faulty_replay_benchmarker_answers_like_the_table_elsewhere(replay_table: ReplayTable,
                                                                    replayable: list[Candidate]) -> None:
    bench = FaultyReplayBenchmarker(replay_table, crash_on=[replayable[0].key], hang_on=[replayable[1].key])
    result = bench.measure(PROBLEM, replayable[3].plan)
    assert result.ok and result.median_ms == replay_table.problems[PROBLEM.key()][replayable[3].key]["median_ms"]
    assert bench.crash_on == {replayable[0].key} and bench.hang_on == {replayable[1].key}
    assert bench.exit_code == CRASH_EXIT_CODE == 9
    assert "testing recovery" in (faulty_benchmarker.__doc__ or "")


def test_a_crash_costs_one_trial_and_the_worker_restarts(faulty: SubprocessBenchmarker, replay_table: ReplayTable,
                                                         replayable: list[Candidate]) -> None:
    rows = replay_table.problems[PROBLEM.key()]
    assert faulty.device().name == replay_table.device.name
    assert faulty.available(PROBLEM) == set(rows)

    ok = faulty.measure(PROBLEM, replayable[0].plan)
    assert ok.ok and ok.median_ms == rows[replayable[0].key]["median_ms"] and faulty.restarts == 0

    crashed = faulty.measure(PROBLEM, replayable[1].plan)
    assert crashed.status == "crashed" and "died" in crashed.error and crashed.median_ms is None
    assert faulty.measure(PROBLEM, replayable[3].plan).ok and faulty.restarts == 1
    assert faulty.measure(PROBLEM, replayable[1].plan).status == "crashed"  # every time, not just once
    assert faulty.measure(PROBLEM, replayable[0].plan).ok and faulty.restarts == 2


def test_a_hang_times_out_and_the_worker_restarts(faulty: SubprocessBenchmarker, replayable: list[Candidate]) -> None:
    start = time.perf_counter()
    hung = faulty.measure(PROBLEM, replayable[2].plan)
    elapsed = time.perf_counter() - start
    assert elapsed >= TIMEOUT_S  # waited for the timeout (no upper bound: a busy machine is slow, not wrong)
    assert faulty._proc is None  # the hung child is gone
    assert faulty.measure(PROBLEM, replayable[0].plan).ok and faulty.restarts == 1
    assert hung.status == "timeout" and f"within {TIMEOUT_S:g} s" in hung.error


def test_a_worker_killed_between_calls_is_restarted(faulty: SubprocessBenchmarker,
                                                    replayable: list[Candidate]) -> None:
    assert faulty.measure(PROBLEM, replayable[0].plan).ok
    pid = faulty._proc.pid
    os.kill(pid, signal.SIGKILL)
    faulty._proc.join(10)
    assert not faulty._proc.is_alive() and faulty._proc.exitcode == -signal.SIGKILL
    again = faulty.measure(PROBLEM, replayable[3].plan)
    assert again.ok and faulty.restarts == 1 and faulty._proc.pid != pid
    assert faulty.kernel_version(replayable[0].spec) != "unknown"


def test_ctrl_c_to_the_process_group_leaves_the_child_to_its_parent(faulty: SubprocessBenchmarker,
                                                                    replayable: list[Candidate]) -> None:
    """SIGINT (Ctrl-C reaches the whole group) is the parent's to handle: the child neither dies nor prints."""
    os.kill(faulty._proc.pid, signal.SIGINT)
    assert faulty.measure(PROBLEM, replayable[0].plan).ok and faulty.restarts == 0


def test_a_worker_that_cannot_start_says_why() -> None:
    with pytest.raises(WorkerDied, match=r"failed to start: .*no-such-table"):
        SubprocessBenchmarker(FACTORY, {"table_path": "no-such-table.json"}, timeout_s=TIMEOUT_S,
                              start_timeout_s=60, backend="replay")


def _check_tune_with_faults(engine: Engine, replay_table: ReplayTable, replayable: list[Candidate],
                           crash: list[str], hang: list[str]) -> None:
    budget = 10
    bench = _worker(crash_on=crash, hang_on=hang)
    try:
        result = tune(PROBLEM, bench, engine, budget_trials=budget, warm_start=16, seed=0)
        restarts = bench.restarts
    finally:
        bench.close()
    faults_n = len(crash) + len(hang)

    assert result.trials == budget and result.stop_reason == f"trial budget ({budget}) reached"
    expected = {"ok": budget - faults_n, "crashed": len(crash)} | ({"timeout": len(hang)} if hang else {})
    assert result.statuses == expected and result.failed == faults_n
    assert restarts == faults_n  # once after each crash and after each hang
    assert result.best_config not in crash + hang and result.time_ms is not None

    rows = replay_table.problems[PROBLEM.key()]
    measured = run_measurements(engine, result.run_id)
    keys = config_keys(engine, measured)
    assert keys == [c.key for c in replayable[:budget]]  # every trial stored, in warm-start order
    for m, key in zip(measured, keys, strict=True):
        assert m.backend == "replay" and not m.predicted
        if key in crash:
            assert m.status == "crashed" and m.median_ms is None and "died" in m.error
        elif key in hang:
            assert m.status == "timeout" and m.median_ms is None and "did not finish" in m.error
        else:
            assert m.status == "ok" and m.median_ms == rows[key]["median_ms"]

    run = run_row(engine, result.run_id)
    assert run.status == "finished" and run.trials_done == budget and run.best_measurement_id is not None

    study = optuna.load_study(study_name=run.study_name, storage=engine.url.render_as_string(hide_password=False))
    states = [t.state for t in study.trials]
    assert optuna.trial.TrialState.RUNNING not in states
    assert states.count(optuna.trial.TrialState.FAIL) == faults_n
    assert states.count(optuna.trial.TrialState.COMPLETE) == budget - faults_n


def test_tune_survives_worker_crashes(sqlite_engine: Engine, replay_table: ReplayTable,
                                      replayable: list[Candidate]) -> None:
    """Warm-start configs 2, 3 and 5 kill the worker: the study goes on, every trial is stored, the run finishes."""
    crash = [replayable[1].key, replayable[2].key, replayable[4].key]
    _check_tune_with_faults(sqlite_engine, replay_table, replayable, crash, [])


def test_tune_survives_crashes_and_a_hang(sqlite_engine: Engine, replay_table: ReplayTable,
                                          replayable: list[Candidate]) -> None:
    """Warm-start configs 2 and 5 kill the worker, config 3 hangs: stored as crashed, crashed, timeout."""
    crash, hang = [replayable[1].key, replayable[4].key], [replayable[2].key]
    _check_tune_with_faults(sqlite_engine, replay_table, replayable, crash, hang)
