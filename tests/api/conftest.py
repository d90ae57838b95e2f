"""API fixtures: a fresh SQLite database at head per test (PostgreSQL where a test asks for ``pg_url``), the app
built by ``create_app`` on it, a TestClient that runs the lifespan, an API key, and an injectable clock."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_samples import ApiEnv, make_env
from pg_schema import fresh_schema
from sqlalchemy import URL

from convtune.storage import upgrade

DB_BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    return url


@pytest.fixture
def pg_url() -> Iterator[URL]:
    with fresh_schema("convtune_api_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=DB_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str | URL:
    """A database at head of each backend (SQLite always, PostgreSQL where configured)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "pg_url")


class Clock:
    """A settable time source for ``get_clock`` overrides."""

    def __init__(self, now: datetime) -> None:
        self.now = now

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock(datetime(2026, 12, 1, 12, 0, tzinfo=UTC))


@pytest.fixture
def env(sqlite_url: str) -> Iterator[ApiEnv]:
    """The app on a fresh SQLite database (model backend, UTC), a client, and a key with the default limit."""
    with make_env(sqlite_url) as e:
        yield e
