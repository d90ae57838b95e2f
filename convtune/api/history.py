"""Paged reads of a problem's history across devices (measurements, pruning decisions), for
GET /v1/problems/{id} and /trials.

These are the only SQL statements outside ``convtune/storage/repository.py``: the repository reads one
(device, problem) at a time and has no paging; they belong there, and move once it has equivalents.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from convtune.storage.models import Config, Device, Measurement, PruningDecision


def count_measurements(session: Session, problem_id: int) -> int:
    return int(session.scalar(select(func.count()).select_from(Measurement)
                              .where(Measurement.problem_id == problem_id)) or 0)


def count_pruning_decisions(session: Session, problem_id: int, *, stage: str | None = None) -> int:
    query = select(func.count()).select_from(PruningDecision).where(PruningDecision.problem_id == problem_id)
    if stage is not None:
        query = query.where(PruningDecision.stage == stage)
    return int(session.scalar(query) or 0)


def list_measurements(session: Session, problem_id: int, *, limit: int, offset: int) -> list[tuple[Any, str, Any]]:
    """(measurement, device name, config) of a problem, oldest first."""
    rows = session.execute(
        select(Measurement, Device.name, Config)
        .join(Device, Device.id == Measurement.device_id).join(Config, Config.id == Measurement.config_id)
        .where(Measurement.problem_id == problem_id).order_by(Measurement.id).limit(limit).offset(offset))
    return [(m, name, c) for m, name, c in rows]


def list_pruning_decisions(session: Session, problem_id: int, *, limit: int, offset: int,
                           stage: str | None = None) -> list[tuple[Any, str, str]]:
    """(decision, device name, config key) of a problem, oldest first."""
    query = (select(PruningDecision, Device.name, Config.key)
             .join(Device, Device.id == PruningDecision.device_id).join(Config, Config.id == PruningDecision.config_id)
             .where(PruningDecision.problem_id == problem_id))
    if stage is not None:
        query = query.where(PruningDecision.stage == stage)
    rows = session.execute(query.order_by(PruningDecision.id).limit(limit).offset(offset))
    return [(d, name, key) for d, name, key in rows]
