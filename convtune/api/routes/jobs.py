"""POST/GET /v1/jobs, GET/DELETE /v1/jobs/{id}: tuning jobs and their progress."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, status

from convtune.api import tuning
from convtune.api.deps import ReadKeyDep, SessionDep, SettingsDep, WriteKeyDep
from convtune.api.errors import error_responses
from convtune.api.params import JobId, Limit, Offset, OptionalId
from convtune.api.schemas import JobCreate, JobOut, JobStatus

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])


@router.post("", response_model=JobOut, status_code=status.HTTP_202_ACCEPTED, summary="Queue a tuning job",
             responses=error_responses(400, 401, 413, 422, 429, 503))
def create_job(body: JobCreate, session: SessionDep, settings: SettingsDep, key: WriteKeyDep) -> JobOut:
    """Always queues a new job (POST /v1/tune joins an active one instead). With ``window`` the job runs
    only between those times of day (server time zone); with ``not_before`` not before that time."""
    return tuning.create_job(session, settings, key, body)


@router.get("", response_model=list[JobOut], summary="Jobs, newest first", responses=error_responses(401, 422, 503))
def list_jobs(session: SessionDep, settings: SettingsDep, _: ReadKeyDep,
              status: Annotated[JobStatus | None, Query(description="only jobs in this state")] = None,
              batch_id: Annotated[OptionalId, Query(description="only jobs of this batch")] = None,
              problem_id: Annotated[OptionalId, Query(description="only jobs of this problem")] = None,
              limit: Limit = 100, offset: Offset = 0) -> list[JobOut]:
    return tuning.list_jobs(session, settings, status=status, batch_id=batch_id, problem_id=problem_id, limit=limit,
                            offset=offset)


@router.get("/{job_id}", response_model=JobOut, summary="A job: status, trials done, best so far, efficiency",
            responses=error_responses(401, 404, 422, 503))
def get_job(job_id: JobId, session: SessionDep, settings: SettingsDep, _: ReadKeyDep) -> JobOut:
    return tuning.get_job(session, settings, job_id)


@router.delete("/{job_id}", response_model=JobOut, summary="Cancel a job",
               responses=error_responses(401, 404, 409, 422, 503))
def cancel_job(job_id: JobId, session: SessionDep, settings: SettingsDep, key: WriteKeyDep) -> JobOut:
    """A queued job is cancelled at once; a running one gets ``cancel_requested``: its current trial finishes
    and is stored, the rest stop. 409 when the job has already ended."""
    return tuning.cancel_job(session, settings, job_id)
