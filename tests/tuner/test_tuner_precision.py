"""Tuning a tf32 problem: every family whose ``supports()`` accepts it is searched, its measurements and best rows
are stored under the tf32 problem's key (the strict problem gets none), a replay table answers it from the strict
twin's recorded rows (the same strict kernels), and its floors have the strict problem's bytes but the TF32
compute ceiling (any family, the tensor-core one included, may serve it)."""

from __future__ import annotations

from typing import Any

import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, TINY, run_measurements

from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner import tune as tune_module
from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker
from convtune.tuner.tune import tune

H200 = MachineModel.preset("h200")


def test_a_tf32_tune_searches_every_family_that_accepts_it(sqlite_engine: Engine,
                                                           monkeypatch: pytest.MonkeyPatch) -> None:
    asked: list[Any] = []
    real = tune_module.specs_for
    monkeypatch.setattr(tune_module, "specs_for", lambda p, *a, **k: asked.append(p) or real(p, *a, **k))
    problem = TINY.replace(math="tf32")
    result = tune(problem, ModelBenchmarker(H200), sqlite_engine, budget_trials=6, warm_start=6)
    assert asked and all(p == problem for p in asked)          # the families are the tf32 problem's own
    assert set(result.floors_ms) == {spec.family for spec in specs_for(problem)}
    assert result.problem == problem and result.best_config is not None
    with session_scope(sqlite_engine) as session:
        run = repo.get_run(session, result.run_id)
        assert set(run.families.split(",")) == {spec.family for spec in specs_for(problem)}
        assert repo.get_problem(session, run.problem_id).key == problem.key()
        assert repo.find_problem(session, TINY) is None           # nothing stored for the strict problem
        views = repo.list_best_configs(session, problem_key=problem)
        assert views and all(v.problem_key == problem.key() for v in views)


def test_a_replay_answers_a_tf32_problem_from_the_strict_rows(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    problem = PROBLEM.replace(math="tf32")
    assert replay.available(problem) == replay.available(PROBLEM) != set()
    result = tune(problem, replay, sqlite_engine, budget_trials=8, warm_start=8)
    assert result.measured == 8 and result.best_config is not None
    rows = run_measurements(sqlite_engine, result.run_id)
    strict = {key: row for key, row in replay.table.problems[PROBLEM.key()].items()}
    with session_scope(sqlite_engine) as session:
        keys = {m.config_id: repo.get_config(session, m.config_id).key for m in rows}
        assert all(repo.get_problem(session, m.problem_id).key == problem.key() for m in rows)
    for m in rows:                                              # each time is the strict kernel's recorded one
        assert m.median_ms == pytest.approx(strict[keys[m.config_id]]["median_ms"])
    assert problem.key() not in replay.table.problems          # nothing recorded for tf32 itself


def test_a_tf32_row_never_answers_the_strict_problems_tuner_check(sqlite_engine: Engine,
                                                                  replay: ReplayBenchmarker) -> None:
    """A strict tune after a tf32 one measures: the tf32 run is not the strict problem's stored result."""
    tune(PROBLEM.replace(math="tf32"), replay, sqlite_engine, budget_trials=4, warm_start=4)
    strict = tune(PROBLEM, replay, sqlite_engine, budget_trials=4, warm_start=4)
    assert not strict.resumed_from_db and strict.measured == 4


def test_floors_of_a_tf32_problem_use_the_tf32_ceiling() -> None:
    from convtune.tuner.efficiency import best_floor, compute_ceiling

    tf32 = PROBLEM.replace(math="tf32")
    assert compute_ceiling(H200, "tf32") == H200.tf32_peak_flops_per_s > compute_ceiling(H200, "float32")
    for spec in specs_for(PROBLEM):
        strict, loose = best_floor(PROBLEM, H200, spec), best_floor(tf32, H200, spec)
        assert loose["bound_bytes"] == strict["bound_bytes"] and loose["flops"] == strict["flops"]
        assert loose["compute_s"] == pytest.approx(strict["flops"] / H200.tf32_peak_flops_per_s)
        assert loose["floor_s"] <= strict["floor_s"]          # a higher ceiling: never a higher floor
        assert loose["datasheet_floor_s"] <= loose["floor_s"]


def test_tf32_ceiling_falls_back_to_the_datasheet_then_a_ratio() -> None:
    import dataclasses

    from convtune.tuner.efficiency import TF32_PER_FP32_FALLBACK, compute_ceiling

    no_measure = dataclasses.replace(H200, tf32_peak_flops_per_s=0.0)
    assert compute_ceiling(no_measure, "tf32") == H200.datasheet_tf32_flops_per_s
    unknown = dataclasses.replace(no_measure, datasheet_tf32_flops_per_s=0.0)
    assert compute_ceiling(unknown, "tf32") == TF32_PER_FP32_FALLBACK * H200.fp32_peak_flops_per_s
