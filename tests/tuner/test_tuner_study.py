"""ConfigSpace: the pruning survivors as an Optuna space; nearest() maps any suggestion to an unevaluated
survivor (never an excluded one), params_of() names a survivor exactly; samplers and study names."""

from __future__ import annotations

import random
from dataclasses import dataclass
from types import SimpleNamespace
from typing import ClassVar

import numpy as np
import optuna
import pytest
from tuner_samples import TINY

from convtune.kernels.config import KernelConfig
from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.tuner.prune import Candidate, prune
from convtune.tuner.study import ConfigSpace, finite, make_sampler, open_study, study_name

optuna.logging.set_verbosity(optuna.logging.WARNING)


@pytest.fixture(scope="module")
def survivors() -> list[Candidate]:
    """One family's survivors: the mechanics of the space (several families: the tests at the end)."""
    return prune(TINY, MachineModel.preset("h200"), specs_for(TINY, ["direct"])).survivors


@pytest.fixture(scope="module")
def space(survivors: list[Candidate]) -> ConfigSpace:
    return ConfigSpace(survivors)


def _brute_nearest(space: ConfigSpace, params: dict, exclude: set[str]) -> str | None:
    """The survivor of params' family at the least L1 distance of log2 values, ties to the better rank."""
    family = params["family"]
    target = np.log2([params[n] for n in space.fields[family]])
    best = None
    for c in space.by_family[family]:
        if c.key in exclude:
            continue
        dist = float(np.abs(np.log2([getattr(c.config, n) for n in space.fields[family]]) - target).sum())
        score = (round(dist, 9), space.rank[c.key])
        if best is None or score < best[0]:
            best = (score, c.key)
    return best[1] if best else None


def _random_params(space: ConfigSpace, rng: random.Random) -> dict:
    family = rng.choice(space.families)
    return {"family": family} | {n: rng.choice(space.values[family][n]) for n in space.fields[family]}


def test_space_describes_the_survivors(space: ConfigSpace, survivors: list[Candidate]) -> None:
    assert space.size() == len(survivors) == len(space.rank)
    assert space.families == ["direct"]
    assert [space.rank[c.key] for c in survivors] == list(range(len(survivors)))
    for name, values in space.values["direct"].items():
        assert values == sorted({getattr(c.config, name) for c in survivors})


def test_nearest_returns_unexcluded_survivors_only(space: ConfigSpace, survivors: list[Candidate]) -> None:
    rng = random.Random(4)
    keys = [c.key for c in survivors]
    for _ in range(300):
        params = _random_params(space, rng)
        exclude = set(rng.sample(keys, rng.randrange(len(keys))))
        found = space.nearest(params, exclude)
        assert found is not None
        assert found.key in space.rank and found.key not in exclude
        assert found.key == _brute_nearest(space, params, exclude)


def test_nearest_of_a_survivor_is_itself_unless_excluded(space: ConfigSpace, survivors: list[Candidate]) -> None:
    for c in survivors[::7]:
        params = {"family": c.config.family} | c.config.to_dict()
        assert space.nearest(params, set()) is c
        other = space.nearest(params, {c.key})
        assert other is not None and other.key != c.key
        assert other.key == _brute_nearest(space, params, {c.key})


