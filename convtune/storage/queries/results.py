"""Every query convtune makes: the tuner, the worker and the API call these, never SQL of their own.

Conventions:
    - Every function takes an open :class:`~sqlalchemy.orm.Session` and never commits; the caller's
      :func:`~convtune.storage.session.session_scope` does.
    - ``find_*`` returns ``None`` when nothing matches; ``get_*`` raises :class:`~convtune.errors.NotFound`.
    - ``get_or_create_*`` and :func:`record_measurement` are safe against concurrent workers: they insert
      with ``ON CONFLICT DO NOTHING`` (SQLite and PostgreSQL) and read back the row that won.
    - JSON columns get plain JSON: NumPy scalars become Python numbers, and non-finite floats become
      the strings ``"inf"``, ``"-inf"``, ``"nan"`` (PostgreSQL's ``json`` rejects ``Infinity``).
"""

from __future__ import annotations

import math
import numbers
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from functools import lru_cache
from typing import Any, TypeVar, cast

from sqlalchemy import CursorResult, bindparam, case, func, insert, select, update
from sqlalchemy.orm import Session

from convtune.errors import ConvtuneError, InvalidInput, NotFound, StorageError
from convtune.kernels.config import KernelConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage.models import (
    PRUNING_STAGES,
    Base,
    BestConfig,
    Config,
    Device,
    KernelVersion,
    Measurement,
    Problem,
    PruningDecision,
    TuningRun,
    utcnow,
)
from convtune.vocabulary import BACKENDS, MEASUREMENT_STATUSES, OVERALL_SCOPE, RUN_STATUSES
from convtune.vocabulary import FINISHED_RUN_STATUSES as FINISHED_RUN_STATUSES

ModelT = TypeVar("ModelT", bound=Base)

#: The columns that identify a measurement: measured once per device, kernel version and backend.
MEASUREMENT_IDENTITY = ("device_id", "problem_id", "kernel_version_id", "config_id", "backend")
_MEASUREMENT_FIELDS = frozenset(Measurement.__table__.columns.keys()) - {"id", "created_at"}
_RUN_UPDATABLE = frozenset(TuningRun.__table__.columns.keys()) - {"id", "device_id", "problem_id", "created_at",
                                                                   "updated_at"}
# bound parameters per IN (...) list: SQLite allows 32766 per statement, older builds 999
_CHUNK = 500

PruningInput = tuple[KernelConfig, str, str, Mapping[str, Any]]


# ---- helpers --------------------------------------------------------------------------------------------
def _insert(session: Session, target: Any) -> Any:
    """The dialect's INSERT of a model or table (it has ``on_conflict_do_nothing`` / ``on_conflict_do_update``)."""
    dialect = session.get_bind().dialect.name
    if dialect == "postgresql":
        from sqlalchemy.dialects import postgresql

        return postgresql.insert(target)
    if dialect == "sqlite":
        from sqlalchemy.dialects import sqlite

        return sqlite.insert(target)
    raise StorageError(f"database {dialect!r} is not supported: use SQLite or PostgreSQL")


def _choice(field: str, value: str, allowed: Sequence[str]) -> str:
    if value not in allowed:
        raise InvalidInput(field, f"{value!r} is not allowed: must be one of {', '.join(allowed)}")
    return value


def _plain(value: Any) -> Any:
    """NumPy (or other) numbers -> int/float, so that every driver can bind them."""
    if value is None or isinstance(value, bool | str):
        return value
    if isinstance(value, numbers.Integral):
        return int(value)
    if isinstance(value, numbers.Real):
        return float(value)
    return value


