"""POST/GET /v1/batches, GET/DELETE /v1/batches/{id}: batches of tuning jobs (e.g. overnight), per key."""

from __future__ import annotations

from fastapi import APIRouter, status

from convtune.api import handlers
from convtune.api.deps import DbDep, SettingsDep, WriterDep
from convtune.api.errors import error_responses
from convtune.api.params import BatchId, Limit, Offset
from convtune.api.schemas import BatchCreate, BatchOut

router = APIRouter(prefix="/v1/batches", tags=["batches"])


@router.post("", response_model=BatchOut, status_code=status.HTTP_202_ACCEPTED,
             summary="Queue one job per problem (or per layer of a preset network)",
             responses=error_responses(400, 401, 413, 422, 429, 503))
async def create_batch(body: BatchCreate, db: DbDep, settings: SettingsDep, caller: WriterDep) -> BatchOut:
    """Problems no kernel family can run yet are listed under ``skipped`` and get no job. With ``window``
    (e.g. ``22:00-06:00``, in ``timezone``, default the server's; may wrap midnight) jobs start only inside
    it."""
    problems = handlers.batch_problems(body)  # parsing needs no database
    return await db.run(lambda s: handlers.create_batch(s, settings, caller.key(s), body, problems))


@router.get("", response_model=list[BatchOut], summary="The caller's batches, newest first (an admin key: all)",
            responses=error_responses(401, 422, 503))
async def list_batches(db: DbDep, settings: SettingsDep, caller: WriterDep, limit: Limit = 20,
                       offset: Offset = 0) -> list[BatchOut]:
    return await db.run(lambda s: handlers.list_batches(s, settings, caller.key(s), limit=limit, offset=offset))


@router.get("/{batch_id}", response_model=BatchOut, summary="A batch and the status of each job",
            responses=error_responses(401, 404, 422, 503))
async def get_batch(batch_id: BatchId, db: DbDep, settings: SettingsDep, caller: WriterDep) -> BatchOut:
    """404 for another key's batch (unless the caller's key is an admin key)."""
    return await db.run(lambda s: handlers.get_batch(s, settings, caller.key(s), batch_id))


@router.delete("/{batch_id}", response_model=BatchOut, summary="Cancel every job of a batch",
               responses=error_responses(401, 404, 409, 422, 503))
async def cancel_batch(batch_id: BatchId, db: DbDep, settings: SettingsDep, caller: WriterDep) -> BatchOut:
    """Queued jobs are cancelled at once, running ones stop within about a second (a trial in flight finishes
    and is stored). 409 when every job has ended; 404 for another key's batch."""
    return await db.run(lambda s: handlers.cancel_batch(s, settings, caller.key(s), batch_id))
