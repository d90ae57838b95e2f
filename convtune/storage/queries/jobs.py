"""The service's queries: API keys, the job queue the workers claim from, batches, queue statistics.

Re-exported by :mod:`convtune.storage.queries` (call them as ``queries.create_job(...)``); the
conventions are those of :mod:`~convtune.storage.queries.results`: a session in, nothing committed,
``find_*`` -> ``None`` and ``get_*``
-> :class:`~convtune.errors.NotFound`. docs/service.md is the contract.

A job's life::

    queued --claim_job--> running --finish_job--> finished | failed | cancelled
      ^                     |  \\--release_job (graceful stop)--> queued
      |                     \\--heartbeat older than stale_after_s: claim_job takes it again (attempts + 1)
      \\--request_cancel: queued -> cancelled at once; running -> cancel_requested (the worker ends it)

Only the worker holding the claim (``worker_id``) may heartbeat, finish or release a job; a job claimed
again from a dead worker answers the old one ``False``, so no job is ended twice.

Times: every ``now`` is injected (timezone-aware); a window ``("22:00", "06:00")`` is read on the wall
clock of the job's IANA time zone and may wrap midnight. A window gates starting (and claiming again); a
job running when its window closes runs on to its budget.
"""

from __future__ import annotations

import hashlib
import re
import secrets
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime, time, timedelta
from typing import Any, cast
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sqlalchemy import Connection, CursorResult, bindparam, func, or_, select, update
from sqlalchemy.orm import Session

from convtune.errors import InvalidInput, NotFound
from convtune.problem import ConvProblem
from convtune.storage.models import (
    ApiKey,
    Batch,
    Job,
    Measurement,
    Problem,
    TuningRun,
    utcnow,
)
from convtune.storage.queries import results
from convtune.vocabulary import ACTIVE_JOB_STATUSES as ACTIVE_JOB_STATUSES
from convtune.vocabulary import BACKENDS, BATCH_STATUSES, JOB_STATUSES
from convtune.vocabulary import FINAL_JOB_STATUSES as FINAL_JOB_STATUSES

SECRET_PREFIX = "ct_"
#: Characters of the secret shown as ``prefix`` (``"ct_" + 5``).
PREFIX_CHARS = 8
DEFAULT_STALE_AFTER_S = 120.0
#: A job whose worker died this many times is failed instead of claimed again (a job that kills workers).
DEFAULT_MAX_ATTEMPTS = 5
_CLAIM_PAGE = 200
_HHMM = re.compile(r"(\d{1,2}):(\d{2})")

Window = tuple[str, str]


# ---- small helpers ----------------------------------------------------------------------------------------
def _aware(field: str, value: datetime | None) -> datetime | None:
    if value is not None and value.tzinfo is None:
        raise InvalidInput(field, f"{value!r} is naive: pass a timezone-aware datetime (e.g. datetime.now(UTC))")
    return value


def _require_now(now: datetime) -> datetime:
    if not isinstance(now, datetime) or now.tzinfo is None:
        raise InvalidInput("now", f"{now!r} must be a timezone-aware datetime")
    return now


def _choice(field: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidInput(field, f"{value!r} is not allowed: must be one of {', '.join(allowed)}")
    return value


def _families(families: str | Sequence[str] | None) -> str | None:
    """Comma-separated family names, or ``None`` (every family that can run the problem)."""
    if families is None:
        return None
    names = families.split(",") if isinstance(families, str) else list(families)
    names = list(dict.fromkeys(str(n).strip() for n in names if str(n).strip()))
    for name in names:
        if not re.fullmatch(r"[a-z0-9_]+", name):
            raise InvalidInput("families", f"{name!r} is not a family name (lower-case letters, digits, '_')")
    return ",".join(names) or None


def _budgets(budget_trials: int, budget_s: float) -> tuple[int, float]:
    if isinstance(budget_trials, bool) or not isinstance(budget_trials, int) or budget_trials < 1:
        raise InvalidInput("budget_trials", f"{budget_trials!r} must be an integer >= 1")
    if isinstance(budget_s, bool) or not isinstance(budget_s, int | float) or not budget_s > 0:
        raise InvalidInput("budget_s", f"{budget_s!r} must be a number > 0")
    return budget_trials, float(budget_s)


def _problem_id(session: Session, problem: ConvProblem | Problem | int) -> int:
    if isinstance(problem, ConvProblem):
        return results.get_or_create_problem(session, problem).id
    if isinstance(problem, Problem):
        return problem.id
    if session.get(Problem, problem) is None:
        raise NotFound(f"problems: no row with id={problem}")
    return int(problem)


# ---- windows and time zones --------------------------------------------------------------------------------
def check_timezone(name: str) -> str:
    """``name`` if it is an IANA time zone (``"Europe/Berlin"``, ``"UTC"``); else :class:`InvalidInput`."""
    try:
        ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError, TypeError):
        raise InvalidInput("timezone", f"{name!r} is not an IANA time zone (e.g. 'Europe/Berlin', 'UTC')") from None
    return name


