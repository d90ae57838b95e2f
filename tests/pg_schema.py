"""A throw-away PostgreSQL schema for one test (shared by the storage and tuner fixtures)."""

from __future__ import annotations

import contextlib
import gc
import os
import uuid
from collections.abc import Iterator

from sqlalchemy import URL, make_url, text

from convtune.storage import make_engine

POSTGRES_URL_ENV = "CONVTUNE_TEST_POSTGRES_URL"


@contextlib.contextmanager
def fresh_schema(prefix: str) -> Iterator[URL]:
    """Yield the ``CONVTUNE_TEST_POSTGRES_URL`` database with a new, empty schema first on its search
    path (so our tables, Optuna's and both version tables land in it); drop it with everything in it
    afterwards. The database itself and its other schemas are left alone."""
    base = make_url(os.environ[POSTGRES_URL_ENV])
    schema = f"{prefix}_{uuid.uuid4().hex[:12]}"
    admin = make_engine(base)
    try:
        with admin.begin() as connection:
            connection.execute(text(f'CREATE SCHEMA "{schema}"'))
        yield base.update_query_dict({"options": f"-csearch_path={schema}"})
    finally:
        gc.collect()  # engines (and their pools) the test left behind go away first
        with admin.begin() as connection:
            connection.execute(text("SET LOCAL lock_timeout = '20s'"))
            connection.execute(text(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE'))
        admin.dispose()
