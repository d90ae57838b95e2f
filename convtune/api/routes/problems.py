"""GET /v1/problems, /v1/problems/{id}, /v1/problems/{id}/trials, /v1/problems/{id}/report.svg."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Response
from sqlalchemy.orm import Session

from convtune.api.deps import Caller, DbDep, ReaderDep, SettingsDep
from convtune.api.errors import ResourceNotFound, error_responses
from convtune.api.handlers import default_machine
from convtune.api.params import Limit, Offset, OptionalId, ProblemId
from convtune.api.report import report_svg
from convtune.api.schemas import (
    ConfigOut,
    MeasurementOut,
    ProblemDetail,
    ProblemOut,
    PruningDecisionOut,
    TrialsPage,
)
from convtune.api.views import best_out, job_out, problem_of, problem_out, problem_ref, rates, run_out
from convtune.errors import NotFound
from convtune.storage import queries as repo

router = APIRouter(prefix="/v1/problems", tags=["problems"])

Stage = Literal["infeasible", "traffic", "predicted_time", "kept"]


def _problem(session: Any, problem_id: int) -> Any:
    try:
        return repo.get_problem(session, problem_id)
    except NotFound:
        raise ResourceNotFound(f"no problem {problem_id}", "problem_id") from None


@router.get("", response_model=list[ProblemOut], summary="Problems, oldest first",
            responses=error_responses(401, 422, 503))
async def list_problems(db: DbDep, caller: ReaderDep, limit: Limit = 100, offset: Offset = 0) -> list[ProblemOut]:
    def work(session: Session) -> list[ProblemOut]:
        caller.reader(session)
        return [problem_out(row) for row in repo.list_problems(session, limit=limit, offset=offset)]

    return await db.run(work)


@router.get("/{problem_id}", response_model=ProblemDetail, summary="A problem: best configs, runs, jobs, counts",
            responses=error_responses(401, 404, 422, 503))
async def get_problem(problem_id: ProblemId, db: DbDep, settings: SettingsDep, caller: ReaderDep) -> ProblemDetail:
    """The problem's shared history (best configs per device and backend, runs, counts) and the caller's own
    jobs of it (an admin key: everyone's; no key: none)."""

    def work(session: Session) -> ProblemDetail:
        key = caller.reader(session)
        row = _problem(session, problem_id)
        devices = {d.id: d.name for d in repo.list_devices(session)}
        machine = default_machine(settings)
        problems = {row.id: row}
        jobs = [] if key is None else repo.list_jobs(session, problem_id=row.id, limit=100,
                                                     api_key_id=None if key.is_admin else key.id)
        return ProblemDetail(
            **problem_out(row).model_dump(),
            best_configs=[best_out(view) for view in repo.list_best_configs(session, problem_key=row.key)],
            runs=[run_out(run, devices.get(run.device_id, "?")) for run in repo.list_runs(session, row.id)],
            jobs=[job_out(session, job, machine, problems=problems) for job in jobs],
            measurements=repo.count_problem_measurements(session, row.id),
            pruning_decisions=repo.count_problem_pruning_decisions(session, row.id))

    return await db.run(work)


@router.get("/{problem_id}/trials", response_model=TrialsPage,
            summary="A page of the problem's history: measurements and pruning decisions, oldest first",
            responses=error_responses(401, 404, 422, 503))
async def trials(problem_id: ProblemId, db: DbDep, caller: ReaderDep, limit: Limit = 100, offset: Offset = 0,
                 stage: Annotated[Stage | None, Query(description="pruning decisions of this stage only")] = None
                 ) -> TrialsPage:
    """The same ``limit``/``offset`` page both lists; ``total_*`` say how many there are."""
    return await db.run(lambda s: _trials(s, caller, problem_id, limit, offset, stage))


def _trials(session: Session, caller: Caller, problem_id: int, limit: int, offset: int,
            stage: str | None) -> TrialsPage:
    caller.reader(session)
    row = _problem(session, problem_id)
    conv = problem_of(row.key)
    measurements = []
    for m, device, config in repo.page_problem_measurements(session, row.id, limit=limit, offset=offset):
        tflops, gbps = rates(conv, m.median_ms if m.status == "ok" else None)
        measurements.append(MeasurementOut(
            id=m.id, device=device, run_id=m.tuning_run_id, backend=m.backend, predicted=m.predicted, status=m.status,
            config=ConfigOut(key=config.key, kind=config.kind, params=dict(config.params)), median_ms=m.median_ms,
            p10_ms=m.p10_ms, p90_ms=m.p90_ms, min_ms=m.min_ms, tflops=tflops, gbps=gbps, rel_error=m.rel_error,
            num_regs=m.num_regs, smem_bytes=m.smem_bytes, local_bytes=m.local_bytes, compile_s=m.compile_s,
            error=m.error, created_at=m.created_at))
    decisions = [PruningDecisionOut(id=d.id, run_id=d.tuning_run_id, device=device, config_key=key, stage=d.stage,
                                    reason=d.reason, numbers=dict(d.numbers or {}), created_at=d.created_at)
                 for d, device, key in repo.page_problem_pruning_decisions(session, row.id, limit=limit, offset=offset,
                                                                      stage=stage)]
    return TrialsPage(problem=problem_ref(row), limit=limit, offset=offset,
                      total_measurements=repo.count_problem_measurements(session, row.id),
                      total_pruning_decisions=repo.count_problem_pruning_decisions(session, row.id, stage=stage),
                      measurements=measurements, pruning_decisions=decisions)


@router.get("/{problem_id}/report.svg", response_class=Response, summary="Convergence and roofline plot (SVG)",
            responses={200: {"content": {"image/svg+xml": {}}, "description": "the report plot"},
                       **error_responses(401, 404, 422, 503)})
async def report(problem_id: ProblemId, db: DbDep, caller: ReaderDep,
                 device_id: Annotated[OptionalId, Query(description="the device (default: the one with most "
                                                                    "measurements)")] = None) -> Response:
    def work(session: Session) -> str:
        caller.reader(session)
        return report_svg(session, _problem(session, problem_id).id, device_id)

    return Response(await db.run(work), media_type="image/svg+xml")
