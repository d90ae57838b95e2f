"""What POST /v1/tune, /v1/jobs and /v1/batches do, between the request models and the repository.

The routes stay thin: they parse, call functions here inside :meth:`~convtune.api.deps.Database.run`, and
answer. POST /v1/tune works in three steps so that no request does unbounded work and the database is never
held across the model's ranking:

1. :func:`tune_lookup` (a read-only transaction): the key, the stored best (→ 200; of a tf32 problem, the fastest
   of its rows and its strict float32 twin's: ``ConvProblem.serving_keys``), the key's own active job of the shape,
   and the key's queue limit (→ 429) — all before any prediction;
2. :func:`predict_provisional` (no database): the model's provisional config within ``predict_budget_s``;
3. :func:`tune_commit` (a short write transaction): the problem row and the job (→ 202).

Jobs and batches belong to the key that made them: other keys get 404 on read and cancel and do not see
them in lists; an admin key (``convtune keys create --admin``) sees and cancels all.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from convtune.api.errors import Conflict, QueueLimit, ResourceNotFound
from convtune.api.inputs import DeviceChoice, check_families, resolve_device, to_problem, unsupported_reason
from convtune.api.presets import preset_problems
from convtune.api.provisional import Prediction, predict
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
from convtune.errors import InvalidConfig, InvalidInput, InvalidProblem
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.tuner.efficiency import family_choice
from convtune.vocabulary import FINAL_JOB_STATUSES as FINAL_JOB_STATUSES


@dataclass
class TuneOutcome:
    """The answer of POST /v1/tune: 200 (a stored best) or 202 (provisional, with the job)."""

    status_code: int
    body: TuneResponse
    job_id: int | None = None


@dataclass(frozen=True, slots=True)
class TuneLookup:
    """What step 1 of POST /v1/tune found: an answer (``outcome``), or what steps 2 and 3 need."""

    problem: ConvProblem
    device: DeviceChoice
    key_id: int
    outcome: TuneOutcome | None = None
    job_id: int | None = None  # the caller's active job of this shape, joined instead of a new one


def visible(row: Any, api_key: Any) -> bool:
    """Whether a job or batch is the caller's (or the caller holds an admin key)."""
    return bool(api_key.is_admin) or row.api_key_id == api_key.id


def _answerable(view: repo.BestConfigView | None, settings: Settings) -> bool:
    """A stored best answers the request: measured on a GPU, or of this server's own backend (a replay or
    model demo server answers from its replayed or predicted rows)."""
    return view is not None and (view.measured_here or view.backend == settings.backend)


def enforce_queue_limit(session: Session, api_key: Any, new_jobs: int) -> None:
    """429 when ``new_jobs`` more would take the key past its ``max_queued_jobs`` (queued + running)."""
    active = repo.count_active_jobs(session, api_key.id)
    if active + new_jobs > api_key.max_queued_jobs:
        raise QueueLimit(f"the key {api_key.name!r} has {active} queued or running jobs; {new_jobs} more would "
                         f"exceed its limit of {api_key.max_queued_jobs}", "X-API-Key")


def _stored_answer(session: Session, settings: Settings, problem: ConvProblem,
                   device: DeviceChoice) -> TuneOutcome | None:
    # rows come GPU first, then replayed, then predicted: if the first cannot answer, none can. ``serving``: a tf32
    # problem is answered by its own rows and its strict float32 twin's, a strict problem by its own only
    view = repo.find_best_config(session, problem_key=problem, device_name=device.name, serving=True)
    if view is not None and _answerable(view, settings):
        return _with_choice(TuneOutcome(200, tune_measured(view, problem)), problem, device.machine)
    return None


def tune_lookup(session: Session, settings: Settings, api_key: Any, problem: ConvProblem,
                body: TuneRequest) -> TuneLookup:
    """Step 1 of POST /v1/tune (read-only): the stored best, else the caller's own active job of the shape,
    else the queue limit checked — nothing here costs more than a few indexed reads."""
    device = resolve_device(session, body.device, settings.default_device)
    answer = _stored_answer(session, settings, problem, device)
    if answer is not None:
        return TuneLookup(problem, device, api_key.id, outcome=answer)
    check_families(problem, None)
    row = repo.find_problem(session, problem)
    job = (repo.find_active_job(session, problem_id=row.id, device_name=device.name, backend=settings.backend,
                                api_key_id=api_key.id) if row is not None else None)
    if job is None:
        enforce_queue_limit(session, api_key, 1)
    return TuneLookup(problem, device, api_key.id, job_id=job.id if job is not None else None)


