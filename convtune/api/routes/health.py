"""GET /healthz (liveness, no database), GET /readyz (the database answers) and GET /metrics (Prometheus
text exposition format; behind the key when reads need one)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import text
from sqlalchemy.orm import Session

import convtune
from convtune.api.deps import ClockDep, DbDep, ReaderDep, SettingsDep
from convtune.api.errors import error_responses
from convtune.api.schemas import HealthOut
from convtune.storage import repository as repo

router = APIRouter(tags=["health"])

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOB_STATUSES = ("queued", "running", "finished", "failed", "cancelled")
#: the window of queue_stats' measurement count
RATE_WINDOW_S = 60.0


def _health(request: Request, settings: Any, db: Any, database: str) -> HealthOut:
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


@router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics: queue, jobs, trials/s",
            responses={200: {"content": {PROMETHEUS_CONTENT_TYPE: {}}, "description": "text exposition format"},
                       **error_responses(401, 503)})
async def metrics(db: DbDep, clock: ClockDep, caller: ReaderDep) -> PlainTextResponse:
    """Behind the API key when reads need one (a Prometheus scrape sends it as a bearer token)."""

    def work(session: Session) -> dict[str, Any]:
        caller.reader(session)
        return repo.queue_stats(session, now=clock())

    stats = await db.run(work)
    gate = {"in_flight": db.in_flight, "waiting": db.waiting, "shed": db.shed}
    return PlainTextResponse(render_metrics(stats, gate), media_type=PROMETHEUS_CONTENT_TYPE)


def render_metrics(stats: dict[str, Any], gate: dict[str, int] | None = None) -> str:
    """The text exposition of :func:`~convtune.storage.repository.queue_stats`' figures and of the database
    gate (``gate``: in_flight, waiting, shed)."""
    by_status = dict.fromkeys(JOB_STATUSES, 0) | {str(k): int(v) for k, v in stats["jobs_by_status"].items()}
    recent = int(stats["measurements_last_60s"])
    gauges = [
        ("convtune_queue_depth", "Jobs waiting to be claimed (queued).", [("", stats["queue_depth"])]),
        ("convtune_queue_eligible", "Queued jobs a worker could start now (past not_before, inside their window).",
         [("", stats.get("eligible_now", 0))]),
        ("convtune_jobs", "Jobs by status.", [(f'{{status="{s}"}}', n) for s, n in sorted(by_status.items())]),
        ("convtune_active_workers", "Workers with a live heartbeat.", [("", stats.get("active_workers", 0))]),
        ("convtune_trials_per_second", "Measurements stored per second over the last minute.",
         [("", f"{recent / RATE_WINDOW_S:.6g}")]),
        ("convtune_measurements_last_minute", "Measurements stored in the last 60 seconds.", [("", recent)]),
    ]
    if gate is not None:
        gauges += [
            ("convtune_requests_in_flight", "Requests working on the database now.", [("", gate["in_flight"])]),
            ("convtune_requests_waiting", "Requests waiting for a turn at the database.", [("", gate["waiting"])]),
            ("convtune_requests_shed", "Requests answered 503 by the database gate since start.",
             [("", gate["shed"])]),
        ]
    lines = []
    for name, help_text, samples in gauges:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"
