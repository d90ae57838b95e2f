"""``tune`` end to end with timings really measured on an H200 (ReplayBenchmarker), on SQLite and PostgreSQL:
every trial stored, the best stored and found, the run finished, pruning decisions kept; a second tune
measures nothing; ``force`` answers measured configs from the database; the same seed picks the same best."""

from __future__ import annotations

import optuna
import pytest
from sqlalchemy import Engine
from tuner_samples import PROBLEM, config_keys, new_sqlite_url, run_measurements, run_row

from convtune.storage import make_engine, session_scope
from convtune.storage import queries as repo
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.prune import Candidate, PruneResult
from convtune.tuner.tune import TIE_TOLERANCE, Progress, tune

BUDGET = 12


def _engine_url(engine: Engine) -> str:
    return engine.url.render_as_string(hide_password=False)


def test_tune_stores_trials_best_run_and_decisions(engine: Engine, replay: ReplayBenchmarker,
                                                   replay_table: ReplayTable, pruned: PruneResult,
                                                   replayable: list[Candidate]) -> None:
    seen: list[Progress] = []
    result = tune(PROBLEM, replay, engine, budget_trials=BUDGET, seed=0, progress=seen.append)
    rows = replay_table.problems[PROBLEM.key()]

    # the result
    assert result.backend == "replay" and result.device_name == replay_table.device.name
    assert result.trials == result.measured == BUDGET and result.reused == 0 and result.failed == 0
    assert result.statuses == {"ok": BUDGET}
    assert result.stop_reason == f"trial budget ({BUDGET}) reached"
    assert not result.predicted and not result.resumed_from_db
    assert result.prune_summary.startswith(f"grid {pruned.grid_size} -> feasible {pruned.stage_counts['feasible']}")
    assert [p.trials for p in seen] == list(range(1, BUDGET + 1))
    assert seen[-1].best_config is not None and all(p.last_status == "ok" and not p.reused for p in seen)

    # one measurement per trial, replayed (not predicted), numbers as in the table; the warm start
    # evaluates the best-predicted replayable survivors first, in rank order
    measured = run_measurements(engine, result.run_id)
    keys = config_keys(engine, measured)
    assert len(measured) == BUDGET and len(set(keys)) == BUDGET
    assert keys == [key for _, key in replay.measured]
    assert keys == [c.key for c in replayable[:BUDGET]]  # BUDGET <= warm_start (16)
    for m, key in zip(measured, keys, strict=True):
        assert (m.backend, m.predicted, m.status) == ("replay", False, "ok")
        assert m.median_ms == rows[key]["median_ms"]
        assert m.tuning_run_id == result.run_id

    # the best: within the tie tolerance of the fastest measured, stored per family and overall
    fastest = min(m.median_ms for m in measured)
    assert result.best_config in keys
    assert fastest <= result.time_ms <= fastest * (1 + TIE_TOLERANCE)
    assert result.time_ms == rows[result.best_config]["median_ms"]
    assert 0 < result.floor_ms < result.time_ms
    assert result.efficiency == pytest.approx(result.floor_ms / result.time_ms)
    with session_scope(engine) as session:
        views = {v.scope: v for v in repo.list_best_configs(session, problem_key=PROBLEM)}
        assert set(views) == {"direct", "*"}
        for v in views.values():
            assert v.config_key == result.best_config and v.time_ms == result.time_ms
            assert v.floor_ms > 0 and v.efficiency == pytest.approx(v.floor_ms / v.time_ms)
            assert not v.provisional and v.tuning_run_id == result.run_id
            assert v.measurement_id == measured[keys.index(result.best_config)].id
        found = repo.find_best_config(session, problem_key=PROBLEM.key(), device_name=result.device_name)
        assert found is not None and found.config_key == result.best_config and found.scope == "*"
        assert repo.find_best_config(session, problem_key=PROBLEM, device_name="no such GPU") is None

        # the run
        run = repo.get_run(session, result.run_id)
        assert run.status == "finished" and run.stop_reason == result.stop_reason
        assert run.trials_done == BUDGET and run.finished_at is not None and run.started_at <= run.finished_at
        assert run.backend == "replay" and run.families == "direct" and run.sampler == "tpe"
        assert run.budget_trials == BUDGET and run.space_size == pruned.grid_size
        assert run.best_measurement_id == views["*"].measurement_id
        assert run.stage_survivors == pruned.stage_counts | {"replayable": len(replayable)}
        assert run.pruning_s is not None and run.pruning_s > 0

        # the pruning decisions: every feasible candidate, by stage
        assert repo.pruning_stage_counts(session, result.run_id) == {
            "traffic": pruned.stage_counts["feasible"] - pruned.stage_counts["traffic"],
            "predicted_time": pruned.stage_counts["traffic"] - pruned.stage_counts["predicted_time"],
            "kept": pruned.stage_counts["predicted_time"]}
        problem_id = repo.find_problem(session, PROBLEM).id
        dropped = next(d for d in pruned.decisions if d.stage == "traffic")
        stored = repo.find_pruning_decision(session, device_id=run.device_id, problem_id=problem_id,
                                            config_key=dropped.candidate.key)
        assert stored is not None and stored.stage == "traffic" and stored.reason == dropped.reason
        assert stored.numbers["traffic_ratio"] == pytest.approx(dropped.numbers["traffic_ratio"])
        kept = repo.find_pruning_decision(session, device_id=run.device_id, problem_id=problem_id,
                                          config_key=replayable[0].key)
        assert kept is not None and kept.stage == "kept" and kept.numbers["rank"] == 1 + pruned.survivors.index(
            replayable[0])

    # the Optuna study lives in the same database: one finished trial per measurement
    study = optuna.load_study(study_name=run.study_name, storage=_engine_url(engine))
    states = [t.state for t in study.trials]
    assert states.count(optuna.trial.TrialState.COMPLETE) == BUDGET
    assert optuna.trial.TrialState.RUNNING not in states
    assert sorted(t.user_attrs["config"] for t in study.trials if "config" in t.user_attrs) == sorted(keys)

    # a second tune of the same problem: answered from the database, nothing measured
    again = tune(PROBLEM, replay, engine, budget_trials=BUDGET, seed=0)
    assert again.resumed_from_db and again.trials == 0 and again.measured == 0
    assert len(replay.measured) == BUDGET
    assert (again.run_id, again.best_config, again.time_ms) == (result.run_id, result.best_config, result.time_ms)
    assert again.floor_ms == pytest.approx(result.floor_ms) and again.efficiency == pytest.approx(result.efficiency)
    assert len(run_measurements(engine, result.run_id)) == BUDGET
    with session_scope(engine) as session:
        assert len(repo.list_runs(session)) == 1


