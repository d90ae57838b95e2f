"""Every repository function against a freshly migrated database (SQLite, and PostgreSQL where set)."""

from __future__ import annotations

import math
import threading
from datetime import UTC

import numpy as np
import pytest
from sqlalchemy import Engine, event, func, select
from sqlalchemy.orm import Session
from storage_samples import CONFIG, OTHER_CONFIG, OTHER_PROBLEM, PROBLEM, SHA, add_device

from convtune.errors import InvalidInput, NotFound
from convtune.kernels.config import parse_config_key
from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import ConstraintViolation, queries, session_scope
from convtune.storage.models import Config, Device, KernelVersion, Measurement, Problem, PruningDecision


def _measure(session: Session, device: Device, problem: Problem, kernel_version: KernelVersion, config: Config,
             **fields: object) -> Measurement:
    values: dict[str, object] = dict(device_id=device.id, problem_id=problem.id, kernel_version_id=kernel_version.id,
                                     config_id=config.id, backend="gpu", status="ok", median_ms=1.0, p10_ms=0.9,
                                     p90_ms=1.2, min_ms=0.85, reps=50, rotation_sets=4, rel_error=1e-6, num_regs=96,
                                     local_bytes=0, smem_bytes=32768, compile_s=0.4)
    values.update(fields)
    return queries.record_measurement(session, **values)


# ---- devices ---------------------------------------------------------------------------------------------
def test_get_or_create_device_returns_the_same_row_for_the_same_identity(session: Session) -> None:
    first = add_device(session)
    again = add_device(session, copy_bandwidth_bytes_per_s=1.0)  # other ceilings: same device, kept as stored
    assert again.id == first.id
    assert again.copy_bandwidth_bytes_per_s == pytest.approx(4.19e12)
    assert first.created_at.tzinfo is UTC


@pytest.mark.parametrize("change", [{"driver_version": "590.1"}, {"driver_version": None},
                                    {"compute_capability": "9.1"}, {"cuda_version": None}],
                         ids=["driver", "no-driver", "cc", "no-cuda"])
def test_a_new_driver_or_cuda_version_is_a_new_device(session: Session, change: dict[str, object]) -> None:
    first = add_device(session)
    other = add_device(session, **change)  # type: ignore[arg-type]
    assert other.id != first.id
    assert add_device(session, **change).id == other.id  # type: ignore[arg-type]  # NULLs match NULLs


def test_device_from_machine_model_find_get_list_and_update_ceilings(session: Session) -> None:
    machine = MachineModel.preset("h200")
    device = queries.get_or_create_machine_device(session, machine, driver_version="580.65", cuda_version="13.0")
    assert (device.name, device.compute_capability, device.sm_count) == (machine.name, "9.0", machine.sm_count)
    assert queries.get_or_create_machine_device(session, machine, driver_version="580.65",
                                                   cuda_version="13.0").id == device.id
    newer = queries.get_or_create_machine_device(session, machine, driver_version="590.1", cuda_version="13.0")
    assert queries.find_device(session, machine.name).id == newer.id  # the most recent registration
    assert queries.find_device(session, machine.name, compute_capability="8.0") is None
    assert queries.find_device(session, "no such GPU") is None
    assert queries.get_device(session, device.id) is device
    with pytest.raises(NotFound, match="devices"):
        queries.get_device(session, 10_000)
    assert [d.id for d in queries.list_devices(session)] == [device.id, newer.id]
    updated = queries.update_device_ceilings(session, device.id, copy_bandwidth_bytes_per_s=4.0e12,
                                                fp32_peak_flops_per_s=5.0e13, ceilings_source="measured")
    assert (updated.copy_bandwidth_bytes_per_s, updated.ceilings_source) == (4.0e12, "measured")


# ---- problems, kernel versions, configs ------------------------------------------------------------------
def test_problem_rows_are_keyed_by_the_canonical_key(session: Session) -> None:
    row = queries.get_or_create_problem(session, PROBLEM)
    assert row.key == PROBLEM.key()
    assert ConvProblem(**row.spec) == PROBLEM
    assert (row.flops, row.compulsory_bytes) == (PROBLEM.flops, PROBLEM.compulsory_bytes)
    assert queries.get_or_create_problem(session, ConvProblem(**PROBLEM.to_dict())).id == row.id
    assert queries.find_problem(session, PROBLEM).id == row.id
    assert queries.find_problem(session, PROBLEM.key()).id == row.id
    assert queries.find_problem(session, OTHER_PROBLEM) is None
    assert queries.get_problem(session, row.id) is row
    with pytest.raises(NotFound):
        queries.get_problem(session, row.id + 1)


