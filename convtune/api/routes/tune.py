"""POST /v1/tune: the best configuration of a convolution, or a provisional one and a tuning job."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Query, Response
from fastapi.concurrency import run_in_threadpool

from convtune.api import tuning
from convtune.api.deps import SessionDep, SettingsDep, WriteKeyDep
from convtune.api.errors import error_responses
from convtune.api.schemas import TuneRequest, TuneResponse

router = APIRouter(prefix="/v1", tags=["tune"])

WaitQuery = Annotated[float, Query(ge=0, le=600, description="seconds to wait for the tuning job (bounded by the "
                                                             "server's max_wait_s)")]


@router.post(
    "/tune", response_model=TuneResponse, summary="Best configuration of a convolution (tunes unseen shapes)",
    responses={202: {"model": TuneResponse, "description": "Nothing measured yet: the model's provisional config "
                                                           "and the queued (or joined) tuning job"},
               **error_responses(400, 401, 413, 422, 429, 503)})
async def tune(body: TuneRequest, response: Response, session: SessionDep, settings: SettingsDep, key: WriteKeyDep,
               wait: WaitQuery = 0) -> TuneResponse:
    """200 with the best measured configuration (time, TFLOP/s, GB/s, floor time, efficiency, the run that
    found it) when one is stored; otherwise 202 with the analytic model's configuration flagged
    ``provisional`` and a tuning job (an active job of the same shape is joined, not duplicated).
    ``?wait=SECONDS`` keeps the request open until the job ends or the time is up."""
    outcome = await run_in_threadpool(tuning.tune, session, settings, key, body)
    budget = min(wait, settings.max_wait_s)
    if outcome.status_code == 202 and outcome.job_id is not None and budget > 0:
        await run_in_threadpool(session.commit)  # the worker must see the job
        deadline = time.monotonic() + budget
        for delay in tuning.poll_delays(budget):
            await asyncio.sleep(max(0.0, min(delay, deadline - time.monotonic())))
            status = await run_in_threadpool(tuning.poll_job_status, session, outcome.job_id)
            if status in tuning.FINAL_JOB_STATUSES:
                break
        outcome = await run_in_threadpool(tuning.tune_after_wait, session, settings, body, outcome.job_id)
    response.status_code = outcome.status_code
    return outcome.body
