"""The job queue's queries on SQLite and PostgreSQL: creation and validation, windows (with wrap-around and
time zones) and ``not_before`` at injected times, claim order and filters, stale reclaim, cancel, heartbeats,
finish/release exactly once, batches and their derived status, queue statistics, and migration 2."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from service_samples import REPLAY_PROBLEM, T0, TINY, add_job, at, job
from sqlalchemy import URL, Engine, inspect, text

from convtune.errors import InvalidInput, NotFound
from convtune.storage import check, current_revision, downgrade, head_revision, make_engine, session_scope, upgrade
from convtune.storage import queries as repo
from convtune.storage.models import Job, Problem

INITIAL_REVISION = "4eae7045a92c"
SERVICE_TABLES = {"api_keys", "batches", "jobs"}


def claim(engine: Engine, worker: str = "w1", now: datetime = T0, **options: object) -> int | None:
    with session_scope(engine) as session:
        found = repo.claim_job(session, worker_id=worker, now=now, backends=("model",), **options)  # type: ignore[arg-type]
        return None if found is None else found.id


# ---- creating jobs ------------------------------------------------------------------------------------------
def test_create_job_queues_with_defaults_and_one_problem_row(engine: Engine) -> None:
    first = add_job(engine, TINY[0], families=["direct", " direct "], device_name="NVIDIA H200")
    second = add_job(engine, TINY[0])
    with session_scope(engine) as session:
        row = repo.get_job(session, first)
        assert (row.status, row.attempts, row.trials_done, row.cancel_requested) == ("queued", 0, 0, False)
        assert row.families == "direct" and row.device_name == "NVIDIA H200" and row.backend == "model"
        assert row.worker_id is None and row.started_at is None and row.window_start is None
        assert row.created_at.tzinfo is not None
        assert repo.get_job(session, second).problem_id == row.problem_id  # the problem row is shared
        assert session.query(Problem).count() == 1
        assert repo.find_job(session, 10_000) is None
        with pytest.raises(NotFound):
            repo.get_job(session, 10_000)


@pytest.mark.parametrize(("fields", "field"), [
    pytest.param({"backend": "cuda"}, "backend", id="backend"),
    pytest.param({"budget_trials": 0}, "budget_trials", id="budget-trials"),
    pytest.param({"budget_s": -1.0}, "budget_s", id="budget-s"),
    pytest.param({"not_before": datetime(2026, 1, 1)}, "not_before", id="naive-not-before"),
    pytest.param({"window": "22:00"}, "window", id="window-one-end"),
    pytest.param({"window": "25:00-06:00"}, "window", id="window-hour"),
    pytest.param({"window": ("06:00", "6:00")}, "window", id="window-empty"),
    pytest.param({"window": "22:00-06:00", "timezone": "Mars/Olympus"}, "timezone", id="timezone"),
    pytest.param({"families": "direct;winograd"}, "families", id="families"),
])
def test_create_job_rejects_bad_input_naming_the_field(engine: Engine, fields: dict[str, object], field: str) -> None:
    with pytest.raises(InvalidInput) as info:
        add_job(engine, **fields)
    assert info.value.field == field
    with session_scope(engine) as session:
        assert repo.list_jobs(session) == []


def test_create_job_by_problem_id_and_unknown_id(engine: Engine) -> None:
    with session_scope(engine) as session:
        problem_id = repo.get_or_create_problem(session, TINY[1]).id
    assert job(engine, add_job(engine, problem_id)).problem_id == problem_id
    with pytest.raises(NotFound):
        add_job(engine, 10_000)


def test_a_window_without_a_timezone_is_read_in_utc(engine: Engine) -> None:
    row = job(engine, add_job(engine, window="6:30-7:00"))
    assert (row.window_start, row.window_end, row.timezone) == ("06:30", "07:00", "UTC")


# ---- windows ------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("window", "zone", "now", "inside"), [
    pytest.param(("09:00", "17:00"), "UTC", at(hours=0), True, id="day-noon"),
    pytest.param(("09:00", "17:00"), "UTC", at(hours=5), False, id="day-end-excluded"),
    pytest.param(("09:00", "17:00"), "UTC", at(hours=-3), True, id="day-start-included"),
    pytest.param(("22:00", "06:00"), "UTC", at(hours=11, minutes=30), True, id="wrap-before-midnight"),
    pytest.param(("22:00", "06:00"), "UTC", at(hours=17, minutes=59), True, id="wrap-after-midnight"),
    pytest.param(("22:00", "06:00"), "UTC", at(hours=18), False, id="wrap-end-excluded"),
    pytest.param(("22:00", "06:00"), "UTC", at(hours=9, minutes=59), False, id="wrap-before-start"),
    pytest.param(("22:00", "06:00"), "UTC", at(hours=10), True, id="wrap-start-included"),
    # 21:30 UTC is 22:30 in Berlin (CET, UTC+1 in December) and 16:30 in New York
    pytest.param(("22:00", "06:00"), "Europe/Berlin", at(hours=9, minutes=30), True, id="berlin-inside"),
    pytest.param(("22:00", "06:00"), "Europe/Berlin", at(hours=8, minutes=30), False, id="berlin-outside"),
    pytest.param(("16:00", "17:00"), "America/New_York", at(hours=9, minutes=30), True, id="new-york"),
    pytest.param(None, None, at(hours=3), True, id="no-window"),
])
def test_in_window(window: tuple[str, str] | None, zone: str | None, now: datetime, inside: bool) -> None:
    assert repo.in_window(now, window, zone) is inside


def test_parse_window_forms() -> None:
    assert repo.parse_window("22:00-06:00") == repo.parse_window(["22:00", "6:00"]) == ("22:00", "06:00")
    assert repo.parse_window(None) is None


def test_claim_honours_not_before_and_the_window_at_injected_times(engine: Engine) -> None:
    night = add_job(engine, TINY[0], window="22:00-06:00", timezone="Europe/Berlin")
    later = add_job(engine, TINY[1], not_before=at(hours=2))
    assert claim(engine, now=at(hours=1)) is None  # 14:00 in Berlin; later's not_before is 14:00 UTC
    assert claim(engine, now=at(hours=2)) == later
    with session_scope(engine) as session:
        assert repo.finish_job(session, later, worker_id="w1", status="finished")
    assert claim(engine, now=at(hours=8, minutes=59)) is None  # 21:59 in Berlin
    assert claim(engine, now=at(hours=16, minutes=30)) == night  # 05:30 the next morning in Berlin


# ---- claiming -----------------------------------------------------------------------------------------------
def test_claim_takes_the_oldest_eligible_job_of_its_backends_and_device(engine: Engine) -> None:
    replay = add_job(engine, TINY[0], backend="replay")
    other_device = add_job(engine, TINY[1], device_name="NVIDIA A100")
    h200 = add_job(engine, TINY[2], device_name="NVIDIA H200")
    anywhere = add_job(engine, TINY[3])
    assert claim(engine, "w1", device_name="NVIDIA H200") == h200
    assert claim(engine, "w2", device_name=None) == anywhere  # a worker of unknown device: any-device jobs only
    assert claim(engine, "w3", device_name="NVIDIA H200") is None
    with session_scope(engine) as session:
        taken = repo.claim_job(session, worker_id="w4", now=T0, backends=("replay", "model"))
        assert taken is not None and taken.id == replay
    row = job(engine, h200)
    assert (row.status, row.worker_id, row.attempts) == ("running", "w1", 1)
    assert row.claimed_at == row.heartbeat_at == row.started_at == T0
    assert job(engine, other_device).status == "queued"


def test_claim_leaves_a_problem_another_worker_is_tuning(engine: Engine) -> None:
    """Two jobs of one problem share its Optuna study: the second waits for the first."""
    first = add_job(engine, TINY[0])
    same = add_job(engine, TINY[0], budget_trials=9)
    other = add_job(engine, TINY[1])
    assert claim(engine, "w1") == first
    assert claim(engine, "w2") == other
    assert claim(engine, "w3") is None
    with session_scope(engine) as session:
        assert repo.finish_job(session, first, worker_id="w1", status="finished")
    assert claim(engine, "w3") == same


def test_a_stale_job_is_claimed_again_before_a_younger_job_of_its_problem(engine: Engine) -> None:
    first = add_job(engine, TINY[0])
    same = add_job(engine, TINY[0], budget_trials=9)
    assert claim(engine, "dead", now=T0) == first
    assert claim(engine, "w2", now=at(minutes=5)) == first
    assert claim(engine, "w3", now=at(minutes=5)) is None
    assert job(engine, same).status == "queued"


def test_a_stale_running_job_is_claimed_again(engine: Engine) -> None:
    job_id = add_job(engine)
    assert claim(engine, "w1", now=T0) == job_id
    with session_scope(engine) as session:
        assert repo.heartbeat(session, job_id, worker_id="w1", now=at(seconds=30), trials_done=3)
    assert claim(engine, "w2", now=at(seconds=149), stale_after_s=120) is None  # heartbeat 119 s old
    assert claim(engine, "w2", now=at(seconds=151), stale_after_s=120) == job_id
    row = job(engine, job_id)
    assert (row.status, row.worker_id, row.attempts, row.trials_done) == ("running", "w2", 2, 3)
    assert row.started_at == T0 and row.claimed_at == at(seconds=151)
    with session_scope(engine) as session:  # the presumed-dead worker is told, and cannot end the job
        assert not repo.heartbeat(session, job_id, worker_id="w1", now=at(seconds=152))
        assert not repo.finish_job(session, job_id, worker_id="w1", status="finished")
        assert not repo.release_job(session, job_id, worker_id="w1")
        assert repo.finish_job(session, job_id, worker_id="w2", status="finished", trials_done=6, best_time_ms=0.5)
        assert not repo.finish_job(session, job_id, worker_id="w2", status="failed")  # exactly once
    row = job(engine, job_id)
    assert (row.status, row.trials_done, row.best_time_ms, row.error) == ("finished", 6, 0.5, None)


def test_a_stale_job_asked_to_cancel_or_out_of_attempts_is_ended_not_claimed(engine: Engine) -> None:
    cancel = add_job(engine, TINY[0])
    doomed = add_job(engine, TINY[1])
    assert claim(engine, "w1") == cancel and claim(engine, "w2") == doomed
    with session_scope(engine) as session:
        repo.request_cancel(session, cancel)
    assert claim(engine, "w3", now=at(minutes=5), max_attempts=1) is None
    assert (job(engine, cancel).status, job(engine, doomed).status) == ("cancelled", "failed")
    assert "stopped heartbeating" in (job(engine, doomed).error or "")


# ---- heartbeats, cancel, release ----------------------------------------------------------------------------
def test_heartbeat_records_progress_and_turns_false_on_cancel(engine: Engine) -> None:
    job_id = add_job(engine)
    assert claim(engine, "w1") == job_id
    with session_scope(engine) as session:
        assert repo.heartbeat(session, job_id, worker_id="w1", now=at(seconds=5), trials_done=2, best_time_ms=1.5)
        assert not repo.heartbeat(session, job_id, worker_id="someone-else", now=at(seconds=5))
    row = job(engine, job_id)
    assert (row.heartbeat_at, row.trials_done, row.best_time_ms) == (at(seconds=5), 2, 1.5)
    with session_scope(engine) as session:
        cancelled = repo.request_cancel(session, job_id)
        assert (cancelled.status, cancelled.cancel_requested) == ("running", True)  # the worker ends it
        assert not repo.heartbeat(session, job_id, worker_id="w1", now=at(seconds=6), trials_done=3)
        assert repo.finish_job(session, job_id, worker_id="w1", status="cancelled", error="cancelled on request")
    row = job(engine, job_id)
    assert (row.status, row.trials_done) == ("cancelled", 3)
    with session_scope(engine) as session:
        assert repo.request_cancel(session, job_id).status == "cancelled"  # ended already: unchanged
        with pytest.raises(NotFound):
            repo.request_cancel(session, 10_000)


def test_cancel_of_a_queued_job_is_immediate(engine: Engine) -> None:
    job_id = add_job(engine)
    with session_scope(engine) as session:
        row = repo.request_cancel(session, job_id, now=at(seconds=1))
        assert (row.status, row.finished_at, row.cancel_requested) == ("cancelled", at(seconds=1), True)
    assert claim(engine) is None


def test_release_requeues_and_keeps_progress_unless_cancel_was_asked(engine: Engine) -> None:
    keep, drop = add_job(engine, TINY[0]), add_job(engine, TINY[1])
    assert claim(engine, "w1") == keep and claim(engine, "w1") == drop
    with session_scope(engine) as session:
        assert repo.release_job(session, keep, worker_id="w1", trials_done=4)
        repo.request_cancel(session, drop)
        assert repo.release_job(session, drop, worker_id="w1")
    row = job(engine, keep)
    assert (row.status, row.worker_id, row.heartbeat_at, row.trials_done, row.attempts) == ("queued", None, None, 4, 1)
    assert job(engine, drop).status == "cancelled"
    assert claim(engine, "w2") == keep
    assert job(engine, keep).attempts == 2


@pytest.mark.postgres
def test_concurrent_claims_skip_locked_rows_on_postgresql(postgres_url: URL) -> None:
    """A claim holding its row lock (not committed yet) does not block a second worker: it takes the next job."""
    engine = make_engine(postgres_url)
    try:
        first, second = add_job(engine, TINY[0]), add_job(engine, TINY[1])
        with session_scope(engine) as holding:
            held = repo.claim_job(holding, worker_id="w1", now=T0, backends=("model",))
            assert held is not None and held.id == first
            found: list[int | None] = []

            def other() -> None:
                with session_scope(engine) as session:
                    session.execute(text("SET LOCAL lock_timeout = '5s'"))
                    row = repo.claim_job(session, worker_id="w2", now=T0, backends=("model",))
                    found.append(None if row is None else row.id)

            thread = threading.Thread(target=other)
            thread.start()
            thread.join(timeout=30)
            assert found == [second]
        assert (job(engine, first).worker_id, job(engine, second).worker_id) == ("w1", "w2")
    finally:
        engine.dispose()


# ---- listing --------------------------------------------------------------------------------------------------
def test_list_count_and_find_active_jobs(engine: Engine) -> None:
    with session_scope(engine) as session:
        key, _ = repo.create_api_key(session, "lister")
        key_id = key.id
    a = add_job(engine, TINY[0], api_key_id=key_id, device_name="NVIDIA H200")
    b = add_job(engine, TINY[1], api_key_id=key_id)
    c = add_job(engine, TINY[2])
    assert claim(engine, device_name="NVIDIA H200") == a
    with session_scope(engine) as session:
        repo.request_cancel(session, c)
        problem_id = repo.get_job(session, a).problem_id
        assert [j.id for j in repo.list_jobs(session)] == [c, b, a]  # newest first
        assert [j.id for j in repo.list_jobs(session, status="queued")] == [b]
        assert [j.id for j in repo.list_jobs(session, status=["running", "cancelled"])] == [c, a]
        assert [j.id for j in repo.list_jobs(session, problem_id=problem_id)] == [a]
        assert [j.id for j in repo.list_jobs(session, limit=1, offset=1)] == [b]
        assert repo.count_active_jobs(session, key_id) == 2
        found = repo.find_active_job(session, problem_id=problem_id, device_name="NVIDIA H200", backend="model")
        assert found is not None and found.id == a
        assert repo.find_active_job(session, problem_id=problem_id, device_name=None, backend="model") is None
        assert repo.find_active_job(session, problem_id=problem_id, device_name="NVIDIA H200", backend="gpu") is None
        with pytest.raises(InvalidInput):
            repo.list_jobs(session, status="done")


# ---- batches --------------------------------------------------------------------------------------------------
@pytest.mark.parametrize(("counts", "status"), [
    pytest.param({"queued": 3}, "queued", id="all-queued"),
    pytest.param({"queued": 2, "running": 1}, "running", id="one-running"),
    pytest.param({"queued": 2, "finished": 1}, "running", id="some-ended"),
    pytest.param({"finished": 2, "failed": 1}, "finished", id="all-ended"),
    pytest.param({"finished": 1, "cancelled": 2}, "finished", id="some-cancelled"),
    pytest.param({"cancelled": 3}, "cancelled", id="all-cancelled"),
])
def test_batch_status_derivation(counts: dict[str, int], status: str) -> None:
    assert repo.batch_status(counts) == status


def test_a_batch_queues_one_job_per_distinct_problem_and_tracks_its_status(engine: Engine) -> None:
    with session_scope(engine) as session:
        batch = repo.create_batch(session, problems=[TINY[0], TINY[1], TINY[0]], preset="tiny", name="night",
                                  not_before=at(hours=1), window=("22:00", "06:00"), timezone="Europe/Berlin",
                                  backend="model", families=["direct"], budget_trials=5, budget_s=30.0)
        batch_id = batch.id
        jobs = repo.batch_jobs(session, batch_id)
        assert batch.status == "queued" and len(jobs) == 2
        assert {(j.window_start, j.window_end, j.timezone, j.not_before, j.families, j.budget_trials, j.backend)
                for j in jobs} == {("22:00", "06:00", "Europe/Berlin", at(hours=1), "direct", 5, "model")}
        first, second = (j.id for j in jobs)
        assert [b.id for b in repo.list_batches(session)] == [batch_id]
    night = at(hours=10)  # 23:00 in Berlin
    assert claim(engine, "w1", now=night) == first

    def status() -> str:
        with session_scope(engine) as session:
            return repo.get_batch(session, batch_id).status

    assert status() == "running"
    with session_scope(engine) as session:
        repo.finish_job(session, first, worker_id="w1", status="finished")
    assert status() == "running"  # one left to run
    assert claim(engine, "w1", now=night) == second
    with session_scope(engine) as session:
        repo.finish_job(session, second, worker_id="w1", status="failed", error="boom")
        assert [b.id for b in repo.list_batches(session, status="finished")] == [batch_id]
    assert status() == "finished"


def test_cancelling_every_job_of_a_batch_cancels_it(engine: Engine) -> None:
    with session_scope(engine) as session:
        batch_id = repo.create_batch(session, problems=TINY[:3], timezone="UTC", backend="model", families=None,
                                     budget_trials=5, budget_s=30.0).id
    running = claim(engine, "w1")
    with session_scope(engine) as session:
        assert repo.cancel_batch(session, batch_id).status == "running"  # one job still has to stop
        assert repo.finish_job(session, running, worker_id="w1", status="cancelled")  # type: ignore[arg-type]
        assert repo.get_batch(session, batch_id).status == "cancelled"
        with pytest.raises(InvalidInput) as info:
            repo.create_batch(session, problems=[], timezone="UTC", backend="model", families=None,
                              budget_trials=5, budget_s=30.0)
        assert info.value.field == "problems"
        with pytest.raises(NotFound):
            repo.get_batch(session, 10_000)


# ---- statistics ---------------------------------------------------------------------------------------------
def test_queue_stats(engine: Engine) -> None:
    add_job(engine, TINY[0])
    add_job(engine, TINY[1], not_before=at(hours=1))
    add_job(engine, TINY[2])
    assert claim(engine, "w1") is not None
    with session_scope(engine) as session:
        stats = repo.queue_stats(session, now=at(seconds=10))
    assert stats["jobs_by_status"] == {"queued": 2, "running": 1, "finished": 0, "failed": 0, "cancelled": 0}
    assert stats["queue_depth"] == 2 and stats["eligible_now"] == 1 and stats["active_workers"] == 1
    assert stats["measurements_last_60s"] == 0 and stats["trials_per_s"] == 0.0


def test_a_job_of_a_replayed_problem_keeps_its_families_none(engine: Engine) -> None:
    assert job(engine, add_job(engine, REPLAY_PROBLEM, families=None, backend="replay")).families is None


# ---- migration 2 --------------------------------------------------------------------------------------------
def test_migration_2_upgrades_downgrades_and_matches_the_models(db_url: str | URL) -> None:
    engine = make_engine(db_url)
    try:
        add_job(engine, TINY[0])
        assert current_revision(db_url) == head_revision() != INITIAL_REVISION
        check(db_url)
        downgrade(db_url, INITIAL_REVISION)
        assert current_revision(db_url) == INITIAL_REVISION
        assert not SERVICE_TABLES & set(inspect(engine).get_table_names())
        with session_scope(engine) as session:  # the first schema's rows stay
            assert repo.find_problem(session, TINY[0]) is not None
        upgrade(db_url)
        check(db_url)
        assert set(inspect(engine).get_table_names()) >= SERVICE_TABLES
        indexes = {ix["name"]: ix["column_names"] for ix in inspect(engine).get_indexes("jobs")}
        assert indexes["ix_jobs_status_created_at"] == ["status", "created_at"]
    finally:
        engine.dispose()


def test_check_constraints_guard_the_jobs_table(engine: Engine) -> None:
    from convtune.storage import ConstraintViolation

    job_id = add_job(engine)
    for values in ({"status": "done"}, {"status": "running"},  # running without a worker
                   {"window_start": "22:00"}, {"backend": "tpu"}):
        with pytest.raises(ConstraintViolation), session_scope(engine) as session:
            row = session.get(Job, job_id)
            assert row is not None
            for name, value in values.items():
                setattr(row, name, value)
    assert job(engine, job_id).status == "queued"


def test_times_read_back_timezone_aware(engine: Engine) -> None:
    job_id = add_job(engine, not_before=datetime(2026, 12, 7, 13, 0, tzinfo=UTC) + timedelta(minutes=1))
    assert job(engine, job_id).not_before == at(hours=1, minutes=1)