def test_list_problems_pages_in_insertion_order(session: Session) -> None:
    problems = [ConvProblem(N=1, C=8, H=h, W=16, K=8, R=3, S=3) for h in range(3, 10)]
    ids = [queries.get_or_create_problem(session, p).id for p in problems]
    assert [p.id for p in queries.list_problems(session, limit=3)] == ids[:3]
    assert [p.id for p in queries.list_problems(session, limit=3, offset=3)] == ids[3:6]
    assert [p.id for p in queries.list_problems(session, limit=100, offset=6)] == ids[6:]


def test_big_problem_counts_fit_in_bigint(session: Session) -> None:
    big = ConvProblem(N=64, C=512, H=128, W=128, K=512, R=3, S=3, pad_h=1, pad_w=1)
    assert big.flops > 2**31
    assert queries.get_or_create_problem(session, big).flops == big.flops


def test_kernel_versions_are_keyed_by_family_direction_and_source_hash(session: Session) -> None:
    kv = queries.get_or_create_kernel_version(session, "direct", "fwd", SHA)
    assert queries.get_or_create_kernel_version(session, "direct", "fwd", SHA).id == kv.id
    assert queries.get_or_create_kernel_version(session, "direct", "fwd", "f" * 64).id != kv.id
    assert queries.find_kernel_version(session, "direct", "fwd", SHA).id == kv.id
    assert queries.find_kernel_version(session, "winograd", "fwd", SHA) is None


def test_configs_round_trip_through_their_key(session: Session) -> None:
    row = queries.get_or_create_config(session, CONFIG)
    assert (row.kind, row.key, row.params) == ("direct.fwd", CONFIG.key(), CONFIG.to_dict())
    assert parse_config_key(row.key) == CONFIG
    assert queries.get_or_create_config(session, DirectFwdConfig(**CONFIG.to_dict())).id == row.id
    assert queries.find_config(session, CONFIG).id == row.id
    assert queries.find_config(session, CONFIG.key()).id == row.id
    assert queries.find_config(session, OTHER_CONFIG) is None
    assert queries.get_config(session, row.id) is row
    with pytest.raises(NotFound):
        queries.get_config(session, row.id + 1)


def test_get_or_create_configs_in_bulk_reuses_existing_rows(session: Session) -> None:
    existing = queries.get_or_create_config(session, CONFIG)
    configs = [CONFIG, *(DirectFwdConfig(tile_w=w, tile_k=k) for w in range(1, 40) for k in range(1, 40))]
    ids = queries.get_or_create_configs(session, configs + configs[:10])  # duplicates collapse
    assert len(ids) == len(configs) and ids[CONFIG.key()] == existing.id
    assert session.scalar(select(func.count()).select_from(Config)) == len(configs)
    assert queries.get_or_create_configs(session, configs) == ids
    assert queries.get_or_create_configs(session, []) == {}



def test_new_configs_are_inserted_in_key_order(session: Session, engine: Engine) -> None:
    """Every transaction inserts missing configs sorted by key, so two workers inserting overlapping sets take the
    unique index's locks in one order: one waits, neither deadlocks (PostgreSQL once aborted such a pair)."""
    configs = [DirectFwdConfig(tile_w=w, tile_k=k) for w in range(40, 1, -1) for k in (64, 8, 32)]
    inserted: list[str] = []

    def record(conn, cursor, statement, parameters, context, executemany) -> None:
        if statement.lstrip().upper().startswith("INSERT INTO CONFIGS"):
            rows = parameters if isinstance(parameters, list | tuple) and parameters and not isinstance(
                parameters[0], str | int | float) else [parameters]
            for row in rows:
                values = row.values() if isinstance(row, dict) else row
                inserted.extend(v for v in values if isinstance(v, str) and v.startswith("direct.fwd "))

    event.listen(engine, "before_cursor_execute", record)
    try:
        queries.get_or_create_configs(session, configs)
    finally:
        event.remove(engine, "before_cursor_execute", record)
    assert len(inserted) == len(configs) and inserted == sorted(inserted)


