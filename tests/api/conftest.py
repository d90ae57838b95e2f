"""API fixtures: a fresh SQLite database at head per test (PostgreSQL where a test asks for ``postgres_url``), the app
built by ``create_app`` on it, a TestClient that runs the lifespan, an API key, and an injectable clock."""

from __future__ import annotations

import contextlib
import sqlite3
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest
from api_samples import ApiEnv, make_env

from convtune.storage import upgrade


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


@pytest.fixture(scope="session")
def tuned_template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A SQLite file at head with TUNED tuned by replaying the H200 table (made once, copied per test)."""
    from api_samples import REPLAY, TUNED

    from convtune.storage import make_engine
    from convtune.tuner.benchmark import ReplayBenchmarker
    from convtune.tuner.tune import tune

    path = tmp_path_factory.mktemp("tuned") / "convtune.db"
    url = f"sqlite:///{path}"
    upgrade(url)
    engine = make_engine(url)
    try:
        tune(TUNED, ReplayBenchmarker(REPLAY), engine, budget_trials=43, seed=0, patience=1000)
    finally:
        engine.dispose()
    return path


@pytest.fixture
def tuned_env(tuned_template: Path, tmp_path: Path) -> Iterator[ApiEnv]:
    """:func:`env` on a copy of the tuned database (server backend replay: its replayed rows answer 200, flagged
    ``backend: replay``; a gpu server answers only rows measured on a GPU)."""
    path = tmp_path / "tuned.db"
    # the backup API, not a file copy: committed pages may still sit in the template's WAL file
    with contextlib.closing(sqlite3.connect(tuned_template)) as source, \
            contextlib.closing(sqlite3.connect(path)) as dest:
        source.backup(dest)
    with make_env(f"sqlite:///{path}", backend="replay") as e:
        yield e
