"""Persistence of convtune: typed models, one session scope, one repository module, Alembic migrations.

Usage::

    from convtune.storage import make_engine, session_scope, upgrade, repository

    engine = make_engine()            # $CONVTUNE_DATABASE_URL or the per-user SQLite file
    upgrade(engine)                   # bring the schema to head (Optuna's tables are left alone)
    with session_scope(engine) as session:
        problem = repository.get_or_create_problem(session, ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3"))

The service's queries (API keys, jobs, batches) live in :mod:`convtune.storage.jobs` and are re-exported
by ``repository``.
"""

from __future__ import annotations

from convtune.storage import jobs, repository
from convtune.storage.migrate import SchemaDrift, check, current_revision, downgrade, head_revision, upgrade
from convtune.storage.session import (
    ConstraintViolation,
    default_database_url,
    make_engine,
    make_session_factory,
    session_scope,
)

__all__ = [
    "ConstraintViolation",
    "SchemaDrift",
    "check",
    "current_revision",
    "default_database_url",
    "downgrade",
    "head_revision",
    "jobs",
    "make_engine",
    "make_session_factory",
    "repository",
    "session_scope",
    "upgrade",
]