# ---- runs ------------------------------------------------------------------------------------------------
def test_run_lifecycle(session: Session, device: Device, problem: Problem) -> None:
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families=["direct", "winograd"],
                                backend="replay", sampler="tpe", budget_trials=200, budget_s=np.float64(60.0),
                                study_name="s1", space_size=np.int64(123_456))
    assert (run.status, run.families, run.trials_done, run.stage_survivors) == ("running", "direct,winograd", 0, {})
    assert run.finished_at is None and run.started_at.tzinfo is UTC
    assert type(run.space_size) is int

    queries.update_run(session, run.id, trials_done=np.int64(17), pruning_s=0.25,
                          stage_survivors={"infeasible": 1000, "traffic": np.int64(300), "kept": 40})
    session.expire_all()
    run = queries.get_run(session, run.id)
    assert (run.trials_done, run.pruning_s) == (17, 0.25)
    assert run.stage_survivors == {"infeasible": 1000, "traffic": 300, "kept": 40}

    done = queries.finish_run(session, run.id, "finished", "budget_trials")
    assert (done.status, done.stop_reason) == ("finished", "budget_trials")
    assert done.finished_at is not None and done.finished_at >= done.started_at
    assert queries.find_run(session, run.id) is done
    assert queries.find_run(session, run.id + 1) is None
    with pytest.raises(NotFound):
        queries.get_run(session, run.id + 1)


def test_run_arguments_are_validated(session: Session, device: Device, problem: Problem) -> None:
    with pytest.raises(InvalidInput, match="backend"):
        queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                              backend="cuda", sampler="tpe")
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                backend="gpu", sampler="random")
    with pytest.raises(InvalidInput, match="status"):
        queries.finish_run(session, run.id, "running")
    with pytest.raises(InvalidInput, match="status"):
        queries.update_run(session, run.id, status="paused")
    with pytest.raises(InvalidInput, match="device_id"):
        queries.update_run(session, run.id, device_id=2)
    with pytest.raises(InvalidInput, match="colour"):
        queries.update_run(session, run.id, colour="red")


def test_list_runs_newest_first_and_filtered(session: Session, device: Device, problem: Problem) -> None:
    other = queries.get_or_create_problem(session, OTHER_PROBLEM)
    runs = [queries.create_run(session, device_id=device.id, problem_id=p.id, families="direct", backend="model",
                                  sampler="grid") for p in (problem, other, problem)]
    queries.finish_run(session, runs[0].id, "cancelled", "user")
    assert [r.id for r in queries.list_runs(session)] == [r.id for r in reversed(runs)]
    assert [r.id for r in queries.list_runs(session, problem.id)] == [runs[2].id, runs[0].id]
    assert [r.id for r in queries.list_runs(session, status="cancelled")] == [runs[0].id]
    assert queries.list_runs(session, device_id=device.id + 1) == []
    assert len(queries.list_runs(session, limit=1, offset=1)) == 1


# ---- measurements ----------------------------------------------------------------------------------------
def test_record_measurement_stores_every_field(session: Session, device: Device, problem: Problem,
                                               kernel_version: KernelVersion) -> None:
    config = queries.get_or_create_config(session, CONFIG)
    row = _measure(session, device, problem, kernel_version, config, num_regs=np.int32(96), median_ms=np.float32(1.0))
    assert (row.status, row.backend, row.predicted, row.num_regs, row.median_ms) == ("ok", "gpu", False, 96, 1.0)
    assert (row.p10_ms, row.p90_ms, row.min_ms, row.reps, row.rotation_sets) == (0.9, 1.2, 0.85, 50, 4)
    assert row.tuning_run_id is None and row.error is None
    found = queries.find_measurement(session, device_id=device.id, problem_id=problem.id,
                                        kernel_version_id=kernel_version.id, config_id=config.id, backend="gpu")
    assert found is row
    assert queries.find_measurement(session, device_id=device.id, problem_id=problem.id,
                                       kernel_version_id=kernel_version.id, config_id=config.id,
                                       backend="replay") is None
    assert queries.get_measurement(session, row.id) is row
    with pytest.raises(NotFound):
        queries.get_measurement(session, row.id + 1)