def predict_provisional(settings: Settings, lookup: TuneLookup) -> Prediction | None:
    """Step 2 of POST /v1/tune (no database): the model's provisional config within the request's budget."""
    return predict(lookup.problem, lookup.device.machine, settings.predict_budget_s)


def tune_commit(session: Session, settings: Settings, api_key: Any, lookup: TuneLookup,
                prediction: Prediction | None) -> TuneOutcome:
    """Step 3 of POST /v1/tune: the problem row and the job (the caller's active one, or a new one), 202."""
    problem, device = lookup.problem, lookup.device
    problem_row = repo.get_or_create_problem(session, problem)
    job = repo.find_job(session, lookup.job_id) if lookup.job_id is not None else None
    if job is None or job.status in FINAL_JOB_STATUSES:
        job = repo.find_active_job(session, problem_id=problem_row.id, device_name=device.name,
                                   backend=settings.backend, api_key_id=api_key.id)
    if job is None:
        enforce_queue_limit(session, api_key, 1)
        job = repo.create_job(session, problem=problem, backend=settings.backend,
                              budget_trials=settings.default_budget_trials, budget_s=settings.default_budget_s,
                              device_name=device.name, api_key_id=api_key.id, timezone=settings.timezone)
    return _with_choice(TuneOutcome(202, tune_provisional(problem, problem_row, prediction,
                                                          job_out(session, job, device.machine)), job.id),
                        problem, device.machine)


def tune_after_wait(session: Session, settings: Settings, body: TuneRequest, job_id: int,
                    prediction: Prediction | None, note: str | None = None) -> TuneOutcome:
    """The answer once waiting is over: the stored best if the job finished with one, else 202 with the
    job's state and the provisional prediction."""
    problem = to_problem(body.problem, body.dtype, math=body.math)
    device = resolve_device(session, body.device, settings.default_device)
    job = repo.get_job(session, job_id)
    if job.status == "finished":
        answer = _stored_answer(session, settings, problem, device)
        if answer is not None:
            return answer
    problem_row = repo.get_problem(session, job.problem_id)
    if job.status in ("failed", "cancelled"):
        note = f"the tuning job {job.status}{': ' + job.error if job.error else ''}; the config is the model's"
    return _with_choice(TuneOutcome(202, tune_provisional(problem, problem_row, prediction,
                                                          job_out(session, job, device.machine), note), job.id),
                        problem, device.machine)


def _with_choice(outcome: TuneOutcome, problem: ConvProblem, machine: MachineModel) -> TuneOutcome:
    """Attach the bound's family choice (floor times side by side) to the answer."""
    outcome.body = outcome.body.model_copy(update={"family_choice": choice_out(problem, machine)})
    return outcome


@lru_cache(maxsize=4096)
def choice_out(problem: ConvProblem, machine: MachineModel) -> FamilyChoiceOut:
    """The bound's family choice of a shape (pure arithmetic of the bounds, so cached per shape and machine)."""
    return FamilyChoiceOut.model_validate(family_choice(problem, machine))


def poll_job_status(session: Session, job_id: int) -> str:
    """The job's status as committed now."""
    return str(repo.get_job(session, job_id).status)


def poll_delays(total_s: float) -> list[float]:
    """Sleeps of a bounded wait: 0.1 s growing to 1 s, summing to ``total_s``."""
    delays, spent, step = [], 0.0, 0.1
    while spent < total_s - 1e-9:
        delay = min(step, total_s - spent)
        delays.append(delay)
        spent += delay
        step = min(1.0, step * 1.5)
    return delays


# ---- jobs ------------------------------------------------------------------------------------------------
def default_machine(settings: Settings) -> MachineModel:
    return MachineModel.preset(settings.default_device)


def create_job(session: Session, settings: Settings, api_key: Any, body: JobCreate) -> JobOut:
    problem = to_problem(body.problem, body.dtype, math=body.math)
    device = resolve_device(session, body.device, settings.default_device)
    families = check_families(problem, body.families)
    enforce_queue_limit(session, api_key, 1)
    job = repo.create_job(
        session, problem=problem, backend=body.backend or settings.backend, families=families,
        budget_trials=body.budget_trials or settings.default_budget_trials,
        budget_s=body.budget_s or settings.default_budget_s, device_name=device.name, api_key_id=api_key.id,
        not_before=body.not_before, window=body.window, timezone=body.timezone or settings.timezone)
    return job_out(session, job, device.machine)