def _hhmm(text: str) -> str:
    match = _HHMM.fullmatch(text.strip()) if isinstance(text, str) else None
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise InvalidInput("window", f"{text!r} is not a time of day HH:MM (00:00 to 23:59)")
    return f"{int(match[1]):02d}:{match[2]}"


def parse_window(window: str | Sequence[str] | None) -> Window | None:
    """``"22:00-06:00"`` or ``("22:00", "06:00")`` -> ``("22:00", "06:00")``; ``None`` -> ``None``.

    Raises:
        InvalidInput: (field ``window``) not two HH:MM times, or both the same (an empty window).
    """
    if window is None:
        return None
    parts = window.split("-") if isinstance(window, str) else list(window)
    if len(parts) != 2:
        raise InvalidInput("window", f"{window!r} must be two times of day, START-END (e.g. 22:00-06:00)")
    start, end = _hhmm(parts[0]), _hhmm(parts[1])
    if start == end:
        raise InvalidInput("window", f"{start}-{end} is empty: start and end must differ")
    return start, end


def in_window(now: datetime, window: Window | None, timezone: str | None) -> bool:
    """Whether ``now`` falls inside the daily window, read on the wall clock of ``timezone``.

    The window includes its start and excludes its end; a start after the end wraps midnight
    (``22:00-06:00`` is 22:00 to 23:59 and 00:00 to 05:59). No window: always inside.
    """
    if window is None:
        return True
    local = _require_now(now).astimezone(ZoneInfo(timezone or "UTC")).time()
    start, end = (time.fromisoformat(t) for t in window)
    if start < end:
        return start <= local < end
    return local >= start or local < end


def _job_window(job: Job | Batch) -> Window | None:
    if job.window_start is None or job.window_end is None:
        return None
    return job.window_start, job.window_end


def is_eligible(job: Job, now: datetime) -> bool:
    """A job may start (or restart) at ``now``: past its ``not_before`` and inside its window."""
    return _eligible(job.not_before, job.window_start, job.window_end, job.timezone, now)


def _eligible(not_before: datetime | None, window_start: str | None, window_end: str | None, timezone: str | None,
              now: datetime) -> bool:
    if not_before is not None and now < not_before:
        return False
    window = (window_start, window_end) if window_start is not None and window_end is not None else None
    return in_window(now, window, timezone)


def _schedule(not_before: datetime | None, window: str | Sequence[str] | None,
              timezone: str | None) -> dict[str, Any]:
    parsed = parse_window(window)
    zone = check_timezone(timezone) if timezone is not None else ("UTC" if parsed is not None else None)
    return {"not_before": _aware("not_before", not_before), "window_start": parsed[0] if parsed else None,
            "window_end": parsed[1] if parsed else None, "timezone": zone}


# ---- API keys -----------------------------------------------------------------------------------------------
def hash_secret(secret: str) -> str:
    """SHA-256 hex of an API key's secret (what ``api_keys.key_hash`` holds)."""
    return hashlib.sha256(secret.encode("utf-8")).hexdigest()


