"""The worker in process (model backend, tiny problems): a job tuned to its budget and finished once; a tuned
problem's new job answered from the stored run; windows at an injected clock; cancel, stop (release) and a
lost claim after the current trial; a dead worker's job continued to its budget by the next; failures;
heartbeats through long trials; ``run``; ``convtune worker``."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import optuna
import pytest
from service_samples import ROOT, TINY, add_job, at, job
from sqlalchemy import URL, Engine, select

from convtune.errors import InvalidConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.service.runner import JobCancelled, Worker, benchmarker_factory
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.storage.models import Measurement, TuningRun
from convtune.tuner.benchmark import ModelBenchmarker, TrialResult

BUDGET = 6


class HookedModel(ModelBenchmarker):
    """The analytic model, calling ``hook(n)`` before its n-th answer."""

    def __init__(self, hook: Callable[[int], None] | None = None) -> None:
        super().__init__(MachineModel.preset("h200"))
        self.calls = 0
        self.hook = hook

    def measure(self, problem: ConvProblem, plan: Any) -> TrialResult:
        self.calls += 1
        if self.hook is not None:
            self.hook(self.calls)
        return super().measure(problem, plan)


def make_worker(engine: Engine, bench: ModelBenchmarker | None = None, **options: Any) -> Worker:
    bench = bench or HookedModel()
    values: dict[str, Any] = {"worker_id": "w1", "backends": ("model",), "heartbeat_s": 0.001} | options
    return Worker(engine, lambda backend: bench, **values)


def later(seconds: float) -> Callable[[], datetime]:
    return lambda: datetime.now(UTC) + timedelta(seconds=seconds)


def runs(engine: Engine) -> list[TuningRun]:
    with session_scope(engine) as session:
        return list(session.scalars(select(TuningRun).order_by(TuningRun.id)))


def measurements(engine: Engine) -> list[Measurement]:
    with session_scope(engine) as session:
        return list(session.scalars(select(Measurement).order_by(Measurement.id)))


def tagged_configs(engine: Engine) -> dict[str, list[str]]:
    """Study name -> the configs its trials evaluated (the ``config`` attribute is set once stored)."""
    url = engine.url.render_as_string(hide_password=False)
    return {name: [t.user_attrs["config"] for t in optuna.load_study(study_name=name, storage=url).trials
                   if "config" in t.user_attrs]
            for name in optuna.get_all_study_names(storage=url)}


# ---- the happy path ------------------------------------------------------------------------------------------
def test_a_job_is_tuned_to_its_budget_and_finished_once(engine: Engine) -> None:
    worker = make_worker(engine)
    assert not worker.run_once()  # nothing queued
    job_id = add_job(engine, budget_trials=BUDGET)
    assert worker.run_once()
    assert not worker.run_once()
    row = job(engine, job_id)
    [run] = runs(engine)
    assert (row.status, row.trials_done, row.attempts, row.worker_id, row.error) == ("finished", BUDGET, 1, "w1", None)
    assert row.tuning_run_id == run.id and run.status == "finished" and run.trials_done == BUDGET
    assert row.stop_reason == "budget_trials" and run.stop_reason == f"trial budget ({BUDGET}) reached"
    assert row.started_at is not None and row.finished_at is not None and row.finished_at >= row.started_at
    with session_scope(engine) as session:
        best = repo.get_measurement(session, run.best_measurement_id)  # type: ignore[arg-type]
    assert row.best_time_ms == pytest.approx(best.median_ms)
    assert len(measurements(engine)) == BUDGET
    worker.close()


def test_a_new_job_of_a_tuned_problem_finishes_at_once_with_the_stored_result(engine: Engine) -> None:
    bench = HookedModel()
    worker = make_worker(engine, bench)
    first = add_job(engine, budget_trials=BUDGET)
    assert worker.run_once()
    second = add_job(engine, budget_trials=BUDGET * 3)
    assert worker.run_once()
    assert bench.calls == BUDGET  # nothing measured again
    done, again = job(engine, first), job(engine, second)
    assert (again.status, again.trials_done, again.tuning_run_id) == ("finished", 0, done.tuning_run_id)
    assert (done.stop_reason, again.stop_reason) == ("budget_trials", "stored")
    assert again.best_time_ms == done.best_time_ms and len(runs(engine)) == 1


class SearchClock:
    """tune()'s clock for a worker: each model answer takes ``trial_s``; pruning takes nothing."""

    def __init__(self, trial_s: float) -> None:
        self.now, self.trial_s = 0.0, trial_s

    def __call__(self) -> float:
        return self.now

    def hook(self, n: int) -> None:
        self.now += self.trial_s


