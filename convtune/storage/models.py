"""SQLAlchemy 2 typed models of convtune's tables (what the Alembic migrations in ``storage/migrations/`` create).

Identity rules (docs/design.md, "Storage and scale-out"): a result is keyed by device (name, compute
capability, driver and CUDA versions), kernel source hash, family/direction, problem and configuration,
so adding candidates never invalidates old measurements. Model-predicted rows (backend ``"model"``)
carry ``predicted = true``, enforced by a CHECK constraint, and are never mixed with measured ones.

Optuna's RDBStorage may share the database: its tables (:data:`OPTUNA_TABLES`) and its
``alembic_version`` table are not ours; ``convtune/storage/migrations/env.py`` leaves them out of autogenerate.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

from sqlalchemy import (
    JSON,
    BigInteger,
    Boolean,
    CheckConstraint,
    DateTime,
    Float,
    ForeignKey,
    Index,
    Integer,
    MetaData,
    String,
    Text,
    TypeDecorator,
    UniqueConstraint,
)
from sqlalchemy.engine import Dialect
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column

from convtune.vocabulary import BACKENDS as BACKENDS
from convtune.vocabulary import BATCH_STATUSES as BATCH_STATUSES
from convtune.vocabulary import JOB_STATUSES as JOB_STATUSES
from convtune.vocabulary import MEASUREMENT_STATUSES as MEASUREMENT_STATUSES
from convtune.vocabulary import OVERALL_SCOPE as OVERALL_SCOPE
from convtune.vocabulary import RUN_STATUSES as RUN_STATUSES

PRUNING_STAGES = ("infeasible", "traffic", "predicted_time", "kept")

#: Tables that Optuna's RDBStorage creates (Optuna 3.x-5.x), plus its own Alembic version table.
OPTUNA_TABLES = frozenset({
    "studies", "trials", "trial_params", "trial_values", "trial_user_attributes", "trial_system_attributes",
    "study_user_attributes", "study_system_attributes", "study_directions", "trial_intermediate_values",
    "trial_heartbeats", "version_info", "alembic_version",
})
#: Our Alembic version table; Optuna keeps the default ``alembic_version``.
VERSION_TABLE = "convtune_alembic_version"

# Composite unique constraints and indexes carry explicit short names: generated ones
# (uq_<table>_<every column>) would exceed PostgreSQL's 63-character identifier limit.
NAMING_CONVENTION = {
    "ix": "ix_%(column_0_label)s",
    "uq": "uq_%(table_name)s_%(column_0_name)s",
    "ck": "ck_%(table_name)s_%(constraint_name)s",
    "fk": "fk_%(table_name)s_%(column_0_name)s_%(referred_table_name)s",
    "pk": "pk_%(table_name)s",
}


def utcnow() -> datetime:
    """The current time, timezone-aware, in UTC."""
    return datetime.now(UTC)


class UTCDateTime(TypeDecorator[datetime]):
    """A timestamp stored in UTC and always read back timezone-aware.

    PostgreSQL keeps ``timestamptz``; SQLite keeps text without an offset, so values are converted to
    UTC on the way in and tagged UTC on the way out. Naive datetimes are rejected: they are ambiguous.
    """

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        if value.tzinfo is None:
            raise ValueError(f"naive datetime {value!r}: pass a timezone-aware datetime (e.g. datetime.now(UTC))")
        return value.astimezone(UTC)

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


def _in(column: str, allowed: tuple[str, ...]) -> str:
    return f"{column} IN ({', '.join(repr(a) for a in allowed)})"


class Base(DeclarativeBase):
    """Declarative base on a metadata with a naming convention (stable constraint names for Alembic)."""

    metadata = MetaData(naming_convention=NAMING_CONVENTION)


# sort_order puts the bookkeeping timestamps after a table's own columns
class _CreatedAt:
    created_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, sort_order=100)


class _Timestamps(_CreatedAt):
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow, onupdate=utcnow, sort_order=101)


class Device(_Timestamps, Base):
    """One GPU as the tuner saw it; a new driver or CUDA version is a new device row."""

    __tablename__ = "devices"
    __table_args__ = (
        # NULLS NOT DISTINCT (PostgreSQL 15+): two workers registering a device without a driver
        # version must collide, not create two rows.
        UniqueConstraint("name", "compute_capability", "driver_version", "cuda_version", name="uq_devices_identity",
                         postgresql_nulls_not_distinct=True),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(128))
    compute_capability: Mapped[str] = mapped_column(String(16))  # "9.0"
    sm_count: Mapped[int] = mapped_column(Integer)
    driver_version: Mapped[str | None] = mapped_column(String(64))
    cuda_version: Mapped[str | None] = mapped_column(String(64))
    copy_bandwidth_bytes_per_s: Mapped[float] = mapped_column(Float)
    fp32_peak_flops_per_s: Mapped[float] = mapped_column(Float)
    ceilings_source: Mapped[str] = mapped_column(String(64))


class Problem(_CreatedAt, Base):
    """One convolution problem, keyed by the canonical :meth:`ConvProblem.key`."""

    __tablename__ = "problems"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    key: Mapped[str] = mapped_column(String(255), unique=True)
    spec: Mapped[dict[str, Any]] = mapped_column(JSON)  # ConvProblem.to_dict()
    flops: Mapped[int] = mapped_column(BigInteger)
    compulsory_bytes: Mapped[int] = mapped_column(BigInteger)


class KernelVersion(_CreatedAt, Base):
    """A kernel family's source for one direction, identified by the SHA-256 of its source."""

    __tablename__ = "kernel_versions"
    __table_args__ = (UniqueConstraint("family", "direction", "source_sha256", name="uq_kernel_versions_identity"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    family: Mapped[str] = mapped_column(String(32))
    direction: Mapped[str] = mapped_column(String(16))
    source_sha256: Mapped[str] = mapped_column(String(64))


class Config(_CreatedAt, Base):
    """A kernel configuration, keyed by the canonical :meth:`KernelConfig.key`."""

    __tablename__ = "configs"

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    kind: Mapped[str] = mapped_column(String(64))  # "direct.fwd"
    key: Mapped[str] = mapped_column(String(512), unique=True)
    params: Mapped[dict[str, Any]] = mapped_column(JSON)  # KernelConfig.to_dict()


class TuningRun(_Timestamps, Base):
    """One tuning session of a problem on a device: budget, progress, pruning summary, outcome."""

    __tablename__ = "tuning_runs"
    __table_args__ = (
        CheckConstraint(_in("backend", BACKENDS), name="backend"),
        CheckConstraint(_in("status", RUN_STATUSES), name="status"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"), index=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    families: Mapped[str] = mapped_column(String(255))  # comma-separated family names
    backend: Mapped[str] = mapped_column(String(16))
    sampler: Mapped[str] = mapped_column(String(64))
    budget_trials: Mapped[int | None] = mapped_column(Integer)
    budget_s: Mapped[float | None] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="running")
    stop_reason: Mapped[str | None] = mapped_column(String(255))
    study_name: Mapped[str | None] = mapped_column(String(255))
    space_size: Mapped[int | None] = mapped_column(BigInteger)
    stage_survivors: Mapped[dict[str, int]] = mapped_column(JSON, default=dict)  # {"stage": count}
    pruning_s: Mapped[float | None] = mapped_column(Float)
    # measurements stored by this run: incremented in the transaction that stores each one
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    # the job this run tunes for (NULL: `convtune tune`); use_alter: jobs.tuning_run_id points back here
    job_id: Mapped[int | None] = mapped_column(ForeignKey("jobs.id", ondelete="SET NULL", use_alter=True), index=True)
    # use_alter: tuning_runs and measurements reference each other; the migration adds this FK last.
    best_measurement_id: Mapped[int | None] = mapped_column(
        ForeignKey("measurements.id", ondelete="SET NULL", use_alter=True))
    started_at: Mapped[datetime] = mapped_column(UTCDateTime(), default=utcnow)
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())


class Measurement(_CreatedAt, Base):
    """The outcome of one configuration on one device, kernel version and backend: measured once, ever."""

    __tablename__ = "measurements"
    __table_args__ = (
        UniqueConstraint("device_id", "problem_id", "kernel_version_id", "config_id", "backend",
                         name="uq_measurements_identity"),
        CheckConstraint(_in("backend", BACKENDS), name="backend"),
        CheckConstraint(_in("status", MEASUREMENT_STATUSES), name="status"),
        # model-predicted rows are flagged, and only they are
        CheckConstraint("predicted = (backend = 'model')", name="predicted_iff_model"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    kernel_version_id: Mapped[int] = mapped_column(ForeignKey("kernel_versions.id"))
    config_id: Mapped[int] = mapped_column(ForeignKey("configs.id"))
    tuning_run_id: Mapped[int | None] = mapped_column(ForeignKey("tuning_runs.id", ondelete="SET NULL"), index=True)
    backend: Mapped[str] = mapped_column(String(16))
    predicted: Mapped[bool] = mapped_column(Boolean)
    status: Mapped[str] = mapped_column(String(16))
    median_ms: Mapped[float | None] = mapped_column(Float)
    p10_ms: Mapped[float | None] = mapped_column(Float)
    p90_ms: Mapped[float | None] = mapped_column(Float)
    min_ms: Mapped[float | None] = mapped_column(Float)
    reps: Mapped[int | None] = mapped_column(Integer)
    rotation_sets: Mapped[int | None] = mapped_column(Integer)
    rel_error: Mapped[float | None] = mapped_column(Float)
    num_regs: Mapped[int | None] = mapped_column(Integer)
    local_bytes: Mapped[int | None] = mapped_column(Integer)
    smem_bytes: Mapped[int | None] = mapped_column(Integer)
    compile_s: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)


class PruningDecision(_CreatedAt, Base):
    """Why the pruner dropped (or kept) a configuration in a run, with the numbers it compared."""

    __tablename__ = "pruning_decisions"
    __table_args__ = (
        CheckConstraint(_in("stage", PRUNING_STAGES), name="stage"),
        Index("ix_pruning_decisions_lookup", "device_id", "problem_id", "config_id"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    tuning_run_id: Mapped[int] = mapped_column(ForeignKey("tuning_runs.id", ondelete="CASCADE"), index=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"))
    config_id: Mapped[int] = mapped_column(ForeignKey("configs.id"))
    stage: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text)
    # e.g. traffic_words, bound_words, ratio, predicted_s, best_predicted_s
    numbers: Mapped[dict[str, Any]] = mapped_column(JSON, default=dict)


class BestConfig(_Timestamps, Base):
    """The best configuration known for (device, problem, scope, backend); scope is a family name or ``"*"``.

    One row per backend: a replayed or model-predicted best never replaces (or passes for) one measured on
    the GPU; readers that serve configurations to ops ask for ``backend = "gpu"``.
    """

    __tablename__ = "best_configs"
    __table_args__ = (
        UniqueConstraint("device_id", "problem_id", "scope", "backend", name="uq_best_configs_scope"),
        CheckConstraint(_in("backend", BACKENDS), name="backend"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    device_id: Mapped[int] = mapped_column(ForeignKey("devices.id"))
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    scope: Mapped[str] = mapped_column(String(32))
    config_id: Mapped[int] = mapped_column(ForeignKey("configs.id"))
    measurement_id: Mapped[int | None] = mapped_column(ForeignKey("measurements.id", ondelete="SET NULL"))
    time_ms: Mapped[float] = mapped_column(Float)
    floor_ms: Mapped[float] = mapped_column(Float)
    efficiency: Mapped[float] = mapped_column(Float)  # floor_ms / time_ms
    provisional: Mapped[bool] = mapped_column(Boolean)  # model-predicted, not measured
    tuning_run_id: Mapped[int | None] = mapped_column(ForeignKey("tuning_runs.id", ondelete="SET NULL"))
    backend: Mapped[str] = mapped_column(String(16), default="gpu")  # what measured it: gpu, replay or model


# ---- the service: API keys, batches, jobs (docs/service.md) ------------------------------------------------


def _schedule_checks() -> tuple[CheckConstraint, ...]:
    # a window has both ends or none; budgets are positive
    return (CheckConstraint("(window_start IS NULL) = (window_end IS NULL)", name="window_both_ends"),
            CheckConstraint("budget_trials >= 0", name="budget_trials"),
            CheckConstraint("budget_s > 0", name="budget_s"))


class ApiKey(_CreatedAt, Base):
    """A client of the API. Only the SHA-256 of the secret is stored; ``prefix`` identifies it on screen."""

    __tablename__ = "api_keys"
    __table_args__ = (CheckConstraint("max_queued_jobs >= 0", name="max_queued_jobs"),)

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str] = mapped_column(String(64), unique=True)
    key_hash: Mapped[str] = mapped_column(String(64), unique=True)  # SHA-256 hex of the secret
    prefix: Mapped[str] = mapped_column(String(8))  # the secret's first 8 characters
    max_queued_jobs: Mapped[int] = mapped_column(Integer, default=100)
    # an admin key sees, and may cancel, every key's jobs and batches; others only their own
    is_admin: Mapped[bool] = mapped_column(Boolean, default=False)
    revoked_at: Mapped[datetime | None] = mapped_column(UTCDateTime(), sort_order=101)


class Batch(_CreatedAt, Base):
    """Many jobs submitted together (one per problem), sharing a budget, a start time and a daily window.

    ``status`` is derived from the jobs (:func:`convtune.storage.queries.jobs.batch_status`) and kept up to date
    by every job transition.
    """

    __tablename__ = "batches"
    __table_args__ = (
        CheckConstraint(_in("status", BATCH_STATUSES), name="status"),
        CheckConstraint(_in("backend", BACKENDS), name="backend"),
        *_schedule_checks(),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    name: Mapped[str | None] = mapped_column(String(255))
    preset: Mapped[str | None] = mapped_column(String(64))
    status: Mapped[str] = mapped_column(String(16), default="queued")
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime())
    window_start: Mapped[str | None] = mapped_column(String(5))  # "22:00"
    window_end: Mapped[str | None] = mapped_column(String(5))  # "06:00" (may wrap midnight)
    timezone: Mapped[str] = mapped_column(String(64))  # IANA name, e.g. "Europe/Berlin"
    backend: Mapped[str] = mapped_column(String(16))
    families: Mapped[str | None] = mapped_column(String(255))  # comma-separated; NULL: all that apply
    budget_trials: Mapped[int] = mapped_column(Integer)
    budget_s: Mapped[float] = mapped_column(Float)
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"))


class Job(_Timestamps, Base):
    """One request to tune one problem: queued, claimed by a worker (heartbeats), then ended once.

    ``worker_id``/``claimed_at``/``heartbeat_at`` describe the current claim; a running job whose
    heartbeat is older than the claimer's ``stale_after_s`` is claimed again (``attempts`` counts claims).
    """

    __tablename__ = "jobs"
    __table_args__ = (
        CheckConstraint(_in("status", JOB_STATUSES), name="status"),
        CheckConstraint(_in("backend", BACKENDS), name="backend"),
        *_schedule_checks(),
        # a window's times are read in a named time zone
        CheckConstraint("window_start IS NULL OR timezone IS NOT NULL", name="window_timezone"),
        CheckConstraint("status != 'running' OR worker_id IS NOT NULL", name="running_has_worker"),
        Index("ix_jobs_status_created_at", "status", "created_at"),
    )

    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    problem_id: Mapped[int] = mapped_column(ForeignKey("problems.id"), index=True)
    device_name: Mapped[str | None] = mapped_column(String(128))  # NULL: any device
    backend: Mapped[str] = mapped_column(String(16))
    families: Mapped[str | None] = mapped_column(String(255))  # comma-separated; NULL: all that apply
    budget_trials: Mapped[int] = mapped_column(Integer)
    budget_s: Mapped[float] = mapped_column(Float)
    status: Mapped[str] = mapped_column(String(16), default="queued")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    batch_id: Mapped[int | None] = mapped_column(ForeignKey("batches.id"), index=True)
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime())
    window_start: Mapped[str | None] = mapped_column(String(5))
    window_end: Mapped[str | None] = mapped_column(String(5))
    timezone: Mapped[str | None] = mapped_column(String(64))
    worker_id: Mapped[str | None] = mapped_column(String(128))
    attempts: Mapped[int] = mapped_column(Integer, default=0)
    claimed_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    heartbeat_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    finished_at: Mapped[datetime | None] = mapped_column(UTCDateTime())
    tuning_run_id: Mapped[int | None] = mapped_column(ForeignKey("tuning_runs.id", ondelete="SET NULL"))
    trials_done: Mapped[int] = mapped_column(Integer, default=0)
    best_time_ms: Mapped[float | None] = mapped_column(Float)
    error: Mapped[str | None] = mapped_column(Text)
    # why it stopped: a code of convtune.tuner.tune.STOP_CODES (budget_s, budget_trials, exhausted, ...)
    stop_reason: Mapped[str | None] = mapped_column(String(32))
    api_key_id: Mapped[int | None] = mapped_column(ForeignKey("api_keys.id"))
