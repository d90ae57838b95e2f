"""POST /v1/batches, GET /v1/batches, GET /v1/batches/{id}: batches of tuning jobs (e.g. overnight)."""

from __future__ import annotations

from fastapi import APIRouter, status

from convtune.api import tuning
from convtune.api.deps import ReadKeyDep, SessionDep, SettingsDep, WriteKeyDep
from convtune.api.errors import error_responses
from convtune.api.params import BatchId, Limit, Offset
from convtune.api.schemas import BatchCreate, BatchOut

router = APIRouter(prefix="/v1/batches", tags=["batches"])


@router.post("", response_model=BatchOut, status_code=status.HTTP_202_ACCEPTED,
             summary="Queue one job per problem (or per layer of a preset network)",
             responses=error_responses(400, 401, 413, 422, 429, 503))
def create_batch(body: BatchCreate, session: SessionDep, settings: SettingsDep, key: WriteKeyDep) -> BatchOut:
    """Problems no kernel family can run yet are listed under ``skipped`` and get no job. With ``window``
    (e.g. ``22:00-06:00``, server time zone, may wrap midnight) jobs start only inside it."""
    return tuning.create_batch(session, settings, key, body)


@router.get("", response_model=list[BatchOut], summary="Batches, newest first",
            responses=error_responses(401, 422, 503))
def list_batches(session: SessionDep, settings: SettingsDep, _: ReadKeyDep, limit: Limit = 20,
                 offset: Offset = 0) -> list[BatchOut]:
    return tuning.list_batches(session, settings, limit=limit, offset=offset)


@router.get("/{batch_id}", response_model=BatchOut, summary="A batch and the status of each job",
            responses=error_responses(401, 404, 422, 503))
def get_batch(batch_id: BatchId, session: SessionDep, settings: SettingsDep, _: ReadKeyDep) -> BatchOut:
    return tuning.get_batch(session, settings, batch_id)
