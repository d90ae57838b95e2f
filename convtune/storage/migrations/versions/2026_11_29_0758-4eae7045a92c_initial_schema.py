"""Initial schema: devices, problems, kernel versions, configs, tuning runs, measurements, pruning, best configs.

Optuna's tables (``studies``, ``trials``, ...) and its ``alembic_version`` may share the database; this
history never touches them and keeps its own version table, ``convtune_alembic_version``.

Revision ID: 4eae7045a92c
Revises:
Create Date: 2026-11-29 07:58:58.324403+00:00
"""

from __future__ import annotations

from collections.abc import Sequence

import sqlalchemy as sa
from alembic import op

# revision identifiers, used by Alembic.
revision: str = "4eae7045a92c"
down_revision: str | Sequence[str] | None = None
branch_labels: str | Sequence[str] | None = None
depends_on: str | Sequence[str] | None = None


def upgrade() -> None:
    """Create the tables of the first schema."""
    op.create_table(
        "configs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("kind", sa.String(length=64), nullable=False),
        sa.Column("key", sa.String(length=512), nullable=False),
        sa.Column("params", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_configs")),
        sa.UniqueConstraint("key", name=op.f("uq_configs_key")),
    )
    op.create_table(
        "devices",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("name", sa.String(length=128), nullable=False),
        sa.Column("compute_capability", sa.String(length=16), nullable=False),
        sa.Column("sm_count", sa.Integer(), nullable=False),
        sa.Column("driver_version", sa.String(length=64), nullable=True),
        sa.Column("cuda_version", sa.String(length=64), nullable=True),
        sa.Column("copy_bandwidth_bytes_per_s", sa.Float(), nullable=False),
        sa.Column("fp32_peak_flops_per_s", sa.Float(), nullable=False),
        sa.Column("ceilings_source", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_devices")),
        sa.UniqueConstraint(
            "name",
            "compute_capability",
            "driver_version",
            "cuda_version",
            name="uq_devices_identity",
            postgresql_nulls_not_distinct=True,
        ),
    )
    op.create_table(
        "kernel_versions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("family", sa.String(length=32), nullable=False),
        sa.Column("direction", sa.String(length=16), nullable=False),
        sa.Column("source_sha256", sa.String(length=64), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_kernel_versions")),
        sa.UniqueConstraint("family", "direction", "source_sha256", name="uq_kernel_versions_identity"),
    )
    op.create_table(
        "problems",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("key", sa.String(length=255), nullable=False),
        sa.Column("spec", sa.JSON(), nullable=False),
        sa.Column("flops", sa.BigInteger(), nullable=False),
        sa.Column("compulsory_bytes", sa.BigInteger(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_problems")),
        sa.UniqueConstraint("key", name=op.f("uq_problems_key")),
    )
    op.create_table(
        "tuning_runs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("families", sa.String(length=255), nullable=False),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("sampler", sa.String(length=64), nullable=False),
        sa.Column("budget_trials", sa.Integer(), nullable=True),
        sa.Column("budget_s", sa.Float(), nullable=True),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("stop_reason", sa.String(length=255), nullable=True),
        sa.Column("study_name", sa.String(length=255), nullable=True),
        sa.Column("space_size", sa.BigInteger(), nullable=True),
        sa.Column("stage_survivors", sa.JSON(), nullable=False),
        sa.Column("pruning_s", sa.Float(), nullable=True),
        sa.Column("trials_done", sa.Integer(), nullable=False),
        sa.Column("best_measurement_id", sa.Integer(), nullable=True),
        sa.Column("started_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("finished_at", sa.DateTime(timezone=True), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("backend IN ('gpu', 'replay', 'model')", name=op.f("ck_tuning_runs_backend")),
        sa.CheckConstraint(
            "status IN ('running', 'finished', 'failed', 'cancelled')", name=op.f("ck_tuning_runs_status")
        ),
        sa.ForeignKeyConstraint(["device_id"], ["devices.id"], name=op.f("fk_tuning_runs_device_id_devices")),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_tuning_runs_problem_id_problems")),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_tuning_runs")),
    )
    op.create_index(op.f("ix_tuning_runs_device_id"), "tuning_runs", ["device_id"])
    op.create_index(op.f("ix_tuning_runs_problem_id"), "tuning_runs", ["problem_id"])
    op.create_table(
        "measurements",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("kernel_version_id", sa.Integer(), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("tuning_run_id", sa.Integer(), nullable=True),
        sa.Column("backend", sa.String(length=16), nullable=False),
        sa.Column("predicted", sa.Boolean(), nullable=False),
        sa.Column("status", sa.String(length=16), nullable=False),
        sa.Column("median_ms", sa.Float(), nullable=True),
        sa.Column("p10_ms", sa.Float(), nullable=True),
        sa.Column("p90_ms", sa.Float(), nullable=True),
        sa.Column("min_ms", sa.Float(), nullable=True),
        sa.Column("reps", sa.Integer(), nullable=True),
        sa.Column("rotation_sets", sa.Integer(), nullable=True),
        sa.Column("rel_error", sa.Float(), nullable=True),
        sa.Column("num_regs", sa.Integer(), nullable=True),
        sa.Column("local_bytes", sa.Integer(), nullable=True),
        sa.Column("smem_bytes", sa.Integer(), nullable=True),
        sa.Column("compile_s", sa.Float(), nullable=True),
        sa.Column("error", sa.Text(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint("backend IN ('gpu', 'replay', 'model')", name=op.f("ck_measurements_backend")),
        sa.CheckConstraint("predicted = (backend = 'model')", name=op.f("ck_measurements_predicted_iff_model")),
        sa.CheckConstraint(
            "status IN ('ok', 'compile_error', 'launch_error', 'wrong', 'timeout', 'crashed', 'spill')",
            name=op.f("ck_measurements_status"),
        ),
        sa.ForeignKeyConstraint(["config_id"], ["configs.id"], name=op.f("fk_measurements_config_id_configs")),
        sa.ForeignKeyConstraint(["device_id"], ["devices.id"], name=op.f("fk_measurements_device_id_devices")),
        sa.ForeignKeyConstraint(
            ["kernel_version_id"],
            ["kernel_versions.id"],
            name=op.f("fk_measurements_kernel_version_id_kernel_versions"),
        ),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_measurements_problem_id_problems")),
        sa.ForeignKeyConstraint(
            ["tuning_run_id"],
            ["tuning_runs.id"],
            name=op.f("fk_measurements_tuning_run_id_tuning_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_measurements")),
        sa.UniqueConstraint(
            "device_id", "problem_id", "kernel_version_id", "config_id", "backend", name="uq_measurements_identity"
        ),
    )
    op.create_index(op.f("ix_measurements_tuning_run_id"), "measurements", ["tuning_run_id"])
    op.create_table(
        "pruning_decisions",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("tuning_run_id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("stage", sa.String(length=16), nullable=False),
        sa.Column("reason", sa.Text(), nullable=False),
        sa.Column("numbers", sa.JSON(), nullable=False),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.CheckConstraint(
            "stage IN ('infeasible', 'traffic', 'predicted_time', 'kept')", name=op.f("ck_pruning_decisions_stage")
        ),
        sa.ForeignKeyConstraint(["config_id"], ["configs.id"], name=op.f("fk_pruning_decisions_config_id_configs")),
        sa.ForeignKeyConstraint(["device_id"], ["devices.id"], name=op.f("fk_pruning_decisions_device_id_devices")),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_pruning_decisions_problem_id_problems")),
        sa.ForeignKeyConstraint(
            ["tuning_run_id"],
            ["tuning_runs.id"],
            name=op.f("fk_pruning_decisions_tuning_run_id_tuning_runs"),
            ondelete="CASCADE",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_pruning_decisions")),
    )
    op.create_index("ix_pruning_decisions_lookup", "pruning_decisions", ["device_id", "problem_id", "config_id"])
    op.create_index(op.f("ix_pruning_decisions_tuning_run_id"), "pruning_decisions", ["tuning_run_id"])
    op.create_table(
        "best_configs",
        sa.Column("id", sa.Integer(), nullable=False),
        sa.Column("device_id", sa.Integer(), nullable=False),
        sa.Column("problem_id", sa.Integer(), nullable=False),
        sa.Column("scope", sa.String(length=32), nullable=False),
        sa.Column("config_id", sa.Integer(), nullable=False),
        sa.Column("measurement_id", sa.Integer(), nullable=True),
        sa.Column("time_ms", sa.Float(), nullable=False),
        sa.Column("floor_ms", sa.Float(), nullable=False),
        sa.Column("efficiency", sa.Float(), nullable=False),
        sa.Column("provisional", sa.Boolean(), nullable=False),
        sa.Column("tuning_run_id", sa.Integer(), nullable=True),
        sa.Column("created_at", sa.DateTime(timezone=True), nullable=False),
        sa.Column("updated_at", sa.DateTime(timezone=True), nullable=False),
        sa.ForeignKeyConstraint(["config_id"], ["configs.id"], name=op.f("fk_best_configs_config_id_configs")),
        sa.ForeignKeyConstraint(["device_id"], ["devices.id"], name=op.f("fk_best_configs_device_id_devices")),
        sa.ForeignKeyConstraint(
            ["measurement_id"],
            ["measurements.id"],
            name=op.f("fk_best_configs_measurement_id_measurements"),
            ondelete="SET NULL",
        ),
        sa.ForeignKeyConstraint(["problem_id"], ["problems.id"], name=op.f("fk_best_configs_problem_id_problems")),
        sa.ForeignKeyConstraint(
            ["tuning_run_id"],
            ["tuning_runs.id"],
            name=op.f("fk_best_configs_tuning_run_id_tuning_runs"),
            ondelete="SET NULL",
        ),
        sa.PrimaryKeyConstraint("id", name=op.f("pk_best_configs")),
        sa.UniqueConstraint("device_id", "problem_id", "scope", name="uq_best_configs_scope"),
    )
    op.create_index(op.f("ix_best_configs_problem_id"), "best_configs", ["problem_id"])

    # tuning_runs and measurements reference each other, so this foreign key comes last. Batch mode
    # re-creates tuning_runs on SQLite, which cannot ALTER TABLE ... ADD CONSTRAINT.
    with op.batch_alter_table("tuning_runs") as batch_op:
        batch_op.create_foreign_key(
            op.f("fk_tuning_runs_best_measurement_id_measurements"),
            "measurements",
            ["best_measurement_id"],
            ["id"],
            ondelete="SET NULL",
        )


def downgrade() -> None:
    """Drop every table of the first schema (dropping a table drops its indexes)."""
    with op.batch_alter_table("tuning_runs") as batch_op:
        batch_op.drop_constraint(op.f("fk_tuning_runs_best_measurement_id_measurements"), type_="foreignkey")
    for table in ("best_configs", "pruning_decisions", "measurements", "tuning_runs", "configs", "kernel_versions",
                  "problems", "devices"):
        op.drop_table(table)
