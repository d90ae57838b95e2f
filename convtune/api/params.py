"""Path and query parameters shared by the routers; bounded, so no value reaches SQL out of its range."""

from __future__ import annotations

from typing import Annotated

from fastapi import Path, Query

MAX_ID = 2**31 - 1  # INTEGER primary keys (PostgreSQL int4)
MAX_LIMIT = 1000

ProblemId = Annotated[int, Path(ge=1, le=MAX_ID, description="a problem's id")]
JobId = Annotated[int, Path(ge=1, le=MAX_ID, description="a job's id")]
BatchId = Annotated[int, Path(ge=1, le=MAX_ID, description="a batch's id")]
Limit = Annotated[int, Query(ge=1, le=MAX_LIMIT, description="page size")]
Offset = Annotated[int, Query(ge=0, le=MAX_ID, description="rows to skip")]
OptionalId = Annotated[int | None, Query(ge=1, le=MAX_ID)]
