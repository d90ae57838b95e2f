"""Issue 17's out-of-sample tuner efficiency, replayed: the uniform 2000-config sample of the direct space on three
5×5 wide-suite shapes that no model term was fitted on (``tests/data/replay_h200_space_sample_5x5.json.gz``, H200,
2026-12-05). ``tune`` reaches a configuration within 3% of the sample's best in at most half the median trials of the
best peer over 20 seeds — Optuna TPE or any Kernel Tuner strategy in simulation mode on the same sample
(``benchmarks/results/tuner_efficiency/out_of_sample_5x5.md``: 95.5 adaptive_tabu_greywolf, 44 TPE, 49.5 TPE)."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine

from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.tune import tune

SAMPLE = Path(__file__).resolve().parents[1] / "data" / "replay_h200_space_sample_5x5.json.gz"
WITHIN = 1.03
#: problem -> half the best peer's median trials on the sample
BOUND = {
    "N=16 C=16 H=28 W=28 K=32 R=5 S=5 stride=1 pad=2 dilation=1 dtype=float32": 95.5 / 2,
    "N=8 C=48 H=35 W=35 K=64 R=5 S=5 stride=1 pad=2 dilation=1 dtype=float32": 44 / 2,
    "N=64 C=64 H=27 W=27 K=192 R=5 S=5 stride=1 pad=2 dilation=1 dtype=float32": 49.5 / 2,
}


@pytest.fixture(scope="module")
def sample() -> ReplayTable:
    return ReplayTable.load(SAMPLE)


@pytest.mark.slow
@pytest.mark.parametrize("key", list(BOUND), ids=["googlenet_inc3a", "inception_v3_5b", "alexnet_conv2"])
def test_tune_beats_every_peer_out_of_sample(sample: ReplayTable, sqlite_engine: Engine, key: str) -> None:
    assert set(sample.problems) == set(BOUND)
    rows = sample.problems[key]
    assert len(rows) == 2000
    best_ms = min(r["median_ms"] for r in rows.values() if r.get("status") == "ok")
    bench = ReplayBenchmarker(sample)
    result = tune(ConvProblem.parse(key), bench, sqlite_engine, budget_trials=200, budget_s=1e9, patience=10**9,
                  epsilon=0.0, seed=3, stop_at_ms=best_ms * WITHIN)
    assert result.time_ms is not None and result.time_ms <= best_ms * WITHIN
    assert result.stop_reason.startswith("target time")
    assert result.trials == len(bench.measured) <= BOUND[key]