def test_record_measurement_is_idempotent_on_its_identity(session: Session, device: Device, problem: Problem,
                                                          kernel_version: KernelVersion) -> None:
    config = queries.get_or_create_config(session, CONFIG)
    first = _measure(session, device, problem, kernel_version, config, median_ms=1.0)
    again = _measure(session, device, problem, kernel_version, config, median_ms=5.0, status="timeout")
    assert again.id == first.id and again.median_ms == 1.0 and again.status == "ok"  # never measured twice
    replayed = _measure(session, device, problem, kernel_version, config, backend="replay", median_ms=2.0)
    assert replayed.id != first.id  # another backend is another measurement
    newer_kernel = queries.get_or_create_kernel_version(session, "direct", "fwd", "a" * 64)
    assert _measure(session, device, problem, newer_kernel, config).id not in (first.id, replayed.id)
    assert session.scalar(select(func.count()).select_from(Measurement)) == 3


def test_failed_and_predicted_measurements(session: Session, device: Device, problem: Problem,
                                           kernel_version: KernelVersion) -> None:
    config = queries.get_or_create_config(session, CONFIG)
    failed = _measure(session, device, problem, kernel_version, config, status="compile_error", median_ms=None,
                      p10_ms=None, p90_ms=None, min_ms=None, reps=None, error="ptxas: too many resources")
    assert failed.status == "compile_error" and failed.median_ms is None and "ptxas" in failed.error
    predicted = _measure(session, device, problem, kernel_version, config, backend="model", median_ms=0.7)
    assert predicted.predicted is True
    with pytest.raises(InvalidInput, match="predicted"):
        _measure(session, device, problem, kernel_version, config, backend="model", predicted=False)
    with pytest.raises(InvalidInput, match="predicted"):
        _measure(session, device, problem, kernel_version, config, backend="replay", predicted=True)


@pytest.mark.parametrize(("fields", "match"), [
    ({"status": "great"}, "status"), ({"backend": "cpu"}, "backend"), ({"colour": "red"}, "colour"),
    ({"config_id": None}, "config_id"),
], ids=["bad-status", "bad-backend", "unknown-field", "missing-identity"])
def test_record_measurement_rejects_bad_fields(session: Session, device: Device, problem: Problem,
                                               kernel_version: KernelVersion, fields: dict[str, object],
                                               match: str) -> None:
    config = queries.get_or_create_config(session, CONFIG)
    with pytest.raises(InvalidInput, match=match):
        _measure(session, device, problem, kernel_version, config, **fields)


def test_measurements_for_never_mixes_predicted_and_measured(session: Session, device: Device, problem: Problem,
                                                             kernel_version: KernelVersion) -> None:
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                backend="gpu", sampler="tpe")
    a, b = (queries.get_or_create_config(session, c) for c in (CONFIG, OTHER_CONFIG))
    gpu_a = _measure(session, device, problem, kernel_version, a, tuning_run_id=run.id, median_ms=2.0)
    gpu_b = _measure(session, device, problem, kernel_version, b, median_ms=1.5)
    replay_a = _measure(session, device, problem, kernel_version, a, backend="replay", median_ms=2.1)
    model_a = _measure(session, device, problem, kernel_version, a, backend="model", median_ms=1.0)
    ids = lambda rows: [r.id for r in rows]  # noqa: E731
    kw = dict(device_id=device.id, problem_id=problem.id)
    assert ids(queries.measurements_for(session, **kw)) == [gpu_a.id, gpu_b.id, replay_a.id]
    assert ids(queries.measurements_for(session, **kw, predicted=True)) == [model_a.id]
    assert ids(queries.measurements_for(session, **kw, backend="gpu")) == [gpu_a.id, gpu_b.id]
    assert ids(queries.measurements_for(session, **kw, backend="model")) == [model_a.id]
    assert ids(queries.measurements_for(session, **kw, run_id=run.id)) == [gpu_a.id]
    assert queries.measurements_for(session, device_id=device.id, problem_id=problem.id + 1) == []
    # the best measured row ignores the faster prediction and failed rows
    _measure(session, device, problem, queries.get_or_create_kernel_version(session, "direct", "fwd", "b" * 64),
             b, status="wrong", median_ms=0.1)
    assert queries.best_measurement(session, **kw).id == gpu_b.id
    assert queries.best_measurement(session, **kw, predicted=True).id == model_a.id
    assert queries.best_measurement(session, **kw, family="direct").id == gpu_b.id
    assert queries.best_measurement(session, **kw, family="winograd") is None


