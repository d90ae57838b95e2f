"""Access: keys on every write (no key, wrong key, revoked key -> 401), reads open unless closed by a setting,
per-key queue limit (429), request-size limit (413)."""

from __future__ import annotations

import pytest
from api_samples import TINY, TINY2, ApiEnv, key_body, make_env

from convtune.storage import queries as repo
from convtune.storage import session_scope

WRITES = [("post", "/v1/tune", key_body(TINY)), ("post", "/v1/jobs", key_body(TINY)),
          ("post", "/v1/batches", {"preset": "s4convd"}), ("delete", "/v1/jobs/1", None)]


def _send(env: ApiEnv, method: str, path: str, body: dict | None, headers: dict[str, str] | None = None):
    return env.client.request(method.upper(), path, json=body, headers=headers or {})


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_without_a_key_are_401(env: ApiEnv, method: str, path: str, body: dict | None) -> None:
    r = _send(env, method, path, body)
    assert r.status_code == 401
    assert r.json()["field"] == "X-API-Key"
    assert "API key is required" in r.json()["detail"]
    assert r.headers["www-authenticate"].startswith("Bearer")


@pytest.mark.parametrize(("method", "path", "body"), WRITES)
def test_writes_with_a_wrong_key_are_401(env: ApiEnv, method: str, path: str, body: dict | None) -> None:
    for headers in ({"X-API-Key": "ct_" + "x" * 32}, {"X-API-Key": env.secret + "x"},
                    {"Authorization": "Bearer ct_nope"}, {"Authorization": f"Basic {env.secret}"}):
        r = _send(env, method, path, body, headers)
        assert r.status_code == 401, headers
        assert r.json()["field"] == "X-API-Key"


def test_a_revoked_key_is_401(env: ApiEnv) -> None:
    assert _send(env, "post", "/v1/jobs", key_body(TINY), env.headers).status_code == 202
    with session_scope(env.engine) as session:
        repo.revoke_api_key(session, "tests")
    r = _send(env, "post", "/v1/jobs", key_body(TINY2), env.headers)
    assert r.status_code == 401
    assert "unknown or revoked" in r.json()["detail"]


def test_the_key_may_come_as_a_bearer_token(env: ApiEnv) -> None:
    r = _send(env, "post", "/v1/jobs", key_body(TINY), {"Authorization": f"Bearer {env.secret}"})
    assert r.status_code == 202
    assert r.json()["status"] == "queued"


def test_reads_are_open_by_default_but_jobs_and_batches_belong_to_keys(env: ApiEnv) -> None:
    for path in ("/v1/problems", "/healthz", "/readyz", "/metrics", "/", "/docs", "/openapi.json"):
        assert env.client.get(path).status_code == 200, path
    for path in ("/v1/jobs", "/v1/batches", "/v1/jobs/1", "/v1/batches/1"):
        r = env.client.get(path)
        assert r.status_code == 401 and r.json()["field"] == "X-API-Key", path
        assert env.client.get(path, headers=env.headers).status_code in (200, 404), path


def test_reads_can_be_closed_by_a_setting(sqlite_url: str) -> None:
    """Closed reads cover every route with stored data, /metrics included; /healthz (liveness), /docs and
    /openapi.json (the API's description, no data) stay open."""
    with make_env(sqlite_url, require_key_for_reads=True) as env:
        for path in ("/v1/jobs", "/v1/problems", "/v1/batches", "/v1/jobs/1", "/v1/problems/1", "/metrics", "/",
                     "/problems/1", "/v1/configs/best?problem=N%3D1+C%3D8+H%3D8+W%3D8+K%3D8+R%3D3+S%3D3"):
            assert env.client.get(path).status_code == 401, path
            assert env.client.get(path, headers={"X-API-Key": "ct_wrong"}).status_code == 401, path
        assert env.client.get("/v1/jobs", headers=env.headers).status_code == 200
        assert env.client.get("/v1/problems", headers={"Authorization": f"Bearer {env.secret}"}).status_code == 200
        for path in ("/healthz", "/docs", "/openapi.json"):
            assert env.client.get(path).status_code == 200, path
        assert env.client.get("/metrics", headers={"Authorization": f"Bearer {env.secret}"}).status_code == 200


def test_over_the_keys_queue_limit_is_429(env: ApiEnv) -> None:
    secret = env.new_key("small", max_queued_jobs=2)
    headers = {"X-API-Key": secret}
    assert _send(env, "post", "/v1/jobs", key_body(TINY), headers).status_code == 202
    assert _send(env, "post", "/v1/tune", key_body(TINY2), headers).status_code == 202
    r = _send(env, "post", "/v1/jobs", key_body(TINY), headers)
    assert r.status_code == 429
    assert "limit of 2" in r.json()["detail"]
    # joining an active job queues nothing, so it is allowed at the limit
    assert _send(env, "post", "/v1/tune", key_body(TINY2), headers).status_code == 202
    # a batch that would pass the limit is refused whole; another key is not affected
    assert _send(env, "post", "/v1/batches", {"preset": "resnet18"}, headers).status_code == 429
    assert _send(env, "post", "/v1/jobs", key_body(TINY), env.headers).status_code == 202
    # an ended job frees its place
    job_id = env.client.get("/v1/jobs", params={"status": "queued"}, headers=headers).json()[-1]["id"]
    assert _send(env, "delete", f"/v1/jobs/{job_id}", None, headers).status_code == 200
    assert _send(env, "post", "/v1/jobs", key_body(TINY), headers).status_code == 202
    assert env.client.get("/v1/jobs", headers=headers).json()[0]["status"] == "queued"


def test_a_body_over_the_limit_is_413_before_it_is_read(env: ApiEnv) -> None:
    big = b'{"problem": {"key": "' + b"x" * 70_000 + b'"}}'
    r = env.client.post("/v1/tune", content=big, headers=env.headers | {"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json() == {"detail": f"request body of {len(big)} bytes exceeds the limit of 65536 bytes",
                        "field": "body"}


def test_a_streamed_body_over_the_limit_is_413(env: ApiEnv) -> None:
    def chunks():
        yield b'{"problems": ['
        for _ in range(2000):
            yield b'{"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3"},'
        yield b"]}"

    r = env.client.post("/v1/batches", content=chunks(), headers=env.headers | {"content-type": "application/json"})
    assert r.status_code == 413
    assert r.json()["field"] == "body"
    assert env.client.get("/v1/batches", headers=env.headers).json() == []


def test_the_limit_is_a_setting(sqlite_url: str) -> None:
    with make_env(sqlite_url, max_request_bytes=2048) as env:
        body = {"problems": [{"key": f"N={n} C=8 H=8 W=8 K=8 R=3 S=3"} for n in range(1, 80)]}
        assert env.client.post("/v1/batches", json=body, headers=env.headers).status_code == 413
        body["problems"] = body["problems"][:3]
        assert env.client.post("/v1/batches", json=body, headers=env.headers).status_code == 202
