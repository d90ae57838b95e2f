"""Engine factory and the one transaction scope: ``with session_scope(engine) as session: ...``.

SQLite (the default, one machine) gets WAL journaling, foreign keys and a busy timeout on every
connection; PostgreSQL (many workers) gets pre-ping so a pool survives server restarts. Database
errors leave this module as :class:`~convtune.errors.StorageError` (constraint violations as its
subclass :class:`ConstraintViolation`), always after a rollback.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import URL, Engine, create_engine, event, make_url
from sqlalchemy.exc import IntegrityError, SQLAlchemyError
from sqlalchemy.orm import Session, sessionmaker

from convtune.errors import StorageError
from convtune.vocabulary import DEMO_BACKENDS as DEMO_BACKENDS

DATABASE_URL_ENV = "CONVTUNE_DATABASE_URL"
#: How long a SQLite connection waits for another writer's lock before failing.
SQLITE_BUSY_TIMEOUT_MS = 30_000


class ConstraintViolation(StorageError):
    """A write broke a unique, foreign-key, check or not-null constraint (an ``IntegrityError``)."""


def default_database_url() -> str:
    """``$CONVTUNE_DATABASE_URL``, else a per-user SQLite file (its directory is created).

    The file is ``$XDG_DATA_HOME/convtune/convtune.db``, or ``~/.local/share/convtune/convtune.db``
    when ``XDG_DATA_HOME`` is unset.
    """
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    directory = _data_dir()
    directory.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{directory / 'convtune.db'}"




def _data_dir() -> Path:
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(data_home) / "convtune"


def demo_database_path(backend: str) -> Path:
    """The SQLite file a ``replay`` or ``model`` run of ``convtune tune`` writes when no database is chosen:
    ``$XDG_DATA_HOME/convtune/demo-<backend>.db`` beside the default file, never the default file itself
    (which ``convtune best`` and the ops read as this machine's measurements)."""
    return _data_dir() / f"demo-{backend}.db"


def demo_database_url(backend: str) -> str:
    """:func:`demo_database_path` as a URL (its directory is created)."""
    path = demo_database_path(backend)
    path.parent.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{path}"


def make_engine(url: str | URL | None = None, *, sqlite_foreign_keys: bool = True, **kwargs: Any) -> Engine:
    """Create an engine for ``url`` (default: :func:`default_database_url`).

    Args:
        url: a SQLAlchemy URL, e.g. ``sqlite:////path/convtune.db`` or
            ``postgresql+psycopg2://user@host/db``.
        sqlite_foreign_keys: enforce foreign keys on SQLite connections (off only for migrations,
            whose batch mode copies tables).
        **kwargs: passed to :func:`sqlalchemy.create_engine`.

    Example:
        >>> engine = make_engine("sqlite:///:memory:")
    """
    url = make_url(url if url is not None else default_database_url())
    if url.get_backend_name() == "sqlite":
        engine = create_engine(url, **kwargs)
        _configure_sqlite(engine, foreign_keys=sqlite_foreign_keys)
        return engine
    kwargs.setdefault("pool_pre_ping", True)
    return create_engine(url, **kwargs)


def _configure_sqlite(engine: Engine, *, foreign_keys: bool) -> None:
    @event.listens_for(engine, "connect")
    def _on_connect(dbapi_connection: Any, connection_record: Any) -> None:
        cursor = dbapi_connection.cursor()
        try:
            # WAL lets readers (the API) work while one writer (the tuner) commits; the setting
            # is stored in the file, the other pragmas are per connection.
            cursor.execute("PRAGMA journal_mode=WAL")
            cursor.execute("PRAGMA synchronous=NORMAL")
            cursor.execute(f"PRAGMA foreign_keys={'ON' if foreign_keys else 'OFF'}")
            cursor.execute(f"PRAGMA busy_timeout={SQLITE_BUSY_TIMEOUT_MS}")
        finally:
            cursor.close()


@contextmanager
def session_scope(bind: Engine | sessionmaker[Session]) -> Iterator[Session]:
    """One unit of work: commit on success, roll back on any error.

    Objects stay usable after the block (``expire_on_commit=False``). Repository functions never
    commit; the scope does.

    Args:
        bind: an engine, or a session factory built on one.

    Raises:
        ConstraintViolation: a constraint was violated (after rollback).
        StorageError: any other SQLAlchemy error (after rollback); the original is ``__cause__``.

    Example:
        >>> with session_scope(engine) as session:
        ...     problem = repository.get_or_create_problem(session, ConvProblem.parse("N=1 C=3 ..."))
    """
    session = bind() if isinstance(bind, sessionmaker) else Session(bind, expire_on_commit=False)
    try:
        yield session
        session.commit()
    except IntegrityError as exc:
        session.rollback()
        raise ConstraintViolation(f"constraint violated: {exc.orig}") from exc
    except SQLAlchemyError as exc:
        session.rollback()
        raise StorageError(f"database error: {exc}") from exc
    except BaseException:
        session.rollback()
        raise
    finally:
        session.close()


def make_session_factory(engine: Engine) -> sessionmaker[Session]:
    """A session factory with the same settings :func:`session_scope` uses for a bare engine."""
    return sessionmaker(engine, expire_on_commit=False)
