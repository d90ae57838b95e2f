"""Engine factory and session scope: default URL, SQLite pragmas, commit/rollback, error translation."""

from __future__ import annotations

from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import Engine, func, select, text
from sqlalchemy.orm import Session
from storage_samples import PROBLEM, add_device

from convtune.errors import ConvtuneError, StorageError
from convtune.storage import ConstraintViolation, make_engine, make_session_factory, queries, session_scope
from convtune.storage.models import Problem
from convtune.storage.session import DATABASE_URL_ENV, SQLITE_BUSY_TIMEOUT_MS, default_database_url


# ---- default URL -----------------------------------------------------------------------------------------
def test_default_url_comes_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, "postgresql+psycopg2://tuner@db.example/convtune")
    assert default_database_url() == "postgresql+psycopg2://tuner@db.example/convtune"


def test_default_url_is_a_per_user_sqlite_file_under_xdg_data_home(monkeypatch: pytest.MonkeyPatch,
                                                                   tmp_path: Path) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    assert default_database_url() == f"sqlite:///{tmp_path / 'xdg' / 'convtune' / 'convtune.db'}"
    assert (tmp_path / "xdg" / "convtune").is_dir()


def test_default_url_falls_back_to_local_share(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.delenv(DATABASE_URL_ENV, raising=False)
    monkeypatch.delenv("XDG_DATA_HOME", raising=False)
    monkeypatch.setenv("HOME", str(tmp_path))
    assert default_database_url() == f"sqlite:///{tmp_path / '.local' / 'share' / 'convtune' / 'convtune.db'}"
    assert (tmp_path / ".local" / "share" / "convtune").is_dir()


def test_make_engine_without_url_uses_the_default(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setenv(DATABASE_URL_ENV, f"sqlite:///{tmp_path / 'env.db'}")
    engine = make_engine()
    try:
        assert engine.url.database == str(tmp_path / "env.db")
    finally:
        engine.dispose()


# ---- SQLite pragmas --------------------------------------------------------------------------------------
def test_sqlite_connections_use_wal_foreign_keys_and_a_busy_timeout(sqlite_database_url: str) -> None:
    engine = make_engine(sqlite_database_url)
    try:
        with engine.connect() as connection:
            pragma = lambda name: connection.exec_driver_sql(f"PRAGMA {name}").scalar()  # noqa: E731
            assert pragma("journal_mode") == "wal"
            assert pragma("foreign_keys") == 1
            assert pragma("busy_timeout") == SQLITE_BUSY_TIMEOUT_MS
        # WAL is a property of the file: a plain connection sees it too
        import sqlite3

        plain = sqlite3.connect(sqlite_database_url.removeprefix("sqlite:///"))
        try:
            assert plain.execute("PRAGMA journal_mode").fetchone()[0] == "wal"
        finally:
            plain.close()
    finally:
        engine.dispose()


def test_sqlite_foreign_keys_can_be_turned_off_for_migrations(sqlite_database_url: str) -> None:
    engine = make_engine(sqlite_database_url, sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection:
            assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 0
    finally:
        engine.dispose()


@pytest.mark.postgres
def test_postgres_engines_pre_ping(postgres_database_url: str) -> None:
    engine = make_engine(postgres_database_url)
    try:
        assert engine.pool._pre_ping  # type: ignore[attr-defined]
        with engine.connect() as connection:
            assert connection.execute(text("SELECT 1")).scalar() == 1
    finally:
        engine.dispose()


# ---- session scope ---------------------------------------------------------------------------------------
def _count_problems(engine: Engine) -> int:
    with session_scope(engine) as session:
        return session.scalar(select(func.count()).select_from(Problem)) or 0


def test_session_scope_commits_on_success_and_objects_stay_usable(engine: Engine) -> None:
    with session_scope(engine) as session:
        row = queries.get_or_create_problem(session, PROBLEM)
    assert _count_problems(engine) == 1
    assert row.key == PROBLEM.key()  # expire_on_commit=False: attributes survive the scope
    assert isinstance(row.created_at, datetime)


def test_session_scope_rolls_back_and_raises_storage_error_on_a_database_error(engine: Engine) -> None:
    with pytest.raises(StorageError, match="database error") as info, session_scope(engine) as session:
        queries.get_or_create_problem(session, PROBLEM)
        session.execute(text("SELECT * FROM no_such_table"))
    assert not isinstance(info.value, ConstraintViolation)
    assert isinstance(info.value, ConvtuneError) and info.value.__cause__ is not None
    assert _count_problems(engine) == 0  # the problem inserted before the error was rolled back


def test_session_scope_turns_integrity_errors_into_constraint_violations(engine: Engine) -> None:
    with session_scope(engine) as session:
        queries.get_or_create_problem(session, PROBLEM)
    with pytest.raises(ConstraintViolation, match="constraint violated"), session_scope(engine) as session:
        add_device(session)
        session.add(Problem(key=PROBLEM.key(), spec={}, flops=1, compulsory_bytes=1))
    assert isinstance(ConstraintViolation("x"), StorageError)
    with session_scope(engine) as session:
        assert queries.find_device(session, "NVIDIA H200") is None  # rolled back with the failing insert


def test_session_scope_rolls_back_and_reraises_other_errors_unchanged(engine: Engine) -> None:
    with pytest.raises(KeyError, match="boom"), session_scope(engine) as session:
        queries.get_or_create_problem(session, PROBLEM)
        raise KeyError("boom")
    assert _count_problems(engine) == 0


def test_session_scope_accepts_a_session_factory(engine: Engine) -> None:
    factory = make_session_factory(engine)
    with session_scope(factory) as session:
        assert isinstance(session, Session)
        queries.get_or_create_problem(session, PROBLEM)
    assert _count_problems(engine) == 1


def test_naive_datetimes_are_rejected(engine: Engine) -> None:
    with pytest.raises(StorageError, match="naive datetime"), session_scope(engine) as session:
        device = add_device(session)
        run = queries.create_run(session, device_id=device.id, problem_id=queries.get_or_create_problem(
            session, PROBLEM).id, families="direct", backend="gpu", sampler="tpe")
        queries.update_run(session, run.id, finished_at=datetime(2026, 1, 1))