def json_safe(value: Any) -> Any:
    """Standard JSON of ``value``: plain numbers, non-finite floats as ``"inf"``/``"-inf"``/``"nan"``."""
    kind = type(value)
    if kind is int or kind is str or kind is bool or value is None:  # fast path: bulk inserts call this a lot
        return value
    if kind is float:
        return value if math.isfinite(value) else ("nan" if math.isnan(value) else ("inf" if value > 0 else "-inf"))
    if kind is dict and all(type(k) is str and (type(v) is int or (type(v) is float and math.isfinite(v)))
                            for k, v in value.items()):
        return value   # a flat dict of finite numbers (a pruning decision's): already standard JSON
    if isinstance(value, Mapping):
        return {str(k): json_safe(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [json_safe(v) for v in value]
    plain = _plain(value)
    return value if plain is value else json_safe(plain)


def _get(session: Session, model: type[ModelT], row_id: int) -> ModelT:
    row = session.get(model, row_id)
    if row is None:
        raise NotFound(f"{model.__tablename__}: no row with id={row_id}")
    return row


def _get_or_create(session: Session, model: type[ModelT], identity: dict[str, Any],
                   values: dict[str, Any]) -> ModelT:
    query = select(model).filter_by(**identity).order_by(model.id).limit(1)  # type: ignore[attr-defined]
    row = session.scalars(query).first()
    if row is None:
        session.execute(_insert(session, model).values(**identity, **values).on_conflict_do_nothing())
        row = session.scalars(query).first()
    if row is None:  # pragma: no cover - the insert or a concurrent one must have left a row
        raise StorageError(f"{model.__tablename__}: could not insert or find {identity}")
    return row


# ---- devices --------------------------------------------------------------------------------------------
def get_or_create_device(session: Session, *, name: str, compute_capability: str, sm_count: int,
                         driver_version: str | None, cuda_version: str | None, copy_bandwidth_bytes_per_s: float,
                         fp32_peak_flops_per_s: float, ceilings_source: str) -> Device:
    """The device row of (name, compute capability, driver, CUDA), created with these ceilings if new.

    An existing row keeps its ceilings; see :func:`update_device_ceilings`.
    """
    identity = {"name": name, "compute_capability": compute_capability, "driver_version": driver_version,
                "cuda_version": cuda_version}
    values = {"sm_count": int(sm_count), "copy_bandwidth_bytes_per_s": float(copy_bandwidth_bytes_per_s),
              "fp32_peak_flops_per_s": float(fp32_peak_flops_per_s), "ceilings_source": ceilings_source}
    return _get_or_create(session, Device, identity, values)


def get_or_create_machine_device(session: Session, machine: MachineModel, *, driver_version: str | None = None,
                                 cuda_version: str | None = None) -> Device:
    """:func:`get_or_create_device` from a :class:`MachineModel` (compute capability ``(9, 0)`` -> ``"9.0"``)."""
    major, minor = machine.compute_capability
    return get_or_create_device(
        session, name=machine.name, compute_capability=f"{major}.{minor}", sm_count=machine.sm_count,
        driver_version=driver_version, cuda_version=cuda_version,
        copy_bandwidth_bytes_per_s=machine.copy_bandwidth_bytes_per_s,
        fp32_peak_flops_per_s=machine.fp32_peak_flops_per_s, ceilings_source=machine.ceilings_source)


def update_device_ceilings(session: Session, device_id: int, *, copy_bandwidth_bytes_per_s: float,
                           fp32_peak_flops_per_s: float, ceilings_source: str) -> Device:
    """Replace a device's roofline ceilings (e.g. vendor figures by measured ones)."""
    device = get_device(session, device_id)
    device.copy_bandwidth_bytes_per_s = float(copy_bandwidth_bytes_per_s)
    device.fp32_peak_flops_per_s = float(fp32_peak_flops_per_s)
    device.ceilings_source = ceilings_source
    session.flush()
    return device


def find_device(session: Session, name: str, *, compute_capability: str | None = None) -> Device | None:
    """The most recently registered device called ``name`` (optionally of one compute capability)."""
    query = select(Device).where(Device.name == name)
    if compute_capability is not None:
        query = query.where(Device.compute_capability == compute_capability)
    return session.scalars(query.order_by(Device.id.desc()).limit(1)).first()


def get_device(session: Session, device_id: int) -> Device:
    """The device with this id; raises :class:`NotFound`."""
    return _get(session, Device, device_id)


def list_devices(session: Session) -> list[Device]:
    """Every device, oldest first."""
    return list(session.scalars(select(Device).order_by(Device.id)))


# ---- problems, kernel versions, configs ------------------------------------------------------------------
def get_or_create_problem(session: Session, problem: ConvProblem) -> Problem:
    """The row of ``problem`` (by its canonical key), with its spec, FLOPs and compulsory bytes."""
    return _get_or_create(session, Problem, {"key": problem.key()},
                          {"spec": json_safe(problem.to_dict()), "flops": problem.flops,
                           "compulsory_bytes": problem.compulsory_bytes})


def find_problem(session: Session, key: str | ConvProblem) -> Problem | None:
    """The problem with this canonical key (a :class:`ConvProblem` is turned into its key)."""
    key = key.key() if isinstance(key, ConvProblem) else key
    return session.scalars(select(Problem).where(Problem.key == key)).first()


def get_problem(session: Session, problem_id: int) -> Problem:
    """The problem with this id; raises :class:`NotFound`."""
    return _get(session, Problem, problem_id)


def list_problems(session: Session, limit: int = 100, offset: int = 0) -> list[Problem]:
    """One page of problems, oldest first."""
    return list(session.scalars(select(Problem).order_by(Problem.id).limit(limit).offset(offset)))


def get_or_create_kernel_version(session: Session, family: str, direction: str, sha: str) -> KernelVersion:
    """The kernel version of (family, direction, SHA-256 of the source)."""
    return _get_or_create(session, KernelVersion, {"family": family, "direction": direction, "source_sha256": sha},
                          {})


def find_kernel_version(session: Session, family: str, direction: str, sha: str) -> KernelVersion | None:
    """The kernel version of (family, direction, source hash), if recorded."""
    return session.scalars(select(KernelVersion).filter_by(family=family, direction=direction,
                                                           source_sha256=sha)).first()


def get_or_create_config(session: Session, config: KernelConfig) -> Config:
    """The row of ``config`` (by its canonical key)."""
    return _get_or_create(session, Config, {"key": config.key()},
                          {"kind": config.kind, "params": json_safe(config.to_dict())})


def get_or_create_configs(session: Session, configs: Iterable[KernelConfig]) -> dict[str, int]:
    """Bulk :func:`get_or_create_config`: ``{config key: config id}`` for every config given.

    Looks the keys up in chunks, inserts the missing ones with ``INSERT ... ON CONFLICT DO NOTHING
    RETURNING`` in batches, and reads back the ids of any that a concurrent worker inserted first.
    """
    return _get_or_create_configs(session, {config.key(): config for config in configs})


def _get_or_create_configs(session: Session, wanted: Mapping[str, KernelConfig]) -> dict[str, int]:
    ids = _config_ids(session, wanted)
    now = utcnow()
    # in key order: concurrent workers inserting overlapping sets then take the unique index's locks in one order,
    # so one waits for the other instead of both deadlocking (PostgreSQL aborted such a pair under load)
    missing = [{"key": key, "kind": config.kind, "params": json_safe(config.to_dict()), "created_at": now}
               for key, config in sorted(wanted.items()) if key not in ids]
    if not missing:
        return ids
    table = Config.__table__
    stmt = _insert(session, table).on_conflict_do_nothing()
    if session.get_bind().dialect.insert_executemany_returning:
        # RETURNING makes SQLAlchemy batch the rows into multi-row INSERTs ("insertmanyvalues");
        # without it psycopg2 would send one INSERT ... ON CONFLICT per row
        ids.update((key, config_id) for key, config_id in
                   session.execute(stmt.returning(table.c.key, table.c.id), missing))
    else:  # pragma: no cover - SQLite older than 3.35
        session.execute(stmt, missing)
    # rows a concurrent worker inserted first are not returned: read their ids
    ids.update(_config_ids(session, [row["key"] for row in missing if row["key"] not in ids]))
    return ids


def _config_ids(session: Session, keys: Iterable[str]) -> dict[str, int]:
    keys = list(keys)
    found: dict[str, int] = {}
    for start in range(0, len(keys), _CHUNK):
        chunk = keys[start:start + _CHUNK]
        found.update((key, config_id) for key, config_id in
                     session.execute(select(Config.key, Config.id).where(Config.key.in_(chunk))))
    return found


def find_config(session: Session, key: str | KernelConfig) -> Config | None:
    """The config with this canonical key (a :class:`KernelConfig` is turned into its key)."""
    key = key.key() if isinstance(key, KernelConfig) else key
    return session.scalars(select(Config).where(Config.key == key)).first()


def get_config(session: Session, config_id: int) -> Config:
    """The config with this id; raises :class:`NotFound`."""
    return _get(session, Config, config_id)


# ---- tuning runs -----------------------------------------------------------------------------------------
def create_run(session: Session, *, device_id: int, problem_id: int, families: str | Sequence[str], backend: str,
               sampler: str, budget_trials: int | None = None, budget_s: float | None = None,
               study_name: str | None = None, space_size: int | None = None, job_id: int | None = None) -> TuningRun:
    """Start a tuning run (status ``"running"``); ``families`` is a list or a comma-separated string;
    ``job_id`` names the service job it tunes for."""
    run = TuningRun(device_id=device_id, problem_id=problem_id,
                    families=families if isinstance(families, str) else ",".join(families),
                    backend=_choice("backend", backend, BACKENDS), sampler=sampler, budget_trials=budget_trials,
                    budget_s=_plain(budget_s), study_name=study_name, space_size=_plain(space_size),
                    status="running", stage_survivors={}, trials_done=0, job_id=job_id, started_at=utcnow())
    session.add(run)
    session.flush()
    return run


def update_run(session: Session, run_id: int, **fields: Any) -> TuningRun:
    """Set some columns of a run (e.g. ``trials_done``, ``stage_survivors``, ``best_measurement_id``)."""
    run = get_run(session, run_id)
    for name, value in fields.items():
        if name not in _RUN_UPDATABLE:
            raise InvalidInput(name, f"not an updatable column of tuning_runs: allowed {sorted(_RUN_UPDATABLE)}")
        if name == "status":
            _choice("status", value, RUN_STATUSES)
        elif name == "backend":
            _choice("backend", value, BACKENDS)
        setattr(run, name, json_safe(value) if name == "stage_survivors" else _plain(value))
    session.flush()
    return run


def finish_run(session: Session, run_id: int, status: str = "finished", stop_reason: str | None = None) -> TuningRun:
    """End a run: ``status`` is ``"finished"``, ``"failed"`` or ``"cancelled"``; stamps ``finished_at``."""
    _choice("status", status, FINISHED_RUN_STATUSES)
    return update_run(session, run_id, status=status, stop_reason=stop_reason, finished_at=utcnow())


def find_run(session: Session, run_id: int) -> TuningRun | None:
    """The run with this id, or ``None``."""
    return session.get(TuningRun, run_id)


def get_run(session: Session, run_id: int) -> TuningRun:
    """The run with this id; raises :class:`NotFound`."""
    return _get(session, TuningRun, run_id)


def list_runs(session: Session, problem_id: int | None = None, *, device_id: int | None = None,
              status: str | None = None, limit: int = 100, offset: int = 0) -> list[TuningRun]:
    """Runs, newest first, optionally of one problem, device or status."""
    query = select(TuningRun)
    if problem_id is not None:
        query = query.where(TuningRun.problem_id == problem_id)
    if device_id is not None:
        query = query.where(TuningRun.device_id == device_id)
    if status is not None:
        query = query.where(TuningRun.status == status)
    return list(session.scalars(query.order_by(TuningRun.id.desc()).limit(limit).offset(offset)))


# ---- measurements ----------------------------------------------------------------------------------------
def find_measurement(session: Session, *, device_id: int, problem_id: int, kernel_version_id: int, config_id: int,
                     backend: str) -> Measurement | None:
    """The measurement of this configuration on this device, kernel version and backend, if any."""
    return session.scalars(select(Measurement).filter_by(
        device_id=device_id, problem_id=problem_id, kernel_version_id=kernel_version_id, config_id=config_id,
        backend=backend)).first()


def get_measurement(session: Session, measurement_id: int) -> Measurement:
    """The measurement with this id; raises :class:`NotFound`."""
    return _get(session, Measurement, measurement_id)


def record_measurement(session: Session, **fields: Any) -> Measurement:
    """Store one measurement, or return the one already stored under the same identity.

    Args:
        **fields: columns of ``measurements``; required are ``device_id``, ``problem_id``,
            ``kernel_version_id``, ``config_id``, ``backend`` and ``status``. ``predicted`` defaults
            to ``backend == "model"`` and may not say otherwise.

    A new row with a ``tuning_run_id`` adds one to that run's ``trials_done`` in the same transaction.

    Returns:
        The stored row. When (device, problem, kernel version, config, backend) was already measured,
        that earlier row, unchanged: a configuration is never measured twice. Concurrent workers
        racing on the same identity both get the winner's row (``ON CONFLICT DO NOTHING``).

    Raises:
        InvalidInput: an unknown column, a missing identity column, or a bad backend/status.
    """
    for name in fields:
        if name not in _MEASUREMENT_FIELDS:
            raise InvalidInput(name, f"not a column of measurements: allowed {sorted(_MEASUREMENT_FIELDS)}")
    for name in (*MEASUREMENT_IDENTITY, "status"):
        if fields.get(name) is None:
            raise InvalidInput(name, "is required")
    backend = _choice("backend", fields["backend"], BACKENDS)
    _choice("status", fields["status"], MEASUREMENT_STATUSES)
    predicted = backend == "model"
    if fields.setdefault("predicted", predicted) != predicted:
        raise InvalidInput("predicted", f"must be {predicted} for backend {backend!r}: model rows, and only "
                                        "they, are predictions")
    values = {name: _plain(value) for name, value in fields.items()}
    statement = _insert(session, Measurement).values(**values).on_conflict_do_nothing(
        index_elements=list(MEASUREMENT_IDENTITY))
    inserted = cast("CursorResult[Any]", session.execute(statement)).rowcount  # an INSERT's result: a CursorResult
    if inserted and values.get("tuning_run_id") is not None:
        # the run's count moves in the transaction that stores the row: a crash can lose neither alone
        session.execute(update(TuningRun).where(TuningRun.id == values["tuning_run_id"])
                        .values(trials_done=TuningRun.trials_done + 1).execution_options(synchronize_session=False))
    row = find_measurement(session, **{name: values[name] for name in MEASUREMENT_IDENTITY})
    if row is None:  # pragma: no cover
        raise StorageError(f"measurements: could not insert or find {values}")
    return row


def measurements_for(session: Session, *, device_id: int, problem_id: int, backend: str | None = None,
                     run_id: int | None = None, predicted: bool = False) -> list[Measurement]:
    """Measurements of a problem on a device, oldest first.

    Measured and predicted rows are never mixed: with ``backend`` given, that backend's rows; without,
    the measured rows (``predicted=False``, the default) or the model's (``predicted=True``).
    """
    query = select(Measurement).where(Measurement.device_id == device_id, Measurement.problem_id == problem_id)
    if backend is not None:
        query = query.where(Measurement.backend == backend)
    else:
        query = query.where(Measurement.predicted == predicted)
    if run_id is not None:
        query = query.where(Measurement.tuning_run_id == run_id)
    return list(session.scalars(query.order_by(Measurement.id)))


def best_measurement(session: Session, *, device_id: int, problem_id: int, predicted: bool = False,
                     family: str | None = None) -> Measurement | None:
    """The fastest ``ok`` measurement (lowest median) of a problem on a device, optionally of one family."""
    query = (select(Measurement)
             .where(Measurement.device_id == device_id, Measurement.problem_id == problem_id,
                    Measurement.predicted == predicted, Measurement.status == "ok",
                    Measurement.median_ms.is_not(None))
             .order_by(Measurement.median_ms, Measurement.id).limit(1))
    if family is not None:
        query = query.join(KernelVersion, KernelVersion.id == Measurement.kernel_version_id).where(
            KernelVersion.family == family)
    return session.scalars(query).first()


# ---- pruning decisions -----------------------------------------------------------------------------------
def record_pruning_decisions(session: Session, run_id: int, device_id: int, problem_id: int,
                             decisions: Iterable[PruningInput]) -> int:
    """Bulk-insert the pruner's verdicts of one run: ``(config, stage, reason, numbers)`` each.

    Configs are get-or-created in bulk; the decisions go in as one executemany, so 100k rows take
    seconds, not minutes. Returns the number of rows inserted.
    """
    decisions = list(decisions)
    keys = [config.key() for config, *_ in decisions]
    config_ids = _get_or_create_configs(session, dict(zip(keys, (config for config, *_ in decisions), strict=True)))
    now = utcnow()
    rows = [{"tuning_run_id": run_id, "device_id": device_id, "problem_id": problem_id, "config_id": config_ids[key],
             "stage": stage if stage in PRUNING_STAGES else _choice("stage", stage, PRUNING_STAGES),
             "reason": reason, "numbers": json_safe(numbers), "created_at": now}
            for key, (_, stage, reason, numbers) in zip(keys, decisions, strict=True)]
    if rows:
        # a Core executemany: the ORM's bulk insert spent 3 of its 4.4 s on 128k rows collecting per-row commands
        table: Any = PruningDecision.__table__
        session.execute(insert(table), rows)
    return len(rows)


def find_pruning_decision(session: Session, *, device_id: int, problem_id: int,
                          config_key: str | KernelConfig) -> PruningDecision | None:
    """The latest pruning decision about a config for a problem on a device, or ``None``."""
    key = config_key.key() if isinstance(config_key, KernelConfig) else config_key
    return session.scalars(
        select(PruningDecision).join(Config, Config.id == PruningDecision.config_id)
        .where(PruningDecision.device_id == device_id, PruningDecision.problem_id == problem_id, Config.key == key)
        .order_by(PruningDecision.id.desc()).limit(1)).first()


def pruning_stage_counts(session: Session, run_id: int) -> dict[str, int]:
    """How many configs of a run each pruning stage decided: ``{"traffic": 812, "kept": 40, ...}``."""
    rows = session.execute(select(PruningDecision.stage, func.count()).where(PruningDecision.tuning_run_id == run_id)
                           .group_by(PruningDecision.stage))
    return {stage: count for stage, count in rows}


# ---- best configurations ---------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class BestConfigView:
    """A best configuration joined with its device, problem and config (what the API answers)."""

    problem_key: str
    problem_id: int
    device_name: str
    device_id: int
    compute_capability: str
    scope: str
    config_key: str
    config_kind: str
    params: dict[str, Any]
    time_ms: float
    floor_ms: float
    efficiency: float
    provisional: bool
    measurement_id: int | None
    tuning_run_id: int | None
    updated_at: datetime
    backend: str = "gpu"  # what measured it: "gpu" (this device), "replay" (a recorded table), "model"

    @property
    def measured_here(self) -> bool:
        """Measured on a GPU of this device name: the only rows served to ops as measured."""
        return self.backend == "gpu" and not self.provisional

    @property
    def measured(self) -> bool:
        """What the API and ``convtune best`` call ``measured``: :attr:`measured_here`."""
        return self.measured_here

    @property
    def provenance(self) -> str:
        """One phrase for readers: ``"measured"``, ``"replay (not measured here)"`` or ``"provisional (model)"``."""
        if self.measured_here:
            return "measured"
        return "provisional (not measured)" if self.backend == "gpu" else PROVENANCE.get(self.backend, self.backend)


#: How a best row of each backend is labelled where it is shown (CLI, pages): only GPU rows are measured.
PROVENANCE = {"gpu": "measured", "replay": "replay (not measured here)", "model": "provisional (model)"}


_BEST_UPDATABLE = ("config_id", "measurement_id", "time_ms", "floor_ms", "efficiency", "provisional", "tuning_run_id",
                   "updated_at")


def upsert_best_config(session: Session, *, device_id: int, problem_id: int, scope: str, config_id: int,
                       measurement_id: int | None, time_ms: float, floor_ms: float, efficiency: float,
                       provisional: bool, tuning_run_id: int | None, backend: str | None = None) -> BestConfig:
    """Insert or replace the best configuration of (device, problem, scope, backend) in one statement.

    ``scope`` is a family name or ``"*"`` (overall). ``backend`` defaults to the measurement's backend
    (``"model"`` for a provisional row without one, else ``"gpu"``). The row is replaced unconditionally:
    the caller decides what is better; rows of other backends are never touched.
    """
    if not scope:
        raise InvalidInput("scope", "must be a family name or '*'")
    if backend is None:
        measured = session.get(Measurement, measurement_id) if measurement_id is not None else None
        backend = measured.backend if measured is not None else ("model" if provisional else "gpu")
    backend = _choice("backend", backend, BACKENDS)
    now = utcnow()
    stmt = _insert(session, BestConfig).values(
        device_id=device_id, problem_id=problem_id, scope=scope, backend=backend, config_id=config_id,
        measurement_id=measurement_id, time_ms=_plain(time_ms), floor_ms=_plain(floor_ms),
        efficiency=_plain(efficiency), provisional=bool(provisional), tuning_run_id=tuning_run_id, created_at=now,
        updated_at=now)
    stmt = stmt.on_conflict_do_update(index_elements=["device_id", "problem_id", "scope", "backend"],
                                      set_={name: stmt.excluded[name] for name in _BEST_UPDATABLE})
    session.execute(stmt)
    return session.scalars(
        select(BestConfig).filter_by(device_id=device_id, problem_id=problem_id, scope=scope, backend=backend)
        .execution_options(populate_existing=True)).one()


#: The columns of a best row's view, in one Core statement: the ORM would build four entities per row, which
#: is most of a cached POST /v1/tune's server time.
_BEST_COLUMNS = (Problem.key.label("problem_key"), Problem.id.label("problem_id"),
                 Device.name.label("device_name"), Device.id.label("device_id"), Device.compute_capability,
                 BestConfig.scope, Config.key.label("config_key"), Config.kind.label("config_kind"),
                 Config.params, BestConfig.time_ms, BestConfig.floor_ms, BestConfig.efficiency,
                 BestConfig.provisional, BestConfig.measurement_id, BestConfig.tuning_run_id, BestConfig.updated_at,
                 BestConfig.backend)


@lru_cache(maxsize=8)
def _best_statement(by_device: bool, by_scope: bool, by_backend: bool) -> Any:
    """The best-rows query for one combination of filters, built once: its parameters are bound at
    execution (``problem_keys``, ``device_name``, ``scope``, ``backend``), so a lookup skips building a
    statement (half of its cost when built per call)."""
    query = (select(*_BEST_COLUMNS)
             .join_from(BestConfig, Problem, Problem.id == BestConfig.problem_id)
             .join(Device, Device.id == BestConfig.device_id)
             .join(Config, Config.id == BestConfig.config_id)
             .where(Problem.key.in_(bindparam("problem_keys", expanding=True))))
    if by_device:
        query = query.where(Device.name == bindparam("device_name"))
    if by_scope:
        query = query.where(BestConfig.scope == bindparam("scope"))
    if by_backend:
        query = query.where(BestConfig.backend == bindparam("backend"))
    # measured on the GPU, then replayed, then predicted; then fastest
    rank = case((BestConfig.backend == "gpu", 0), (BestConfig.backend == "replay", 1), else_=2)
    return query.order_by(BestConfig.provisional, rank, BestConfig.time_ms, BestConfig.id)


@lru_cache(maxsize=4096)
def _parsed_serving_keys(key: str) -> tuple[str, ...]:
    """:meth:`ConvProblem.serving_keys` of a stored key; the key alone when it no longer parses."""
    try:
        return ConvProblem.parse(key).serving_keys()
    except ConvtuneError:
        return (key,)


def serving_keys(problem_key: str | ConvProblem) -> tuple[str, ...]:
    """The problem keys whose best rows may serve ``problem_key`` (:meth:`ConvProblem.serving_keys`: a tf32 problem's
    own and the strict float32 problem's; any other problem's own only)."""
    if isinstance(problem_key, ConvProblem):
        return problem_key.serving_keys()
    return _parsed_serving_keys(problem_key)


def _keys(problem_key: str | ConvProblem, serving: bool) -> tuple[str, ...]:
    if serving:
        return serving_keys(problem_key)
    return (problem_key.key() if isinstance(problem_key, ConvProblem) else problem_key,)


def _best_rows(session: Session, problem_keys: tuple[str, ...], device_name: str | None, scope: str | None,
               backend: str | None = None) -> list[Any]:
    params: dict[str, Any] = {"problem_keys": list(problem_keys)}
    if device_name is not None:
        params["device_name"] = device_name
    if scope is not None:
        params["scope"] = scope
    if backend is not None:
        params["backend"] = _choice("backend", backend, BACKENDS)
    query = _best_statement(device_name is not None, scope is not None, backend is not None)
    return list(session.execute(query, params))


def _view(row: Any) -> BestConfigView:
    return _view_from(row._asdict())


def _view_from(values: Mapping[str, Any]) -> BestConfigView:
    """The view of a row's :data:`_BEST_COLUMNS` (other columns of ``values`` are left out)."""
    fields: dict[str, Any] = {column.key: values[column.key] for column in _BEST_COLUMNS}
    fields["params"] = dict(fields["params"] or {})
    return BestConfigView(**fields)


def find_best_config(session: Session, *, problem_key: str | ConvProblem, device_name: str | None = None,
                     scope: str = OVERALL_SCOPE, backend: str | None = None,
                     serving: bool = False) -> BestConfigView | None:
    """The best configuration of a problem (on devices called ``device_name``, or on any device; of one
    ``backend``, or of any).

    Among several matching rows (several devices, driver versions, backends), a measured one beats a
    provisional one, a GPU measurement a replayed one, then the lowest time wins. ``serving``: the rows of every
    problem that may serve this one (:func:`serving_keys`: a tf32 problem's and the strict float32 problem's),
    else the problem's own rows only (its history).
    """
    rows = _best_rows(session, _keys(problem_key, serving), device_name, scope, backend)
    return _view(rows[0]) if rows else None


def get_best_config(session: Session, *, problem_key: str | ConvProblem, device_name: str | None = None,
                    scope: str = OVERALL_SCOPE, backend: str | None = None, serving: bool = False) -> BestConfigView:
    """:func:`find_best_config`, raising :class:`NotFound` when nothing is known yet."""
    view = find_best_config(session, problem_key=problem_key, device_name=device_name, scope=scope, backend=backend,
                            serving=serving)
    if view is None:
        where = f" on {device_name!r}" if device_name is not None else ""
        key = problem_key.key() if isinstance(problem_key, ConvProblem) else problem_key
        raise NotFound(f"no best configuration (scope {scope!r}) for problem {key!r}{where}")
    return view


def list_best_configs(session: Session, *, problem_key: str | ConvProblem, device_name: str | None = None,
                      scope: str | None = None, serving: bool = False) -> list[BestConfigView]:
    """Every best configuration of a problem (of one ``scope`` when given; every backend's row): measured on
    a GPU first, then replayed, then predicted, then fastest. The first is what :func:`find_best_config`
    answers; the others are what a reader shows beside it, flagged by their backend. ``serving``: as
    :func:`find_best_config` (a row's ``problem_key`` says which problem it was measured for)."""
    return [_view(row) for row in _best_rows(session, _keys(problem_key, serving), device_name, scope)]


# ---- paged history of a problem across devices (GET /v1/problems/{id}, /trials, the pages) ---------------
def count_problem_measurements(session: Session, problem_id: int) -> int:
    """Measurements of a problem on every device and backend."""
    return int(session.scalar(select(func.count()).select_from(Measurement)
                              .where(Measurement.problem_id == problem_id)) or 0)


def count_problem_pruning_decisions(session: Session, problem_id: int, *, stage: str | None = None) -> int:
    """Pruning decisions about a problem on every device (of one stage when given)."""
    query = select(func.count()).select_from(PruningDecision).where(PruningDecision.problem_id == problem_id)
    if stage is not None:
        query = query.where(PruningDecision.stage == stage)
    return int(session.scalar(query) or 0)


def page_problem_measurements(session: Session, problem_id: int, *, limit: int,
                              offset: int) -> list[tuple[Any, str, Any]]:
    """(measurement, device name, config) of a problem, oldest first."""
    rows = session.execute(
        select(Measurement, Device.name, Config)
        .join(Device, Device.id == Measurement.device_id).join(Config, Config.id == Measurement.config_id)
        .where(Measurement.problem_id == problem_id).order_by(Measurement.id).limit(limit).offset(offset))
    return [(m, name, c) for m, name, c in rows]


def page_problem_pruning_decisions(session: Session, problem_id: int, *, limit: int, offset: int,
                           stage: str | None = None) -> list[tuple[Any, str, str]]:
    """(decision, device name, config key) of a problem, oldest first."""
    query = (select(PruningDecision, Device.name, Config.key)
             .join(Device, Device.id == PruningDecision.device_id).join(Config, Config.id == PruningDecision.config_id)
             .where(PruningDecision.problem_id == problem_id))
    if stage is not None:
        query = query.where(PruningDecision.stage == stage)
    rows = session.execute(query.order_by(PruningDecision.id).limit(limit).offset(offset))
    return [(d, name, key) for d, name, key in rows]


def config_keys_by_id(session: Session, config_ids: Iterable[int]) -> dict[int, str]:
    """``{config id: config key}`` of these ids, in chunks (one query per 500 ids)."""
    ids = sorted(set(config_ids))
    found: dict[int, str] = {}
    for start in range(0, len(ids), 500):
        found.update(session.execute(select(Config.id, Config.key).where(Config.id.in_(ids[start:start + 500]))).all())
    return found


# ---- the measured best of the current kernel versions (the ops' config resolver, convtune/ops/resolver.py) --------
def find_measured_best(session: Session, *, problem_key: str | ConvProblem, device_name: str,
                       kernel_shas: Mapping[str, str], direction: str = "fwd") -> BestConfigView | None:
    """The fastest stored best configuration that may serve a problem on devices called ``device_name``, measured
    on a real GPU with a kernel version still current; None when there is none. The serving rule of the ops: the
    rows of every problem of :func:`serving_keys` (a tf32 problem: its own and the strict float32 problem's, the
    fastest of both wins; a strict problem: its own only, so a tf32 row never serves it), in one query.

    A row qualifies when it is not provisional and its measurement has backend ``"gpu"``, is not predicted,
    has status ``"ok"``, is of the row's config, and its kernel version is of ``direction`` with
    ``source_sha256 == kernel_shas[family]`` (``kernel_shas``: family → SHA-256 of the family's current
    source). Replay and model rows never qualify (a replayed or predicted time says nothing about this
    device), nor do rows of an older kernel source. Every scope is considered, so a per-family best of a
    current version still serves when the overall best is of a stale one. The join is on the measurement,
    so it works whether or not ``best_configs`` stores a backend of its own.
    """
    from sqlalchemy import and_, or_

    if not kernel_shas:
        return None
    keys = serving_keys(problem_key)
    current = or_(*(and_(KernelVersion.family == family, KernelVersion.source_sha256 == sha)
                    for family, sha in kernel_shas.items()))
    query = (select(BestConfig, Problem, Device, Config, Measurement)
             .join(Problem, Problem.id == BestConfig.problem_id)
             .join(Device, Device.id == BestConfig.device_id)
             .join(Config, Config.id == BestConfig.config_id)
             .join(Measurement, Measurement.id == BestConfig.measurement_id)
             .join(KernelVersion, KernelVersion.id == Measurement.kernel_version_id)
             .where(Problem.key.in_(keys), Device.name == device_name, BestConfig.provisional.is_(False),
                    Measurement.backend == "gpu", Measurement.predicted.is_(False), Measurement.status == "ok",
                    Measurement.config_id == BestConfig.config_id, KernelVersion.direction == direction, current)
             .order_by(BestConfig.time_ms, BestConfig.id).limit(1))
    row = session.execute(query).first()
    return None if row is None else _measured_view(*row)


def _measured_view(best: BestConfig, problem: Problem, device: Device, config: Config,
                   measurement: Measurement) -> BestConfigView:
    """The :class:`BestConfigView` of one row of :func:`find_measured_best` (the view's fields, whatever they are)."""
    from dataclasses import fields

    values: dict[str, Any] = {"problem_key": problem.key, "problem_id": problem.id, "device_name": device.name,
              "device_id": device.id, "compute_capability": device.compute_capability, "scope": best.scope,
              "config_key": config.key, "config_kind": config.kind, "params": dict(config.params or {}),
              "time_ms": best.time_ms, "floor_ms": best.floor_ms, "efficiency": best.efficiency,
              "provisional": best.provisional, "measurement_id": best.measurement_id,
              "tuning_run_id": best.tuning_run_id, "updated_at": best.updated_at, "backend": measurement.backend}
    wanted = {f.name for f in fields(BestConfigView)}
    return BestConfigView(**{name: value for name, value in values.items() if name in wanted})


# ---- every best row with its kernel version (convtune export, convtune/ops/export.py) ----------------------------
@dataclass(frozen=True, slots=True)
class ExportRow:
    """A best row as ``convtune export`` writes it: the view, the kernel version (SHA-256 of the family's source)
    its measurement was taken with (None without a measurement), and whether the resolver would serve it as
    measured (:func:`find_measured_best`'s conditions but the kernel version, which the reader checks)."""

    view: BestConfigView
    kernel_version: str | None
    servable: bool


def list_export_rows(session: Session, *, device_name: str | None = None,
                     backend: str | None = None) -> list[ExportRow]:
    """Every best row (on devices called ``device_name``, of ``backend``; None: all), by problem key, device,
    scope and rank (GPU first, then fastest)."""
    query = (select(*_BEST_COLUMNS, KernelVersion.source_sha256, KernelVersion.direction,
                    Measurement.backend.label("m_backend"), Measurement.predicted, Measurement.status,
                    Measurement.config_id.label("m_config_id"), BestConfig.config_id.label("b_config_id"))
             .join_from(BestConfig, Problem, Problem.id == BestConfig.problem_id)
             .join(Device, Device.id == BestConfig.device_id)
             .join(Config, Config.id == BestConfig.config_id)
             .outerjoin(Measurement, Measurement.id == BestConfig.measurement_id)
             .outerjoin(KernelVersion, KernelVersion.id == Measurement.kernel_version_id))
    if device_name is not None:
        query = query.where(Device.name == device_name)
    if backend is not None:
        query = query.where(BestConfig.backend == _choice("backend", backend, BACKENDS))
    rank = case((BestConfig.backend == "gpu", 0), (BestConfig.backend == "replay", 1), else_=2)
    query = query.order_by(Problem.key, Device.name, BestConfig.scope, BestConfig.provisional, rank,
                           BestConfig.time_ms, BestConfig.id)
    out = []
    for row in session.execute(query):
        values = row._asdict()
        view = _view_from(values)
        servable = (not view.provisional and view.backend == "gpu" and values["m_backend"] == "gpu"
                    and values["predicted"] is False and values["status"] == "ok"
                    and values["m_config_id"] == values["b_config_id"] and values["direction"] == "fwd")
        out.append(ExportRow(view, values["source_sha256"], bool(servable)))
    return out