def create_api_key(session: Session, name: str, *, max_queued_jobs: int = 100,
                   is_admin: bool = False) -> tuple[ApiKey, str]:
    """A new API key: its row and the secret, ``ct_`` + 32 url-safe characters. An admin key
    (``is_admin``) sees and cancels every key's jobs and batches; others only their own.

    The secret is returned once and never stored: only its SHA-256 and its first 8 characters
    (``prefix``, to recognise it in listings) are.

    Raises:
        InvalidInput: an empty or too long name, a name already taken (revoked keys keep theirs), or a
            negative ``max_queued_jobs``.
    """
    name = name.strip() if isinstance(name, str) else name
    if not isinstance(name, str) or not name or len(name) > 64:
        raise InvalidInput("name", f"{name!r} must be 1 to 64 characters")
    if isinstance(max_queued_jobs, bool) or not isinstance(max_queued_jobs, int) or max_queued_jobs < 0:
        raise InvalidInput("max_queued_jobs", f"{max_queued_jobs!r} must be an integer >= 0")
    if find_api_key_by_name(session, name) is not None:
        raise InvalidInput("name", f"an API key named {name!r} exists already (revoked keys keep their names)")
    secret = SECRET_PREFIX + secrets.token_urlsafe(24)  # 24 bytes -> 32 url-safe characters
    key = ApiKey(name=name, key_hash=hash_secret(secret), prefix=secret[:PREFIX_CHARS],
                 max_queued_jobs=max_queued_jobs, is_admin=bool(is_admin), created_at=utcnow())
    session.add(key)
    session.flush()
    return key, secret


#: The active key of a secret's hash, built once (it runs on every authenticated request).
_ACTIVE_KEY = (select(ApiKey.id, ApiKey.name, ApiKey.prefix, ApiKey.max_queued_jobs, ApiKey.is_admin)
               .where(ApiKey.key_hash == bindparam("key_hash"), ApiKey.revoked_at.is_(None)))


def find_api_key(session: Session | Connection, secret: str | None) -> Any:
    """The active (not revoked) key with this secret — a row of its ``id``, ``name``, ``prefix``,
    ``max_queued_jobs`` and ``is_admin`` — or ``None``. Looked up by hash: the secret itself is never
    compared, stored or logged."""
    if not secret or not isinstance(secret, str):
        return None
    return session.execute(_ACTIVE_KEY, {"key_hash": hash_secret(secret)}).first()


def find_api_key_by_name(session: Session, name: str) -> ApiKey | None:
    """The key called ``name`` (revoked or not), or ``None``."""
    return session.scalars(select(ApiKey).where(ApiKey.name == name)).first()


def get_api_key(session: Session, key_id: int) -> ApiKey:
    """The key with this id; raises :class:`NotFound`."""
    key = session.get(ApiKey, key_id)
    if key is None:
        raise NotFound(f"api_keys: no row with id={key_id}")
    return key


def revoke_api_key(session: Session, name: str | int, *, now: datetime | None = None) -> ApiKey:
    """Revoke the key called ``name`` (or with this id): it stops authenticating at once. Revoking a
    revoked key changes nothing. Raises :class:`NotFound`."""
    key = get_api_key(session, name) if isinstance(name, int) else find_api_key_by_name(session, name)
    if key is None:
        raise NotFound(f"no API key named {name!r}")
    if key.revoked_at is None:
        key.revoked_at = _aware("now", now) or utcnow()
        session.flush()
    return key


def list_api_keys(session: Session, *, include_revoked: bool = True) -> list[ApiKey]:
    """Every key (or only the active ones), oldest first."""
    query = select(ApiKey)
    if not include_revoked:
        query = query.where(ApiKey.revoked_at.is_(None))
    return list(session.scalars(query.order_by(ApiKey.id)))


