"""Kernel Tuner's strategies replaying a measured table (benchmarks/kt_replay.py, the peers of
benchmarks/tuner_efficiency.py): the simulation cache admits exactly the measured configurations, maps Kernel Tuner's
evaluations back to config keys, and a run's trials are distinct measured configurations, seeded and capped."""

from __future__ import annotations

import itertools
import json
from pathlib import Path

import pytest

from tests.benchmark_scripts import load_benchmark

pytest.importorskip("kernel_tuner")   # in the dev extra: installed wherever the README's set-up ran

kt_replay = load_benchmark("kt_replay")


def _table() -> dict[str, dict]:
    """Two families with different fields, a sparse sample of each grid, one failed row; time smallest at a=4 b=2."""
    rows: dict[str, dict] = {}
    for a, b, s in itertools.product((1, 2, 4, 8), (1, 2, 4), (1, 2, 3)):
        if (a + b + s) % 3 == 0:      # a sparse sample: not every grid point was measured
            continue
        ms = 0.1 * (1 + abs(a - 4) + abs(b - 2) + 0.1 * s)
        rows[f"fam_x.fwd a={a} b={b} stages={s}"] = {"status": "ok", "median_ms": ms, "reps": 5, "compile_s": 0.5}
    for t in (16, 32, 64):
        rows[f"fam_y.fwd tile={t} stages=2"] = {"status": "ok", "median_ms": 0.3 + t / 1000, "reps": 5}
    rows["fam_y.fwd tile=128 stages=2"] = {"status": "failed", "error": "too much shared memory"}
    return rows


def test_the_cache_admits_exactly_the_measured_configurations(tmp_path: Path) -> None:
    rows = _table()
    cache = kt_replay.SimulationCache(rows)
    assert cache.names[0] == "family" and {"a", "b", "stages", "tile"} <= set(cache.names)
    assert sorted(cache.by_element.values()) == sorted(rows)
    params = dict(zip(cache.names, cache.values["fam_x.fwd a=4 b=2 stages=1"], strict=True))
    assert params["a"] == 4 and params["tile"] == 0          # a field the family lacks: the placeholder
    assert cache.admits(params)
    assert not cache.admits({**params, "a": 3})               # never measured
    path = tmp_path / "cache.json"
    cache.write(path)
    doc = json.loads(path.read_text())
    assert doc["tune_params_keys"] == cache.names and len(doc["cache"]) == len(rows)
    failed = doc["cache"][cache.element_key(cache.values["fam_y.fwd tile=128 stages=2"])]
    assert failed["time"] == kt_replay.FAILED
    ok = doc["cache"][cache.element_key(cache.values["fam_x.fwd a=4 b=2 stages=1"])]
    assert ok["time"] == pytest.approx(0.1 * 1.1) and ok["compile_time"] == pytest.approx(500.0)


@pytest.mark.parametrize("strategy", ["random_sample", "greedy_mls", "genetic_algorithm"])
def test_a_run_evaluates_distinct_measured_configurations_seeded_and_capped(tmp_path: Path, strategy: str) -> None:
    rows = _table()
    cache = kt_replay.SimulationCache(rows)
    path = tmp_path / "cache.json"
    cache.write(path)
    order, error = kt_replay.strategy_order(cache, path, strategy, seed=3, max_trials=12)
    assert error is None
    assert 0 < len(order) <= 12
    assert len(set(order)) == len(order) and set(order) <= set(rows)
    again, _ = kt_replay.strategy_order(cache, path, strategy, seed=3, max_trials=12)
    assert again == order


def test_a_run_longer_than_the_table_ends_within_it(tmp_path: Path) -> None:
    """A budget above the universe's size: the run ends (revisits are capped) having seen each config at most once."""
    rows = _table()
    cache = kt_replay.SimulationCache(rows)
    path = tmp_path / "cache.json"
    cache.write(path)
    order, _ = kt_replay.strategy_order(cache, path, "mls", seed=0, max_trials=10 * len(rows), revisit_cap=2)
    assert len(order) <= len(rows) and len(set(order)) == len(order)
