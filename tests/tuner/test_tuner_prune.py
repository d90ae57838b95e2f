"""Lower-bound pruning: stage counts, a decision with reason and numbers for every dropped candidate,
ranking with a reproducible tie-break, and settings that change the outcome monotonically."""

from __future__ import annotations

import dataclasses
import itertools
import math
from collections import Counter

import pytest
from tuner_samples import PROBLEM, SMALL, TINY

from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.prune import PruneResult, PruneSettings, build_candidates, prune

MACHINE = MachineModel.preset("h200")
NUMBER_KEYS = {"traffic_words", "bound_words", "traffic_ratio", "predicted_s"}


def _prune(problem: ConvProblem, **settings: float) -> PruneResult:
    return prune(problem, MACHINE, specs_for(problem), PruneSettings(**settings))


@pytest.fixture(scope="module")
def small() -> PruneResult:
    return _prune(SMALL)


def _stages(result: PruneResult) -> dict[str, list]:
    by_stage: dict[str, list] = {"traffic": [], "predicted_time": [], "kept": []}
    for d in result.decisions:
        by_stage[d.stage].append(d)
    return by_stage


def _after_traffic(result: PruneResult) -> set[str]:
    return {d.candidate.key for d in result.decisions if d.stage != "traffic"}


@pytest.mark.parametrize("which", ["small", "replayed"])
def test_stage_counts_add_up(which: str, small: PruneResult, pruned: PruneResult) -> None:
    result = small if which == "small" else pruned
    counts = result.stage_counts
    assert list(counts) == ["feasible", "traffic", "predicted_time"]
    assert result.grid_size >= counts["feasible"] >= counts["traffic"] >= counts["predicted_time"] >= 1
    assert result.grid_size - counts["feasible"] == sum(result.infeasible_reasons.values())
    assert all(n >= 0 for n in result.infeasible_reasons.values())
    stages = _stages(result)
    assert len(stages["traffic"]) == counts["feasible"] - counts["traffic"]
    assert len(stages["predicted_time"]) == counts["traffic"] - counts["predicted_time"]
    assert len(stages["kept"]) == counts["predicted_time"] == len(result.survivors)
    # one decision per feasible candidate, none twice
    keys = [d.candidate.key for d in result.decisions]
    assert len(keys) == len(set(keys)) == counts["feasible"]
    assert {d.candidate.key for d in stages["kept"]} == {c.key for c in result.survivors}
    assert result.summary().startswith(f"grid {result.grid_size} -> feasible {counts['feasible']} -> ")


def test_pruning_reports_its_stages_and_times_itself_on_the_clock_given() -> None:
    """``report`` gets the grid, the running count of configurations built, then each stage's survivors (what
    the progress bar shows); ``elapsed_s`` is read from the injected clock, not the wall."""
    readings = iter([100.0, 103.5])
    reports: list[tuple[str, int]] = []
    result = prune(SMALL, MACHINE, specs_for(SMALL), report=lambda stage, n: reports.append((stage, n)),
                   clock=lambda: next(readings))
    assert result.elapsed_s == 3.5
    assert reports[0] == ("grid", result.grid_size)
    built = [n for stage, n in reports if stage == "enumerated"]
    assert built == sorted(built) and built[-1] == result.stage_counts["feasible"] + \
        result.infeasible_reasons.get("no block fits on an SM", 0)
    assert reports[-3:] == [(stage, result.stage_counts[stage]) for stage in ("feasible", "traffic", "predicted_time")]


def test_the_replayed_problem_drops_candidates_at_every_stage(pruned: PruneResult) -> None:
    counts = pruned.stage_counts
    assert pruned.grid_size > counts["feasible"] > counts["traffic"] > counts["predicted_time"]
    assert pruned.infeasible_reasons.get("rejected by plan()", 0) > 0


def test_every_decision_has_a_reason_and_the_numbers_it_compared(pruned: PruneResult) -> None:
    """On the replayed problem, which drops candidates at both stages."""
    settings = PruneSettings()
    stages = _stages(pruned)
    assert stages["traffic"] and stages["predicted_time"] and stages["kept"]
    best = min(c.predicted_s for c in pruned.survivors)
    for d in pruned.decisions:
        assert d.reason.strip()
        assert set(d.numbers) >= NUMBER_KEYS
        c = d.candidate
        assert d.numbers["traffic_words"] == c.traffic_words > 0
        assert d.numbers["bound_words"] == c.bound_words > 0
        assert d.numbers["traffic_ratio"] == pytest.approx(c.traffic_words / c.bound_words)
        assert d.numbers["predicted_s"] == c.predicted_s
        assert math.isfinite(c.predicted_s) and c.predicted_s > 0
    for d in stages["traffic"]:
        assert d.numbers["traffic_ratio"] > settings.traffic_ratio_max
        assert f"limit {settings.traffic_ratio_max:g}x" in d.reason
    for d in stages["predicted_time"]:
        assert d.numbers["best_predicted_s"] == best
        assert d.numbers["predicted_s"] > settings.predicted_factor * best
        assert f"limit {settings.predicted_factor:g}x" in d.reason
    for d in stages["kept"]:
        assert d.numbers["traffic_ratio"] <= settings.traffic_ratio_max
        assert d.numbers["predicted_s"] <= settings.predicted_factor * best
    ranks = {d.candidate.key: d.numbers["rank"] for d in stages["kept"]}
    assert [ranks[c.key] for c in pruned.survivors] == list(range(1, len(pruned.survivors) + 1))
    assert f"rank 1 of {len(pruned.survivors)}" in next(d.reason for d in stages["kept"] if d.numbers["rank"] == 1)