# ---- jobs ---------------------------------------------------------------------------------------------------
def create_job(session: Session, *, problem: ConvProblem | Problem | int, backend: str,
               families: str | Sequence[str] | None = None, budget_trials: int, budget_s: float,
               device_name: str | None = None, batch_id: int | None = None, api_key_id: int | None = None,
               not_before: datetime | None = None, window: str | Sequence[str] | None = None,
               timezone: str | None = None) -> Job:
    """Queue a job to tune ``problem`` (a :class:`ConvProblem`, whose row is created if new, a row, or an id).

    Args:
        backend: ``"gpu"``, ``"replay"`` or ``"model"``: only workers of that backend claim it.
        families: kernel families (a list or comma-separated); ``None``: all that can run the problem.
        device_name: only a worker on a device of this name claims it; ``None``: any device.
        not_before: the job starts no earlier (timezone-aware).
        window: a daily window ``"22:00-06:00"`` or ``("22:00", "06:00")`` in ``timezone`` (default UTC).

    Raises:
        InvalidInput: a bad backend, budget, window, time zone or naive ``not_before`` (``field`` names it).
        NotFound: ``problem`` is an id that does not exist.
    """
    budget_trials, budget_s = _budgets(budget_trials, budget_s)
    now = utcnow()
    job = Job(problem_id=_problem_id(session, problem), device_name=device_name or None,
              backend=_choice("backend", backend, BACKENDS), families=_families(families),
              budget_trials=budget_trials, budget_s=budget_s, status="queued", cancel_requested=False,
              batch_id=batch_id, api_key_id=api_key_id, attempts=0, trials_done=0, created_at=now, updated_at=now,
              **_schedule(not_before, window, timezone))
    session.add(job)
    session.flush()
    return job


def find_job(session: Session, job_id: int) -> Job | None:
    """The job with this id, or ``None``."""
    return session.get(Job, job_id)


def get_job(session: Session, job_id: int) -> Job:
    """The job with this id; raises :class:`NotFound`."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"jobs: no row with id={job_id}")
    return job


def list_jobs(session: Session, *, status: str | Sequence[str] | None = None, batch_id: int | None = None,
              problem_id: int | None = None, api_key_id: int | None = None, limit: int = 100,
              offset: int = 0) -> list[Job]:
    """One page of jobs, newest first, optionally of some statuses, one batch, one problem or one key."""
    query = select(Job)
    if api_key_id is not None:
        query = query.where(Job.api_key_id == api_key_id)
    if status is not None:
        statuses = [status] if isinstance(status, str) else list(status)
        for s in statuses:
            _choice("status", s, JOB_STATUSES)
        query = query.where(Job.status.in_(statuses))
    if batch_id is not None:
        query = query.where(Job.batch_id == batch_id)
    if problem_id is not None:
        query = query.where(Job.problem_id == problem_id)
    return list(session.scalars(query.order_by(Job.id.desc()).limit(limit).offset(offset)))


def count_active_jobs(session: Session, api_key_id: int) -> int:
    """Queued and running jobs submitted with this key (what its ``max_queued_jobs`` limits)."""
    return int(session.scalar(select(func.count()).select_from(Job).where(
        Job.api_key_id == api_key_id, Job.status.in_(ACTIVE_JOB_STATUSES))) or 0)


def find_active_job(session: Session, *, problem_id: int, device_name: str | None, backend: str,
                    api_key_id: int | None = None) -> Job | None:
    """The oldest queued or running job of (problem, device name, backend[, key]), or ``None``.

    ``device_name=None`` matches jobs for any device. A second request of the same key for the same shape
    joins this job instead of queueing a duplicate (another key's request gets a job of its own, which the
    queue runs after this one and answers from its stored run).
    """
    device = Job.device_name.is_(None) if device_name is None else Job.device_name == device_name
    query = select(Job).where(Job.problem_id == problem_id, device, Job.backend == backend,
                              Job.status.in_(ACTIVE_JOB_STATUSES))
    if api_key_id is not None:
        query = query.where(Job.api_key_id == api_key_id)
    return session.scalars(query.order_by(Job.id).limit(1)).first()


def count_job_trials(session: Session, job_id: int) -> int:
    """Measurements stored by the tuning runs of a job: its trial count, exact after any crash (each row and
    its run are written in one transaction; nothing is counted in memory)."""
    return int(session.scalar(select(func.count()).select_from(Measurement)
                              .join(TuningRun, TuningRun.id == Measurement.tuning_run_id)
                              .where(TuningRun.job_id == job_id)) or 0)


def open_job_runs(session: Session, job_id: int) -> list[TuningRun]:
    """The job's tuning runs still marked ``running`` (a worker that died left them so)."""
    return list(session.scalars(select(TuningRun).where(TuningRun.job_id == job_id, TuningRun.status == "running")
                                .order_by(TuningRun.id)))


