"""POST/GET /v1/jobs, GET/DELETE /v1/jobs/{id}: tuning jobs and their progress (each key sees its own)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from convtune.api import handlers
from convtune.api.deps import DbDep, SettingsDep, WriterDep
from convtune.api.errors import error_responses
from convtune.api.inputs import to_problem
from convtune.api.params import JobId, Limit, Offset, OptionalId
from convtune.api.schemas import JobCreate, JobOut, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("", response_model=JobOut, status_code=status.HTTP_202_ACCEPTED, summary="Queue a tuning job",
             responses=error_responses(400, 401, 413, 422, 429, 503))
async def create_job(body: JobCreate, db: DbDep, settings: SettingsDep, caller: WriterDep) -> JobOut:
    """Always queues a new job (POST /v1/tune joins the caller's active one instead). With ``window`` the job
    runs only between those times of day (in ``timezone``, default the server's); with ``not_before`` not
    before that time."""
    to_problem(body.problem, body.dtype, math=body.math)  # a bad problem is a 422 before the database
    return await db.run(lambda s: handlers.create_job(s, settings, caller.key(s), body))


@router.get("", response_model=list[JobOut], summary="The caller's jobs, newest first (an admin key: everyone's)",
            responses=error_responses(401, 422, 503))
async def list_jobs(db: DbDep, settings: SettingsDep, caller: WriterDep,
                    status: Annotated[JobStatus | None, Query(description="only jobs in this state")] = None,
                    batch_id: Annotated[OptionalId, Query(description="only jobs of this batch")] = None,
                    problem_id: Annotated[OptionalId, Query(description="only jobs of this problem")] = None,
                    limit: Limit = 100, offset: Offset = 0) -> list[JobOut]:
    """Jobs belong to the key that queued them: this lists the caller's."""
    return await db.run(lambda s: handlers.list_jobs(s, settings, caller.key(s), status=status, batch_id=batch_id,
                                                   problem_id=problem_id, limit=limit, offset=offset))


@router.get("/{job_id}", response_model=JobOut, summary="A job: status, trials done, best so far, efficiency",
            responses=error_responses(401, 404, 422, 503))
async def get_job(job_id: JobId, db: DbDep, settings: SettingsDep, caller: WriterDep) -> JobOut:
    """404 for another key's job (unless the caller's key is an admin key)."""
    return await db.run(lambda s: handlers.get_job(s, settings, caller.key(s), job_id))


@router.delete("/{job_id}", response_model=JobOut, summary="Cancel a job",
               responses=error_responses(401, 404, 409, 422, 503))
async def cancel_job(job_id: JobId, db: DbDep, settings: SettingsDep, caller: WriterDep) -> JobOut:
    """A queued job is cancelled at once; a running one gets ``cancel_requested`` and stops within about a
    second in any phase (pruning included; a trial in flight finishes and is stored). 409 when the job has
    already ended; 404 for another key's job."""
    return await db.run(lambda s: handlers.cancel_job(s, settings, caller.key(s), job_id))
