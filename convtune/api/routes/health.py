"""GET /healthz (liveness, no database), GET /readyz (the database answers) and GET /metrics (Prometheus
text exposition format through prometheus-client, see :mod:`convtune.api.metrics`; behind the key when reads
need one)."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any, Literal

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse, Response
from prometheus_client import CollectorRegistry
from prometheus_client.core import Metric
from prometheus_client.exposition import generate_latest
from prometheus_client.registry import Collector
from sqlalchemy import text
from sqlalchemy.orm import Session

import convtune
from convtune.api.deps import ClockDep, DbDep, ReaderDep, SettingsDep
from convtune.api.errors import error_responses
from convtune.api.metrics import CONTENT_TYPE, ServiceMetrics, queue_families
from convtune.api.schemas import HealthOut
from convtune.storage import queries as repo

router = APIRouter(tags=["health"])



def _health(request: Request, settings: Any, db: Any, database: Literal["ok", "not checked"]) -> HealthOut:
    return HealthOut(status="ok", database=database, revision=getattr(request.app.state, "revision", None),
                     backend=settings.backend, worker_in_process=settings.worker_in_process,
                     version=getattr(convtune, "__version__", "0"), timezone=settings.timezone,
                     in_flight=db.in_flight, waiting=db.waiting)


@router.get("/healthz", response_model=HealthOut, summary="Liveness: the process answers (the database is not "
                                                          "asked; see /readyz)")
async def healthz(request: Request, settings: SettingsDep, db: DbDep) -> HealthOut:
    """Answers from the event loop alone, whatever the load or the database does: a probe never waits."""
    return _health(request, settings, db, "not checked")


@router.get("/readyz", response_model=HealthOut, summary="Readiness: the database answers a query",
            responses=error_responses(503))
async def readyz(request: Request, settings: SettingsDep, db: DbDep) -> HealthOut:
    """503 when the database fails or the server is too busy to reach it (a load balancer should send
    traffic elsewhere)."""
    await db.run(lambda session: session.execute(text("SELECT 1")))  # a failing database -> StorageError -> 503
    return _health(request, settings, db, "ok")


@router.get("/metrics", response_class=PlainTextResponse,
            summary="Prometheus metrics: queue, jobs, trials/s, request latency, process",
            responses={200: {"content": {CONTENT_TYPE: {}}, "description": "text exposition format 0.0.4"},
                       **error_responses(401, 503)})
async def metrics(request: Request, db: DbDep, clock: ClockDep, caller: ReaderDep) -> Response:
    """Behind the API key when reads need one (a Prometheus scrape sends it as a bearer token)."""

    def work(session: Session) -> dict[str, Any]:
        caller.reader(session)
        return repo.queue_stats(session, now=clock())

    stats = await db.run(work)
    door = request.app.state.door
    gate = {"in_flight": db.in_flight, "waiting": db.waiting, "shed": db.shed, "inside": door.inside,
            "door_shed": door.shed}
    service: ServiceMetrics = request.app.state.metrics
    return Response(service.exposition(queue_families(stats, gate)), media_type=CONTENT_TYPE)


def render_metrics(stats: dict[str, Any], gate: dict[str, int] | None = None) -> str:
    """The text exposition of the queue and gate gauges alone (:func:`~convtune.api.metrics.queue_families`)."""
    registry = CollectorRegistry(auto_describe=False)
    for family in queue_families(stats, gate):
        registry.register(_One(family))
    return generate_latest(registry).decode()


class _One(Collector):
    def __init__(self, family: Metric) -> None:
        self.family = family

    def collect(self) -> Iterator[Metric]:
        yield self.family
