"""Problems, times and helpers shared by the service tests (imported by name, like storage_samples)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import Engine

from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.storage.models import Job

ROOT = Path(__file__).resolve().parents[2]
REPLAY_PATH = ROOT / "tests" / "data" / "replay_h200_vs_cudnn.json.gz"
#: The replayed problem that prunes fastest (~0.5 s).
REPLAY_PROBLEM = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")
#: Small problems: the model backend tunes each in about a second.
TINY = [ConvProblem(N=1, C=c, H=h, W=h, K=c, R=3, S=3, pad_h=1, pad_w=1) for c in (8, 16) for h in (8, 9, 10)]
#: A fixed instant (a Monday, noon UTC) that tests move forward by hand.
T0 = datetime(2026, 12, 7, 12, 0, tzinfo=UTC)


def at(**delta: float) -> datetime:
    """``T0`` plus a ``timedelta(**delta)``."""
    return T0 + timedelta(**delta)


def add_job(engine: Engine, problem: ConvProblem = TINY[0], **fields: Any) -> int:
    """Queue a job (model backend, 6 trials by default) and return its id."""
    values: dict[str, Any] = {"backend": "model", "budget_trials": 6, "budget_s": 60.0} | fields
    with session_scope(engine) as session:
        return repo.create_job(session, problem=problem, **values).id


def job(engine: Engine, job_id: int) -> Job:
    with session_scope(engine) as session:
        return repo.get_job(session, job_id)
