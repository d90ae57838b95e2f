"""ModelBenchmarker: the analytic model as a dry-run backend. Its results are flagged predicted, stored
under backend "model", never returned as measurements, and its best is provisional."""

from __future__ import annotations

import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, all_measurements, run_measurements, run_row

from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker
from convtune.tuner.tune import tune

H200 = MachineModel.preset("h200")


def test_model_results_are_predictions() -> None:
    bench = ModelBenchmarker(H200)
    spec = specs_for(PROBLEM)[0]
    plan = next(iter(spec.enumerate_plans(PROBLEM, H200)))
    result = bench.measure(PROBLEM, plan)
    assert result.ok and result.predicted
    assert result.median_ms == pytest.approx(spec.predict_s(plan, H200) * 1e3)
    assert bench.available(PROBLEM) is None and bench.backend == "model"
    assert bench.kernel_version(spec) == spec.source_sha256()
    assert bench.device().name == H200.name
    assert [r.predicted for r in bench.retime(PROBLEM, [plan, plan])] == [True, True]


def test_a_model_tune_stores_predictions_apart_from_measurements(sqlite_engine: Engine) -> None:
    result = tune(PROBLEM, ModelBenchmarker(H200), sqlite_engine, budget_trials=5, warm_start=5)
    assert result.predicted and result.backend == "model" and result.trials == 5
    assert result.best_config is not None and 0 < result.efficiency <= 1.5
    rows = run_measurements(sqlite_engine, result.run_id)
    assert len(rows) == 5 and all(m.backend == "model" and m.predicted and m.status == "ok" for m in rows)
    with session_scope(sqlite_engine) as session:
        run = repo.get_run(session, result.run_id)
        assert run.status == "finished" and run.backend == "model"
        ids = {"device_id": run.device_id, "problem_id": run.problem_id}
        assert repo.measurements_for(session, **ids) == []  # measured rows only, by default
        assert repo.measurements_for(session, **ids, predicted=False) == []
        assert len(repo.measurements_for(session, **ids, predicted=True)) == 5
        assert len(repo.measurements_for(session, **ids, backend="model")) == 5
        assert repo.measurements_for(session, **ids, backend="replay") == []
        assert repo.best_measurement(session, **ids) is None
        assert repo.best_measurement(session, **ids, predicted=True) is not None
        views = repo.list_best_configs(session, problem_key=PROBLEM)
        assert {v.scope for v in views} == {result.best_config.split(".", 1)[0], "*"}
        assert all(v.provisional and v.config_key == result.best_config for v in views)
        best = repo.find_best_config(session, problem_key=PROBLEM)
        assert best is not None and best.provisional


def test_a_model_dry_run_never_replaces_a_measured_best(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    measured = tune(PROBLEM, replay, sqlite_engine, budget_trials=5, warm_start=5)
    dry = tune(PROBLEM, ModelBenchmarker(H200), sqlite_engine, budget_trials=5, warm_start=5)
    assert dry.predicted and not dry.resumed_from_db  # the model backend has its own run
    assert run_row(sqlite_engine, dry.run_id).status == "finished"
    assert sum(m.predicted for m in all_measurements(sqlite_engine)) == 5
    with session_scope(sqlite_engine) as session:
        for scope in ("*", "direct"):
            best = repo.find_best_config(session, problem_key=PROBLEM, scope=scope)
            assert best is not None
            assert not best.provisional
            assert (best.config_key, best.time_ms) == (measured.best_config, measured.time_ms)


def test_a_pruning_made_ahead_is_used_only_for_the_space_it_was_made_for(sqlite_engine: Engine,
                                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    """``tune(pruned=...)``: a pruning of the problem's whole space for the machine replaces the tuner's own; with
    ``families`` (another space) the tuner prunes again."""
    from convtune.tuner import tune as tune_module
    from convtune.tuner.prune import prune

    ahead = prune(PROBLEM, H200, specs_for(PROBLEM))
    calls: list[int] = []
    real = tune_module.prune
    monkeypatch.setattr(tune_module, "prune", lambda *a, **k: calls.append(1) or real(*a, **k))
    result = tune(PROBLEM, ModelBenchmarker(H200), sqlite_engine, budget_trials=3, warm_start=3, pruned=ahead)
    assert calls == [] and result.trials == 3 and result.pruning_s == ahead.elapsed_s
    family = specs_for(PROBLEM)[0].family
    tune(PROBLEM, ModelBenchmarker(H200), sqlite_engine, budget_trials=3, warm_start=3, pruned=ahead,
         families=[family], force=True)
    assert calls == [1]
