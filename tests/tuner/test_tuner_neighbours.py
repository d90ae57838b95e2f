"""LocalSearch: the unevaluated survivor nearest to the best measured configurations (ties to the better
predicted rank), its share of the trials after the warm start, and ``tune`` using it after the warm start."""

from __future__ import annotations

import random

import numpy as np
import optuna
import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, TINY, config_keys, run_measurements

from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.tuner.benchmark import ReplayBenchmarker
from convtune.tuner.neighbours import MAX_CENTRES, TIE, LocalSearch
from convtune.tuner.prune import Candidate, prune
from convtune.tuner.study import ConfigSpace
from convtune.tuner.tune import tune

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def survivors() -> list[Candidate]:
    return prune(TINY, MachineModel.preset("h200"), specs_for(TINY, ["direct"])).survivors


@pytest.fixture(scope="module")
def space(survivors: list[Candidate]) -> ConfigSpace:
    return ConfigSpace(survivors)


def _log2(c: Candidate, space: ConfigSpace) -> np.ndarray:
    return np.log2([getattr(c.config, n) for n in space.fields[c.config.family]])


def _brute_propose(space: ConfigSpace, measured: dict[str, float], elite: int, exclude: set[str]) -> str | None:
    by_key = {c.key: c for cands in space.by_family.values() for c in cands}
    ranked = sorted(measured, key=lambda k: (measured[k], k))
    fastest = measured[ranked[0]]
    near = [k for k in ranked if measured[k] <= fastest * (1 + TIE)]
    centres = [by_key[k] for k in ranked[:max(elite, min(len(near), MAX_CENTRES))]]
    best = None
    for c in by_key.values():
        if c.key in exclude:
            continue
        dists = [float(np.abs(_log2(c, space) - _log2(e, space)).sum()) for e in centres
                 if e.config.family == c.config.family]
        if not dists:
            continue
        score = (round(min(dists), 9), space.rank[c.key])
        if best is None or score < best[0]:
            best = (score, c.key)
    return best[1] if best else None


def test_nothing_measured_nothing_proposed(space: ConfigSpace) -> None:
    local = LocalSearch(space)
    assert local.propose(set()) is None
    local.record("direct.fwd not a survivor", 1.0)
    local.record(next(iter(space.rank)), float("inf"))
    assert local.measured == {} and local.propose(set()) is None


