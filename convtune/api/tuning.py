"""What POST /v1/tune, /v1/jobs and /v1/batches do, between the request models and the repository.

The routes stay thin: they parse, call one function here, and answer. Order inside matters for SQLite:
the model's prediction (seconds for a new shape) runs before the first write, so the database's write
lock is never held across it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from sqlalchemy.orm import Session

from convtune.api.errors import Conflict, QueueLimit, ResourceNotFound
from convtune.api.inputs import check_families, resolve_device, to_problem, unsupported_reason
from convtune.api.presets import preset_problems
from convtune.api.provisional import predict
from convtune.api.schemas import (
    BatchCreate,
    BatchOut,
    FamilyChoiceOut,
    JobCreate,
    JobOut,
    SkippedProblem,
    TuneRequest,
    TuneResponse,
)
from convtune.api.settings import Settings
from convtune.api.views import batch_out, job_out, tune_measured, tune_provisional
from convtune.errors import InvalidConfig, InvalidInput, NotFound
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import repository as repo
from convtune.tuner.analysis import family_choice

FINAL_JOB_STATUSES = ("finished", "failed", "cancelled")


@dataclass
class TuneOutcome:
    """The answer of POST /v1/tune: 200 (a stored best) or 202 (provisional, with the job)."""

    status_code: int
    body: TuneResponse
    job_id: int | None = None


def _answerable(view: repo.BestConfigView | None, settings: Settings) -> bool:
    """A stored best answers the request: measured, or model-predicted on a model-backend (demo) server."""
    return view is not None and (not view.provisional or settings.backend == "model")


def enforce_queue_limit(session: Session, api_key: Any, new_jobs: int) -> None:
    """429 when ``new_jobs`` more would take the key past its ``max_queued_jobs`` (queued + running)."""
    active = repo.count_active_jobs(session, api_key.id)
    if active + new_jobs > api_key.max_queued_jobs:
        raise QueueLimit(f"the key {api_key.name!r} has {active} queued or running jobs; {new_jobs} more would "
                         f"exceed its limit of {api_key.max_queued_jobs}", "X-API-Key")


def tune(session: Session, settings: Settings, api_key: Any, body: TuneRequest) -> TuneOutcome:
    """The stored best of the problem, else the model's provisional answer and a tuning job (an active job
    of the same problem, device and backend is joined instead of queueing a duplicate)."""
    problem = to_problem(body.problem, body.dtype)
    device = resolve_device(session, body.device, settings.default_device)
    view = repo.find_best_config(session, problem_key=problem, device_name=device.name)
    if view is not None and _answerable(view, settings):
        return _with_choice(TuneOutcome(200, tune_measured(view)), problem, device.machine)
    check_families(problem, None)
    prediction = predict(problem, device.machine)  # before the first write: see the module docstring
    problem_row = repo.get_or_create_problem(session, problem)
    job = repo.find_active_job(session, problem_id=problem_row.id, device_name=device.name, backend=settings.backend)
    if job is None:
        enforce_queue_limit(session, api_key, 1)
        job = repo.create_job(session, problem=problem, backend=settings.backend,
                              budget_trials=settings.default_budget_trials, budget_s=settings.default_budget_s,
                              device_name=device.name, api_key_id=api_key.id, timezone=settings.timezone)
    return _with_choice(TuneOutcome(202, tune_provisional(problem, problem_row, prediction,
                                                          job_out(session, job, device.machine)), job.id),
                        problem, device.machine)


def tune_after_wait(session: Session, settings: Settings, body: TuneRequest, job_id: int) -> TuneOutcome:
    """The answer once waiting is over: the stored best if the job finished with one, else 202 with the
    job's state (the provisional prediction comes from the cache)."""
    problem = to_problem(body.problem, body.dtype)
    device = resolve_device(session, body.device, settings.default_device)
    job = repo.get_job(session, job_id)
    if job.status == "finished":
        view = repo.find_best_config(session, problem_key=problem, device_name=device.name)
        if view is not None and _answerable(view, settings):
            return _with_choice(TuneOutcome(200, tune_measured(view)), problem, device.machine)
    problem_row = repo.get_problem(session, job.problem_id)
    note = None
    if job.status in ("failed", "cancelled"):
        note = f"the tuning job {job.status}{': ' + job.error if job.error else ''}; the config is the model's"
    return _with_choice(TuneOutcome(202, tune_provisional(problem, problem_row, predict(problem, device.machine),
                                                          job_out(session, job, device.machine), note), job.id),
                        problem, device.machine)


def _with_choice(outcome: TuneOutcome, problem: ConvProblem, machine: MachineModel) -> TuneOutcome:
    """Attach the bound's family choice (floor times side by side) to the answer."""
    choice = FamilyChoiceOut.model_validate(family_choice(problem, machine))
    outcome.body = outcome.body.model_copy(update={"family_choice": choice})
    return outcome


def poll_job_status(session: Session, job_id: int) -> str:
    """The job's status as committed now (ends the read transaction, so the next poll sees new commits)."""
    session.expire_all()
    status = repo.get_job(session, job_id).status
    session.commit()
    return str(status)


def poll_delays(total_s: float) -> list[float]:
    """Sleeps of a bounded wait: 0.1 s growing to 1 s, summing to ``total_s``."""
    delays, spent, step = [], 0.0, 0.1
    while spent < total_s - 1e-9:
        delay = min(step, total_s - spent)
        delays.append(delay)
        spent += delay
        step = min(1.0, step * 1.5)
    return delays


