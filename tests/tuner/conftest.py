"""Tuner fixtures: the H200 replay table, pruning of the replayed problem, fresh migrated databases.

``db_url`` is a new SQLite file or, for the ``postgres`` parameter, a new schema in the database named
by ``CONVTUNE_TEST_POSTGRES_URL`` (first on the search path, so our tables, Optuna's tables and both
version tables land in it); the schema is dropped with everything in it afterwards, the database
itself is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from pg_schema import fresh_schema
from sqlalchemy import URL, Engine
from tuner_samples import PROBLEM, REPLAY_PATH, new_sqlite_url

from convtune.kernels.registry import specs_for
from convtune.storage import make_engine, upgrade
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.prune import Candidate, PruneResult, prune

DB_BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture(scope="session")
def replay_table() -> ReplayTable:
    return ReplayTable.load(REPLAY_PATH)


@pytest.fixture
def replay(replay_table: ReplayTable) -> ReplayBenchmarker:
    """A replay benchmarker with an empty ``measured`` list (the table itself is shared, read-only)."""
    return ReplayBenchmarker(replay_table)


@pytest.fixture(scope="session")
def pruned(replay_table: ReplayTable) -> PruneResult:
    """Pruning of :data:`PROBLEM` on the replay table's machine (what ``tune`` computes)."""
    return prune(PROBLEM, replay_table.device.machine, specs_for(PROBLEM))


@pytest.fixture(scope="session")
def replayable(pruned: PruneResult, replay_table: ReplayTable) -> list[Candidate]:
    """The survivors the replay table can answer, in rank order (the tuner's search space)."""
    rows = replay_table.problems[PROBLEM.key()]
    return [c for c in pruned.survivors if c.key in rows]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return new_sqlite_url(tmp_path / "db")


@pytest.fixture
def postgres_url() -> Iterator[URL]:
    """A fresh PostgreSQL schema at head; dropped (with Optuna's tables in it) afterwards."""
    with fresh_schema("convtune_tuner_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=DB_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> str | URL:
    """A database at head of each backend (SQLite always, PostgreSQL where configured)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")


@pytest.fixture
def engine(db_url: str | URL) -> Iterator[Engine]:
    engine = make_engine(db_url)
    yield engine
    engine.dispose()


@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()