def running_worker_ids(session: Session) -> set[str]:
    """The ``worker_id`` of every running job."""
    return set(session.scalars(select(Job.worker_id).where(Job.status == "running", Job.worker_id.is_not(None))))


def expire_claims(session: Session, worker_ids: Iterable[str]) -> int:
    """Make the running jobs of these (dead) workers claimable now, as if their heartbeats had gone stale;
    returns how many. A restarted ``convtune serve`` resumes its own job at once instead of after
    ``stale_after_s``."""
    ids = list(worker_ids)
    if not ids:
        return 0
    long_ago = datetime(1970, 1, 1, tzinfo=UTC)
    result = session.execute(update(Job).where(Job.status == "running", Job.worker_id.in_(ids))
                             .values(heartbeat_at=long_ago).execution_options(synchronize_session=False))
    return int(cast("CursorResult[Any]", result).rowcount or 0)  # an UPDATE's result is a CursorResult


def request_cancel(session: Session, job_id: int, *, now: datetime | None = None) -> Job:
    """Cancel a job: a queued one is ``cancelled`` at once; a running one gets ``cancel_requested`` and
    its worker stops after the current trial (which is stored) and ends it ``cancelled``. A finished,
    failed or cancelled job is returned unchanged. Raises :class:`NotFound`."""
    job = _locked(session, job_id)
    if job is None:
        raise NotFound(f"jobs: no row with id={job_id}")
    if job.status in FINAL_JOB_STATUSES:
        return job
    job.cancel_requested = True
    if job.status == "queued":
        job.status = "cancelled"
        job.finished_at = _aware("now", now) or utcnow()
        job.error = "cancelled before it started"
    session.flush()
    _sync_batch(session, job.batch_id)
    return job


def _locked(session: Session, job_id: int, *, skip_locked: bool = False) -> Job | None:
    """The job, re-read and locked for this transaction (PostgreSQL ``FOR UPDATE``; SQLite ignores it and
    serialises writers instead)."""
    query = (select(Job).where(Job.id == job_id).with_for_update(skip_locked=skip_locked)
             .execution_options(populate_existing=True))
    return session.scalars(query).first()


def claim_job(session: Session, *, worker_id: str, now: datetime, backends: Sequence[str] = ("gpu",),
              device_name: str | None = None, stale_after_s: float = DEFAULT_STALE_AFTER_S,
              max_attempts: int = DEFAULT_MAX_ATTEMPTS) -> Job | None:
    """Claim the oldest eligible job for this worker, or ``None`` when there is none.

    Candidates, oldest ``created_at`` first: queued jobs, and running jobs whose heartbeat is older than
    ``stale_after_s`` (their worker died), of one of ``backends`` and for ``device_name`` or any device.
    Eligible: ``now >= not_before`` and ``now`` inside the job's window. A job whose problem (with the same
    backend and families) has another job running, live or stale, is left for later: both would continue
    the same Optuna study, and a stale one is claimed again first (it is older). A stale job with
    ``cancel_requested`` is ended ``cancelled`` instead of claimed; one already claimed ``max_attempts``
    times is ended ``failed``.

    PostgreSQL: each candidate is locked with ``SELECT ... FOR UPDATE SKIP LOCKED`` and re-checked, so
    concurrent workers never claim the same job. SQLite: one worker (the transaction serialises writers).

    The claim sets ``status="running"``, ``worker_id``, ``claimed_at = heartbeat_at = now``,
    ``started_at`` (first claim only) and ``attempts += 1``.
    """
    _require_now(now)
    backends = [_choice("backends", b, BACKENDS) for b in backends]
    stale_before = now - timedelta(seconds=stale_after_s)
    # running jobs, live or stale (a stale one is claimed again before any younger job of its problem)
    busy: dict[tuple[int, str, str | None], set[int]] = {}
    for job_id, problem_id, backend, families in session.execute(select(Job.id, Job.problem_id, Job.backend,
                                                                        Job.families).where(Job.status == "running")):
        busy.setdefault((problem_id, backend, families), set()).add(job_id)
    claimable = or_(Job.status == "queued", (Job.status == "running") & (Job.heartbeat_at < stale_before))
    device = Job.device_name.is_(None) if device_name is None else or_(Job.device_name.is_(None),
                                                                        Job.device_name == device_name)
    query = (select(Job.id, Job.problem_id, Job.backend, Job.families, Job.not_before, Job.window_start,
                    Job.window_end, Job.timezone)
             .where(claimable, device, Job.backend.in_(backends),
                    or_(Job.not_before.is_(None), Job.not_before <= now))
             .order_by(Job.created_at, Job.id))
    offset = 0
    while True:
        page = session.execute(query.limit(_CLAIM_PAGE).offset(offset)).all()
        for row in page:
            if busy.get((row.problem_id, row.backend, row.families), set()) - {row.id}:
                continue
            if not _eligible(None, row.window_start, row.window_end, row.timezone, now):  # not_before: in SQL
                continue
            job = _claim_one(session, row.id, worker_id, now, stale_before, max_attempts)
            if job is not None:
                return job
        if len(page) < _CLAIM_PAGE:
            return None
        offset += _CLAIM_PAGE


