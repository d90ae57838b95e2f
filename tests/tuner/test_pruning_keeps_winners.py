"""Pruning never drops every measured winner: on each shape of the H200 TF32 and bf16 replay tables, one config within
3% of the shape's best measured time survives the shipped limits (with the earlier 16× traffic / 1.5× predicted limits
none did on 3 TF32 and 12 bf16 shapes: benchmarks/results/tuner_efficiency/pruning_limits.md)."""

from __future__ import annotations

import pytest

from convtune.tuner.benchmark import ReplayTable
from convtune.tuner.prune import PruneSettings
from tests.benchmark_scripts import load_benchmark

pruning_limits = load_benchmark("pruning_limits")


@pytest.mark.parametrize(("table", "lost_before"), [("tests/data/replay_h200_tf32.json.gz", 3),
                                                    ("tests/data/replay_h200_bf16.json.gz", 12)])
def test_every_shape_keeps_a_3pct_best_config(table: str, lost_before: int) -> None:
    replay = ReplayTable.load(table)
    needs = {key: pruning_limits.shape_needs(replay, key) for key in replay.problems}
    assert all(needs.values())
    lost = [key for key, n in needs.items() if not pruning_limits.kept(n, PruneSettings())]
    assert lost == []
    assert sum(not pruning_limits.kept(n, pruning_limits.EARLIER) for n in needs.values()) == lost_before


def test_the_limits_keep_the_least_demanding_winner_and_drop_the_rest() -> None:
    settings = PruneSettings(traffic_ratio_max=24.0, predicted_factor=3.0)
    assert pruning_limits.kept([(30.0, 1.0), (20.0, 2.0)], settings)
    assert not pruning_limits.kept([(30.0, 1.0), (20.0, 3.5)], settings)   # each fails one limit
    assert not pruning_limits.kept([], settings)
