"""Pruning never drops every measured winner: on each shape of the H200 TF32 and bf16 replay tables, one config within
3% of the shape's best measured time survives the shipped limits (with the earlier 16× traffic / 1.5× predicted limits
none did on 3 TF32 and 12 bf16 shapes of the tables of the time, benchmarks/results/tuner_efficiency/pruning_limits.md;
on the tables remade from the six-family H200 runs of 2026-12-05, 2 TF32 and 13 bf16 shapes)."""

from __future__ import annotations

import pytest

from convtune.tuner.benchmark import ReplayTable
from convtune.tuner.prune import PruneSettings
from tests.benchmark_scripts import load_benchmark

pruning_limits = load_benchmark("pruning_limits")


@pytest.mark.parametrize(("table", "lost_before"), [("tests/data/replay_h200_tf32.json.gz", 3),
                                                    ("tests/data/replay_h200_bf16.json.gz", 14)])
def test_every_shape_keeps_a_3pct_best_config(table: str, lost_before: int) -> None:
    replay = ReplayTable.load(table)
    assert all(pruning_limits.good_keys(replay, key) for key in replay.problems)
    lost = [key for key in replay.problems if not pruning_limits.kept(replay, key, PruneSettings())]
    assert lost == []
    assert sum(not pruning_limits.kept(replay, key, pruning_limits.EARLIER) for key in replay.problems) == lost_before


def test_the_needed_limits_are_those_of_the_winners() -> None:
    """The least limits a shape needs pass its own prune; the 7×7 stem's winners need more than 1.5× (folded stems)."""
    replay = ReplayTable.load("tests/data/replay_h200_bf16.json.gz")
    key = next(k for k in replay.problems if k.startswith("N=64 C=3 H=224 W=224 K=64 R=7"))
    needs = pruning_limits.shape_needs(replay, key)
    assert needs and min(f for _, f in needs) > 1.5
    assert not pruning_limits.kept(replay, key, pruning_limits.EARLIER)
    assert pruning_limits.kept(replay, key, PruneSettings())
