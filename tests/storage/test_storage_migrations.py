"""Alembic: base -> head -> base -> head, no drift between models and migrations, Optuna coexistence."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import optuna
import pytest
from alembic import command
from alembic.script import ScriptDirectory
from sqlalchemy import URL, inspect, text
from storage_samples import CONFIG

from convtune.errors import StorageError
from convtune.storage import (
    SchemaDrift,
    check,
    current_revision,
    downgrade,
    head_revision,
    make_engine,
    queries,
    session_scope,
    upgrade,
)
from convtune.storage.migrate import alembic_config, migrations_dir
from convtune.storage.models import OPTUNA_TABLES, VERSION_TABLE, Base

ROOT = Path(__file__).resolve().parents[2]
OUR_TABLES = set(Base.metadata.tables)


def _tables(url: str | URL) -> set[str]:
    engine = make_engine(url)
    try:
        return set(inspect(engine).get_table_names())
    finally:
        engine.dispose()


# ---- the revision history --------------------------------------------------------------------------------
def test_history_has_a_single_head_and_date_prefixed_files() -> None:
    scripts = ScriptDirectory.from_config(alembic_config())
    assert len(scripts.get_heads()) == 1
    files = sorted(p.name for p in (migrations_dir() / "versions").glob("*.py") if p.name != "__init__.py")
    assert files and all(re.fullmatch(r"\d{4}_\d{2}_\d{2}_\d{4}-[0-9a-f]{12}_\w+\.py", f) for f in files), files


def test_revision_scripts_are_frozen_copies() -> None:
    """A revision must not import the models: they move on, the revision must not."""
    for path in (migrations_dir() / "versions").glob("*.py"):
        assert "convtune" not in "".join(re.findall(r"^\s*(?:from|import) .*$", path.read_text(), re.M)), path


def test_our_table_names_do_not_collide_with_optunas() -> None:
    from optuna.storages._rdb.models import BaseModel

    assert set(BaseModel.metadata.tables) | {"alembic_version"} <= OPTUNA_TABLES  # the filter knows them all
    assert not OUR_TABLES & OPTUNA_TABLES
    assert VERSION_TABLE != "alembic_version"


# ---- upgrade / downgrade / check on each backend ---------------------------------------------------------
def test_upgrade_downgrade_upgrade_and_no_drift(empty_database_url: str | URL) -> None:
    url = empty_database_url
    assert current_revision(url) is None
    upgrade(url)
    assert current_revision(url) == head_revision()
    assert _tables(url) == OUR_TABLES | {VERSION_TABLE}
    check(url)  # models match the migrations

    downgrade(url, "base")
    assert current_revision(url) is None
    assert _tables(url) <= {VERSION_TABLE}

    upgrade(url)
    check(url)
    upgrade(url)  # at head already: a no-op
    assert current_revision(url) == head_revision()


def test_upgrade_through_an_engine_keeps_data_and_sqlite_foreign_keys(database_url: str | URL) -> None:
    engine = make_engine(database_url)
    try:
        with session_scope(engine) as session:
            queries.get_or_create_config(session, CONFIG)
        upgrade(engine)  # an engine works as the target too
        with session_scope(engine) as session:
            assert queries.find_config(session, CONFIG) is not None
        # migrating through an engine leaves SQLite foreign keys on for its next users
        with engine.connect() as connection:
            if connection.dialect.name == "sqlite":
                assert connection.exec_driver_sql("PRAGMA foreign_keys").scalar() == 1
    finally:
        engine.dispose()


def test_check_refuses_a_database_that_is_not_at_head(empty_database_url: str | URL) -> None:
    with pytest.raises(StorageError, match="not up to date") as info:
        check(empty_database_url)
    assert not isinstance(info.value, SchemaDrift)


def test_check_reports_drift(database_url: str | URL) -> None:
    engine = make_engine(database_url)
    try:
        with engine.begin() as connection:
            connection.execute(text("DROP INDEX ix_pruning_decisions_lookup"))
            connection.execute(text("CREATE TABLE stray_table (id INTEGER PRIMARY KEY)"))
    finally:
        engine.dispose()
    with pytest.raises(SchemaDrift) as info:
        check(database_url)
    assert "ix_pruning_decisions_lookup" in str(info.value) and "stray_table" in str(info.value)


def test_offline_mode_emits_sql_for_postgresql() -> None:
    config = alembic_config(url="postgresql://")
    config.output_buffer = io.StringIO()
    command.upgrade(config, "head", sql=True)
    sql = config.output_buffer.getvalue()
    assert "CREATE TABLE devices" in sql and f"CREATE TABLE {VERSION_TABLE}" in sql
    assert "NULLS NOT DISTINCT" in sql
    assert "ALTER TABLE tuning_runs ADD CONSTRAINT fk_tuning_runs_best_measurement_id_measurements" in sql


def test_the_alembic_command_line_uses_our_ini(sqlite_database_url: str) -> None:
    alembic = [sys.executable, "-m", "alembic", "-c", str(ROOT / "alembic.ini"), "-x", f"url={sqlite_database_url}"]
    for args in (["upgrade", "head"], ["check"], ["current"]):
        run = subprocess.run([*alembic, *args], cwd=ROOT, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0, run.stdout + run.stderr
    assert head_revision() in run.stdout
    assert current_revision(sqlite_database_url) == head_revision()


# ---- Optuna in the same database -------------------------------------------------------------------------
def _optuna_round_trip(url: str) -> None:
    storage = optuna.storages.RDBStorage(url)
    study = optuna.create_study(storage=storage, study_name="coexist", load_if_exists=True)
    study.optimize(lambda trial: trial.suggest_float("x", -1.0, 1.0) ** 2, n_trials=3)
    assert len(optuna.load_study(study_name="coexist", storage=url).trials) >= 3
    storage.engine.dispose()


def _optuna_version(url: str | URL) -> str:
    engine = make_engine(url)
    try:
        with engine.connect() as connection:
            return connection.execute(text("SELECT version_num FROM alembic_version")).scalar_one()
    finally:
        engine.dispose()


def _plain_url(url: str | URL) -> str:
    return url if isinstance(url, str) else url.render_as_string(hide_password=False)


@pytest.mark.parametrize("optuna_first", [True, False], ids=["optuna-first", "convtune-first"])
def test_optuna_and_convtune_share_a_database(empty_database_url: str | URL, optuna_first: bool) -> None:
    url = _plain_url(empty_database_url)
    if optuna_first:
        _optuna_round_trip(url)
        optuna_tables = _tables(url)
        upgrade(url)
    else:
        upgrade(url)
        _optuna_round_trip(url)
        optuna_tables = _tables(url) - OUR_TABLES - {VERSION_TABLE}
    assert {"studies", "trials", "alembic_version"} <= optuna_tables
    optuna_version = _optuna_version(url)

    check(url)  # Optuna's tables are not drift
    assert _tables(url) == OUR_TABLES | {VERSION_TABLE} | optuna_tables
    _optuna_round_trip(url)  # Optuna still accepts its schema (it checks its own alembic_version)

    downgrade(url, "base")  # ours go, Optuna's stay, data and version included
    assert _tables(url) == optuna_tables | {VERSION_TABLE}
    assert _optuna_version(url) == optuna_version
    _optuna_round_trip(url)
    upgrade(url)
    check(url)


def test_job_stop_reason_is_filled_for_jobs_that_ended_before_it(database_url: str | URL) -> None:
    """Revision b15a5e0c0de1 adds ``jobs.stop_reason``; ended jobs get the code of their status or of their
    run's sentence (taken back one revision and forward again, with the jobs stored meanwhile)."""
    from storage_samples import PROBLEM, add_device

    from convtune.storage.models import Job

    engine = make_engine(database_url)
    try:
        ids: dict[str, int] = {}
        with session_scope(engine) as session:
            device, problem = add_device(session), queries.get_or_create_problem(session, PROBLEM)
            for name, status, sentence in (("time", "finished", "time budget (20 s) reached"),
                                           ("trials", "finished", "trial budget (5) reached"),
                                           ("space", "finished", "every surviving configuration was evaluated"),
                                           ("cancelled", "cancelled", None), ("failed", "failed", None),
                                           ("queued", "queued", None)):
                job = queries.create_job(session, problem=PROBLEM, backend="model", budget_trials=5, budget_s=20.0)
                if sentence is not None:
                    run = queries.create_run(session, device_id=device.id, problem_id=problem.id,
                                                families="direct", backend="model", sampler="tpe", job_id=job.id)
                    queries.finish_run(session, run.id, "finished", sentence)
                    job.tuning_run_id = run.id
                job.status = status
                ids[name] = job.id
        downgrade(engine, "7c1d2e3f4a5b")
        upgrade(engine)
        with session_scope(engine) as session:
            codes = {name: session.get(Job, job_id).stop_reason for name, job_id in ids.items()}
        assert codes == {"time": "budget_s", "trials": "budget_trials", "space": "exhausted",
                         "cancelled": "cancelled", "failed": "error", "queued": None}
    finally:
        engine.dispose()
