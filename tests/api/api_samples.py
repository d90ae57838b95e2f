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
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope
from convtune.storage import repository as repo
from convtune.tuner.benchmark import ModelBenchmarker
from convtune.tuner.tune import tune

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay_h200_vs_cudnn.json.gz"
#: In the replay table: 43 of its pruning survivors are (pruning ~0.5 s).
TUNED = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")
#: Small: pruning and the model's ranking take ~0.05 s.
TINY = ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
TINY2 = ConvProblem.parse("N=2 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
DEPTHWISE = ConvProblem.parse("N=1 C=32 H=16 W=16 K=32 R=3 S=3 pad=1 groups=32")


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


def run_worker_once(env: ApiEnv, now: datetime | None = None) -> int | None:
    """One claim-tune-finish cycle of a worker on ``env``'s database and backend; the job's id, or ``None``
    when nothing was eligible at ``now`` (default: the real time)."""
    now = now or datetime.now(UTC)
    worker = _worker_class()
    if worker is not None:
        return worker(env)(now)
    with session_scope(env.engine) as session:
        job = repo.claim_job(session, worker_id="test-worker", now=now, backends=(env.settings.backend,))
        if job is None:
            return None
        job_id, problem_id, families = job.id, job.problem_id, job.families
        budget_trials, budget_s = job.budget_trials, job.budget_s
        key = repo.get_problem(session, problem_id).key
    result = tune(ConvProblem.parse(key), ModelBenchmarker(MachineModel.preset("h200")), env.engine,
                  families=families.split(",") if families else None, budget_trials=budget_trials, budget_s=budget_s)
    with session_scope(env.engine) as session:
        repo.finish_job(session, job_id, worker_id="test-worker", status="finished", tuning_run_id=result.run_id,
                        trials_done=result.trials, best_time_ms=result.time_ms)
    return job_id


def _worker_class() -> Any:
    return None
