"""Bounded work per request: the database gate (503 + Retry-After, never a deadlock), the model's ranking
within its budget, 429 before any prediction, bounded ids everywhere, answers and keys cached for a second."""

from __future__ import annotations

import asyncio
import time

import pytest
from api_samples import TINY, TUNED, ApiEnv, key_body, make_env

from convtune.api import handlers, provisional
from convtune.api.deps import Database, KeyCache
from convtune.api.errors import ServiceBusy
from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope

#: Valid, and the largest 1×1 layer the API takes: 46,000 rows and channels (the traffic sums per tile made
#: ranking one configuration of it cost 46,000 steps).
HUGE = ConvProblem(N=1, C=46000, H=46000, W=1, K=46000, R=1, S=1)


class _App:
    """Just enough of a FastAPI app for :class:`Database` (an engine on ``state``)."""

    class state:
        engine = None


def test_the_gate_sheds_with_503_and_retry_after_when_every_turn_is_taken() -> None:
    db = Database(_App(), max_in_flight=1, max_waiting=1, queue_timeout_s=0.2)  # type: ignore[arg-type]

    async def scenario() -> list[object]:
        db._gate()
        slots = db._slots
        assert slots is not None
        await slots.acquire()  # the one turn is taken (a request at the database)
        db.in_flight = 1
        waiting = asyncio.create_task(db.run(lambda s: "never"))  # waits for a turn...
        await asyncio.sleep(0.01)
        outcomes: list[object] = []
        try:
            await db.run(lambda s: "never")  # ...and one more finds the queue full: shed at once
        except ServiceBusy as exc:
            outcomes.append(exc)
        try:
            await waiting  # no turn within queue_timeout_s: shed
        except ServiceBusy as exc:
            outcomes.append(exc)
        return outcomes

    full, timed_out = asyncio.run(scenario())
    for exc in (full, timed_out):
        assert isinstance(exc, ServiceBusy) and exc.status_code == 503 and exc.headers == {"Retry-After": "1"}
    assert "more than 1 waiting" in str(full) and "no turn within 0.2 s" in str(timed_out)
    assert db.shed == 2 and db.waiting == 0


def test_a_shed_request_is_a_json_503_naming_the_wait(env: ApiEnv) -> None:
    async def busy(work, *, bare=False):  # every turn taken
        raise env.app.state.database.busy("test")

    env.app.state.database.run = busy
    r = env.client.get("/v1/problems")
    assert r.status_code == 503 and r.headers["retry-after"] == "1" and "busy" in r.json()["detail"]
    assert env.client.get("/healthz").status_code == 200  # liveness never waits for the database


def test_the_connection_pool_covers_every_admitted_request(sqlite_url: str) -> None:
    with make_env(sqlite_url, max_in_flight=24) as env:
        pool = env.app.state.engine.pool
        assert pool.size() >= 24 and pool._max_overflow == 0 and pool._timeout == env.settings.db_pool_timeout_s


def test_the_models_ranking_stops_at_its_budget_and_is_finished_in_the_background() -> None:
    provisional.clear_cache()
    machine = MachineModel.preset("h200")
    problem = ConvProblem.parse("N=8 C=96 H=56 W=56 K=96 R=5 S=5 pad=2")  # ~86k direct configurations
    ticks = iter(range(10**9))
    cut = provisional.predict(problem, machine, budget_s=0.01, clock=lambda: next(ticks) * 1e-3)  # 1 ms a look
    assert cut is not None and not cut.complete and 0 < cut.ranked <= 11 * provisional.CLOCK_EVERY
    provisional.wait_for_background()
    full = provisional.predict(problem, machine, budget_s=0.01)  # the background thread finished it
    assert full is not None and full.complete and full.ranked > 50_000 and full.time_ms <= cut.time_ms
    best = min((spec.choice_s(pl, machine), pl.config.key(), spec.predict_s(pl, machine))
               for spec in specs_for(problem) for pl in spec.enumerate_plans(problem, machine))
    # chosen across families by the calibrated time, answered with the chosen family's own model time
    assert (full.time_ms, full.config.key()) == (pytest.approx(best[2] * 1e3), best[1])


def test_a_huge_valid_shape_costs_under_a_second_of_cpu_before_its_202(env: ApiEnv, monkeypatch) -> None:
    provisional.clear_cache()
    monkeypatch.setattr(provisional, "_complete_in_background", lambda *a: None)  # count this request only
    cpu = time.process_time()
    r = env.client.post("/v1/tune", json=key_body(HUGE), headers=env.headers)
    cpu = time.process_time() - cpu
    assert r.status_code == 202, r.text
    assert r.json()["job"]["status"] == "queued" and r.json()["config"] is not None
    assert cpu <= 1.0, f"{cpu:.2f} s of CPU before the 202"


