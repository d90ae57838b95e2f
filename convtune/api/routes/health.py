"""GET /healthz (liveness and the database) and GET /metrics (Prometheus text exposition format)."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import PlainTextResponse
from sqlalchemy import text

import convtune
from convtune.api.deps import ClockDep, SessionDep, SettingsDep
from convtune.api.errors import error_responses
from convtune.api.schemas import HealthOut
from convtune.storage import repository as repo

router = APIRouter(tags=["health"])

PROMETHEUS_CONTENT_TYPE = "text/plain; version=0.0.4; charset=utf-8"
JOB_STATUSES = ("queued", "running", "finished", "failed", "cancelled")
#: the window of queue_stats' measurement count
RATE_WINDOW_S = 60.0


@router.get("/healthz", response_model=HealthOut, summary="The service and its database are up",
            responses=error_responses(503))
def healthz(request: Request, session: SessionDep, settings: SettingsDep) -> HealthOut:
    session.execute(text("SELECT 1"))  # a failing database is a StorageError -> 503
    return HealthOut(status="ok", database="ok", revision=getattr(request.app.state, "revision", None),
                     backend=settings.backend, worker_in_process=settings.worker_in_process,
                     version=getattr(convtune, "__version__", "0"))


@router.get("/metrics", response_class=PlainTextResponse, summary="Prometheus metrics: queue, jobs, trials/s",
            responses={200: {"content": {PROMETHEUS_CONTENT_TYPE: {}}, "description": "text exposition format"},
                       **error_responses(503)})
def metrics(session: SessionDep, clock: ClockDep) -> PlainTextResponse:
    stats = repo.queue_stats(session, now=clock())
    return PlainTextResponse(render_metrics(stats), media_type=PROMETHEUS_CONTENT_TYPE)


def render_metrics(stats: dict[str, Any]) -> str:
    """The text exposition of :func:`~convtune.storage.repository.queue_stats`' figures."""
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
    lines = []
    for name, help_text, samples in gauges:
        lines += [f"# HELP {name} {help_text}", f"# TYPE {name} gauge"]
        lines += [f"{name}{labels} {value}" for labels, value in samples]
    return "\n".join(lines) + "\n"
