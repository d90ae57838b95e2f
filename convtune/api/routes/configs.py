"""GET /v1/configs/best: a stored best configuration (answered from the database only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from sqlalchemy.orm import Session

from convtune.api.answers import AnswerCache, json_response
from convtune.api.deps import DbDep, ReaderDep
from convtune.api.errors import ResourceNotFound, error_responses
from convtune.api.inputs import to_problem
from convtune.api.schemas import EXAMPLE_KEY, PRINTABLE, BestConfigOut
from convtune.api.views import best_out
from convtune.storage import queries as repo
from convtune.vocabulary import BACKENDS, OVERALL_SCOPE

router = APIRouter(prefix="/v1/configs", tags=["configs"])


@router.get("/best", response_model=BestConfigOut, summary="The stored best configuration of a problem",
            responses=error_responses(401, 404, 422, 503))
async def best_config(request: Request, db: DbDep, caller: ReaderDep,
                      problem: Annotated[str, Query(min_length=1, max_length=512, examples=[EXAMPLE_KEY],
                                                    description="the problem's key (FIELD=VALUE tokens)")],
                      device: Annotated[str | None, Query(min_length=1, max_length=64, pattern=PRINTABLE,
                                                          description="a stored device name; default: any")] = None,
                      family: Annotated[str, Query(min_length=1, max_length=32, pattern=PRINTABLE,
                                                   description="a kernel family, or '*' for the overall best")]
                      = OVERALL_SCOPE,
                      backend: Annotated[str | None, Query(pattern="^(" + "|".join(BACKENDS) + ")$",
                                                           description="only rows of this backend (gpu: measured "
                                                                       "on a GPU); default: any, GPU rows first")]
                      = None) -> BestConfigOut:
    """Rows measured on a GPU come first, then replayed ones, then model predictions, then the fastest; the
    answer says ``measured`` (true only for a GPU row) and ``backend``, and ``others`` lists the other rows of
    the problem and scope (e.g. a replayed row beside the measured one), flagged the same way; 404 when nothing
    is stored for the problem (POST /v1/tune queues a tuning job). A tf32 problem (``math=tf32`` in the key) is
    answered from its own rows and its strict float32 twin's, the fastest first (a strict config is valid for tf32;
    ``problem.precision`` says which one answered); a strict problem only from its own rows, never a tf32 one."""
    conv = to_problem({"key": problem})
    answers: AnswerCache = request.app.state.answers
    cache_key = ("best", conv.key(), device, family, backend)
    cached = answers.get(cache_key)
    if cached is not None:
        if caller.secret or caller.required:
            await db.key(caller)
        return json_response(cached)  # type: ignore[return-value]

    def work(session: Session) -> bytes:
        caller.reader(session)
        # every backend's row of the scope, GPU-measured first: the first that fits ``backend`` answers, the
        # rest are listed beside it (flagged), so a replayed row is seen but never passes for a measurement
        views = repo.list_best_configs(session, problem_key=conv, device_name=device, scope=family, serving=True)
        view = next((v for v in views if backend is None or v.backend == backend), None)
        if view is None:
            where = f" on {device!r}" if device else ""
            what = f" of backend {backend!r}" if backend else ""
            raise ResourceNotFound(f"no stored best configuration (scope {family!r}){what} for {conv.key()}{where}",
                                   "problem")
        return best_out(view, [v for v in views if v is not view]).model_dump_json().encode()

    data = await db.run(work)
    answers.put(cache_key, data)
    return json_response(data)  # type: ignore[return-value]
