"""Shared helpers of the API tests (imported by name): the app on a database, keys, replay tunes."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy import URL, Engine

from convtune.api.main import create_app
from convtune.api.settings import Settings
from convtune.problem import ConvProblem
from convtune.service.runner import Worker, benchmarker_factory
from convtune.storage import make_engine, session_scope
from convtune.storage import queries as repo

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay_h200_vs_cudnn.json.gz"
#: In the replay table: 43 of its pruning survivors are (pruning ~0.5 s).
TUNED = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")
#: Small: pruning and the model's ranking take ~0.05 s.
TINY = ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
TINY2 = ConvProblem.parse("N=2 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
DEPTHWISE = ConvProblem.parse("N=1 C=32 H=16 W=16 K=32 R=3 S=3 pad=1 groups=32")
#: Grouped but not depthwise: no kernel family runs it.
GROUPED = ConvProblem.parse("N=1 C=32 H=16 W=16 K=32 R=3 S=3 pad=1 groups=4")


@dataclass
class ApiEnv:
    url: str | URL
    settings: Settings
    app: FastAPI
    client: TestClient
    engine: Engine
    secret: str
    key_id: int
    headers: dict[str, str] = field(default_factory=dict)

    def new_key(self, name: str, max_queued_jobs: int = 100) -> str:
        with session_scope(self.engine) as session:
            _, secret = repo.create_api_key(session, name, max_queued_jobs=max_queued_jobs)
        return secret


def settings_for(url: str | URL, **overrides: Any) -> Settings:
    values: dict[str, Any] = {"database_url": str(url) if isinstance(url, str) else url.render_as_string(False),
                              "backend": "model", "timezone": "UTC", "worker_in_process": False}
    return Settings(**(values | overrides))


@contextlib.contextmanager
def make_env(url: str | URL, **overrides: Any) -> Iterator[ApiEnv]:
    settings = settings_for(url, **overrides)
    app = create_app(settings)
    engine = make_engine(settings.database_url)
    try:
        with session_scope(engine) as session:
            key, secret = repo.create_api_key(session, "tests")
            key_id = key.id
        with TestClient(app) as client:
            yield ApiEnv(url, settings, app, client, engine, secret, key_id, {"X-API-Key": secret})
    finally:
        engine.dispose()


def key_body(problem: ConvProblem) -> dict[str, Any]:
    return {"problem": {"key": problem.key()}}


def run_worker_once(env: ApiEnv, now: datetime | None = None, *, replay_delay_s: float = 0.0, **options: Any) -> bool:
    """One claim-tune-finish cycle of a worker (``convtune.service.runner.Worker``) of ``env``'s backend on its
    database, at ``now`` (default: the real time); whether a job was claimed."""
    clock = (lambda: now) if now is not None else (lambda: datetime.now(UTC))
    factory = benchmarker_factory(replay=REPLAY, replay_delay_s=replay_delay_s)
    worker = Worker(env.engine, factory, backends=(env.settings.backend,), clock=clock, worker_id="test-worker",
                    **options)
    try:
        return worker.run_once()
    finally:
        worker.close()
