"""The worker: claims queued tuning jobs, tunes them with heartbeats, and ends each job exactly once.

Loop (:meth:`Worker.run`): :func:`~convtune.storage.queries.results.claim_job` -> ``tune()`` -> ``finish_job``;
nothing eligible -> wait ``poll_s``. While a job runs, its heartbeat is sent at most every
``heartbeat_s`` from ``tune()``'s progress callback (after each stored trial) and, through phases without
trials (pruning, compiling, the final re-timing), from a background thread. The callback raises
:class:`JobCancelled` after the current trial (which is stored) when

- a cancel was requested (``DELETE /v1/jobs/{id}``): the job ends ``cancelled``;
- the job is no longer this worker's (its heartbeat went stale and another worker claimed it): the job
  is left to that worker;
- the worker is stopping (SIGTERM, :meth:`Worker.stop`): the job is released back to the queue, and the
  next worker continues it.

A job whose tuning raises ends ``failed`` with the error. Every ended job records why it stopped
(``jobs.stop_reason``: ``budget_s``, ``budget_trials``, ``exhausted``, ... from ``tune()``, else
``cancelled`` or ``error``). A job's ``budget_s`` is search time: ``tune()`` starts its clock after
pruning and always measures the warm start first, so a small budget never ends a job after one trial.

Every trial is committed by ``tune()`` as it is
measured, so a worker killed outright (SIGKILL, a lost host) loses at most the trial in flight: its job's
heartbeat goes stale, another worker claims it again (``attempts`` + 1) and continues.

``force`` is never passed to ``tune()``: a job asks for its problem to be tuned, so

- a NEW job of a problem that already has a finished run (same device, families, backend and kernel
  version) ends ``finished`` at once with that stored result (``trials_done`` 0, ``tuning_run_id`` the
  earlier run): measuring again would only repeat it;
- a job claimed AGAIN (its worker died or released it) calls ``tune()`` the same way: its own run never
  finished, so ``tune()`` opens a new run on the same Optuna study, which skips every configuration
  already evaluated and answers any measured but unrecorded one from the database. Its trial budget is
  what the job has left (``budget_trials`` - ``trials_done``). If the earlier attempt did finish its
  run but died before ending the job, that finished run is the job's answer: ``force`` would start a
  whole new run instead.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import uuid
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import TYPE_CHECKING, Any

from sqlalchemy import Engine

from convtune.errors import ConvtuneError, InvalidConfig, StorageError
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage.session import session_scope
from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker, ReplayTable

if TYPE_CHECKING:
    from convtune.tuner.benchmark import Benchmarker
    from convtune.tuner.tune import Progress

log = logging.getLogger(__name__)

#: ``backend -> benchmarker``: how a worker measures the jobs of one backend.
BenchmarkerFactory = Callable[[str], "Benchmarker"]


def utc_now() -> datetime:
    """The default clock: now, in UTC."""
    return datetime.now(UTC)


class JobCancelled(Exception):
    """Raised from ``tune()``'s progress callback to stop a job after the current (stored) trial.

    ``reason`` is ``"cancel"`` (requested), ``"lost"`` (claimed by another worker, or ended) or
    ``"stopping"`` (this worker shuts down).
    """

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason


# ---- benchmarkers ------------------------------------------------------------------------------------------
def benchmarker_factory(*, replay: str | Path | None = None, machine: str = "h200", trial_delay_s: float = 0.0,
                        replay_delay_s: float | None = None, gpu_timeout_s: float = 120.0) -> BenchmarkerFactory:
    """The usual factory: ``gpu`` trials in a restartable child process, ``replay`` from a timing table,
    ``model`` from the analytic model of the ``machine`` preset. ``trial_delay_s`` (alias
    ``replay_delay_s``) slows each replay or model answer down (tests: jobs long enough to interrupt); the
    GPU takes the time it takes.

    Raises (when called):
        InvalidConfig: ``replay`` is missing or unreadable for the replay backend (field ``--replay``), or
            ``machine`` is not a preset (field ``--machine``).
    """
    if replay_delay_s is not None:
        trial_delay_s = replay_delay_s

    def make(backend: str) -> Benchmarker:
        if backend == "replay":
            table = ReplayTable.for_option(replay)
            if trial_delay_s > 0:
                from convtune.testing.delayed import DelayedReplayBenchmarker

                return DelayedReplayBenchmarker(table, trial_delay_s)
            return ReplayBenchmarker(table)
        if backend == "model":
            try:
                preset = MachineModel.preset(machine)
            except ConvtuneError as exc:
                raise InvalidConfig("--machine", str(exc)) from None
            if trial_delay_s > 0:
                from convtune.testing.delayed import DelayedModelBenchmarker

                return DelayedModelBenchmarker(preset, trial_delay_s)
            return ModelBenchmarker(preset)
        if backend == "gpu":
            from convtune.tuner.trial_process import (
                SubprocessBenchmarker,  # starts the trial process (CUDA lives there)
            )

            return SubprocessBenchmarker(timeout_s=gpu_timeout_s)
        raise InvalidConfig("--backend", f"{backend!r} is not a backend: allowed gpu, replay, model")

    return make


def prepare_optuna_schema(engine: Engine, attempts: int = 5) -> None:
    """Let Optuna create its tables (and its ``alembic_version``) in our database once, before tuning.

    Optuna creates them on first use without a lock: workers starting together on a fresh PostgreSQL
    database race (``UniqueViolation`` on ``alembic_version``). Whoever loses retries and finds the
    tables made.
    """
    import optuna

    url = engine.url.render_as_string(hide_password=False)
    # the engine options of convtune.tuner.study.open_study: SQLite waits for the writer's lock
    options = {"connect_args": {"timeout": 30}} if url.startswith("sqlite") else {"pool_pre_ping": True}
    for attempt in range(attempts):
        try:
            storage = optuna.storages.RDBStorage(url, engine_kwargs=options)
        except Exception as exc:
            if attempt == attempts - 1:
                raise StorageError(f"cannot create Optuna's tables: {type(exc).__name__}: {exc}") from exc
            time.sleep(0.2 * (attempt + 1))
        else:
            storage.engine.dispose()
            return


def default_worker_id() -> str:
    """``host:pid:random``: unique per worker process and readable in the jobs table."""
    return f"{socket.gethostname()}:{os.getpid()}:{uuid.uuid4().hex[:6]}"


# ---- one claimed job ---------------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class _Claim:
    """What the worker needs of a claimed job, read inside the claiming transaction."""

    job_id: int
    problem: dict[str, Any]
    problem_id: int
    backend: str
    families: list[str] | None
    budget_trials: int
    budget_s: float
    attempts: int
    trials_before: int  # measurements its earlier attempts stored (counted in the database)


class _JobState:
    """Progress of the running job, shared by tune()'s callbacks and the heartbeat thread."""

    def __init__(self, claim: _Claim) -> None:
        self.claim = claim
        self.best_time_ms: float | None = None
        self.run_id: int | None = None
        self.lost: str | None = None  # why the job must stop: "cancel" or "lost"
        self.lock = threading.Lock()
        self.last_beat = time.monotonic()


