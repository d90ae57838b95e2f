"""Problems, paths and small helpers shared by the tuner tests (imported by name, like storage_samples)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import Engine, select

from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope, upgrade
from convtune.storage.models import Measurement, TuningRun

REPLAY_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h200_vs_cudnn.json.gz"

#: The replayed problem whose pruning is fastest (~0.5 s): 7192 survivors, 43 of them in the table.
PROBLEM = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")
#: A small problem whose pruning takes ~0.05 s (for tests that prune many times).
TINY = ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
#: A larger one (~0.2 s) with many ties in predicted time.
SMALL = ConvProblem.parse("N=2 C=32 H=16 W=16 K=32 R=3 S=3 stride=2 pad=1")


def new_sqlite_url(directory: Path) -> str:
    """A new SQLite file in ``directory`` brought to head."""
    directory.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{directory / 'convtune.db'}"
    upgrade(url)
    return url


def run_row(engine: Engine, run_id: int) -> TuningRun:
    with session_scope(engine) as session:
        return repo.get_run(session, run_id)


def run_measurements(engine: Engine, run_id: int) -> list[Measurement]:
    """Measurements stored by one tuning run, oldest first."""
    with session_scope(engine) as session:
        return list(session.scalars(select(Measurement).where(Measurement.tuning_run_id == run_id)
                                    .order_by(Measurement.id)))


def all_measurements(engine: Engine) -> list[Measurement]:
    with session_scope(engine) as session:
        return list(session.scalars(select(Measurement).order_by(Measurement.id)))


def config_keys(engine: Engine, rows: list[Measurement]) -> list[str]:
    with session_scope(engine) as session:
        return [repo.get_config(session, m.config_id).key for m in rows]


def replay_rows(table: Any, problem: ConvProblem) -> dict[str, dict[str, Any]]:
    return table.problems[problem.key()]


def assert_tuned_by_replay(engine: Engine, problem: ConvProblem, table: Any, searched: set[str], fastest: str) -> None:
    """Tune ``problem`` by replay of ``table`` (40 trials, 16 warm-start) and check what a GPU-less run can: every
    family of ``searched`` got a measured trial, the rows are stored unedited under the problem, the best is the
    fastest measured row the search reached (or a tie) and of family ``fastest``, its efficiency within (0, 1]."""
    from convtune.tuner.benchmark import ReplayBenchmarker
    from convtune.tuner.tune import TIE_TOLERANCE, tune

    recorded = table.problems[problem.key()]
    result = tune(problem, ReplayBenchmarker(table), engine, budget_trials=40, warm_start=16, seed=0)
    assert result.best_config is not None and result.time_ms is not None
    rows = run_measurements(engine, result.run_id)
    with session_scope(engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in rows]
        assert all(repo.get_problem(session, m.problem_id).key == problem.key() for m in rows)
    ok = [(m.median_ms, k) for m, k in zip(rows, keys, strict=True) if m.status == "ok"]
    assert searched <= {k.split(".")[0] for _, k in ok}, "a family was not searched"
    for m, k in zip(rows, keys, strict=True):
        if m.status == "ok":
            assert abs(m.median_ms - recorded[k]["median_ms"]) <= 1e-9 * recorded[k]["median_ms"]   # unedited
    assert min(ok)[0] <= result.time_ms <= min(ok)[0] * (1 + TIE_TOLERANCE)
    assert result.best_config.split(".")[0] == fastest
    assert result.efficiency is not None and 0 < result.efficiency <= 1
