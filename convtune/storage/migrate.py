"""Run convtune's Alembic migrations from Python: upgrade, downgrade, check, current revision.

Where the migrations are: inside the package, ``convtune/storage/migrations/`` (``env.py``,
``script.py.mako``, ``versions/``), so a source checkout and an installed wheel find them at the same
place beside this module. The database URL (or an open connection) reaches ``migrations/env.py``
through ``Config.attributes``, never through a file.
"""

from __future__ import annotations

import io
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, Literal

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from alembic.util import CommandError
from sqlalchemy import URL, Connection, Engine

from convtune.errors import StorageError
from convtune.storage.models import OPTUNA_TABLES, VERSION_TABLE, Base, UTCDateTime
from convtune.storage.session import make_engine

_PACKAGE = "convtune.storage.migrations"
#: the folder of :data:`_PACKAGE`: beside this module in a checkout and in an installed copy alike
_FOLDER = Path(__file__).parent / "migrations"


class SchemaDrift(StorageError):
    """The database schema differs from the models (``alembic check`` found operations to generate)."""


def include_name(name: str | None, type_: str, parent_names: Any) -> bool:
    """Alembic ``include_name`` hook: leave Optuna's tables (and its ``alembic_version``) alone.

    Optuna's RDBStorage may share our database; without this, autogenerate would propose to drop
    its tables. Our own tables are always included, even if a name ever collided.
    """
    if type_ == "table" and name is not None:
        return name in Base.metadata.tables or name not in OPTUNA_TABLES
    return True


def render_item(type_: str, obj: Any, autogen_context: Any) -> str | Literal[False]:
    """Alembic ``render_item`` hook: write :class:`UTCDateTime` as ``sa.DateTime(timezone=True)``.

    Revision scripts must not import ``convtune.storage.models`` (they are frozen; the models move on).
    """
    if type_ == "type" and isinstance(obj, UTCDateTime):
        return "sa.DateTime(timezone=True)"
    return False


#: ``context.configure`` options of ``migrations/env.py``.
CONTEXT_OPTIONS: dict[str, Any] = {
    "target_metadata": Base.metadata,
    "version_table": VERSION_TABLE,
    "include_name": include_name,
    "render_item": render_item,
    "render_as_batch": True,  # SQLite cannot ALTER most things; batch mode copies the table
    "compare_type": True,
}


def migrations_dir() -> Path:
    """The folder holding ``env.py``, ``script.py.mako`` and ``versions/`` (package ``convtune.storage.migrations``).

    Raises:
        StorageError: the folder has no ``env.py`` (a broken installation).
    """
    if (_FOLDER / "env.py").is_file():
        return _FOLDER
    raise StorageError(f"convtune's migrations are missing: no {_FOLDER / 'env.py'} (package {_PACKAGE}); "
                       "reinstall convtune")


def alembic_config(url: str | URL | None = None, connection: Connection | None = None) -> Config:
    """An Alembic ``Config`` pointing at :func:`migrations_dir`, with the URL or connection attached."""
    config = Config(stdout=io.StringIO())  # a library does not print; alembic's log stays available
    config.set_main_option("script_location", str(migrations_dir()))
    if url is not None:
        config.attributes["url"] = url
    if connection is not None:
        config.attributes["connection"] = connection
    return config


@contextmanager
def migration_connection(target: str | URL | Engine | None) -> Iterator[Connection]:
    """A connection to migrate through, committed on success; SQLite foreign keys are off meanwhile."""
    engine = target if isinstance(target, Engine) else make_engine(target, sqlite_foreign_keys=False)
    try:
        with engine.connect() as connection:
            sqlite = connection.dialect.name == "sqlite"
            foreign_keys = False
            if sqlite:
                # Foreign keys stay off while migrating: batch mode drops and re-creates tables. The
                # pragma is a no-op inside a transaction, so it is set before the first DML statement.
                foreign_keys = bool(connection.exec_driver_sql("PRAGMA foreign_keys").scalar())
                connection.exec_driver_sql("PRAGMA foreign_keys=OFF")
            try:
                yield connection
                if sqlite:
                    broken = connection.exec_driver_sql("PRAGMA foreign_key_check").fetchall()
                    if broken:
                        raise StorageError(f"migration left rows with dangling foreign keys: {broken[:5]}")
                connection.commit()
            finally:
                connection.rollback()  # no-op after the commit
                if foreign_keys:
                    connection.exec_driver_sql("PRAGMA foreign_keys=ON")
                    connection.commit()
    finally:
        if engine is not target:
            engine.dispose()


def _run(action: str, target: str | URL | Engine | None, *args: Any) -> None:
    try:
        with migration_connection(target) as connection:
            getattr(command, action)(alembic_config(connection=connection), *args)
    except CommandError as exc:
        if "New upgrade operations detected" in str(exc):
            raise SchemaDrift(f"schema differs from the models: {exc}") from exc
        raise StorageError(f"alembic {action} failed: {exc}") from exc


def upgrade(target: str | URL | Engine | None = None, revision: str = "head") -> None:
    """Bring the database to ``revision`` (default: the latest). Optuna's tables are not touched.

    Args:
        target: a URL or an engine; ``None`` means :func:`~convtune.storage.session.default_database_url`.
        revision: an Alembic revision id, ``"head"``, or a relative step like ``"+1"``.

    Example:
        >>> upgrade("sqlite:////tmp/convtune.db")
    """
    _run("upgrade", target, revision)


def downgrade(target: str | URL | Engine | None, revision: str) -> None:
    """Take the database back to ``revision`` (``"base"`` drops every convtune table)."""
    _run("downgrade", target, revision)


def check(target: str | URL | Engine | None = None) -> None:
    """``alembic check``: the database is at head and its schema matches the models.

    Raises:
        SchemaDrift: autogenerate would emit operations (models and migrations disagree).
        StorageError: the database is not at the head revision, or cannot be reached.
    """
    _run("check", target)


def current_revision(target: str | URL | Engine | None = None) -> str | None:
    """The revision the database is at, or ``None`` before the first upgrade."""
    with migration_connection(target) as connection:
        context = MigrationContext.configure(connection, opts={"version_table": VERSION_TABLE})
        return context.get_current_revision()


def head_revision() -> str:
    """The latest revision id of the shipped migrations."""
    head = ScriptDirectory.from_config(alembic_config()).get_current_head()
    if head is None:
        raise StorageError("convtune's migrations have no revisions")
    return head
