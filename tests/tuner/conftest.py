"""Tuner fixtures: the H200 replay table, pruning of the replayed problem, fresh migrated databases.

``db_url`` is a new SQLite file or, for the ``postgres`` parameter, a new schema in the database named
by ``CONVTUNE_TEST_POSTGRES_URL`` (first on the search path, so our tables, Optuna's tables and both
version tables land in it); the schema is dropped with everything in it afterwards, the database
itself is left alone.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, REPLAY_PATH

from convtune.kernels.registry import specs_for
from convtune.storage import make_engine
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.prune import Candidate, PruneResult, prune


@pytest.fixture(scope="session")
def replay_table() -> ReplayTable:
    return ReplayTable.load(REPLAY_PATH)


@pytest.fixture
def replay(replay_table: ReplayTable) -> ReplayBenchmarker:
    """A replay benchmarker with an empty ``measured`` list (the table itself is shared, read-only)."""
    return ReplayBenchmarker(replay_table)


@pytest.fixture(scope="session")
def pruned(replay_table: ReplayTable) -> PruneResult:
    """Pruning of :data:`PROBLEM` on the replay table's machine (what ``tune`` computes: the families the
    table measured, here the direct one)."""
    return prune(PROBLEM, replay_table.device.machine, specs_for(PROBLEM, ["direct"]))


@pytest.fixture(scope="session")
def replayable(pruned: PruneResult, replay_table: ReplayTable) -> list[Candidate]:
    """The survivors the replay table can answer, in rank order (the tuner's search space)."""
    rows = replay_table.problems[PROBLEM.key()]
    return [c for c in pruned.survivors if c.key in rows]




@pytest.fixture
def sqlite_engine(sqlite_url: str) -> Iterator[Engine]:
    engine = make_engine(sqlite_url)
    yield engine
    engine.dispose()
