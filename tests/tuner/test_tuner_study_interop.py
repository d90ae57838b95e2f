"""What Optuna (and so optuna-dashboard) sees of a tuned study, through Optuna's own API: the objective named
``time_ms``, user attributes with the problem, device, family, backend, floor and kernel version, ordered
integer distributions for the config fields; a study written with categorical ones stays loadable and is
continued, warm-started, in its successor."""

from __future__ import annotations

from typing import Any

import optuna
import pytest
from optuna.distributions import CategoricalDistribution, IntDistribution
from sqlalchemy import Engine
from tuner_samples import PROBLEM, TINY

from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.ops import resolver
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner import study as study_mod
from convtune.tuner.benchmark import ModelBenchmarker, ReplayBenchmarker
from convtune.tuner.tune import TIE_TOLERANCE, tune

H200 = MachineModel.preset("h200")


def _url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def _run_and_best(engine: Engine, run_id: int) -> tuple[Any, Any]:
    with session_scope(engine) as session:
        run = repo.get_run(session, run_id)
        best = repo.find_best_config(session, problem_key=repo.get_problem(session, run.problem_id).key,
                                     backend=run.backend)
        return run, best


@pytest.mark.parametrize("backend", ["model", "replay"])
def test_a_tuned_study_shows_the_metric_name_and_user_attrs(sqlite_engine: Engine, replay: ReplayBenchmarker,
                                                            backend: str) -> None:
    problem = TINY if backend == "model" else PROBLEM
    bench = ModelBenchmarker(H200) if backend == "model" else replay
    result = tune(problem, bench, sqlite_engine, budget_trials=6, warm_start=3, families=["direct"])
    run, best = _run_and_best(sqlite_engine, result.run_id)

    loaded = optuna.load_study(study_name=run.study_name, storage=_url(sqlite_engine))
    assert loaded.metric_names == ["time_ms"]
    attrs = loaded.user_attrs
    assert (attrs["problem"], attrs["device"], attrs["family"], attrs["families"], attrs["backend"]) == (
        problem.key(), result.device_name, "direct", ["direct"], backend)
    assert attrs["problem_fields"] == problem.to_dict()
    assert attrs["floor_ms"] == pytest.approx(best.floor_ms, rel=1e-9)  # the floor the best row stores
    assert attrs["floor_ms_by_family"] == {"direct": pytest.approx(best.floor_ms, rel=1e-9)}
    expected = bench.kernel_version(get_spec("direct"))  # the model's: the current source; a replay's: its table's
    assert backend == "replay" or expected == resolver.kernel_shas()["direct"]
    assert attrs["kernel_version"]["direct"] in (expected, expected[:12])

    trials = [t for t in loaded.trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert trials and all(t.value is not None for t in trials)
    for t in trials:  # ordered: tile sizes are magnitudes on a log scale, not unordered labels
        assert t.distributions and all(isinstance(d, IntDistribution) and d.log for d in t.distributions.values())
    # the result is the fastest trial, or a config with a smaller key within the tie tolerance of it
    fastest = min(t.value for t in trials)
    assert fastest <= result.time_ms * (1 + 1e-9) and result.time_ms <= fastest * (1 + TIE_TOLERANCE) * (1 + 1e-9)


def test_a_resumed_study_keeps_its_description(sqlite_engine: Engine) -> None:
    first = tune(TINY, ModelBenchmarker(H200), sqlite_engine, budget_trials=4, warm_start=2, families=["direct"])
    again = tune(TINY, ModelBenchmarker(H200), sqlite_engine, budget_trials=8, warm_start=2, families=["direct"],
                 force=True, seed=1)
    run, _ = _run_and_best(sqlite_engine, again.run_id)
    loaded = optuna.load_study(study_name=run.study_name, storage=_url(sqlite_engine))
    assert loaded.metric_names == ["time_ms"] and loaded.user_attrs["problem"] == TINY.key()
    assert len({t.params.get("direct.tile_k") for t in loaded.trials}) >= 1
    assert first.run_id != again.run_id and not study_mod.has_categorical_space(loaded)


def test_a_study_of_categorical_parameters_is_continued_in_a_warm_started_successor(
        sqlite_engine: Engine, monkeypatch: pytest.MonkeyPatch) -> None:
    # the first run as the code before ordered distributions wrote it: every field categorical
    with monkeypatch.context() as m:
        m.setattr(study_mod, "distribution", lambda name, values: CategoricalDistribution(values))
        m.setattr(study_mod, "has_categorical_space", lambda study: False)
        m.setattr(study_mod, "describe_study", lambda study, attrs: None)
        old = tune(TINY, ModelBenchmarker(H200), sqlite_engine, budget_trials=5, warm_start=5, families=["direct"])
    run, _ = _run_and_best(sqlite_engine, old.run_id)
    url = _url(sqlite_engine)
    legacy = optuna.load_study(study_name=run.study_name, storage=url)
    legacy_trials = len(legacy.trials)
    assert study_mod.has_categorical_space(legacy) and legacy_trials == 5

    new = tune(TINY, ModelBenchmarker(H200), sqlite_engine, budget_trials=9, warm_start=5, families=["direct"],
               force=True)
    assert new.trials == 9 and new.reused == 0  # nothing the first run measured is asked again
    legacy = optuna.load_study(study_name=run.study_name, storage=url)  # untouched, still loadable
    assert len(legacy.trials) == legacy_trials
    successor = optuna.load_study(study_name=run.study_name + study_mod.SUCCESSOR_SUFFIX, storage=url)
    adopted = [t for t in successor.trials if t.user_attrs.get("adopted")]
    with session_scope(sqlite_engine) as session:
        first_configs = {repo.get_config(session, m.config_id).key
                         for m in repo.measurements_for(session, device_id=run.device_id, problem_id=run.problem_id,
                                                        backend="model", run_id=old.run_id)}
    assert {t.user_attrs["config"] for t in adopted} == first_configs  # warm start: the first run's results
    assert successor.metric_names == ["time_ms"] and successor.user_attrs["problem"] == TINY.key()
    fresh = [t for t in successor.trials if not t.user_attrs.get("adopted") and t.params]
    assert fresh and all(isinstance(d, IntDistribution) for t in fresh for d in t.distributions.values())


def test_distributions_are_ordered_except_for_labels() -> None:
    assert study_mod.distribution("tile_k", [16, 32, 64]) == IntDistribution(16, 64, log=True)
    assert study_mod.distribution("tile_l", [4, 48]) == IntDistribution(4, 48, log=True)
    assert isinstance(study_mod.distribution("design", [1, 2]), CategoricalDistribution)
    assert isinstance(study_mod.distribution("tile_k", [0, 1]), CategoricalDistribution)


def test_study_attrs_of_another_name_are_empty() -> None:
    assert study_mod.study_attrs("my-study") == {}
    attrs = study_mod.study_attrs(study_mod.study_name("Some GPU", TINY.key(), ["direct"], "gpu", ["abc"]))
    assert attrs["device"] == "Some GPU" and attrs["floor_ms"] is None  # no preset: no floor
    assert attrs["kernel_version"] == {"direct": "abc"}