def test_survivors_are_ranked_by_predicted_time_then_config_key(small: PruneResult) -> None:
    order = [(c.predicted_s, c.key) for c in small.survivors]
    assert order == sorted(order)
    # the tie-break matters here: many survivors share a predicted time
    assert max(Counter(c.predicted_s for c in small.survivors).values()) > 1


def test_ranking_does_not_depend_on_enumeration_order(small: PruneResult) -> None:
    def reverse(spec):  # type: ignore[no-untyped-def]
        return dataclasses.replace(spec, enumerate_plans=lambda p, m: reversed(list(spec.enumerate_plans(p, m))))

    again = prune(SMALL, MACHINE, [reverse(spec) for spec in reversed(specs_for(SMALL))])
    assert [c.key for c in again.survivors] == [c.key for c in small.survivors]
    assert again.stage_counts == small.stage_counts
    assert Counter((d.candidate.key, d.stage) for d in again.decisions) == \
        Counter((d.candidate.key, d.stage) for d in small.decisions)


def test_candidates_carry_consistent_numbers() -> None:
    candidates = build_candidates(TINY, MACHINE, specs_for(TINY))
    assert candidates
    for c in candidates[:200]:
        assert c.key == c.config.key() == c.plan.config.key()
        assert c.traffic_ratio == pytest.approx(c.traffic_words / c.bound_words)


TRAFFIC = [1.0, 2.0, 4.0, 16.0, math.inf]
FACTOR = [1.0, 1.05, 1.5, 3.0, math.inf]


@pytest.fixture(scope="module")
def grid() -> dict[tuple[float, float], PruneResult]:
    """TINY pruned under every (traffic_ratio_max, predicted_factor) pair (~1 s in all)."""
    return {(t, f): _prune(TINY, traffic_ratio_max=t, predicted_factor=f) for t in TRAFFIC for f in FACTOR}


@pytest.mark.parametrize("t", TRAFFIC)
def test_a_bigger_predicted_factor_keeps_a_superset(grid: dict, t: float) -> None:
    kept = [{c.key for c in grid[(t, f)].survivors} for f in FACTOR]
    for smaller, bigger in itertools.pairwise(kept):
        assert smaller <= bigger
    assert len(kept[-1]) == grid[(t, FACTOR[-1])].stage_counts["traffic"]  # no limit: everyone passes


@pytest.mark.parametrize("f", FACTOR)
def test_a_bigger_traffic_limit_passes_a_superset(grid: dict, f: float) -> None:
    passed = [_after_traffic(grid[(t, f)]) for t in TRAFFIC]
    for smaller, bigger in itertools.pairwise(passed):
        assert smaller <= bigger
    feasible = grid[(TRAFFIC[-1], f)].stage_counts["feasible"]
    assert len(passed[-1]) == feasible  # no limit: every feasible candidate passes
    assert len(passed[0]) < feasible  # the tightest limit drops some


def test_without_limits_everything_feasible_survives_and_factor_one_keeps_only_the_best(grid: dict) -> None:
    """Factor 1 keeps exactly each family's best prediction(s): families are thresholded on their own."""
    loose = grid[(math.inf, math.inf)]
    assert len(loose.survivors) == loose.stage_counts["feasible"]
    tight = grid[(math.inf, 1.0)]
    assert tight.survivors[0].predicted_s == min(c.predicted_s for c in loose.survivors)
    families = {c.spec.family for c in loose.survivors}
    assert {c.spec.family for c in tight.survivors} == families
    for family in families:
        best = min(c.predicted_s for c in loose.survivors if c.spec.family == family)
        kept = [c for c in tight.survivors if c.spec.family == family]
        assert all(c.predicted_s == best for c in kept)
        assert len(kept) == sum(c.predicted_s == best for c in loose.survivors if c.spec.family == family)


def test_settings_do_not_change_feasibility(grid: dict) -> None:
    assert len({(r.grid_size, r.stage_counts["feasible"]) for r in grid.values()}) == 1
    assert len({tuple(sorted(r.infeasible_reasons.items())) for r in grid.values()}) == 1


def test_no_specs_means_no_survivors() -> None:
    result = prune(PROBLEM, MACHINE, [])
    assert result.survivors == [] and result.decisions == [] and result.grid_size == 0
    assert result.stage_counts == {"feasible": 0, "traffic": 0, "predicted_time": 0}