def test_a_small_time_budget_still_measures_the_warm_start(engine: Engine) -> None:
    """budget_s of 1 s, trials of 10 s: the job measures its whole warm start (4), then stops on time and
    says so (``stop_reason`` budget_s), never after a single trial."""
    clock = SearchClock(10.0)
    job_id = add_job(engine, budget_trials=50, budget_s=1.0)
    worker = make_worker(engine, HookedModel(clock.hook), tune_options={"clock": clock, "warm_start": 4})
    assert worker.run_once()
    row = job(engine, job_id)
    [run] = runs(engine)
    assert (row.status, row.stop_reason, row.trials_done) == ("finished", "budget_s", 4)
    assert run.stop_reason == "time budget (1 s) reached" and run.pruning_s == 0.0


def test_the_worker_waits_for_the_window_at_an_injected_clock(engine: Engine) -> None:
    job_id = add_job(engine, window="22:00-06:00", timezone="UTC", budget_trials=3)
    assert not make_worker(engine, clock=lambda: at(hours=9, minutes=59)).run_once()  # 21:59
    assert make_worker(engine, clock=lambda: at(hours=10)).run_once()
    assert job(engine, job_id).status == "finished"


# ---- stopping after the current trial ------------------------------------------------------------------------
def test_cancel_stops_the_job_after_the_current_trial(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=BUDGET * 2)

    def cancel_at_third(n: int) -> None:
        if n == 3:
            with session_scope(engine) as session:
                repo.request_cancel(session, job_id)

    assert make_worker(engine, HookedModel(cancel_at_third)).run_once()
    row = job(engine, job_id)
    [run] = runs(engine)
    assert (row.status, row.trials_done) == ("cancelled", 3) and "cancelled on request" in (row.error or "")
    assert row.stop_reason == "cancelled"
    assert run.status == "cancelled" and row.tuning_run_id == run.id
    assert len(measurements(engine)) == 3  # the third trial finished and was stored


def test_stop_releases_the_job_and_the_next_worker_continues_it(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=BUDGET * 2)
    first = make_worker(engine, worker_id="w1")
    first.benchmarker_factory = lambda backend: HookedModel(lambda n: first.stop() if n == 3 else None)
    assert first.run_once()
    assert not first.run_once()  # stopping: claims nothing more
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.trials_done, row.attempts) == ("queued", None, 3, 1)
    assert [r.status for r in runs(engine)] == ["cancelled"]

    second_bench = HookedModel()
    assert make_worker(engine, second_bench, worker_id="w2").run_once()
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.trials_done, row.attempts) == ("finished", "w2", BUDGET * 2, 2)
    assert second_bench.calls == BUDGET * 2 - 3  # the rest of the budget, nothing measured twice
    [configs] = tagged_configs(engine).values()
    assert len(configs) == len(set(configs)) == BUDGET * 2 == len(measurements(engine))
    assert [r.status for r in runs(engine)] == ["cancelled", "finished"]


def test_a_job_claimed_by_another_worker_is_left_to_it(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=BUDGET * 2)

    def taken_over(n: int) -> None:
        if n == 3:  # another worker believes w1 dead and claims the job
            # on PostgreSQL, SKIP LOCKED passes over the row while w1's heartbeat thread holds it: retry
            for _ in range(100):
                with session_scope(engine) as session:
                    taken = repo.claim_job(session, worker_id="w2", now=datetime.now(UTC) + timedelta(hours=1),
                                           backends=("model",), device_name="NVIDIA H200")
                    taken_id = taken.id if taken is not None else None
                if taken_id is not None:
                    break
                time.sleep(0.05)
            assert taken_id == job_id

    assert make_worker(engine, HookedModel(taken_over)).run_once()
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.attempts) == ("running", "w2", 2)  # w1 did not touch it
    assert [r.status for r in runs(engine)] == ["cancelled"]


class _Died(BaseException):
    """A worker dying in the middle of a trial (in-process stand-in for SIGKILL)."""