def test_a_key_at_its_queue_limit_gets_429_without_any_prediction(env: ApiEnv, monkeypatch) -> None:
    def no_prediction(*args, **kwargs):
        raise AssertionError("the model ranked configurations for a request that was refused")

    monkeypatch.setattr(handlers, "predict", no_prediction)
    full = {"X-API-Key": env.new_key("full", max_queued_jobs=0)}
    r = env.client.post("/v1/tune", json=key_body(HUGE), headers=full)
    assert r.status_code == 429 and "limit of 0" in r.json()["detail"]


@pytest.mark.parametrize("path", ["/problems/9223372036854775808", "/problems/0", "/v1/problems/2147483648",
                                  "/v1/jobs/9223372036854775808", "/v1/batches/-1", "/problems/1?device=0"])
def test_every_route_bounds_its_ids(env: ApiEnv, path: str) -> None:
    r = env.client.get(path, headers=env.headers)
    assert r.status_code == 422, (path, r.status_code, r.text)


def test_a_stored_answer_is_served_from_memory_for_answer_cache_s(tuned_env: ApiEnv) -> None:
    first = tuned_env.client.post("/v1/tune", json=key_body(TUNED), headers=tuned_env.headers)
    assert first.status_code == 200
    with session_scope(tuned_env.engine) as session:  # the stored best changes in the database...
        best = repo.get_best_config(session, problem_key=TUNED)
        repo.upsert_best_config(session, device_id=best.device_id, problem_id=best.problem_id, scope="*",
                                config_id=repo.find_config(session, best.config_key).id, measurement_id=None,
                                time_ms=best.time_ms / 2, floor_ms=best.floor_ms, efficiency=0.9, provisional=False,
                                tuning_run_id=None, backend=best.backend)
    again = tuned_env.client.post("/v1/tune", json=key_body(TUNED), headers=tuned_env.headers)
    assert again.content == first.content  # ...and the answer of the last second is still served
    tuned_env.app.state.answers.clear()  # (as after answer_cache_s)
    fresh = tuned_env.client.post("/v1/tune", json=key_body(TUNED), headers=tuned_env.headers)
    assert fresh.json()["time_ms"] == pytest.approx(best.time_ms / 2)


def test_answers_are_not_cached_when_the_setting_is_zero(sqlite_url: str) -> None:
    with make_env(sqlite_url, answer_cache_s=0) as env:
        assert env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).status_code == 202
        assert len(env.app.state.answers._entries) == 0


def test_a_revoked_key_stops_working_within_key_cache_s() -> None:
    now = [100.0]
    cache = KeyCache(1.0, clock=lambda: now[0])
    cache.put("ct_secret", "key row")
    assert cache.get("ct_secret") == "key row"
    now[0] += 1.01
    assert cache.get("ct_secret") is None  # the next request reads the key again: a revoked one is 401
    assert KeyCache(0.0).get("ct_secret") is None


def test_the_door_sheds_beyond_max_concurrent_but_never_healthz() -> None:
    from convtune.api.shedding import DoorCount, LoadShedding

    inside = asyncio.Event()
    release = asyncio.Event()

    async def app(scope, receive, send):  # a request that holds its place until released
        inside.set()
        await release.wait()
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": b"ok"})

    count = DoorCount()
    door = LoadShedding(app, max_concurrent=1, count=count)

    async def call(path: str) -> list[dict]:
        sent: list[dict] = []

        async def send(message: dict) -> None:
            sent.append(message)

        await door({"type": "http", "path": path}, None, send)
        return sent

    async def scenario() -> tuple[list[dict], list[dict], list[dict]]:
        first = asyncio.create_task(call("/v1/problems"))
        await inside.wait()
        shed = await call("/v1/problems")
        health = asyncio.create_task(call("/healthz"))
        await asyncio.sleep(0)
        release.set()
        return await first, shed, await health

    first, shed, health = asyncio.run(scenario())
    assert first[0]["status"] == 200 and health[0]["status"] == 200
    assert shed[0]["status"] == 503 and (b"retry-after", b"1") in shed[0]["headers"]
    assert b"limit of 1 concurrent" in shed[1]["body"] and (count.inside, count.shed) == (0, 1)