def _claim_one(session: Session, job_id: int, worker_id: str, now: datetime, stale_before: datetime,
               max_attempts: int) -> Job | None:
    job = _locked(session, job_id, skip_locked=True)  # another worker holds it: skip, never wait
    if job is None:
        return None
    stale = job.status == "running" and job.heartbeat_at is not None and job.heartbeat_at < stale_before
    if job.status != "queued" and not stale:  # claimed or ended since the candidates were read
        return None
    if stale and (job.cancel_requested or job.attempts >= max_attempts):
        job.status = "cancelled" if job.cancel_requested else "failed"
        job.finished_at = now
        job.error = (f"its worker {job.worker_id} stopped heartbeating; "
                     + ("cancelled as requested" if job.cancel_requested else
                        f"claimed {job.attempts} times, each worker died: not retried"))
        session.flush()
        _sync_batch(session, job.batch_id)
        return None
    job.status = "running"
    job.worker_id = worker_id
    job.claimed_at = job.heartbeat_at = now
    job.started_at = job.started_at or now
    job.attempts += 1
    session.flush()
    _sync_batch(session, job.batch_id)
    return job


def heartbeat(session: Session, job_id: int, *, worker_id: str, now: datetime, trials_done: int | None = None,
              best_time_ms: float | None = None, tuning_run_id: int | None = None) -> bool:
    """Record that ``worker_id`` is alive and working on the job (and its progress, where given).

    Returns:
        ``True`` to go on; ``False`` when the worker must stop after the current trial: the job is no
        longer this worker's (it was claimed again, or ended) or a cancel was requested.
    """
    _require_now(now)
    values: dict[str, Any] = {"heartbeat_at": now, "updated_at": utcnow()}
    for name, value in (("trials_done", trials_done), ("best_time_ms", best_time_ms),
                        ("tuning_run_id", tuning_run_id)):
        if value is not None:
            values[name] = value
    row = session.execute(update(Job).where(Job.id == job_id, Job.worker_id == worker_id, Job.status == "running")
                          .values(**values).returning(Job.cancel_requested)
                          .execution_options(synchronize_session=False)).first()
    return row is not None and not row.cancel_requested


