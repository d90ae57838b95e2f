"""Test-wide set-up: auto-skip of ``gpu``/``postgres`` tests, Hypothesis profiles."""

from __future__ import annotations

import functools
import os
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

POSTGRES_URL_ENV = "CONVTUNE_TEST_POSTGRES_URL"
# the untuned choice's cross-process cache stays off unless a test points it at its own file: a user's cache (or
# one test's) must not answer another test's model_choice
os.environ["CONVTUNE_CHOICE_CACHE"] = "off"

settings.register_profile("ci", derandomize=True, deadline=None, suppress_health_check=[HealthCheck.too_slow])
settings.register_profile("dev", deadline=None)
settings.load_profile("ci" if os.environ.get("CI") or os.environ.get("CONVTUNE_CI") else "dev")


@functools.cache
def cuda_unavailable_reason() -> str | None:
    """Why no CUDA device is usable here, or None when one is (probed once per session)."""
    try:
        import cupy

        count = cupy.cuda.runtime.getDeviceCount()
    except Exception as exc:  # ImportError, CUDARuntimeError, a missing driver library, ...
        return f"needs a CUDA device: CuPy probe failed ({type(exc).__name__}: {exc})"
    return None if count > 0 else "needs a CUDA device: CuPy sees 0 devices"


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    gpu_items = [item for item in items if "gpu" in item.keywords]
    if gpu_items and (reason := cuda_unavailable_reason()) is not None:
        for item in gpu_items:
            item.add_marker(pytest.mark.skip(reason=reason))
    if not os.environ.get(POSTGRES_URL_ENV):
        skip_pg = pytest.mark.skip(reason=f"needs PostgreSQL: set {POSTGRES_URL_ENV} to a database URL")
        for item in items:
            if "postgres" in item.keywords:
                item.add_marker(skip_pg)


# ---- databases at head, shared by the tuner, service and API tests (tests/storage has its own) ----------
DB_BACKENDS = [pytest.param("sqlite", id="sqlite"), pytest.param("postgres", id="postgres", marks=pytest.mark.postgres)]


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    """A new SQLite file brought to head by Alembic."""
    from convtune.storage import upgrade

    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    return url


@pytest.fixture
def postgres_url() -> Iterator[Any]:
    """A new PostgreSQL schema at head, first on the search path (Optuna's tables land in it too)."""
    from pg_schema import fresh_schema

    from convtune.storage import upgrade

    with fresh_schema("convtune_test") as url:
        upgrade(url)
        yield url


@pytest.fixture(params=DB_BACKENDS)
def db_url(request: pytest.FixtureRequest) -> Any:
    """A database at head of each backend (SQLite always, PostgreSQL where configured)."""
    return request.getfixturevalue("sqlite_url" if request.param == "sqlite" else "postgres_url")


@pytest.fixture
def engine(db_url: Any) -> Iterator[Any]:
    from convtune.storage import make_engine

    engine = make_engine(db_url)
    yield engine
    engine.dispose()
