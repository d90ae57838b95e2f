"""Alembic environment of convtune: our own version table, Optuna's tables left alone.

The database comes from, in order: an open connection in ``config.attributes["connection"]``
(:mod:`convtune.storage.migrate`), a URL in ``config.attributes["url"]``, ``-x url=...`` on the
command line, ``sqlalchemy.url`` if a caller set it, then ``$CONVTUNE_DATABASE_URL`` or the per-user
SQLite file (:func:`convtune.storage.session.default_database_url`). No URL is ever written in
``alembic.ini``.
"""

from __future__ import annotations

from alembic import context
from sqlalchemy import Connection

from convtune.storage.migrate import CONTEXT_OPTIONS, migration_connection
from convtune.storage.session import default_database_url

config = context.config


def _url() -> str:
    url = config.attributes.get("url") or context.get_x_argument(as_dictionary=True).get("url")
    return str(url or config.get_main_option("sqlalchemy.url") or default_database_url())


def _migrate(connection: Connection) -> None:
    context.configure(connection=connection, **CONTEXT_OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_offline() -> None:
    """Emit SQL to stdout (``alembic upgrade --sql``) instead of running it."""
    context.configure(url=_url(), literal_binds=True, dialect_opts={"paramstyle": "named"}, **CONTEXT_OPTIONS)
    with context.begin_transaction():
        context.run_migrations()


def run_migrations_online() -> None:
    connection = config.attributes.get("connection")
    if connection is not None:
        _migrate(connection)
        return
    with migration_connection(_url()) as connection:
        _migrate(connection)


if context.is_offline_mode():
    run_migrations_offline()
else:
    run_migrations_online()
