"""Cancel and stop take effect in every phase (pruning included, tested with an injected slow prune); a
reclaimed job's count comes from the stored measurements and a dead worker's Optuna trials are failed; a
restarted worker of the same host takes its dead predecessor's job at once."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import optuna
import pytest
from service_samples import TINY, add_job, job
from sqlalchemy import Engine

from convtune.machine import MachineModel
from convtune.service.runner import Worker, dead_local_workers
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner import prune as prune_module
from convtune.tuner.benchmark import ModelBenchmarker
from convtune.tuner.study import make_sampler, open_study
from convtune.tuner.tune import fail_running_trials


def make_worker(engine: Engine, **options: Any) -> Worker:
    values: dict[str, Any] = {"worker_id": "w1", "backends": ("model",), "heartbeat_s": 0.5,
                              "cancel_poll_s": 0.05, "poll_s": 0.05} | options
    return Worker(engine, lambda backend: ModelBenchmarker(MachineModel.preset("h200")), **values)


@pytest.fixture
def endless_pruning(monkeypatch: pytest.MonkeyPatch) -> threading.Event:
    """Pruning that never ends by itself: it only calls its ``check`` (as the real one does every 64
    configurations). The event is set once pruning has started."""
    started = threading.Event()

    def slow_build(problem: Any, machine: Any, specs: Any, check: Any = None, report: Any = None) -> list[Any]:
        started.set()
        while True:
            if check is not None:
                check()
            time.sleep(0.01)

    monkeypatch.setattr(prune_module, "build_candidates", slow_build)
    return started


def wait_until(what: str, condition: Any, timeout_s: float) -> None:
    deadline = time.monotonic() + timeout_s
    while not condition():
        assert time.monotonic() < deadline, f"{what} did not happen within {timeout_s:g} s"
        time.sleep(0.02)


def test_cancel_during_pruning_ends_the_job_within_seconds(engine: Engine, endless_pruning: threading.Event) -> None:
    job_id = add_job(engine, budget_trials=6)
    worker = make_worker(engine)
    thread = threading.Thread(target=worker.run_once, daemon=True)
    thread.start()
    assert endless_pruning.wait(30)
    with session_scope(engine) as session:
        repo.request_cancel(session, job_id)
    wait_until("the cancel", lambda: job(engine, job_id).status == "cancelled", timeout_s=5)
    thread.join(10)
    assert not thread.is_alive()
    row = job(engine, job_id)
    assert row.trials_done == 0 and "cancelled on request" in (row.error or "")
    with session_scope(engine) as session:
        [run] = repo.list_runs(session, row.problem_id)
        assert run.status == "cancelled" and run.job_id == job_id and row.tuning_run_id == run.id


def test_stop_during_pruning_releases_the_job_within_seconds(engine: Engine, endless_pruning: threading.Event) -> None:
    job_id = add_job(engine, budget_trials=6)
    worker = make_worker(engine)
    thread = threading.Thread(target=worker.run_once, daemon=True)
    thread.start()
    assert endless_pruning.wait(30)
    worker.stop()
    thread.join(5)
    assert not thread.is_alive()
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.attempts) == ("queued", None, 1)


def test_a_reclaimed_job_counts_the_stored_measurements_and_fails_the_dead_workers_trials(engine: Engine) -> None:
    """A worker that died mid-job (simulated: its heartbeat stale, a trial left RUNNING in its study, and its
    job's trial count behind what it stored) is continued to exactly its budget."""
    budget = 8
    job_id = add_job(engine, TINY[1], budget_trials=budget)
    first = make_worker(engine, worker_id="w-dead", heartbeat_s=0.5)
    stop_after = 3

    def hook(progress: Any) -> None:
        if progress.trials == stop_after:
            raise SystemExit  # dies like a killed process: nothing after this trial runs
    first.tune_options = {}
    original = first._progress
    first._progress = lambda state, p: (original(state, p), hook(p))  # type: ignore[method-assign]
    with pytest.raises(SystemExit):
        first.run_once()  # (SystemExit releases the job: put it back to "running, stale" by hand)
    with session_scope(engine) as session:
        row = repo.get_job(session, job_id)
        row.status, row.worker_id, row.trials_done = "running", "w-dead", 1  # the heartbeat lagged behind
        from datetime import UTC, datetime

        row.heartbeat_at = datetime(2000, 1, 1, tzinfo=UTC)
        [run] = repo.list_runs(session, row.problem_id)
        run.status = "running"
        study_name = run.study_name
    url = engine.url.render_as_string(hide_password=False)
    study = open_study(url, study_name, make_sampler("tpe", 0))
    orphan = study.ask()  # the trial the dead worker was measuring
    assert len(study.get_trials(states=(optuna.trial.TrialState.RUNNING,))) == 1

    assert make_worker(engine, worker_id="w-next").run_once()
    row = job(engine, job_id)
    with session_scope(engine) as session:
        stored = repo.count_job_trials(session, job_id)
        runs = repo.list_runs(session, row.problem_id)
    assert (row.status, row.attempts) == ("finished", 2)
    assert row.trials_done == stored == budget  # from the database, not from the lost heartbeat count
    assert sorted(r.status for r in runs) == ["failed", "finished"]
    study = optuna.load_study(study_name=study_name, storage=url)
    assert study.trials[orphan.number].state == optuna.trial.TrialState.FAIL
    assert study.get_trials(states=(optuna.trial.TrialState.RUNNING,)) == []
    assert fail_running_trials(study) == 0


def test_a_restarted_worker_takes_its_dead_predecessors_job_at_once(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=2)
    host = socket.gethostname()
    dead = f"{host}:{2**22 + 12345}:abcdef"  # a pid above pid_max: no such process
    from datetime import UTC, datetime

    with session_scope(engine) as session:
        row = repo.get_job(session, job_id)
        row.status, row.worker_id, row.attempts = "running", dead, 1
        row.heartbeat_at = datetime.now(UTC)  # fresh: only the dead pid says it will never beat again
    assert dead_local_workers([dead, f"{host}:1:abcdef", f"other-host:{2**22 + 1}:abcdef", "custom-id"], host) == [dead]
    assert make_worker(engine, stale_after_s=3600).run_once()
    row = job(engine, job_id)
    assert (row.status, row.attempts, row.worker_id) == ("finished", 2, "w1")
