"""Stored rows to response models: the figures (TFLOP/s, GB/s, floor, efficiency) are derived here."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from functools import lru_cache
from typing import Any

from sqlalchemy.orm import Session

from convtune.api.inputs import machine_for_name
from convtune.api.provisional import Prediction, floor_ms
from convtune.api.schemas import (
    BatchOut,
    BestConfigOut,
    ConfigOut,
    JobOut,
    OtherBestOut,
    ProblemOut,
    ProblemRef,
    RunOut,
    TuneResponse,
)
from convtune.errors import ConvtuneError
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo


@lru_cache(maxsize=4096)
def problem_of(key: str) -> ConvProblem | None:
    """The ConvProblem of a stored key (``None`` if the key no longer parses, e.g. after a rule change)."""
    try:
        return ConvProblem.parse(key)
    except ConvtuneError:
        return None


def rates(problem: ConvProblem | None, time_ms: float | None) -> tuple[float | None, float | None]:
    """(TFLOP/s, GB/s of the compulsory bytes) at ``time_ms``."""
    if problem is None or not time_ms or time_ms <= 0:
        return None, None
    seconds = time_ms * 1e-3
    return problem.flops / seconds / 1e12, problem.compulsory_bytes / seconds / 1e9


def precision_of(key: str) -> str | None:
    """The precision class of a stored key (``ConvProblem.precision``), None if the key no longer parses."""
    problem = problem_of(key)
    return problem.precision if problem is not None else None


def ref(problem_id: int, key: str) -> ProblemRef:
    """A problem's id, key and precision class, as every answer that shows a problem shows it."""
    return ProblemRef(id=problem_id, key=key, precision=precision_of(key))


def problem_ref(row: Any) -> ProblemRef:
    return ref(row.id, row.key)


def problem_out(row: Any) -> ProblemOut:
    return ProblemOut(id=row.id, key=row.key, precision=precision_of(row.key), spec=dict(row.spec), flops=row.flops,
                      compulsory_bytes=row.compulsory_bytes, created_at=row.created_at)


def best_out(view: repo.BestConfigView, others: Sequence[repo.BestConfigView] = ()) -> BestConfigOut:
    """The answer row, measured only if a GPU of its device name measured it; ``others`` (other backends' rows
    of the problem) are listed beside it, flagged."""
    tflops, gbps = rates(problem_of(view.problem_key), view.time_ms)
    return BestConfigOut(
        problem=ref(view.problem_id, view.problem_key), device=view.device_name,
        compute_capability=view.compute_capability, scope=view.scope,
        config=ConfigOut(key=view.config_key, kind=view.config_kind, params=view.params), time_ms=view.time_ms,
        tflops=tflops, gbps=gbps, floor_ms=view.floor_ms, efficiency=view.efficiency, provisional=view.provisional,
        backend=view.backend, measured=view.measured_here, run_id=view.tuning_run_id,
        measurement_id=view.measurement_id, updated_at=view.updated_at,
        others=[OtherBestOut(device=o.device_name, scope=o.scope, config=o.config_key, time_ms=o.time_ms,
                             floor_ms=o.floor_ms, efficiency=o.efficiency, provisional=o.provisional,
                             backend=o.backend, measured=o.measured_here, run_id=o.tuning_run_id) for o in others])


_NOTES = {"model": "predicted by the analytic model (this server runs the model backend)",
          "replay": "replayed from a recorded timing table (this server runs the replay backend), not measured here"}


def tune_measured(view: repo.BestConfigView, requested: ConvProblem | None = None) -> TuneResponse:
    """The 200 answer of POST /v1/tune: a stored best (model-predicted or replayed only on a server of that
    backend, and flagged so). ``problem`` is the row's own problem: for a tf32 request answered by a strict float32
    row, the strict problem (its ``precision`` says float32, and the note says why)."""
    best = best_out(view)
    note = _NOTES.get(view.backend)
    if requested is not None and view.problem_key != requested.key():
        served = (f"served by the {best.problem.precision} problem's config (a config verified for a stricter "
                  f"precision class serves {requested.precision}); POST /v1/jobs tunes the {requested.precision} "
                  "problem itself")
        note = f"{served}; {note}" if note else served
    return TuneResponse(
        problem=best.problem, provisional=view.provisional, predicted=view.provisional, device=view.device_name,
        config=best.config, time_ms=best.time_ms, tflops=best.tflops, gbps=best.gbps, floor_ms=best.floor_ms,
        efficiency=best.efficiency, run_id=best.run_id, job_id=None, job=None, backend=view.backend,
        measured=view.measured_here, note=note)


