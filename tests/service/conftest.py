"""Service fixtures: a fresh database at head per test (a SQLite file, or a new PostgreSQL schema in the
database named by ``CONVTUNE_TEST_POSTGRES_URL``, dropped with everything in it afterwards).

``db_url`` runs a test on each backend; ``sqlite_db_url`` / ``postgres_db_url`` on one.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_schema import fresh_schema
from sqlalchemy import URL, Engine

from convtune.storage import make_engine, upgrade

DB_BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def sqlite_db_url(tmp_path: Path) -> str:
    """A new SQLite file at head."""
    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    return url


@pytest.fixture
def postgres_db_url() -> Iterator[URL]:
    """A new PostgreSQL schema at head (first on the search path: Optuna's tables land in it too)."""
    with fresh_schema("convtune_service_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=DB_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str | URL:
    """A database at head of each backend (SQLite always, PostgreSQL where configured)."""
    return request.getfixturevalue("sqlite_db_url" if request.param == "sqlite" else "postgres_db_url")


@pytest.fixture
def engine(db_url: str | URL) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()