def test_deleting_a_run_keeps_its_measurements(engine: Engine) -> None:
    with session_scope(engine) as session:
        device, problem = add_device(session), queries.get_or_create_problem(session, PROBLEM)
        kv = queries.get_or_create_kernel_version(session, "direct", "fwd", SHA)
        run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                    backend="gpu", sampler="tpe")
        m = _measure(session, device, problem, kv, queries.get_or_create_config(session, CONFIG),
                     tuning_run_id=run.id)
        queries.update_run(session, run.id, best_measurement_id=m.id)
        queries.record_pruning_decisions(session, run.id, device.id, problem.id,
                                            [(OTHER_CONFIG, "traffic", "r", {})])
    with session_scope(engine) as session:
        session.delete(queries.get_run(session, run.id))
    with session_scope(engine) as session:
        assert queries.get_measurement(session, m.id).tuning_run_id is None  # ON DELETE SET NULL
        assert session.scalar(select(func.count()).select_from(PruningDecision)) == 0  # ON DELETE CASCADE


# ---- pruning decisions -----------------------------------------------------------------------------------
def test_pruning_decisions_round_trip(session: Session, device: Device, problem: Problem) -> None:
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                backend="model", sampler="grid")
    numbers = {"traffic_words": np.int64(10_000), "bound_words": 4_000.0, "ratio": 2.5, "predicted_s": math.inf,
               "best_predicted_s": -math.inf, "gap": math.nan, "per_axis": (1, 2.0)}
    n = queries.record_pruning_decisions(session, run.id, device.id, problem.id, [
        (CONFIG, "traffic", "moves 2.5x the lower bound", numbers),
        (OTHER_CONFIG, "kept", "survivor", {}),
    ])
    assert n == 2
    row = queries.find_pruning_decision(session, device_id=device.id, problem_id=problem.id, config_key=CONFIG)
    assert (row.stage, row.reason, row.tuning_run_id) == ("traffic", "moves 2.5x the lower bound", run.id)
    assert row.numbers == {"traffic_words": 10_000, "bound_words": 4_000.0, "ratio": 2.5, "predicted_s": "inf",
                           "best_predicted_s": "-inf", "gap": "nan", "per_axis": [1, 2.0]}
    assert queries.find_pruning_decision(session, device_id=device.id, problem_id=problem.id,
                                            config_key=OTHER_CONFIG.key()).stage == "kept"
    assert queries.find_pruning_decision(session, device_id=device.id, problem_id=problem.id + 1,
                                            config_key=CONFIG) is None
    assert queries.find_pruning_decision(session, device_id=device.id, problem_id=problem.id,
                                            config_key="direct.fwd tile_h=99") is None
    # a later run's decision about the same config is the latest one
    run2 = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                 backend="model", sampler="grid")
    queries.record_pruning_decisions(session, run2.id, device.id, problem.id, [(CONFIG, "kept", "bound moved", {})])
    latest = queries.find_pruning_decision(session, device_id=device.id, problem_id=problem.id, config_key=CONFIG)
    assert (latest.tuning_run_id, latest.stage) == (run2.id, "kept")
    assert queries.pruning_stage_counts(session, run.id) == {"traffic": 1, "kept": 1}
    assert queries.record_pruning_decisions(session, run.id, device.id, problem.id, []) == 0
    with pytest.raises(InvalidInput, match="stage"):
        queries.record_pruning_decisions(session, run.id, device.id, problem.id, [(CONFIG, "vibes", "", {})])


def test_ten_thousand_pruning_decisions_insert_in_seconds(session: Session, device: Device, problem: Problem) -> None:
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                backend="model", sampler="grid")
    stages = ("infeasible", "traffic", "predicted_time", "kept")
    decisions = [(DirectFwdConfig(tile_w=w, tile_k=k), stages[(w + k) % 4], f"reason {w} {k}",
                  {"traffic_words": w * k, "bound_words": 100.0, "ratio": w * k / 100.0})
                 for w in range(1, 101) for k in range(1, 101)]
    statements: list[str] = []

    def count(conn, cursor, statement, parameters, context, executemany) -> None:
        statements.append(statement)

    event.listen(session.bind, "before_cursor_execute", count)
    try:
        assert queries.record_pruning_decisions(session, run.id, device.id, problem.id, decisions) == 10_000
        session.flush()
    finally:
        event.remove(session.bind, "before_cursor_execute", count)
    # fast because it is batched: a few statements for 10k rows, never one round trip per row (no wall clock)
    assert len(statements) < 100, len(statements)
    assert queries.pruning_stage_counts(session, run.id) == {s: 2_500 for s in stages}
    assert session.scalar(select(func.count()).select_from(Config)) == 10_000


