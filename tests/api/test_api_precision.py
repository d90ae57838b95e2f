"""Precision classes through the API: a problem's ``math`` ("ieee" | "tf32") in its fields or key, bad values 422
naming ``math``, every shown problem carries its ``precision``, and the serving rule — a tf32 problem is answered by
the fastest of its own rows and its strict float32 twin's, a strict problem never by a tf32 row — on
GET /v1/configs/best and POST /v1/tune."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import TINY, make_env
from best_rows import GPU_CONFIG, GPU_MS, PROBLEM, TF32_CONFIG, TF32_MS, TF32_PROBLEM, store, strict_and_tf32, url_text

from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope, upgrade

FIELDS = {"N": 2, "C": 16, "H": 14, "W": 14, "K": 24, "R": 3, "S": 3, "pad": 1}  # PROBLEM's fields


@pytest.fixture
def both(db_url: Any) -> Any:
    """The app (model backend) on a database holding a GPU row of PROBLEM and a faster one of its tf32 twin."""
    strict_and_tf32(db_url)
    with make_env(url_text(db_url)) as env:
        yield env


def _best(env: Any, problem: ConvProblem) -> Any:
    r = env.client.get("/v1/configs/best", params={"problem": problem.key()}, headers=env.headers)
    assert r.status_code == 200, r.text
    return r.json()


def test_a_faster_tf32_row_never_answers_a_strict_problem(both: Any) -> None:
    body = _best(both, PROBLEM)
    assert (body["config"]["key"], body["time_ms"], body["problem"]["key"], body["problem"]["precision"]) == (
        GPU_CONFIG.key(), GPU_MS, PROBLEM.key(), "float32")
    assert TF32_CONFIG.key() not in [o["config"] for o in body["others"]]
    r = both.client.post("/v1/tune", json={"problem": FIELDS}, headers=both.headers)
    assert r.status_code == 200 and r.json()["config"]["key"] == GPU_CONFIG.key()
    assert r.json()["problem"]["precision"] == "float32" and r.json()["note"] is None


def test_a_tf32_problem_gets_the_fastest_of_both_classes(both: Any) -> None:
    body = _best(both, TF32_PROBLEM)
    assert (body["config"]["key"], body["time_ms"], body["problem"]["key"], body["problem"]["precision"]) == (
        TF32_CONFIG.key(), TF32_MS, TF32_PROBLEM.key(), "tf32")
    assert [(o["config"], o["time_ms"]) for o in body["others"]] == [(GPU_CONFIG.key(), GPU_MS)]
    for problem in ({**FIELDS, "math": "tf32"}, {"key": TF32_PROBLEM.key()}):
        r = both.client.post("/v1/tune", json={"problem": problem}, headers=both.headers)
        assert r.status_code == 200, r.text
        assert r.json()["config"]["key"] == TF32_CONFIG.key() and r.json()["problem"]["precision"] == "tf32"


def test_a_tf32_problem_is_answered_by_a_faster_strict_row_and_says_so(db_url: Any) -> None:
    strict_and_tf32(db_url, tf32_ms=2 * GPU_MS)
    with make_env(url_text(db_url)) as env:
        body = _best(env, TF32_PROBLEM)
        assert (body["config"]["key"], body["problem"]["key"], body["problem"]["precision"]) == (
            GPU_CONFIG.key(), PROBLEM.key(), "float32")
        r = env.client.post("/v1/tune", json={"problem": {**FIELDS, "math": "tf32"}}, headers=env.headers)
        assert r.status_code == 200 and r.json()["config"]["key"] == GPU_CONFIG.key()
        assert "float32 problem's config" in r.json()["note"] and "POST /v1/jobs" in r.json()["note"]


def test_a_tf32_row_alone_leaves_the_strict_problem_unanswered(db_url: Any) -> None:
    upgrade(db_url)
    store(db_url, TF32_CONFIG, "gpu", TF32_MS, problem=TF32_PROBLEM)
    with make_env(url_text(db_url), backend="gpu") as env:
        r = env.client.get("/v1/configs/best", params={"problem": PROBLEM.key()}, headers=env.headers)
        assert r.status_code == 404
        r = env.client.post("/v1/tune", json={"problem": FIELDS}, headers=env.headers)
        assert r.status_code == 202 and r.json()["job"]["problem"]["precision"] == "float32"
        assert _best(env, TF32_PROBLEM)["config"]["key"] == TF32_CONFIG.key()


def test_an_unseen_tf32_shape_queues_a_job_of_that_class(env: Any) -> None:
    r = env.client.post("/v1/tune", json={"problem": {"key": TINY.key() + " math=tf32"}}, headers=env.headers)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert job["problem"]["key"] == TINY.replace(math="tf32").key() and job["problem"]["precision"] == "tf32"
    assert r.json()["problem"] == job["problem"]
    with session_scope(env.engine) as session:
        row = repo.find_problem(session, TINY.replace(math="tf32"))
        assert row is not None and row.spec["math"] == "tf32"
        assert repo.find_problem(session, TINY) is None           # the strict problem is another row
    detail = env.client.get(f"/v1/problems/{row.id}").json()
    assert detail["precision"] == "tf32" and detail["spec"]["math"] == "tf32"
    listed = env.client.get("/v1/problems").json()
    assert [(p["key"], p["precision"]) for p in listed] == [(TINY.replace(math="tf32").key(), "tf32")]
    page = env.client.get(f"/problems/{row.id}").text
    assert "<dt>precision</dt><dd>tf32" in page


@pytest.mark.parametrize(("body", "needle"), [
    ({"problem": {**FIELDS, "math": "fp16"}}, "allowed ['ieee', 'tf32']"),
    ({"problem": {**FIELDS, "math": "TF32"}}, "allowed ['ieee', 'tf32']"),
    ({"problem": {**FIELDS, "math": 1}}, "must be a string"),
    ({"problem": {**FIELDS, "math": ["tf32"]}}, "must be a string"),
    ({"problem": {**FIELDS, "math": "tf32", "dtype": "float16"}}, "needs dtype='float32'"),
    ({"problem": {**FIELDS, "math": "tf32"}, "dtype": "bfloat16"}, "needs dtype='float32'"),
    ({"problem": {"key": PROBLEM.key() + " math=half"}}, "allowed ['ieee', 'tf32']"),
    ({"problem": {"B": 16, "C": 8, "L": 32, "K": 4, "math": "tf32"}}, "must be 'ieee'"),
], ids=["unknown", "case", "number", "list", "fp16-storage", "request-dtype", "key", "causal"])
def test_a_bad_math_is_422_naming_the_field(env: Any, body: dict[str, Any], needle: str) -> None:
    for path in ("/v1/tune", "/v1/jobs"):
        r = env.client.post(path, json=body, headers=env.headers)
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "math" and needle in r.json()["detail"]
    r = env.client.post("/v1/batches", json={"problems": [body["problem"]], **{k: v for k, v in body.items()
                                                                              if k != "problem"}},
                        headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "problems[0].math"


def test_the_schema_declares_math_and_precision(env: Any) -> None:
    schema = env.client.get("/openapi.json").json()
    components = schema["components"]["schemas"]
    text = str(schema)
    assert "'math': {'type': 'string', 'enum': ['ieee', 'tf32']" in text
    assert "math=tf32" in text and "strict problem is never answered with a tf32 config" in text
    assert components["ProblemRef"]["properties"]["precision"]["anyOf"][0]["enum"] == [
        "float32", "tf32", "bfloat16", "float16"]
    assert "precision" in components["ProblemOut"]["properties"]


def test_a_tf32_job_is_tuned_and_stored_under_its_key(env: Any) -> None:
    """POST /v1/jobs of a tf32 problem → a worker tunes it (every family that accepts it) → its best answers the
    tf32 problem and nothing answers the strict one."""
    from api_samples import run_worker_once

    tf32 = TINY.replace(math="tf32")
    r = env.client.post("/v1/jobs", json={"problem": {"key": tf32.key()}, "budget_trials": 4}, headers=env.headers)
    assert r.status_code == 202, r.text
    assert r.json()["problem"]["precision"] == "tf32"
    assert run_worker_once(env)
    job = env.client.get(f"/v1/jobs/{r.json()['id']}", headers=env.headers).json()
    assert job["status"] == "finished", job
    body = _best(env, tf32)
    assert body["problem"]["key"] == tf32.key() and body["backend"] == "model"
    assert env.client.get("/v1/configs/best", params={"problem": TINY.key()}, headers=env.headers).status_code == 404


def test_the_request_math_overrides_the_default_and_conflicts_with_an_explicit_one(env: Any) -> None:
    r = env.client.post("/v1/jobs", json={"problem": {"key": TINY.key()}, "math": "tf32"}, headers=env.headers)
    assert r.status_code == 202, r.text
    assert r.json()["problem"]["key"] == TINY.replace(math="tf32").key()
    r = env.client.post("/v1/tune", json={"problem": {**FIELDS, "math": "ieee"}, "math": "tf32"}, headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "math" and "the problem says 'ieee'" in r.json()["detail"]
    r = env.client.post("/v1/tune", json={"problem": {"key": TINY.key() + " math=tf32"}, "math": "ieee"},
                        headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "math"
    r = env.client.post("/v1/tune", json={"problem": FIELDS, "math": "fp16"}, headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "math"


def test_a_preset_batch_takes_math_on_its_dense_layers(env: Any) -> None:
    r = env.client.post("/v1/batches", json={"preset": "mobilenet_v2", "math": "tf32"}, headers=env.headers)
    assert r.status_code == 202, r.text[:300]
    problems = [ConvProblem.parse(job["problem"]["key"]) for job in r.json()["jobs"]]
    assert {p.math for p in problems if p.groups == 1} == {"tf32"}
    assert {p.math for p in problems if p.groups > 1} == {"ieee"}
    r = env.client.post("/v1/batches", json={"preset": "resnet18", "math": "tf32", "dtype": "float16"},
                        headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "math"
