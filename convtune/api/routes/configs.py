"""GET /v1/configs/best: a stored best configuration (answered from the database only)."""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query

from convtune.api.deps import ReadKeyDep, SessionDep
from convtune.api.errors import ResourceNotFound, error_responses
from convtune.api.inputs import to_problem
from convtune.api.schemas import EXAMPLE_KEY, PRINTABLE, BestConfigOut
from convtune.api.views import best_out
from convtune.storage import repository as repo
from convtune.storage.models import OVERALL_SCOPE

router = APIRouter(prefix="/v1/configs", tags=["configs"])


@router.get("/best", response_model=BestConfigOut, summary="The stored best configuration of a problem",
            responses=error_responses(401, 404, 422, 503))
def best_config(session: SessionDep, _: ReadKeyDep,
                problem: Annotated[str, Query(min_length=1, max_length=512, examples=[EXAMPLE_KEY],
                                              description="the problem's key (FIELD=VALUE tokens)")],
                device: Annotated[str | None, Query(min_length=1, max_length=64, pattern=PRINTABLE,
                                                    description="a stored device name; default: any")] = None,
                family: Annotated[str, Query(min_length=1, max_length=32, pattern=PRINTABLE,
                                             description="a kernel family, or '*' for the overall best")]
                = OVERALL_SCOPE) -> BestConfigOut:
    """Measured results come before provisional (model-predicted) ones, then the fastest; 404 when nothing
    is stored for the problem (POST /v1/tune queues a tuning job)."""
    conv = to_problem({"key": problem})
    view = repo.find_best_config(session, problem_key=conv, device_name=device, scope=family)
    if view is None:
        where = f" on {device!r}" if device else ""
        raise ResourceNotFound(f"no stored best configuration (scope {family!r}) for {conv.key()}{where}", "problem")
    return best_out(view)
