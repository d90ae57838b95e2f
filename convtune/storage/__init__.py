"""Persistence of convtune: typed models, one session scope, one query package, Alembic migrations.

Usage::

    from convtune.storage import make_engine, session_scope, upgrade, queries

    engine = make_engine()            # $CONVTUNE_DATABASE_URL or the per-user SQLite file
    upgrade(engine)                   # bring the schema to head (Optuna's tables are left alone)
    with session_scope(engine) as session:
        problem = queries.get_or_create_problem(session, ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3"))

Every query is in :mod:`convtune.storage.queries` (results and the service's jobs, re-exported by one front).
"""

from __future__ import annotations

from convtune.storage import queries
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
    "make_engine",
    "make_session_factory",
    "queries",
    "session_scope",
    "upgrade",
]
