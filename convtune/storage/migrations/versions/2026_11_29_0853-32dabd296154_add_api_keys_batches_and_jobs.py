"""Add the service's tables: API keys, batches of jobs, and the job queue the workers claim from.

Secrets are never stored: ``api_keys.key_hash`` is the SHA-256 hex of one. ``jobs`` is read by status and
age (``ix_jobs_status_created_at``: the workers' claim query and the API's listings).

Revision ID: 32dabd296154
Revises: 4eae7045a92c
Create Date: 2026-11-29 08:53:43.127231+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "32dabd296154"
down_revision: str | Sequence[str] | None = "4eae7045a92c"
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create api_keys, batches and jobs."""
    op.create_table(
        "api_keys",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=64), nullable=False),
        sa.Column("key_hash", sa.String(length=64), nullable=False),
        sa.Column("prefix", sa.String(length=8), nullable=False),
        sa.Column("max_queued_jobs", sa.Integer(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("revoked_at", sa.DateTime(timezone=True), nullable=True),
        sa.CheckConstraint("max_queued_jobs >= 0", name=op.f("ck_api_keys_max_queued_jobs")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_api_keys")),
        sa.UniqueConstraint("key_hash", name=op.f("uq_api_keys_key_hash")),
        sa.UniqueConstraint("name", name=op.f("uq_api_keys_name")),
    )
    op.create_table(
        "batches",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=255), nullable=True),
        sa.Column("preset", sa.String(length=64), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_start", sa.String(length=5), nullable=True),
        sa.Column("window_end", sa.String(length=5), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=False),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("families", sa.String(length=255), nullable=True),
        sa.Column("budget_trials", sa.Integer(), nullable=False),
        sa.Column("budget_s", sa.Float(), nullable=False),
        sa.Column("api_key_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("backend IN ('gpu', 'replay', 'model')", name=op.f("ck_batches_backend")),
        sa.CheckConstraint("status IN ('queued', 'running', 'finished', 'cancelled')", name=op.f("ck_batches_status")),
        sa.CheckConstraint("(window_start IS NULL) = (window_end IS NULL)", name=op.f("ck_batches_window_both_ends")),
        sa.CheckConstraint("budget_s > 0", name=op.f("ck_batches_budget_s")),
        sa.CheckConstraint("budget_trials >= 0", name=op.f("ck_batches_budget_trials")),
        sa.ForeignKeyConstraint(["api_key_id"], ["api_keys.id"], name=op.f("fk_batches_api_key_id_api_keys")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_batches")),
    )
    op.create_table(
        "jobs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("device_name", sa.String(length=128), nullable=True),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("families", sa.String(length=255), nullable=True),
        sa.Column("budget_trials", sa.Integer(), nullable=False),
        sa.Column("budget_s", sa.Float(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("cancel_requested", sa.Boolean(), nullable=False),
        sa.Column("batch_id", sa.Integer(), nullable=True),
        sa.Column("not_before", sa.DateTime(timezone=True), nullable=True),
        sa.Column("window_start", sa.String(length=5), nullable=True),
        sa.Column("window_end", sa.String(length=5), nullable=True),
        sa.Column("timezone", sa.String(length=64), nullable=True),
        sa.Column("worker_id", sa.String(length=128), nullable=True),
        sa.Column("attempts", sa.Integer(), nullable=False),
        sa.Column("claimed_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("heartbeat_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("tuning_run_id", sa.Integer(), nullable=True),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("best_time_ms", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("api_key_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("backend IN ('gpu', 'replay', 'model')", name=op.f("ck_jobs_backend")),
        sa.CheckConstraint("status != 'running' OR worker_id IS NOT NULL", name=op.f("ck_jobs_running_has_worker")),
        sa.CheckConstraint(
            "status IN ('queued', 'running', 'finished', 'failed', 'cancelled')", name=op.f("ck_jobs_status")
        ),
        sa.CheckConstraint("(window_start IS NULL) = (window_end IS NULL)", name=op.f("ck_jobs_window_both_ends")),
        sa.CheckConstraint("budget_s > 0", name=op.f("ck_jobs_budget_s")),
        sa.CheckConstraint("budget_trials >= 0", name=op.f("ck_jobs_budget_trials")),
        sa.CheckConstraint("window_start IS NULL OR timezone IS NOT NULL", name=op.f("ck_jobs_window_timezone")),
        sa.ForeignKeyConstraint(["api_key_id"], ["api_keys.id"], name=op.f("fk_jobs_api_key_id_api_keys")),
        sa.ForeignKeyConstraint(["batch_id"], ["batches.id"], name=op.f("fk_jobs_batch_id_batches")),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_jobs_problem_id_problems")),
        sa.ForeignKeyConstraint(
            ["tuning_run_id"], ["tuning_runs.id"], name=op.f("fk_jobs_tuning_run_id_tuning_runs"), ondelete="SET NULL"
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_jobs")),
    )
    op.create_index(op.f("ix_jobs_batch_id"), "jobs", ["batch_id"])
    op.create_index(op.f("ix_jobs_problem_id"), "jobs", ["problem_id"])
    op.create_index("ix_jobs_status_created_at", "jobs", ["status", "created_at"])


def downgrade() -> None:
    """Drop jobs, batches and api_keys (dropping a table drops its indexes)."""
    for table in ("jobs", "batches", "api_keys"):
        op.drop_table(table)