# force=True resumes the one study of (device, problem, families, backend, kernel version): the configs
# it already evaluated are known to the sampler and are not proposed again; see the next two tests.
def test_force_tunes_again_without_measuring_anything_twice(engine: Engine, replay: ReplayBenchmarker,
                                                            replay_table: ReplayTable) -> None:
    first = tune(PROBLEM, replay, engine, budget_trials=8, seed=0)
    forced = tune(PROBLEM, replay, engine, budget_trials=8, seed=0, force=True)
    assert not forced.resumed_from_db and forced.run_id != first.run_id
    assert forced.trials == forced.measured + forced.reused == 8
    assert len(set(replay.measured)) == len(replay.measured) == 8 + forced.measured  # nothing measured twice
    assert run_row(engine, forced.run_id).status == "finished"
    # the best is chosen over every stored measurement of the problem, so it is never worse than before
    assert forced.time_ms <= first.time_ms * (1 + TIE_TOLERANCE)
    rows = replay_table.problems[PROBLEM.key()]
    assert forced.time_ms == rows[forced.best_config]["median_ms"]


def test_configs_measured_before_are_answered_from_the_database(sqlite_engine: Engine,
                                                                replay: ReplayBenchmarker) -> None:
    """Without the study's record of them (e.g. a lost Optuna study, or a worker that died between storing a
    measurement and telling Optuna), measured configs are adopted into the study as finished trials: never
    measured again, never counted as the new run's trials."""
    first = tune(PROBLEM, replay, sqlite_engine, budget_trials=6, seed=0)
    name = run_row(sqlite_engine, first.run_id).study_name
    optuna.delete_study(study_name=name, storage=_engine_url(sqlite_engine))
    forced = tune(PROBLEM, replay, sqlite_engine, budget_trials=6, seed=0, force=True)
    assert forced.reused == 0 and forced.measured == 6 and forced.trials == 6
    assert len(replay.measured) == 12 and len(set(replay.measured)) == 12  # six new configs, none twice
    assert forced.time_ms <= first.time_ms
    assert len(run_measurements(sqlite_engine, forced.run_id)) == 6  # the old rows stay with the run that made them
    assert run_row(sqlite_engine, forced.run_id).trials_done == 6
    trials = optuna.load_study(study_name=name, storage=_engine_url(sqlite_engine)).trials
    complete = [t for t in trials if t.state == optuna.trial.TrialState.COMPLETE]
    assert sum(bool(t.user_attrs.get("adopted")) for t in complete) == 6 and len(complete) == 12


def test_the_same_seed_picks_the_same_best_on_fresh_databases(tmp_path, replay_table: ReplayTable) -> None:
    results, sequences = [], []
    for name in ("a", "b"):
        engine = make_engine(new_sqlite_url(tmp_path / name))
        bench = ReplayBenchmarker(replay_table)
        try:
            results.append(tune(PROBLEM, bench, engine, budget_trials=16, seed=7, warm_start=4))
        finally:
            engine.dispose()
        sequences.append(bench.measured)
    a, b = results
    assert a.best_config is not None
    assert (a.best_config, a.time_ms, a.stop_reason) == (b.best_config, b.time_ms, b.stop_reason)
    assert sequences[0] == sequences[1]  # the sampler's whole path is reproducible, not just the winner
