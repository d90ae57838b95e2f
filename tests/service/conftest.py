"""Service fixtures: a fresh database at head per test (a SQLite file, or a new PostgreSQL schema in the
database named by ``CONVTUNE_TEST_POSTGRES_URL``, dropped with everything in it afterwards).

``db_url`` runs a test on each backend; ``sqlite_url`` / ``postgres_url`` on one.
"""

from __future__ import annotations