def test_a_dead_workers_job_is_continued_to_its_budget(engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    job_id = add_job(engine, budget_trials=BUDGET * 2)

    def die_at_fourth(n: int) -> None:
        if n == 4:
            raise _Died

    with monkeypatch.context() as patch:
        patch.setattr(repo, "release_job", lambda *args, **kwargs: False)  # a dead worker releases nothing
        with pytest.raises(_Died):
            make_worker(engine, HookedModel(die_at_fourth), worker_id="dead").run_once()
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.trials_done) == ("running", "dead", 3)
    with session_scope(engine) as session:  # SIGKILL would not have let tune() close its run either
        repo.update_run(session, row.tuning_run_id, status="running", stop_reason=None, finished_at=None)
    assert not make_worker(engine, worker_id="w2", clock=later(60)).run_once()  # heartbeat not stale yet

    bench = HookedModel()
    assert make_worker(engine, bench, worker_id="w2", clock=later(300)).run_once()
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.trials_done, row.attempts) == ("finished", "w2", BUDGET * 2, 2)
    assert bench.calls == BUDGET * 2 - 3
    orphan, resumed = runs(engine)
    assert orphan.status == "failed" and "stopped heartbeating" in (orphan.stop_reason or "")
    assert resumed.status == "finished" and row.tuning_run_id == resumed.id
    [configs] = tagged_configs(engine).values()
    assert len(configs) == len(set(configs)) == BUDGET * 2 == len(measurements(engine))


# ---- failures and heartbeats ----------------------------------------------------------------------------------
def test_a_job_whose_tuning_raises_fails_with_the_error(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=BUDGET)

    def on_fire(n: int) -> None:
        if n == 2:
            raise RuntimeError("the GPU is on fire")

    assert make_worker(engine, HookedModel(on_fire)).run_once()
    row = job(engine, job_id)
    assert row.status == "failed" and row.error == "RuntimeError: the GPU is on fire"
    assert row.stop_reason == "error"
    assert [r.status for r in runs(engine)] == ["failed"]


def test_heartbeats_continue_through_a_long_trial(engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=2)
    seen: list[Any] = []

    def slow(n: int) -> None:
        if n == 1:
            claimed = job(engine, job_id).claimed_at
            time.sleep(0.6)
            row = job(engine, job_id)
            seen.extend([claimed, row.heartbeat_at, row.tuning_run_id])

    assert make_worker(engine, HookedModel(slow), heartbeat_s=0.1).run_once()
    claimed, beat, run_id = seen
    assert claimed is not None and beat is not None and beat > claimed  # beats without any trial ending
    assert run_id == runs(engine)[0].id  # the run is named before its first trial: a death leaves no orphan


def test_job_cancelled_carries_its_reason() -> None:
    assert JobCancelled("stopping", "worker w1 is stopping").reason == "stopping"


# ---- the loop ------------------------------------------------------------------------------------------------
def test_run_until_idle_and_until_stopped(engine: Engine) -> None:
    ids = [add_job(engine, problem, budget_trials=3) for problem in TINY[:2]]
    worker = make_worker(engine, poll_s=0.05)
    worker.run(exit_when_idle=True)
    assert [job(engine, i).status for i in ids] == ["finished", "finished"] and worker.jobs_run == 2

    stop = threading.Event()
    idle = make_worker(engine, poll_s=0.05)
    thread = threading.Thread(target=idle.run, args=(stop,))
    thread.start()
    time.sleep(0.2)
    stop.set()
    thread.join(timeout=10)
    assert not thread.is_alive()


def test_the_in_process_worker_of_the_api(engine: Engine) -> None:
    settings = SimpleNamespace(backend="model", replay_path=None, default_device="h200")
    worker = Worker.for_settings(settings, engine=engine, poll_s=0.05)
    job_id = add_job(engine, budget_trials=2)
    thread = worker.start_thread()
    deadline = time.monotonic() + 30
    while job(engine, job_id).status != "finished" and time.monotonic() < deadline:
        time.sleep(0.05)
    worker.stop()
    thread.join(timeout=10)
    assert job(engine, job_id).status == "finished" and not thread.is_alive()
    assert worker.device_name == "NVIDIA H200"


def test_bad_settings_are_refused(engine: Engine) -> None:
    with pytest.raises(InvalidConfig):
        Worker(engine, benchmarker_factory(), backends=("model",), heartbeat_s=120, stale_after_s=60)
    with pytest.raises(InvalidConfig):
        Worker(engine, benchmarker_factory(), backends=())
    with pytest.raises(InvalidConfig) as info:
        benchmarker_factory()("replay")
    assert info.value.field == "--replay"