def _monotonic() -> float:
    return time.monotonic()


# ---- jobs ------------------------------------------------------------------------------------------------
def default_machine(settings: Settings) -> MachineModel:
    return MachineModel.preset(settings.default_device)


def create_job(session: Session, settings: Settings, api_key: Any, body: JobCreate) -> JobOut:
    problem = to_problem(body.problem, body.dtype)
    device = resolve_device(session, body.device, settings.default_device)
    families = check_families(problem, body.families)
    enforce_queue_limit(session, api_key, 1)
    job = repo.create_job(
        session, problem=problem, backend=body.backend or settings.backend, families=families,
        budget_trials=body.budget_trials or settings.default_budget_trials,
        budget_s=body.budget_s or settings.default_budget_s, device_name=device.name, api_key_id=api_key.id,
        not_before=body.not_before, window=body.window, timezone=settings.timezone)
    return job_out(session, job, device.machine)


def get_job(session: Session, settings: Settings, job_id: int) -> JobOut:
    job = repo.find_job(session, job_id)
    if job is None:
        raise ResourceNotFound(f"no job {job_id}", "job_id")
    return job_out(session, job, default_machine(settings))


def list_jobs(session: Session, settings: Settings, *, status: str | None, batch_id: int | None,
              problem_id: int | None, limit: int, offset: int) -> list[JobOut]:
    problems: dict[int, Any] = {}
    machine = default_machine(settings)
    return [job_out(session, job, machine, problems=problems)
            for job in repo.list_jobs(session, status=status, batch_id=batch_id, problem_id=problem_id, limit=limit,
                                      offset=offset)]


def cancel_job(session: Session, settings: Settings, job_id: int) -> JobOut:
    """Queued: cancelled now. Running: ``cancel_requested``; the worker stops after the current trial
    (which is stored). Finished, failed or cancelled already: 409."""
    job = repo.find_job(session, job_id)
    if job is None:
        raise ResourceNotFound(f"no job {job_id}", "job_id")
    if job.status in FINAL_JOB_STATUSES:
        raise Conflict(f"job {job_id} is already {job.status}", "job_id")
    return job_out(session, repo.request_cancel(session, job_id), default_machine(settings))


# ---- batches ---------------------------------------------------------------------------------------------
def batch_problems(body: BatchCreate) -> list[ConvProblem]:
    """The problems of a batch: its list, or a preset's layers (deduplicated, in order)."""
    if (body.problems is None) == (body.preset is None):
        raise InvalidInput("preset" if body.preset is not None else "problems",
                           "give either 'problems' (a list) or 'preset' (a network name), not both and not neither")
    if body.preset is not None:
        problems = preset_problems(body.preset, batch_size=body.batch_size)
        if body.dtype is not None:
            problems = [p.replace(dtype=body.dtype) for p in problems]
        return problems
    if body.batch_size is not None:
        raise InvalidInput("batch_size", "applies to presets only; give N (or B) in each problem instead")
    assert body.problems is not None
    return list(dict.fromkeys(to_problem(spec, body.dtype, prefix=f"problems[{i}].")
                              for i, spec in enumerate(body.problems)))


def create_batch(session: Session, settings: Settings, api_key: Any, body: BatchCreate) -> BatchOut:
    """One job per problem that some kernel family can run; the others are listed as ``skipped``."""
    problems = batch_problems(body)
    device = resolve_device(session, body.device, settings.default_device)
    families = body.families
    runnable: list[ConvProblem] = []
    skipped: list[SkippedProblem] = []
    for problem in problems:
        if families is None:
            reason = unsupported_reason(problem)
        else:
            try:
                check_families(problem, families)
                reason = None
            except InvalidConfig as exc:
                if exc.field == "families":  # an unknown family fails the whole request
                    raise
                reason = exc.detail
        if reason is None:
            runnable.append(problem)
        else:
            skipped.append(SkippedProblem(key=problem.key(), reason=reason))
    if not runnable:
        raise InvalidConfig("problems" if body.problems is not None else "preset",
                            f"no kernel family can run any of the {len(problems)} problems: {skipped[0].reason}")
    enforce_queue_limit(session, api_key, len(runnable))
    batch = repo.create_batch(
        session, problems=runnable, preset=body.preset, name=body.name, not_before=body.not_before, window=body.window,
        timezone=settings.timezone, backend=body.backend or settings.backend, families=families,
        budget_trials=body.budget_trials or settings.default_budget_trials,
        budget_s=body.budget_s or settings.default_budget_s, api_key_id=api_key.id, device_name=device.name)
    return batch_out(session, batch, repo.batch_jobs(session, batch.id), device.machine, skipped)


def get_batch(session: Session, settings: Settings, batch_id: int) -> BatchOut:
    try:
        batch = repo.get_batch(session, batch_id)
    except NotFound:
        raise ResourceNotFound(f"no batch {batch_id}", "batch_id") from None
    return batch_out(session, batch, repo.batch_jobs(session, batch.id), default_machine(settings))


def list_batches(session: Session, settings: Settings, *, limit: int, offset: int) -> list[BatchOut]:
    machine = default_machine(settings)
    return [batch_out(session, batch, repo.batch_jobs(session, batch.id), machine)
            for batch in repo.list_batches(session, limit=limit, offset=offset)]