def finish_job(session: Session, job_id: int, *, worker_id: str, status: str, error: str | None = None,
               tuning_run_id: int | None = None, trials_done: int | None = None, best_time_ms: float | None = None,
               now: datetime | None = None, stop_reason: str | None = None) -> bool:
    """End the job this worker holds: ``status`` is ``"finished"``, ``"failed"`` or ``"cancelled"``;
    ``stop_reason`` is why (a code of :data:`convtune.tuner.tune.STOP_CODES`).

    Returns:
        ``True`` when it was ended now; ``False`` (nothing changed) when the job is not running under
        ``worker_id`` any more: it was claimed again after this worker was presumed dead, or ended.
    """
    _choice("status", status, FINAL_JOB_STATUSES)
    job = _locked(session, job_id)
    if job is None or job.status != "running" or job.worker_id != worker_id:
        return False
    job.status = status
    job.finished_at = _aware("now", now) or utcnow()
    job.error = error[:4000] if error else None
    if stop_reason is not None:
        job.stop_reason = stop_reason[:32]
    if tuning_run_id is not None:
        job.tuning_run_id = tuning_run_id
    if trials_done is not None:
        job.trials_done = trials_done
    if best_time_ms is not None:
        job.best_time_ms = best_time_ms
    session.flush()
    _sync_batch(session, job.batch_id)
    return True


def release_job(session: Session, job_id: int, *, worker_id: str, trials_done: int | None = None,
                tuning_run_id: int | None = None) -> bool:
    """Give a running job back to the queue (graceful shutdown): ``queued``, ``worker_id`` cleared, so
    the next worker continues it at once (``trials_done`` so far count against its budget). A job with
    ``cancel_requested`` is ended ``cancelled`` instead. Returns ``False`` (nothing changed) when the job
    is not running under ``worker_id``."""
    job = _locked(session, job_id)
    if job is None or job.status != "running" or job.worker_id != worker_id:
        return False
    if trials_done is not None:
        job.trials_done = trials_done
    if tuning_run_id is not None:
        job.tuning_run_id = tuning_run_id
    if job.cancel_requested:
        job.status, job.finished_at = "cancelled", utcnow()
    else:
        job.status = "queued"
        job.worker_id = job.claimed_at = job.heartbeat_at = None
    session.flush()
    _sync_batch(session, job.batch_id)
    return True


# ---- batches ------------------------------------------------------------------------------------------------
def create_batch(session: Session, *, problems: Iterable[ConvProblem | Problem | int], preset: str | None = None,
                 name: str | None = None, not_before: datetime | None = None, window: str | Sequence[str] | None = None,
                 timezone: str, backend: str, families: str | Sequence[str] | None, budget_trials: int,
                 budget_s: float, api_key_id: int | None = None, device_name: str | None = None) -> Batch:
    """A batch and one queued job per distinct problem (in the order given; repeats are dropped: a network
    repeats layer shapes). The jobs copy the batch's backend, families, budgets, ``not_before`` and window.

    Raises:
        InvalidInput: no problems, or a bad backend, budget, window or time zone.
    """
    budget_trials, budget_s = _budgets(budget_trials, budget_s)
    schedule = _schedule(not_before, window, check_timezone(timezone))
    problem_ids = list(dict.fromkeys(_problem_id(session, p) for p in problems))
    if not problem_ids:
        raise InvalidInput("problems", "a batch needs at least one problem")
    batch = Batch(name=name, preset=preset, status="queued", backend=_choice("backend", backend, BACKENDS),
                  families=_families(families), budget_trials=budget_trials, budget_s=budget_s,
                  api_key_id=api_key_id, created_at=utcnow(), **schedule)
    session.add(batch)
    session.flush()
    for problem_id in problem_ids:
        create_job(session, problem=problem_id, backend=batch.backend, families=batch.families,
                   budget_trials=budget_trials, budget_s=budget_s, device_name=device_name, batch_id=batch.id,
                   api_key_id=api_key_id, not_before=not_before, window=_job_window(batch),
                   timezone=batch.timezone)
    return batch


def find_batch(session: Session, batch_id: int) -> Batch | None:
    """The batch with this id, or ``None``."""
    return session.get(Batch, batch_id)


def get_batch(session: Session, batch_id: int) -> Batch:
    """The batch with this id; raises :class:`NotFound`."""
    batch = session.get(Batch, batch_id)
    if batch is None:
        raise NotFound(f"batches: no row with id={batch_id}")
    return batch