def _own_job(session: Session, api_key: Any, job_id: int) -> Any:
    job = repo.find_job(session, job_id)
    if job is None or not visible(job, api_key):  # another key's job is not there for this caller
        raise ResourceNotFound(f"no job {job_id} of the key {api_key.name!r}", "job_id")
    return job


def get_job(session: Session, settings: Settings, api_key: Any, job_id: int) -> JobOut:
    return job_out(session, _own_job(session, api_key, job_id), default_machine(settings))


def list_jobs(session: Session, settings: Settings, api_key: Any, *, status: str | None, batch_id: int | None,
              problem_id: int | None, limit: int, offset: int) -> list[JobOut]:
    """The caller's jobs (an admin key: everyone's), newest first."""
    problems: dict[int, Any] = {}
    machine = default_machine(settings)
    owner = None if api_key.is_admin else api_key.id
    return [job_out(session, job, machine, problems=problems)
            for job in repo.list_jobs(session, status=status, batch_id=batch_id, problem_id=problem_id,
                                      api_key_id=owner, limit=limit, offset=offset)]


def cancel_job(session: Session, settings: Settings, api_key: Any, job_id: int) -> JobOut:
    """Queued: cancelled now. Running: ``cancel_requested``; the worker stops within about a second
    (pruning included; a trial in flight finishes and is stored). Finished, failed or cancelled already: 409."""
    job = _own_job(session, api_key, job_id)
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
        if body.math is not None:  # the dense layers: the ones convtune.torch runs in PyTorch's TF32 class
            try:
                problems = [p.replace(math=body.math) if p.groups == 1 else p for p in problems]
            except InvalidProblem as exc:
                raise InvalidProblem("math", exc.detail) from None
        return problems
    if body.batch_size is not None:
        raise InvalidInput("batch_size", "applies to presets only; give N (or B) in each problem instead")
    assert body.problems is not None
    return list(dict.fromkeys(to_problem(spec, body.dtype, math=body.math, prefix=f"problems[{i}].")
                              for i, spec in enumerate(body.problems)))


def create_batch(session: Session, settings: Settings, api_key: Any, body: BatchCreate,
                 problems: list[ConvProblem] | None = None) -> BatchOut:
    """One job per problem that some kernel family can run; the others are listed as ``skipped``
    (``problems``: :func:`batch_problems` of the body, when the caller has parsed them already)."""
    problems = problems if problems is not None else batch_problems(body)
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
        timezone=body.timezone or settings.timezone, backend=body.backend or settings.backend, families=families,
        budget_trials=body.budget_trials or settings.default_budget_trials,
        budget_s=body.budget_s or settings.default_budget_s, api_key_id=api_key.id, device_name=device.name)
    return batch_out(session, batch, repo.batch_jobs(session, batch.id), device.machine, skipped)


def _own_batch(session: Session, api_key: Any, batch_id: int) -> Any:
    batch = repo.find_batch(session, batch_id)
    if batch is None or not visible(batch, api_key):
        raise ResourceNotFound(f"no batch {batch_id} of the key {api_key.name!r}", "batch_id")
    return batch


def get_batch(session: Session, settings: Settings, api_key: Any, batch_id: int) -> BatchOut:
    batch = _own_batch(session, api_key, batch_id)
    return batch_out(session, batch, repo.batch_jobs(session, batch.id), default_machine(settings))


def list_batches(session: Session, settings: Settings, api_key: Any, *, limit: int, offset: int) -> list[BatchOut]:
    """The caller's batches (an admin key: everyone's), newest first."""
    machine = default_machine(settings)
    owner = None if api_key.is_admin else api_key.id
    return [batch_out(session, batch, repo.batch_jobs(session, batch.id), machine)
            for batch in repo.list_batches(session, api_key_id=owner, limit=limit, offset=offset)]


def cancel_batch(session: Session, settings: Settings, api_key: Any, batch_id: int) -> BatchOut:
    """Cancel every queued or running job of the caller's batch (running ones stop within about a second);
    409 when every job has ended already."""
    batch = _own_batch(session, api_key, batch_id)
    if batch.status in ("finished", "cancelled"):
        raise Conflict(f"batch {batch_id} is already {batch.status}", "batch_id")
    batch = repo.cancel_batch(session, batch_id)
    return batch_out(session, batch, repo.batch_jobs(session, batch.id), default_machine(settings))