def tune_provisional(problem: ConvProblem, problem_row: Any, prediction: Prediction | None, job: JobOut | None,
                     note: str | None = None) -> TuneResponse:
    """The 202 answer of POST /v1/tune: the model's prediction and the job that will measure."""
    if prediction is None:
        return TuneResponse(problem=problem_ref(problem_row), provisional=True, predicted=True, device=None,
                            config=None, time_ms=None, tflops=None, gbps=None, floor_ms=None, efficiency=None,
                            run_id=None, job_id=job.id if job else None, job=job,
                            note=note or "the model has no valid configuration for this problem")
    tflops, gbps = rates(problem, prediction.time_ms)
    config = prediction.config
    default = "provisional: predicted by the analytic model; a tuning job will measure it"
    if not prediction.complete:
        default = (f"provisional: the best of the {prediction.ranked} configurations the analytic model ranked "
                   "within this request's budget (the rest is ranked in the background: ask again); a tuning job "
                   "will measure it")
    return TuneResponse(
        problem=problem_ref(problem_row), provisional=True, predicted=True, device=prediction.machine,
        config=ConfigOut(key=config.key(), kind=config.kind, params=config.to_dict()), time_ms=prediction.time_ms,
        tflops=tflops, gbps=gbps, floor_ms=prediction.floor_ms, efficiency=prediction.efficiency, run_id=None,
        job_id=job.id if job else None, job=job, backend="model", prediction_complete=prediction.complete,
        note=note or default)


def _families(text: str | None) -> list[str] | None:
    return [f for f in text.split(",") if f] if text else None


def _window(row: Any) -> str | None:
    start, end = getattr(row, "window_start", None), getattr(row, "window_end", None)
    return f"{start}-{end}" if start and end else None


def job_out(session: Session, job: Any, default_machine: MachineModel, *,
            problems: dict[int, Any] | None = None) -> JobOut:
    """A job with its problem key, and the floor time and efficiency of its best so far."""
    problems = problems if problems is not None else {}
    row = problems.get(job.problem_id)
    if row is None:
        row = problems[job.problem_id] = repo.get_problem(session, job.problem_id)
    problem = problem_of(row.key)
    machine = machine_for_name(job.device_name) or default_machine
    floor = floor_ms(problem, machine) if problem is not None else None
    best = job.best_time_ms
    return JobOut(
        id=job.id, problem=problem_ref(row), device_name=job.device_name, backend=job.backend,
        families=_families(job.families), budget_trials=job.budget_trials, budget_s=job.budget_s,
        status=job.status, cancel_requested=bool(job.cancel_requested), batch_id=job.batch_id,
        not_before=job.not_before, window=_window(job), timezone=job.timezone,
        eligible=job.status == "queued" and repo.is_eligible(job, datetime.now(UTC)), worker_id=job.worker_id,
        attempts=job.attempts or 0, trials_done=job.trials_done or 0, best_time_ms=best, floor_ms=floor,
        efficiency=floor / best if floor and best else None, tuning_run_id=job.tuning_run_id, error=job.error,
        stop_reason=getattr(job, "stop_reason", None),
        created_at=job.created_at, updated_at=job.updated_at, started_at=job.started_at,
        finished_at=job.finished_at)


def run_out(run: Any, device_name: str) -> RunOut:
    return RunOut(id=run.id, device=device_name, backend=run.backend, families=_families(run.families) or [],
                  sampler=run.sampler, status=run.status, stop_reason=run.stop_reason, trials_done=run.trials_done,
                  budget_trials=run.budget_trials, budget_s=run.budget_s, pruning_s=run.pruning_s,
                  space_size=run.space_size,
                  stage_survivors=dict(run.stage_survivors or {}), best_measurement_id=run.best_measurement_id,
                  started_at=run.started_at, finished_at=run.finished_at)


def batch_out(session: Session, batch: Any, jobs: list[Any], default_machine: MachineModel,
              skipped: list[Any] | None = None) -> BatchOut:
    problems: dict[int, Any] = {}
    job_views = [job_out(session, job, default_machine, problems=problems) for job in jobs]
    counts: dict[str, int] = {}
    for job in job_views:
        counts[job.status] = counts.get(job.status, 0) + 1
    return BatchOut(
        id=batch.id, name=batch.name, preset=batch.preset, status=batch.status, not_before=batch.not_before,
        window=_window(batch), timezone=batch.timezone, backend=batch.backend, families=_families(batch.families),
        budget_trials=batch.budget_trials, budget_s=batch.budget_s, created_at=batch.created_at, counts=counts,
        jobs=job_views, skipped=skipped or [])
