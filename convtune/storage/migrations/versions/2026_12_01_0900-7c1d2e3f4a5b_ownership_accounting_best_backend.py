"""Ownership, exact trial accounting and one best row per backend.

- ``api_keys.is_admin``: an admin key sees and cancels every key's jobs and batches; others only their own.
- ``tuning_runs.job_id``: the job a run tunes for, set when the run is created (not found afterwards by a
  time window), so a job's trials are counted from the stored measurements of its runs.
- ``best_configs.backend``: the backend that measured the row (gpu, replay, model), part of the row's
  identity, so a replayed or predicted best never replaces one measured on the GPU. Existing rows take the
  backend of their measurement; rows without one are ``model`` when provisional, else ``gpu``.

Revision ID: 7c1d2e3f4a5b
Revises: 32dabd296154
Create Date: 2026-12-01 09:00:00+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "7c1d2e3f4a5b"
down_revision: str | Sequence[str] | None = "32dabd296154"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None

BACKEND_CHECK = "backend IN ('gpu', 'replay', 'model')"


def upgrade() -> None:
    """Add the three columns, fill ``best_configs.backend``, and key best rows by backend too."""
    with op.batch_alter_table("api_keys") as batch:
        batch.add_column(sa.Column("is_admin", sa.Boolean(), nullable=False, server_default=sa.false()))
    with op.batch_alter_table("tuning_runs") as batch:
        batch.add_column(sa.Column("job_id", sa.Integer(), nullable=True))
        batch.create_index(batch.f("ix_tuning_runs_job_id"), ["job_id"], unique=False)
        batch.create_foreign_key(batch.f("fk_tuning_runs_job_id_jobs"), "jobs", ["job_id"], ["id"],
                                 ondelete="SET NULL")
    with op.batch_alter_table("best_configs") as batch:
        batch.add_column(sa.Column("backend", sa.String(length=16), nullable=False, server_default="gpu"))
    op.execute("UPDATE best_configs SET backend = COALESCE("
               "(SELECT m.backend FROM measurements m WHERE m.id = best_configs.measurement_id), "
               "CASE WHEN provisional THEN 'model' ELSE 'gpu' END)")
    with op.batch_alter_table("best_configs") as batch:
        batch.alter_column("backend", server_default=None)
        batch.drop_constraint("uq_best_configs_scope", type_="unique")
        batch.create_unique_constraint("uq_best_configs_scope", ["device_id", "problem_id", "scope", "backend"])
        batch.create_check_constraint("backend", BACKEND_CHECK)
    with op.batch_alter_table("api_keys") as batch:
        batch.alter_column("is_admin", server_default=None)


def downgrade() -> None:
    """Drop the columns; of several best rows per (device, problem, scope) the GPU one stays, else the
    fastest."""
    op.execute("DELETE FROM best_configs WHERE id IN (SELECT b.id FROM best_configs b WHERE EXISTS ("
               "SELECT 1 FROM best_configs o WHERE o.device_id = b.device_id AND o.problem_id = b.problem_id "
               "AND o.scope = b.scope AND o.id <> b.id AND ((o.backend = 'gpu') > (b.backend = 'gpu') OR "
               "((o.backend = 'gpu') = (b.backend = 'gpu') AND (o.time_ms < b.time_ms OR "
               "(o.time_ms = b.time_ms AND o.id < b.id))))))")
    with op.batch_alter_table("best_configs") as batch:
        batch.drop_constraint(op.f("ck_best_configs_backend"), type_="check")
        batch.drop_constraint("uq_best_configs_scope", type_="unique")
        batch.create_unique_constraint("uq_best_configs_scope", ["device_id", "problem_id", "scope"])
        batch.drop_column("backend")
    with op.batch_alter_table("tuning_runs") as batch:
        batch.drop_constraint(batch.f("fk_tuning_runs_job_id_jobs"), type_="foreignkey")
        batch.drop_index(batch.f("ix_tuning_runs_job_id"))
        batch.drop_column("job_id")
    with op.batch_alter_table("api_keys") as batch:
        batch.drop_column("is_admin")