# ---- best configurations ---------------------------------------------------------------------------------
def test_upsert_best_config_inserts_then_replaces_per_backend(session: Session, device: Device, problem: Problem,
                                                              kernel_version: KernelVersion) -> None:
    a, b = (queries.get_or_create_config(session, c) for c in (CONFIG, OTHER_CONFIG))
    run = queries.create_run(session, device_id=device.id, problem_id=problem.id, families="direct",
                                backend="model", sampler="grid")
    kw = dict(device_id=device.id, problem_id=problem.id, scope="*")
    first = queries.upsert_best_config(session, **kw, config_id=a.id, measurement_id=None, time_ms=2.0,
                                          floor_ms=0.5, efficiency=0.25, provisional=True, tuning_run_id=run.id)
    assert (first.config_id, first.provisional, first.time_ms, first.backend) == (a.id, True, 2.0, "model")
    m = _measure(session, device, problem, kernel_version, b, median_ms=1.0)
    # a GPU measurement gets a row of its own: the model's row stays, and never passes for a measurement
    gpu = queries.upsert_best_config(session, **kw, config_id=b.id, measurement_id=m.id, time_ms=np.float64(1.0),
                                        floor_ms=0.5, efficiency=0.5, provisional=False, tuning_run_id=None)
    assert gpu.id != first.id and (gpu.backend, first.backend) == ("gpu", "model")
    second = queries.upsert_best_config(session, **kw, config_id=b.id, measurement_id=m.id, time_ms=np.float64(0.9),
                                           floor_ms=0.5, efficiency=0.55, provisional=False, tuning_run_id=None)
    assert second.id == gpu.id
    assert (second.config_id, second.measurement_id, second.time_ms, second.efficiency, second.provisional,
            second.tuning_run_id) == (b.id, m.id, 0.9, 0.55, False, None)
    assert second.updated_at >= second.created_at
    view = queries.find_best_config(session, problem_key=problem.key)
    assert (view.backend, view.measured_here) == ("gpu", True)
    model_view = queries.find_best_config(session, problem_key=problem.key, backend="model")
    assert (model_view.backend, model_view.measured_here, model_view.time_ms) == ("model", False, 2.0)
    family = queries.upsert_best_config(session, **{**kw, "scope": "direct"}, config_id=b.id, measurement_id=m.id,
                                           time_ms=1.0, floor_ms=0.5, efficiency=0.5, provisional=False,
                                           tuning_run_id=None)
    assert family.id != first.id
    with pytest.raises(InvalidInput, match="scope"):
        queries.upsert_best_config(session, **{**kw, "scope": ""}, config_id=b.id, measurement_id=None, time_ms=1.0,
                                      floor_ms=0.5, efficiency=0.5, provisional=False, tuning_run_id=None)