def test_nearest_walks_every_survivor_once_then_returns_none(space: ConfigSpace, survivors: list[Candidate]) -> None:
    params = {"family": "direct"} | survivors[len(survivors) // 2].config.to_dict()
    exclude: set[str] = set()
    while (found := space.nearest(params, exclude)) is not None:
        assert found.key not in exclude
        exclude.add(found.key)
    assert exclude == {c.key for c in survivors}
    assert space.nearest(params, exclude | {"something else"}) is None


def test_params_of_round_trips_through_optuna_and_nearest(space: ConfigSpace, survivors: list[Candidate]) -> None:
    """Enqueue params_of(c), ask, suggest: nearest() maps the suggestion back to c itself."""
    study = optuna.create_study(sampler=make_sampler("tpe", 0))
    picks = survivors[:5] + survivors[5::max(1, len(survivors) // 20)] + survivors[-1:]
    for c in picks:
        study.enqueue_trial(space.params_of(c))
        trial = study.ask()
        params = space.suggest(trial)
        assert params["family"] == c.config.family
        assert space.nearest(params, set()) is c
        study.tell(trial, 1.0)


def test_suggestions_stay_inside_the_space(space: ConfigSpace) -> None:
    study = optuna.create_study(sampler=make_sampler("random", 1))
    for _ in range(20):
        trial = study.ask()
        params = space.suggest(trial)
        assert set(params) == {"family", *space.fields["direct"]}
        for name in space.fields["direct"]:  # ordered: any integer of the survivors' range, on a log scale
            values = space.values["direct"][name]
            assert values[0] <= params[name] <= values[-1]
        assert space.nearest(params, set()).key in space.rank  # which maps to a survivor
        study.tell(trial, 1.0)
    assert set(space.params_of(space.by_family["direct"][0])) == {f"direct.{n}" for n in space.fields["direct"]}


def test_an_empty_space_is_refused() -> None:
    with pytest.raises(ValueError, match="empty search space"):
        ConfigSpace([])


# ---- several families --------------------------------------------------------------------------------
@dataclass(frozen=True, slots=True)
class ToyConfig(KernelConfig):
    """A second family for the space only (no direction, so it is not registered for parsing)."""

    family: ClassVar[str] = "toy"
    a: int = 1
    b: int = 1


def _toy(a: int, b: int, predicted_s: float) -> Candidate:
    return Candidate(spec=None, plan=SimpleNamespace(config=ToyConfig(a, b)), predicted_s=predicted_s,  # type: ignore[arg-type]
                     traffic_words=1, bound_words=1.0)


@pytest.fixture(scope="module")
def mixed(survivors: list[Candidate]) -> ConfigSpace:
    toys = [_toy(1, 1, 1.0), _toy(2, 4, 2.0), _toy(8, 2, 3.0)]
    return ConfigSpace(sorted(survivors[:10] + toys, key=lambda c: c.predicted_s))


def test_several_families_suggest_a_family_and_name_it(mixed: ConfigSpace) -> None:
    assert mixed.families == ["direct", "toy"]
    study = optuna.create_study(sampler=make_sampler("random", 0))
    for c in (mixed.by_family["toy"][1], mixed.by_family["direct"][3]):
        params = mixed.params_of(c)
        assert params["family"] == c.config.family
        study.enqueue_trial(params)
        trial = study.ask()
        assert mixed.nearest(mixed.suggest(trial), set()) is c
        study.tell(trial, 1.0)


def test_an_exhausted_family_falls_back_to_the_best_ranked_survivor_of_any_family(mixed: ConfigSpace) -> None:
    toy_keys = {c.key for c in mixed.by_family["toy"]}
    found = mixed.nearest({"family": "toy", "a": 2, "b": 4}, toy_keys)
    best_rank = min((c for fam in mixed.families for c in mixed.by_family[fam] if c.key not in toy_keys),
                    key=lambda c: mixed.rank[c.key])
    assert found is best_rank and found.config.family == "direct"
    assert mixed.nearest({"family": "toy", "a": 2, "b": 4}, set(mixed.rank)) is None


# ---- samplers, names, storage ------------------------------------------------------------------------
def test_samplers_and_study_names() -> None:
    assert isinstance(make_sampler("tpe", 0), optuna.samplers.TPESampler)
    assert isinstance(make_sampler("random", 0), optuna.samplers.RandomSampler)
    with pytest.raises(ValueError, match="sampler='grid'"):
        make_sampler("grid", 0)
    name = study_name("NVIDIA H200", TINY.key(), ["winograd", "direct"], "replay")
    assert name == f"convtune|NVIDIA H200|{TINY.key()}|direct,winograd|replay"
    assert name == study_name("NVIDIA H200", TINY.key(), ["direct", "winograd"], "replay")
    assert finite(1.0) and not finite(None) and not finite(float("inf")) and not finite(float("nan"))


def test_open_study_creates_then_resumes(tmp_path) -> None:
    url = f"sqlite:///{tmp_path / 'optuna.db'}"
    first = open_study(url, "s", make_sampler("random", 0))
    first.enqueue_trial({"x": 1})
    trial = first.ask()
    trial.suggest_categorical("x", [1, 2])
    first.tell(trial, 3.0)
    again = open_study(url, "s", make_sampler("random", 0))
    assert [t.value for t in again.trials] == [3.0]
    assert open_study(None, "memory", make_sampler("random", 0)).trials == []


def test_a_space_of_several_families_suggests_each_and_falls_back_across_them() -> None:
    survivors = prune(TINY, MachineModel.preset("h200"), specs_for(TINY)).survivors
    space = ConfigSpace(survivors)
    assert len(space.families) >= 2 and {"direct", "winograd"} <= set(space.families)
    for family in space.families:
        first = next(c for c in survivors if c.config.family == family)
        params = {"family": family} | first.config.to_dict()
        assert space.nearest(params, set()) is first
        assert space.params_of(first)["family"] == family
        # that family exhausted: the best-ranked unevaluated survivor of any family (documented fallback)
        mine = {c.key for c in survivors if c.config.family == family}
        fallback = space.nearest(params, mine)
        assert fallback is not None and fallback.config.family != family
        assert fallback is min((c for c in survivors if c.key not in mine), key=lambda c: space.rank[c.key])
    study = optuna.create_study(sampler=make_sampler("random", 1))
    seen = {space.suggest(study.ask())["family"] for _ in range(40)}
    assert seen == set(space.families)
