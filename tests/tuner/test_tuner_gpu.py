"""The tuner on a real GPU: trials in the worker subprocess, verified, timed, stored (needs a device)."""

from __future__ import annotations

import pytest

from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu


def test_tune_on_gpu_stores_a_verified_best(tmp_path) -> None:
    from convtune.storage import queries as repo
    from convtune.storage.migrate import upgrade
    from convtune.storage.session import make_engine, session_scope
    from convtune.tuner.trial_process import SubprocessBenchmarker
    from convtune.tuner.tune import tune

    engine = make_engine(f"sqlite:///{tmp_path / 'gpu.db'}")
    upgrade(engine)
    problem = ConvProblem.parse("N=2 C=24 H=30 W=30 K=40 R=3 S=3 pad=1")
    bench = SubprocessBenchmarker(timeout_s=120)
    try:
        result = tune(problem, bench, engine, budget_trials=8, budget_s=240, warm_start=4)
    finally:
        bench.close()
    assert result.best_config is not None and result.time_ms > 0
    assert result.statuses.get("ok", 0) >= 1
    assert 0 < result.efficiency <= 1.0
    with session_scope(engine) as session:
        rows = repo.measurements_for(session, device_id=1, problem_id=1, backend="gpu")
        assert len(rows) == result.trials
        ok = [m for m in rows if m.status == "ok"]
        assert all(m.rel_error is not None and m.rel_error <= 1e-5 for m in ok)
        best = repo.find_best_config(session, problem_key=problem.key())
        assert best is not None and best.config_key == result.best_config