# ---- the command line ----------------------------------------------------------------------------------------
def _url(db_url: str | URL) -> str:
    return db_url if isinstance(db_url, str) else db_url.render_as_string(hide_password=False)


def worker_command(db_url: str | URL, *args: str) -> list[str]:
    return [sys.executable, "-m", "convtune.cli", "worker", "--db", _url(db_url), *args]


def test_convtune_worker_runs_the_queue_and_exits_when_idle(db_url: str | URL, engine: Engine) -> None:
    job_id = add_job(engine, budget_trials=3)
    done = subprocess.run(worker_command(db_url, "--backend", "model", "--exit-when-idle", "--poll-s", "0.1",
                                         "--worker-id", "cli-worker"),
                          cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    assert f"job={job_id} event=finished worker=cli-worker" in done.stderr
    assert job(engine, job_id).status == "finished"


@pytest.mark.parametrize(("args", "field"), [
    pytest.param(["--backend", "replay"], "--replay", id="replay-without-table"),
    pytest.param(["--backend", "replay", "--replay", "/nonexistent.json"], "--replay", id="unreadable-table"),
    pytest.param(["--backend", "model", "--heartbeat-s", "200"], "--heartbeat-s", id="heartbeat-too-slow"),
    pytest.param(["--backend", "model", "--machine", "abacus"], "--machine", id="machine"),
    pytest.param(["--backend", "model", "--gpu", "-1"], "--gpu", id="negative-device-index"),
])
def test_convtune_worker_refuses_bad_input_in_one_line(sqlite_url: str, args: list[str], field: str) -> None:
    done = subprocess.run(worker_command(sqlite_url, *args, "--exit-when-idle"), cwd=ROOT, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 2
    assert done.stderr.startswith(f"convtune: error: {field}:") and done.stderr.count("\n") == 1, done.stderr


# ---- the run a job names -------------------------------------------------------------------------------------
def _other_run(engine: Engine, like: TuningRun | None = None) -> int:
    """A run of the same device and problem that is no job's, started when ``like`` started (same second)."""
    with session_scope(engine) as session:
        template = like or session.scalars(select(TuningRun).order_by(TuningRun.id)).first()
        assert template is not None
        run = repo.create_run(session, device_id=template.device_id, problem_id=template.problem_id,
                              families=template.families, backend=template.backend, sampler="random")
        run.started_at = template.started_at
        return run.id


def test_the_job_names_the_run_its_tune_created_even_among_runs_of_the_same_second(engine: Engine) -> None:
    """tune() hands its run id to the worker (``on_run``): no query of "the runs started just now", which
    would pick another worker's run started in the same second."""
    seen: dict[str, Any] = {}
    job_id = add_job(engine, budget_trials=BUDGET)

    def hook(n: int) -> None:
        if n == 1:  # tune() has opened its run and told the worker; another run starts in the same second
            [mine] = [r for r in runs(engine) if r.job_id == job_id]
            seen["mine"], seen["after"] = mine.id, _other_run(engine, mine)
            seen["named"] = job(engine, job_id).tuning_run_id

    worker = make_worker(engine, HookedModel(hook))
    assert worker.run_once()
    worker.close()
    row = job(engine, job_id)
    by_id = {r.id: r for r in runs(engine)}
    assert seen["named"] == seen["mine"] == row.tuning_run_id  # named at once, before the first trial
    assert by_id[seen["after"]].started_at == by_id[seen["mine"]].started_at
    assert by_id[row.tuning_run_id].job_id == job_id and by_id[row.tuning_run_id].status == "finished"
    assert by_id[seen["after"]].status == "running" and by_id[seen["after"]].job_id is None


def test_tune_reports_its_run_id_before_measuring(engine: Engine) -> None:
    from convtune.tuner.tune import tune

    reported: list[int] = []
    calls_then: list[int] = []
    bench = HookedModel()

    def on_run(run_id: int) -> None:
        reported.append(run_id)
        calls_then.append(bench.calls)

    first = tune(TINY[1], bench, engine, budget_trials=2, on_run=on_run, force=True)
    second = tune(TINY[1], bench, engine, budget_trials=2, on_run=on_run, force=True)  # same second, new run
    assert reported == [first.run_id, second.run_id] and first.run_id != second.run_id
    assert calls_then[0] == 0