def list_batches(session: Session, *, status: str | None = None, api_key_id: int | None = None, limit: int = 100,
                 offset: int = 0) -> list[Batch]:
    """One page of batches, newest first (optionally of one status, or of one key)."""
    query = select(Batch)
    if api_key_id is not None:
        query = query.where(Batch.api_key_id == api_key_id)
    if status is not None:
        query = query.where(Batch.status == _choice("status", status, BATCH_STATUSES))
    return list(session.scalars(query.order_by(Batch.id.desc()).limit(limit).offset(offset)))


def batch_jobs(session: Session, batch_id: int) -> list[Job]:
    """Every job of a batch, in the order they were created."""
    return list(session.scalars(select(Job).where(Job.batch_id == batch_id).order_by(Job.id)))


def job_counts(session: Session, *, batch_id: int | None = None) -> dict[str, int]:
    """Jobs per status (every status present, zeros included), of one batch or of all."""
    query = select(Job.status, func.count()).group_by(Job.status)
    if batch_id is not None:
        query = query.where(Job.batch_id == batch_id)
    return dict.fromkeys(JOB_STATUSES, 0) | {status: int(n) for status, n in session.execute(query)}


def batch_status(counts: dict[str, int]) -> str:
    """A batch's status from its jobs' counts per status.

    ``running`` while a job runs or some have ended and others still wait; ``queued`` while none has
    started; once every job has ended: ``cancelled`` if all were cancelled, else ``finished`` (failed
    jobs show in the per-job statuses).
    """
    total = sum(counts.values())
    ended = sum(counts.get(s, 0) for s in FINAL_JOB_STATUSES)
    if total and ended == total:
        return "cancelled" if counts.get("cancelled", 0) == total else "finished"
    if counts.get("running", 0) or ended:
        return "running"
    return "queued"


def _sync_batch(session: Session, batch_id: int | None) -> None:
    if batch_id is None:
        return
    status = batch_status(job_counts(session, batch_id=batch_id))
    session.execute(update(Batch).where(Batch.id == batch_id, Batch.status != status).values(status=status)
                    .execution_options(synchronize_session="fetch"))


def cancel_batch(session: Session, batch_id: int, *, now: datetime | None = None) -> Batch:
    """:func:`request_cancel` every queued or running job of a batch. Raises :class:`NotFound`."""
    batch = get_batch(session, batch_id)
    for job_id in session.scalars(select(Job.id).where(Job.batch_id == batch_id,
                                                       Job.status.in_(ACTIVE_JOB_STATUSES)).order_by(Job.id)):
        request_cancel(session, job_id, now=now)
    session.refresh(batch)
    return batch


# ---- statistics ---------------------------------------------------------------------------------------------
def queue_stats(session: Session, *, now: datetime, stale_after_s: float = DEFAULT_STALE_AFTER_S) -> dict[str, Any]:
    """Figures for ``/metrics`` and the pages.

    Returns:
        ``jobs_by_status`` (every status, zeros included), ``queue_depth`` (queued jobs),
        ``eligible_now`` (queued jobs a worker could start at ``now``), ``active_workers`` (distinct
        workers with a live heartbeat), ``measurements_last_60s`` and ``trials_per_s`` (stored
        measurements of the last minute, and per second).
    """
    _require_now(now)
    counts = job_counts(session)
    queued = session.execute(select(Job.not_before, Job.window_start, Job.window_end, Job.timezone)
                             .where(Job.status == "queued")).all()
    workers = session.scalar(select(func.count(func.distinct(Job.worker_id))).where(
        Job.status == "running", Job.heartbeat_at >= now - timedelta(seconds=stale_after_s))) or 0
    recent = session.scalar(select(func.count()).select_from(Measurement).where(
        Measurement.created_at >= now - timedelta(seconds=60), Measurement.created_at <= now)) or 0
    return {"jobs_by_status": counts, "queue_depth": counts["queued"],
            "eligible_now": sum(_eligible(row.not_before, row.window_start, row.window_end, row.timezone, now)
                                for row in queued),
            "active_workers": int(workers),
            "measurements_last_60s": int(recent), "trials_per_s": int(recent) / 60.0}
