"""Direct and both Winograd paths tuned together, by replay of H200 measurements: the direct candidates of
``vs_cudnn.json`` and every Winograd config of the 3×3 sweep, merged, for N=32 C=512 7×7 (resnet50_3x3_512)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, REPLAY_PATH, run_measurements, run_row

from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.tune import tune

WINOGRAD_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h200_winograd_sweep.json.gz"


@pytest.fixture(scope="module")
def merged() -> ReplayTable:
    table = ReplayTable.load(REPLAY_PATH)
    table.merge(ReplayTable.load(WINOGRAD_PATH))
    return table


def test_the_merged_table_holds_every_family(merged: ReplayTable) -> None:
    kinds = {key.split()[0] for key in merged.problems[PROBLEM.key()]}
    assert kinds == {"direct.fwd", "winograd.fwd", "winograd_unfused.fwd"}
    assert set(merged.kernel_sha256) == kinds


def test_tuning_every_family_finds_the_measured_winner(merged: ReplayTable, sqlite_engine: Engine) -> None:
    rows = merged.problems[PROBLEM.key()]
    ok = {k: r["median_ms"] for k, r in rows.items() if r.get("status") == "ok"}
    best_ms = min(ok.values())
    result = tune(PROBLEM, ReplayBenchmarker(merged), sqlite_engine, budget_trials=80, patience=40, seed=0)
    # the winner is an unfused Winograd config within 3% of the best of all 995 measured configs
    assert result.best_config.startswith("winograd_unfused.fwd ")
    assert result.time_ms <= 1.03 * best_ms
    # every family was measured (the interleaved warm start), and each family's best is a real row
    assert set(result.family_best_ms) == {"direct", "winograd", "winograd_unfused"}
    with session_scope(sqlite_engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in run_measurements(sqlite_engine, result.run_id)]
    measured_ok = {k: ok[k] for k in keys if k in ok}
    for family, ms in result.family_best_ms.items():
        assert ms == min(t for k, t in measured_ok.items() if k.startswith(family + ".fwd "))
    # the bound favours Winograd, and the measured winner agrees
    assert result.bound_favours in ("winograd", "winograd_unfused")
    assert result.floors_ms["winograd"] < result.floors_ms["direct"]
    assert result.efficiency == pytest.approx(result.floors_ms["winograd_unfused"] / result.time_ms)
    run = run_row(sqlite_engine, result.run_id)
    assert run.families == "direct,winograd,winograd_unfused"
    with session_scope(sqlite_engine) as session:
        scopes = {v.scope for v in repo.list_best_configs(session, problem_key=PROBLEM)}
    assert scopes == {"winograd_unfused", "*"}
    # a second tune of the same problem measures nothing new
    again = tune(PROBLEM, ReplayBenchmarker(merged), sqlite_engine, budget_trials=80, patience=40, seed=0)
    assert again.resumed_from_db and again.trials == 0 and again.best_config == result.best_config