def test_get_best_config_joins_device_problem_and_config(session: Session, problem: Problem) -> None:
    h200 = add_device(session)
    h200_new_driver = add_device(session, driver_version="590.1")
    a100 = add_device(session, name="NVIDIA A100-SXM4-80GB", compute_capability="8.0", sm_count=108)
    a, b = (queries.get_or_create_config(session, c) for c in (CONFIG, OTHER_CONFIG))

    def best(device: Device, config: Config, time_ms: float, provisional: bool = False, scope: str = "*") -> None:
        queries.upsert_best_config(session, device_id=device.id, problem_id=problem.id, scope=scope,
                                      config_id=config.id, measurement_id=None, time_ms=time_ms, floor_ms=0.4,
                                      efficiency=0.4 / time_ms, provisional=provisional, tuning_run_id=None)

    with pytest.raises(NotFound, match="no best configuration"):
        queries.get_best_config(session, problem_key=PROBLEM.key())
    assert queries.find_best_config(session, problem_key=PROBLEM) is None
    best(h200, a, 1.0)
    best(h200_new_driver, b, 0.8, provisional=True)  # faster, but only predicted
    best(a100, b, 2.0)
    best(h200, b, 1.1, scope="direct")

    view = queries.get_best_config(session, problem_key=PROBLEM.key(), device_name="NVIDIA H200")
    assert (view.device_name, view.device_id, view.compute_capability) == ("NVIDIA H200", h200.id, "9.0")
    assert (view.problem_key, view.problem_id, view.scope) == (PROBLEM.key(), problem.id, "*")
    assert (view.config_key, view.config_kind, view.params) == (CONFIG.key(), "direct.fwd", CONFIG.to_dict())
    assert (view.time_ms, view.floor_ms, view.efficiency, view.provisional) == (1.0, 0.4, 0.4, False)
    assert view.updated_at.tzinfo is UTC
    assert queries.get_best_config(session, problem_key=PROBLEM).device_id == h200.id  # measured beats predicted
    assert queries.get_best_config(session, problem_key=PROBLEM, device_name=a100.name).time_ms == 2.0
    assert queries.get_best_config(session, problem_key=PROBLEM, scope="direct").config_key == OTHER_CONFIG.key()
    with pytest.raises(NotFound, match="winograd"):
        queries.get_best_config(session, problem_key=PROBLEM, scope="winograd")
    with pytest.raises(NotFound, match="NVIDIA V100"):
        queries.get_best_config(session, problem_key=PROBLEM, device_name="NVIDIA V100")
    scopes = [(v.scope, v.device_id) for v in queries.list_best_configs(session, problem_key=PROBLEM,
                                                                          device_name="NVIDIA H200")]
    assert scopes == [("*", h200.id), ("direct", h200.id), ("*", h200_new_driver.id)]


# ---- constraints the database enforces -------------------------------------------------------------------
def test_database_constraints_hold_without_the_repository(engine: Engine) -> None:
    with session_scope(engine) as session:
        device, problem = add_device(session), queries.get_or_create_problem(session, PROBLEM)
        kv = queries.get_or_create_kernel_version(session, "direct", "fwd", SHA)
        config = queries.get_or_create_config(session, CONFIG)
        ids = dict(device_id=device.id, problem_id=problem.id, kernel_version_id=kv.id, config_id=config.id)
    bad_rows = [
        Measurement(**ids, backend="gpu", predicted=True, status="ok"),            # predicted iff backend == model
        Measurement(**ids, backend="gpu", predicted=False, status="fantastic"),    # status check
        Measurement(**{**ids, "device_id": 999}, backend="gpu", predicted=False, status="ok"),  # foreign key
    ]
    for bad in bad_rows:
        with pytest.raises(ConstraintViolation), session_scope(engine) as session:
            session.add(bad)
    with session_scope(engine) as session:
        session.add(Measurement(**ids, backend="gpu", predicted=False, status="ok"))
    with pytest.raises(ConstraintViolation), session_scope(engine) as session:
        session.add(Measurement(**ids, backend="gpu", predicted=False, status="ok"))  # unique identity


# ---- concurrency -----------------------------------------------------------------------------------------
def test_concurrent_workers_record_the_same_measurement_once(engine: Engine) -> None:
    with session_scope(engine) as session:
        device, problem = add_device(session), queries.get_or_create_problem(session, PROBLEM)
        kv = queries.get_or_create_kernel_version(session, "direct", "fwd", SHA)
        config = queries.get_or_create_config(session, CONFIG)
        ids = dict(device_id=device.id, problem_id=problem.id, kernel_version_id=kv.id, config_id=config.id)
    workers = 4
    barrier = threading.Barrier(workers)
    results: list[int] = []
    errors: list[BaseException] = []

    def worker(i: int) -> None:
        try:
            barrier.wait(timeout=10)
            with session_scope(engine) as session:
                queries.get_or_create_problem(session, OTHER_PROBLEM)
                queries.get_or_create_config(session, OTHER_CONFIG)
                add_device(session, driver_version=None)
                row = queries.record_measurement(session, **ids, backend="gpu", status="ok", median_ms=float(i))
                results.append(row.id)
        except BaseException as exc:  # reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker, args=(i,)) for i in range(workers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert not errors, errors
    assert len(set(results)) == 1 and len(results) == workers
    with session_scope(engine) as session:
        assert session.scalar(select(func.count()).select_from(Measurement)) == 1
        assert session.scalar(select(func.count()).select_from(Problem)) == 2
        assert session.scalar(select(func.count()).select_from(Config)) == 2
        assert session.scalar(select(func.count()).select_from(Device).where(Device.driver_version.is_(None))) == 1
