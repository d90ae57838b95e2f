"""Jobs and batches belong to the key that made them: another key gets 404 on read and cancel and does not
see them in lists; an admin key sees and cancels everything; POST /v1/tune joins only the caller's job."""

from __future__ import annotations

from api_samples import TINY, TINY2, ApiEnv, key_body

from convtune.storage import queries as repo
from convtune.storage import session_scope


def _admin(env: ApiEnv) -> dict[str, str]:
    with session_scope(env.engine) as session:
        _, secret = repo.create_api_key(session, "admin", is_admin=True)
    return {"X-API-Key": secret}


def test_another_keys_job_is_not_there_for_read_list_or_cancel(env: ApiEnv) -> None:
    alice, bob = env.headers, {"X-API-Key": env.new_key("bob")}
    job = env.client.post("/v1/jobs", json=key_body(TINY), headers=alice).json()
    mine = env.client.post("/v1/jobs", json=key_body(TINY2), headers=bob).json()
    for method in ("get", "delete"):
        r = env.client.request(method.upper(), f"/v1/jobs/{job['id']}", headers=bob)
        assert r.status_code == 404 and r.json()["field"] == "job_id", method
    assert [j["id"] for j in env.client.get("/v1/jobs", headers=bob).json()] == [mine["id"]]
    assert [j["id"] for j in env.client.get("/v1/jobs", headers=alice).json()] == [job["id"]]
    assert env.client.get(f"/v1/jobs/{job['id']}", headers=alice).json()["status"] == "queued"  # untouched
    assert env.client.delete(f"/v1/jobs/{job['id']}", headers=alice).json()["status"] == "cancelled"


def test_an_admin_key_sees_and_cancels_every_job(env: ApiEnv) -> None:
    admin = _admin(env)
    job = env.client.post("/v1/jobs", json=key_body(TINY), headers=env.headers).json()
    assert [j["id"] for j in env.client.get("/v1/jobs", headers=admin).json()] == [job["id"]]
    assert env.client.get(f"/v1/jobs/{job['id']}", headers=admin).status_code == 200
    assert env.client.delete(f"/v1/jobs/{job['id']}", headers=admin).json()["status"] == "cancelled"


def test_batches_belong_to_their_key_and_can_be_cancelled(env: ApiEnv) -> None:
    bob = {"X-API-Key": env.new_key("bob")}
    batch = env.client.post("/v1/batches", json={"problems": [key_body(TINY)["problem"], key_body(TINY2)["problem"]]},
                            headers=env.headers).json()
    assert env.client.get(f"/v1/batches/{batch['id']}", headers=bob).status_code == 404
    assert env.client.delete(f"/v1/batches/{batch['id']}", headers=bob).status_code == 404
    assert env.client.get("/v1/batches", headers=bob).json() == []
    assert [b["id"] for b in env.client.get("/v1/batches", headers=_admin(env)).json()] == [batch["id"]]
    cancelled = env.client.delete(f"/v1/batches/{batch['id']}", headers=env.headers)
    assert cancelled.status_code == 200
    assert cancelled.json()["status"] == "cancelled" and cancelled.json()["counts"] == {"cancelled": 2}
    again = env.client.delete(f"/v1/batches/{batch['id']}", headers=env.headers)
    assert again.status_code == 409 and again.json()["field"] == "batch_id"


def test_tune_joins_only_the_callers_own_active_job(env: ApiEnv) -> None:
    bob = {"X-API-Key": env.new_key("bob")}
    a1 = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()["job"]
    a2 = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()["job"]
    b1 = env.client.post("/v1/tune", json=key_body(TINY), headers=bob).json()["job"]
    assert a1["id"] == a2["id"]  # the same key joins its job
    assert b1["id"] != a1["id"]  # another key gets its own (the queue answers it from the first's stored run)
    assert env.client.get(f"/v1/jobs/{b1['id']}", headers=bob).status_code == 200


def test_a_window_is_read_in_the_requests_time_zone(env: ApiEnv) -> None:
    r = env.client.post("/v1/jobs", json=key_body(TINY) | {"window": "22:00-06:00", "timezone": "Asia/Tokyo"},
                        headers=env.headers)
    assert r.status_code == 202 and (r.json()["window"], r.json()["timezone"]) == ("22:00-06:00", "Asia/Tokyo")
    r = env.client.post("/v1/batches", json={"problems": [key_body(TINY2)["problem"]], "timezone": "Nowhere/City"},
                        headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "timezone"