def is_database_error(exc: BaseException) -> bool:
    """The database failed (outage, lost connection), as opposed to the job itself: ours, SQLAlchemy's or
    Optuna's storage error."""
    from sqlalchemy.exc import SQLAlchemyError

    if isinstance(exc, StorageError | SQLAlchemyError):
        return True
    try:
        from optuna.exceptions import StorageInternalError
    except ImportError:  # pragma: no cover
        return False
    return isinstance(exc, StorageInternalError)


def dead_local_workers(worker_ids: Sequence[str], host: str) -> list[str]:
    """The default-named workers (``host:pid:random``) of this host whose process is gone."""
    dead = []
    for worker_id in worker_ids:
        parts = worker_id.split(":")
        if len(parts) != 3 or parts[0] != host or not parts[1].isdigit():
            continue
        try:
            os.kill(int(parts[1]), 0)
        except ProcessLookupError:
            dead.append(worker_id)
        except (PermissionError, OverflowError, OSError):  # alive under another user, or not a pid at all
            continue
    return dead


class Worker:
    """Claims and runs tuning jobs from the database; see the module docstring for the protocol.

    Args:
        engine: the database (SQLite: one worker; PostgreSQL: any number, on any hosts).
        benchmarker_factory: ``backend -> benchmarker``, called once per backend (see
            :func:`benchmarker_factory`); the benchmarkers are closed by :meth:`close`.
        worker_id: this worker's name in ``jobs.worker_id`` (default ``host:pid:random``).
        backends: the job backends this worker takes.
        device_name: take jobs for this device name or for any device; default: the name the first
            backend's benchmarker reports (``"NVIDIA H200"``).
        poll_s: wait between claims when nothing is eligible.
        heartbeat_s: at most this often, at least this often while a job runs.
        stale_after_s: a running job whose heartbeat is older than this is claimed again.
        cancel_poll_s: how often a running job's cancel flag is read (a cancel takes effect within about
            this, in every phase: pruning, compiling, trials).
        clock: ``now`` of claims and heartbeats (tests inject it: windows open without waiting).
        tune_options: extra keyword arguments of ``tune()`` (``patience``, ``sampler``, ``seed``...).

    Example:
        >>> worker = Worker(engine, benchmarker_factory(replay="tests/data/replay_h200_vs_cudnn.json.gz"),
        ...                 backends=("replay",))
        >>> worker.run_once()   # claimed and ran one job?
    """

    def __init__(self, engine: Engine, benchmarker_factory: BenchmarkerFactory, *, worker_id: str | None = None,
                 backends: Sequence[str] = ("gpu",), device_name: str | None = None, poll_s: float = 2.0,
                 heartbeat_s: float = 10.0, stale_after_s: float = 120.0, cancel_poll_s: float = 1.0,
                 clock: Callable[[], datetime] = utc_now, tune_options: dict[str, Any] | None = None) -> None:
        if not backends:
            raise InvalidConfig("backends", "a worker needs at least one backend")
        if not 0 < heartbeat_s < stale_after_s:
            raise InvalidConfig("heartbeat_s", f"{heartbeat_s:g} must be > 0 and below stale_after_s "
                                               f"({stale_after_s:g}), or live jobs would be claimed again")
        if not cancel_poll_s > 0:
            raise InvalidConfig("cancel_poll_s", f"{cancel_poll_s:g} must be > 0")
        self.engine = engine
        self.benchmarker_factory = benchmarker_factory
        self.worker_id = worker_id or default_worker_id()
        self.backends = tuple(backends)
        self.device_name = device_name
        self.poll_s = poll_s
        self.heartbeat_s = heartbeat_s
        self.stale_after_s = stale_after_s
        self.cancel_poll_s = cancel_poll_s
        self.clock = clock
        self.tune_options = dict(tune_options or {})
        self.jobs_run = 0
        self._benchmarkers: dict[str, Benchmarker] = {}
        self._optuna_ready = False
        self._stop = threading.Event()

    @classmethod
    def for_settings(cls, settings: Any, *, engine: Engine, **kwargs: Any) -> Worker:
        """The in-process worker of ``convtune serve`` (:class:`convtune.api.settings.Settings`): jobs of
        ``settings.backend``; replay from ``settings.replay_path``; the model backend predicts for the
        ``settings.default_device`` preset; heartbeats and staleness from the settings."""
        factory = benchmarker_factory(replay=getattr(settings, "replay_path", None),
                                      machine=getattr(settings, "default_device", "h200"))
        for name in ("heartbeat_s", "stale_after_s"):
            value = getattr(settings, f"worker_{name}", None)
            if value is not None:
                kwargs.setdefault(name, value)
        return cls(engine, factory, backends=(settings.backend,), **kwargs)

    # ---- life cycle ------------------------------------------------------------------------------------
    def stop(self) -> None:
        """Ask the worker to stop: the running trial finishes and is stored (pruning stops at once), the job
        is released."""
        self._stop.set()

    @property
    def stopping(self) -> bool:
        return self._stop.is_set()

    def start_thread(self) -> threading.Thread:
        """Run :meth:`run` in a daemon thread (the API's in-process worker); :meth:`stop` ends it."""
        thread = threading.Thread(target=self.run, name=f"convtune-worker-{self.worker_id}", daemon=True)
        thread.start()
        return thread

    def open(self) -> None:
        """Build the benchmarkers and learn the device name (done by the first claim otherwise); make the
        jobs of dead workers of this host claimable at once.

        Raises:
            ConvtuneError: a benchmarker cannot be built (no GPU, unreadable replay table...).
        """
        for backend in self.backends:
            if backend not in self._benchmarkers:
                self._benchmarkers[backend] = self.benchmarker_factory(backend)
        if self.device_name is None:
            self.device_name = self._benchmarkers[self.backends[0]].device().name
        if not self._optuna_ready:
            prepare_optuna_schema(self.engine)
            self._optuna_ready = True
            self._expire_dead_local_claims()

    def _expire_dead_local_claims(self) -> None:
        with session_scope(self.engine) as session:
            dead = [w for w in dead_local_workers(sorted(repo.running_worker_ids(session)), socket.gethostname())
                    if w != self.worker_id]
            if dead and repo.expire_claims(session, dead):
                log.info("worker %s: the jobs of dead workers %s of this host are claimable now", self.worker_id,
                         ", ".join(dead))

    def close(self) -> None:
        """Close the benchmarkers (a GPU worker's child process ends)."""
        benchmarkers, self._benchmarkers = self._benchmarkers, {}
        for bench in benchmarkers.values():
            try:
                bench.close()
            except Exception:  # closing must not hide why the worker stopped
                log.exception("closing the %s benchmarker failed", bench.backend)

    def run(self, stop: threading.Event | None = None, *, exit_when_idle: bool = False) -> None:
        """Claim and run jobs until ``stop`` (or :meth:`stop`) is set; with ``exit_when_idle``, also return
        once nothing is eligible. Database errors are logged and retried after ``poll_s``."""
        if stop is not None:
            self._stop = stop
        try:
            try:
                self.open()
            except Exception:
                log.exception("worker %s cannot start", self.worker_id)
                raise
            log.info("worker %s: backends %s, device %s", self.worker_id, ",".join(self.backends), self.device_name)
            while not self._stop.is_set():
                try:
                    ran = self.run_once()
                except StorageError as exc:
                    log.warning("worker %s: database error, retrying in %g s: %s", self.worker_id, self.poll_s, exc)
                    ran = False
                if not ran:
                    if exit_when_idle:
                        break
                    self._stop.wait(self.poll_s)
        finally:
            self.close()
            log.info("worker %s: stopped after %d jobs", self.worker_id, self.jobs_run)

    def run_once(self) -> bool:
        """Claim one eligible job and run it to its end (or release). Returns whether a job was claimed."""
        if self._stop.is_set():
            return False
        self.open()
        with session_scope(self.engine) as session:
            job = repo.claim_job(session, worker_id=self.worker_id, now=self.clock(), backends=self.backends,
                                 device_name=self.device_name, stale_after_s=self.stale_after_s)
            if job is None:
                return False
            again = job.attempts > 1
            claim = _Claim(job.id, dict(repo.get_problem(session, job.problem_id).spec), job.problem_id, job.backend,
                           job.families.split(",") if job.families else None, job.budget_trials, job.budget_s,
                           job.attempts, repo.count_job_trials(session, job.id) if again else 0)
            if again:
                self._close_orphan_runs(session, job.id, job.tuning_run_id)
        log.info("job=%d event=claimed attempt=%d worker=%s trials_before=%d", claim.job_id, claim.attempts,
                 self.worker_id, claim.trials_before)
        self.jobs_run += 1
        self._run(claim)
        return True

    def _close_orphan_runs(self, session: Any, job_id: int, run_id: int | None) -> None:
        """The runs a dead worker left ``running``: failed, so history shows they ended (their trials stay)."""
        runs = repo.open_job_runs(session, job_id)
        legacy = repo.find_run(session, run_id) if run_id is not None else None  # runs stored before job_id
        if legacy is not None and legacy.status == "running" and legacy not in runs:
            runs.append(legacy)
        for run in runs:
            repo.finish_run(session, run.id, "failed", f"its worker stopped heartbeating; job {job_id} was claimed "
                                                       f"again by {self.worker_id}")

    # ---- one job -----------------------------------------------------------------------------------------
    def _run(self, claim: _Claim) -> None:
        from convtune.tuner.tune import tune

        state = _JobState(claim)
        bench = self._benchmarkers[claim.backend]
        beats = threading.Event()
        thread = threading.Thread(target=self._beat_loop, args=(state, beats), daemon=True,
                                  name=f"convtune-heartbeat-{claim.job_id}")
        thread.start()
        try:
            problem = ConvProblem(**claim.problem)
            result = tune(problem, bench, self.engine, families=claim.families,
                          budget_trials=max(0, claim.budget_trials - claim.trials_before), budget_s=claim.budget_s,
                          progress=lambda p: self._progress(state, p), force=False, job_id=claim.job_id,
                          on_run=lambda run_id: self._on_run(state, run_id), check=lambda: self._check(state),
                          fail_orphans=claim.attempts > 1, **self.tune_options)
        except JobCancelled as exc:
            beats.set()
            thread.join()
            self._end_cancelled(state, exc)
        except Exception as exc:
            beats.set()
            thread.join()
            if is_database_error(exc):
                log.warning("job=%d: the database failed mid-job (%s: %s); releasing it", claim.job_id,
                            type(exc).__name__, exc)
                self._release_when_possible(state)
            else:
                log.exception("job=%d tuning raised", claim.job_id)
                self._finish(state, "failed", error=f"{type(exc).__name__}: {exc}", stop_reason="error")
        except BaseException:  # KeyboardInterrupt, SystemExit: give the job back, then go
            beats.set()
            thread.join()
            self._release(state)
            raise
        else:
            beats.set()
            thread.join()
            state.best_time_ms = result.time_ms
            self._finish(state, "finished", run_id=result.run_id, note=result.stop_reason,
                         stop_reason=result.stop_code or None)

    def _on_run(self, state: _JobState, run_id: int) -> None:
        """tune() opened its run: the job names it at once (a worker that dies now leaves no run unnamed)."""
        state.run_id = run_id
        self._beat(state)

    def _check(self, state: _JobState) -> None:
        """tune()'s check, called through pruning and before each trial: stop if told."""
        if state.lost is not None:
            raise JobCancelled(state.lost, f"job {state.claim.job_id}: "
                                           + ("cancel requested" if state.lost == "cancel" else "claimed elsewhere"))
        if self._stop.is_set():
            raise JobCancelled("stopping", f"worker {self.worker_id} is stopping")

    def _progress(self, state: _JobState, progress: Progress) -> None:
        """tune()'s callback, after each stored trial: record progress, heartbeat when due, stop if told."""
        with state.lock:
            state.best_time_ms = progress.best_ms
        if time.monotonic() - state.last_beat >= self.heartbeat_s:
            self._beat(state)
        self._check(state)

    def _beat_loop(self, state: _JobState, done: threading.Event) -> None:
        """Heartbeats through phases without trials (pruning, compiling, re-timing), and the cancel flag read
        every ``cancel_poll_s``, so a cancel stops pruning within about that."""
        poll_s = min(self.cancel_poll_s, self.heartbeat_s / 2)
        while not done.wait(poll_s):
            if time.monotonic() - state.last_beat >= self.heartbeat_s:
                self._beat(state)
            else:
                self._poll_cancel(state)

    def _poll_cancel(self, state: _JobState) -> None:
        try:
            with session_scope(self.engine) as session:
                job = repo.find_job(session, state.claim.job_id)
                if job is not None and state.lost is None:
                    if job.status != "running" or job.worker_id != self.worker_id:
                        state.lost = "lost"
                    elif job.cancel_requested:
                        state.lost = "cancel"
        except StorageError as exc:
            log.debug("job=%d: cancel poll failed: %s", state.claim.job_id, exc)

    def _beat(self, state: _JobState) -> None:
        with state.lock:
            state.last_beat = time.monotonic()
            best, run_id = state.best_time_ms, state.run_id
            try:
                with session_scope(self.engine) as session:
                    ok = repo.heartbeat(session, state.claim.job_id, worker_id=self.worker_id, now=self.clock(),
                                        trials_done=repo.count_job_trials(session, state.claim.job_id),
                                        best_time_ms=best, tuning_run_id=run_id)
                    if not ok and state.lost is None:
                        job = repo.find_job(session, state.claim.job_id)
                        mine = job is not None and job.status == "running" and job.worker_id == self.worker_id
                        state.lost = "cancel" if mine else "lost"
            except StorageError as exc:  # the database is away: go on; a long outage makes the job stale
                log.warning("job=%d: heartbeat failed: %s", state.claim.job_id, exc)

    # ---- ends ----------------------------------------------------------------------------------------------
    def _end_cancelled(self, state: _JobState, exc: JobCancelled) -> None:
        job_id = state.claim.job_id
        self._mark_run(state, "cancelled", str(exc))
        if exc.reason == "stopping":
            self._release(state)
        elif exc.reason == "cancel":
            self._finish(state, "cancelled", error="cancelled on request after {trials} trials",
                         stop_reason="cancelled")
        else:
            log.warning("job=%d event=lost worker=%s (claimed again by another worker, or ended)", job_id,
                        self.worker_id)

    def _mark_run(self, state: _JobState, status: str, reason: str) -> None:
        """tune() ends an interrupted run ``failed``; an interruption on purpose is ``cancelled``."""
        if state.run_id is None:
            return
        try:
            with session_scope(self.engine) as session:
                repo.finish_run(session, state.run_id, status, reason[:255])
        except ConvtuneError as exc:
            log.warning("job=%d: could not mark run %s %s: %s", state.claim.job_id, state.run_id, status, exc)

    def _finish(self, state: _JobState, status: str, *, error: str | None = None, run_id: int | None = None,
                note: str = "", stop_reason: str | None = None) -> None:
        """End the job; its trial count is read from the stored measurements in the same transaction
        (``error`` may contain ``{trials}``); ``stop_reason`` is a code of ``tune.STOP_CODES``."""
        job_id = state.claim.job_id
        with session_scope(self.engine) as session:
            trials = repo.count_job_trials(session, job_id)
            ended = repo.finish_job(session, job_id, worker_id=self.worker_id, status=status,
                                    error=error.format(trials=trials) if error else None,
                                    tuning_run_id=run_id or state.run_id, trials_done=trials,
                                    best_time_ms=state.best_time_ms, now=self.clock(),
                                    stop_reason=stop_reason)
        if ended:
            log.info("job=%d event=%s worker=%s run=%s trials=%s best_ms=%s %s", job_id, status, self.worker_id,
                     run_id or state.run_id, trials, state.best_time_ms, note or error or "")
        else:
            log.warning("job=%d event=lost worker=%s (not ours any more: its %s result was not recorded)", job_id,
                        self.worker_id, status)

    def _release(self, state: _JobState) -> bool:
        job_id = state.claim.job_id
        with session_scope(self.engine) as session:
            trials = repo.count_job_trials(session, job_id)
            released = repo.release_job(session, job_id, worker_id=self.worker_id, trials_done=trials,
                                        tuning_run_id=state.run_id)
            if released and state.run_id is not None:
                run = repo.find_run(session, state.run_id)
                if run is not None and run.status == "running":
                    repo.finish_run(session, state.run_id, "cancelled", f"worker {self.worker_id} released job "
                                                                        f"{job_id}")
        log.info("job=%d event=%s worker=%s trials=%d", job_id, "released" if released else "lost",
                 self.worker_id, trials)
        return released

    def _release_when_possible(self, state: _JobState) -> None:
        """Release the job once the database answers again (retrying every ``poll_s``), so that the next claim
        continues it at once instead of after ``stale_after_s``; gives up when the worker stops (the job then
        goes stale and is claimed again)."""
        while True:
            try:
                self._release(state)
                return
            except StorageError as exc:
                log.warning("job=%d: cannot release it yet: %s", state.claim.job_id, exc)
            if self._stop.wait(self.poll_s):
                return
