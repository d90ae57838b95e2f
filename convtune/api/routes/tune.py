"""POST /v1/tune: the best configuration of a convolution, or a provisional one and a tuning job."""

from __future__ import annotations

import asyncio
import time
from typing import Annotated

from fastapi import APIRouter, Query, Request, Response

from convtune.api import handlers
from convtune.api.answers import AnswerCache, json_response
from convtune.api.deps import DbDep, SettingsDep, WriterDep
from convtune.api.errors import error_responses
from convtune.api.inputs import to_problem
from convtune.api.schemas import TuneRequest, TuneResponse
from convtune.api.shutdown import shutdown_event

router = APIRouter(prefix="/v1", tags=["tune"])

WaitQuery = Annotated[float, Query(ge=0, le=600, description="seconds to wait for the tuning job (bounded by the "
                                                             "server's max_wait_s; ends early when the server stops "
                                                             "or the client leaves)")]


@router.post(
    "/tune", response_model=TuneResponse, summary="Best configuration of a convolution (tunes unseen shapes)",
    responses={202: {"model": TuneResponse, "description": "Nothing measured yet: the model's provisional config "
                                                           "and the caller's queued (or joined) tuning job"},
               **error_responses(400, 401, 413, 422, 429, 503)})
async def tune(body: TuneRequest, request: Request, response: Response, db: DbDep, settings: SettingsDep,
               caller: WriterDep, wait: WaitQuery = 0) -> TuneResponse:
    """200 with the best measured configuration (time, TFLOP/s, GB/s, floor time, efficiency, the run that
    found it) when one is stored; otherwise 202 with the analytic model's configuration flagged
    ``provisional`` (ranked within ``predict_budget_s`` of CPU) and a tuning job of the caller's key (its
    active job of the same shape is joined, not duplicated). A key at its queue limit gets 429 before any
    prediction. ``?wait=SECONDS`` keeps the request open until the job ends, the time is up, the client
    leaves or the server shuts down (then the 202 names the job)."""
    problem = to_problem(body.problem, body.dtype, math=body.math)  # validation needs no database
    answers: AnswerCache = request.app.state.answers
    cache_key = ("tune", problem.key(), body.device, settings.backend)
    cached = answers.get(cache_key)
    if cached is not None:  # a stored answer of the last second: only the caller's key is checked
        await db.key(caller)
        return json_response(cached)  # type: ignore[return-value]
    lookup = await db.run(lambda s: handlers.tune_lookup(s, settings, caller.key(s), problem, body))
    if lookup.outcome is not None:
        data = lookup.outcome.body.model_dump_json().encode()
        answers.put(cache_key, data)
        return json_response(data)  # type: ignore[return-value]
    prediction = await db.run_cpu(handlers.predict_provisional, settings, lookup)
    outcome = await db.run(lambda s: handlers.tune_commit(s, settings, caller.key(s), lookup, prediction))
    budget = min(wait, settings.max_wait_s)
    if outcome.job_id is not None and budget > 0:
        job_id = outcome.job_id
        note = await _wait_for_job(request, db, job_id, budget)
        outcome = await db.run(lambda s: handlers.tune_after_wait(s, settings, body, job_id, prediction, note))
    response.status_code = outcome.status_code
    return outcome.body


async def _wait_for_job(request: Request, db: DbDep, job_id: int, budget_s: float) -> str | None:
    """Poll the job until it ends or ``budget_s`` passes; return early (with a note) when the server shuts
    down or the client has gone."""
    stopping = shutdown_event(request.app)
    deadline = time.monotonic() + budget_s
    for delay in handlers.poll_delays(budget_s):
        try:
            await asyncio.wait_for(stopping.wait(), max(0.0, min(delay, deadline - time.monotonic())))
            return "the server is shutting down: the job stays queued; ask again later"
        except TimeoutError:
            pass
        if await request.is_disconnected():
            return None
        status = await db.run(lambda s: handlers.poll_job_status(s, job_id))
        if status in handlers.FINAL_JOB_STATUSES:
            return None
    return None