def test_proposal_is_a_one_step_neighbour_of_the_best(space: ConfigSpace, survivors: list[Candidate]) -> None:
    """In the full survivor space the nearest configurations differ from the best in one parameter by one
    step of its grid; the best-predicted of the nearest comes first."""
    centre = survivors[len(survivors) // 2]
    local = LocalSearch(space, elite=1)
    local.record(centre.key, 0.5)
    found = local.propose({centre.key})
    assert found is not None and found.key != centre.key
    fields = space.fields[centre.config.family]
    changed = [n for n in fields if getattr(found.config, n) != getattr(centre.config, n)]
    assert len(changed) == 1
    grid = space.values[centre.config.family][changed[0]]
    assert abs(grid.index(getattr(found.config, changed[0])) - grid.index(getattr(centre.config, changed[0]))) == 1
    dist = {c.key: round(float(np.abs(_log2(c, space) - _log2(centre, space)).sum()), 9) for c in survivors}
    nearest = min(d for k, d in dist.items() if k != centre.key)
    assert dist[found.key] == nearest
    assert found is min((c for c in survivors if c.key != centre.key and dist[c.key] == nearest),
                        key=lambda c: space.rank[c.key])


def test_proposals_match_brute_force(space: ConfigSpace, survivors: list[Candidate]) -> None:
    rng = random.Random(11)
    keys = [c.key for c in survivors]
    for elite in (1, 3):
        for _ in range(40):
            local = LocalSearch(space, elite=elite)
            for key in rng.sample(keys, rng.randrange(1, 8)):
                local.record(key, rng.uniform(0.1, 1.0))
            exclude = set(local.measured) | set(rng.sample(keys, rng.randrange(len(keys) // 2)))
            found = local.propose(exclude)
            assert found is not None and found.key not in exclude
            assert found.key == _brute_propose(space, local.measured, elite, exclude)


def test_elites_follow_the_measurements(space: ConfigSpace, survivors: list[Candidate]) -> None:
    local = LocalSearch(space, elite=2)
    a, b, c = (s.key for s in survivors[:3])
    local.record(a, 3.0)
    local.record(b, 2.0)
    local.record(c, 1.0)
    assert local.elites() == [c, b]
    local.record(a, 0.5)  # a faster repeat of a configuration counts
    assert local.elites() == [a, c]


def test_a_plateau_makes_every_near_tie_a_centre(space: ConfigSpace, survivors: list[Candidate]) -> None:
    keys = [s.key for s in survivors[:MAX_CENTRES + 4]]
    local = LocalSearch(space, elite=3)
    for i, key in enumerate(keys):  # 1.000, 1.001, ...: all within 2% of the fastest
        local.record(key, 1.0 + 0.001 * i)
    assert local.elites() == keys[:MAX_CENTRES]
    local = LocalSearch(space, elite=3)
    for i, key in enumerate(keys[:5]):  # 1.0, 1.1, 1.2, ...: none within 2% but the fastest
        local.record(key, 1.0 + 0.1 * i)
    assert local.elites() == keys[:3]
    local.record(keys[6], 1.015)  # one near tie of the fastest joins the three fastest
    assert local.elites() == [keys[0], keys[6], keys[1]]
    local = LocalSearch(space, elite=1, tie=0.0)  # tie 0: the strict elite
    for i, key in enumerate(keys[:4]):
        local.record(key, 1.0 + 0.001 * i)
    assert local.elites() == keys[:1]


def test_walks_every_survivor_once_then_returns_none(space: ConfigSpace, survivors: list[Candidate]) -> None:
    local = LocalSearch(space)
    local.record(survivors[0].key, 1.0)
    seen = {survivors[0].key}
    while (found := local.propose(seen)) is not None:
        assert found.key not in seen
        seen.add(found.key)
    assert seen == set(space.rank)


@pytest.mark.parametrize(("share", "pattern"), [(0.0, "TTTTTTTT"), (0.5, "LTLTLTLT"), (0.75, "LLLTLLLT"),
                                                (1.0, "LLLLLLLL")])
def test_share_of_local_slots(space: ConfigSpace, share: float, pattern: str) -> None:
    local = LocalSearch(space, share=share)
    assert "".join("L" if local.next_is_local() else "T" for _ in pattern) == pattern
    assert sum(local.is_local(i) for i in range(1000)) == round(1000 * share)


def test_rejects_bad_settings(space: ConfigSpace) -> None:
    with pytest.raises(ValueError):
        LocalSearch(space, elite=0)
    with pytest.raises(ValueError):
        LocalSearch(space, share=1.5)
    with pytest.raises(ValueError):
        LocalSearch(space, tie=-0.1)


def test_tune_searches_the_neighbourhood_after_the_warm_start(sqlite_engine: Engine, replay: ReplayBenchmarker,
                                                              replayable: list[Candidate]) -> None:
    """After the warm start (the best-predicted replayable survivors), the next trials are LocalSearch's
    proposals given the measurements so far: three local ones, then one of the sampler."""
    warm = 4
    result = tune(PROBLEM, replay, sqlite_engine, budget_trials=warm + 4, seed=0, warm_start=warm)
    keys = config_keys(sqlite_engine, run_measurements(sqlite_engine, result.run_id))
    rows = replay.table.problems[PROBLEM.key()]
    local = LocalSearch(ConfigSpace(replayable))
    for i in range(warm, warm + 3):
        for key in keys[:i]:
            local.record(key, rows[key]["median_ms"])
        expected = local.propose(set(keys[:i]))
        assert expected is not None and keys[i] == expected.key
    assert len(set(keys)) == len(keys) == warm + 4
