"""Storage fixtures: a fresh database per test, brought to head by Alembic (never ``create_all``).

``database_url`` is a new SQLite file, or, for the ``postgres`` parameter, a new schema in the
database named by ``CONVTUNE_TEST_POSTGRES_URL`` (dropped with everything in it afterwards; the
database itself and its other schemas are left alone).
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest
from pg_schema import fresh_schema
from sqlalchemy import URL, Engine
from sqlalchemy.orm import Session
from storage_samples import PROBLEM, SHA, add_device

from convtune.storage import make_engine, queries, session_scope, upgrade
from convtune.storage.models import Device, KernelVersion, Problem

BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


def sqlite_url(path: os.PathLike[str] | str) -> str:
    return f"sqlite:///{path}"


@pytest.fixture
def sqlite_database_url(tmp_path: os.PathLike[str]) -> str:
    """An empty SQLite file (not migrated)."""
    return sqlite_url(f"{tmp_path}/convtune.db")


@pytest.fixture
def postgres_database_url() -> Iterator[URL]:
    """A fresh, empty PostgreSQL schema; the URL puts it first on the search path."""
    with fresh_schema("convtune_test") as url:
        yield url


@pytest.fixture(params=BACKENDS)
def empty_database_url(request: pytest.FixtureRequest) -> str | URL:
    """An empty database of each backend (SQLite always, PostgreSQL where configured)."""
    name = "sqlite_database_url" if request.param == "sqlite" else "postgres_database_url"
    return request.getfixturevalue(name)


@pytest.fixture
def database_url(empty_database_url: str | URL) -> str | URL:
    """A database of each backend at the head revision."""
    upgrade(empty_database_url)
    return empty_database_url


@pytest.fixture
def engine(database_url: str | URL) -> Iterator[Engine]:
    engine = make_engine(database_url)
    yield engine
    engine.dispose()


@pytest.fixture
def session(engine: Engine) -> Iterator[Session]:
    """One session for a whole test, committed at the end (the way the tuner holds one per step)."""
    with session_scope(engine) as session:
        yield session


@pytest.fixture
def device(session: Session) -> Device:
    return add_device(session)


@pytest.fixture
def problem(session: Session) -> Problem:
    return queries.get_or_create_problem(session, PROBLEM)


@pytest.fixture
def kernel_version(session: Session) -> KernelVersion:
    return queries.get_or_create_kernel_version(session, "direct", "fwd", SHA)
