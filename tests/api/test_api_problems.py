"""Browsing: GET /v1/problems, /v1/problems/{id}, /v1/problems/{id}/trials (paginated), report.svg,
/v1/configs/best."""

from __future__ import annotations

import xml.etree.ElementTree as ET

import pytest
from api_samples import TINY, TUNED, ApiEnv, key_body

from convtune.storage import queries as repo
from convtune.storage import session_scope


def _problem_id(env: ApiEnv) -> int:
    with session_scope(env.engine) as session:
        row = repo.find_problem(session, TUNED)
        assert row is not None
        return row.id


def test_list_problems_pages(tuned_env: ApiEnv) -> None:
    tuned_env.client.post("/v1/jobs", json=key_body(TINY), headers=tuned_env.headers)
    problems = tuned_env.client.get("/v1/problems").json()
    assert [p["key"] for p in problems] == [TUNED.key(), TINY.key()]
    first = problems[0]
    assert first["flops"] == TUNED.flops and first["compulsory_bytes"] == TUNED.compulsory_bytes
    assert first["spec"]["C"] == 512 and first["created_at"]
    assert [p["key"] for p in tuned_env.client.get("/v1/problems", params={"limit": 1, "offset": 1}).json()] == [
        TINY.key()]
    assert tuned_env.client.get("/v1/problems", params={"offset": 5}).json() == []
    assert tuned_env.client.get("/v1/problems", params={"limit": 0}).status_code == 422
    assert tuned_env.client.get("/v1/problems", params={"limit": 1001}).json()["field"] == "limit"


def test_problem_detail_has_best_configs_runs_jobs_and_counts(tuned_env: ApiEnv) -> None:
    pid = _problem_id(tuned_env)
    d = tuned_env.client.get(f"/v1/problems/{pid}").json()
    assert d["id"] == pid and d["key"] == TUNED.key()
    assert {b["scope"] for b in d["best_configs"]} == {"*", "direct"}
    overall = next(b for b in d["best_configs"] if b["scope"] == "*")
    assert overall["device"] == "NVIDIA H200" and overall["provisional"] is False
    assert overall["efficiency"] == pytest.approx(overall["floor_ms"] / overall["time_ms"])
    assert overall["tflops"] > 0 and overall["gbps"] > 0
    (run,) = d["runs"]
    assert run["status"] == "finished" and run["backend"] == "replay" and run["families"] == ["direct"]
    assert run["trials_done"] == 43 and run["device"] == "NVIDIA H200" and run["stage_survivors"]
    assert run["pruning_s"] is not None and run["pruning_s"] >= 0  # reported apart from the search budget
    assert d["measurements"] == 43
    with session_scope(tuned_env.engine) as session:
        stages = repo.pruning_stage_counts(session, run["id"])
    assert d["pruning_decisions"] == sum(stages.values()) > 1000
    assert d["jobs"] == []


def test_trials_are_paginated(tuned_env: ApiEnv) -> None:
    pid = _problem_id(tuned_env)
    seen, offset = [], 0
    while True:
        page = tuned_env.client.get(f"/v1/problems/{pid}/trials", params={"limit": 20, "offset": offset}).json()
        assert page["total_measurements"] == 43 and page["limit"] == 20 and page["offset"] == offset
        if not page["measurements"]:
            break
        seen += page["measurements"]
        offset += 20
    assert len(seen) == 43 and len({m["id"] for m in seen}) == 43
    assert [m["id"] for m in seen] == sorted(m["id"] for m in seen)  # oldest first
    m = seen[0]
    assert m["backend"] == "replay" and m["predicted"] is False and m["device"] == "NVIDIA H200"
    assert m["config"]["key"].startswith("direct.fwd") and m["config"]["params"]["tile_h"] >= 1
    ok = [m for m in seen if m["status"] == "ok"]
    assert ok and all(m["median_ms"] > 0 and m["tflops"] > 0 for m in ok)


def test_trials_list_pruning_decisions_by_stage(tuned_env: ApiEnv) -> None:
    pid = _problem_id(tuned_env)
    page = tuned_env.client.get(f"/v1/problems/{pid}/trials", params={"limit": 5}).json()
    assert len(page["pruning_decisions"]) == 5 and page["total_pruning_decisions"] > 1000
    d = page["pruning_decisions"][0]
    assert d["stage"] in ("infeasible", "traffic", "predicted_time", "kept") and d["reason"]
    assert d["config_key"].startswith("direct.fwd") and d["device"] == "NVIDIA H200" and d["run_id"]
    kept = tuned_env.client.get(f"/v1/problems/{pid}/trials", params={"stage": "kept", "limit": 1000}).json()
    assert {d["stage"] for d in kept["pruning_decisions"]} == {"kept"}
    with session_scope(tuned_env.engine) as session:
        stages = repo.pruning_stage_counts(session, d["run_id"])
    assert kept["total_pruning_decisions"] == stages["kept"]
    assert tuned_env.client.get(f"/v1/problems/{pid}/trials", params={"stage": "lucky"}).status_code == 422


def test_report_svg(tuned_env: ApiEnv) -> None:
    pid = _problem_id(tuned_env)
    r = tuned_env.client.get(f"/v1/problems/{pid}/report.svg")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("image/svg+xml")
    assert ET.fromstring(r.text).tag.endswith("svg")


def test_unknown_problems_are_404(tuned_env: ApiEnv) -> None:
    for path in ("/v1/problems/999", "/v1/problems/999/trials", "/v1/problems/999/report.svg"):
        r = tuned_env.client.get(path)
        assert r.status_code == 404, path
        assert r.json()["field"] == "problem_id"
    assert tuned_env.client.get("/v1/problems/0").status_code == 422
    assert tuned_env.client.get("/v1/problems/abc").json()["field"] == "problem_id"
    assert tuned_env.client.get("/v1/problems/99999999999").status_code == 422


def test_report_of_an_untuned_problem_is_404(tuned_env: ApiEnv) -> None:
    job = tuned_env.client.post("/v1/jobs", json=key_body(TINY), headers=tuned_env.headers).json()
    r = tuned_env.client.get(f"/v1/problems/{job['problem']['id']}/report.svg")
    assert r.status_code == 404
    detail = tuned_env.client.get(f"/v1/problems/{job['problem']['id']}", headers=tuned_env.headers).json()
    assert detail["best_configs"] == [] and detail["measurements"] == 0 and detail["jobs"][0]["id"] == job["id"]
    # the problem's history is shared, its jobs are the caller's: none without a key, none for another key
    assert tuned_env.client.get(f"/v1/problems/{job['problem']['id']}").json()["jobs"] == []
    other = {"X-API-Key": tuned_env.new_key("other")}
    assert tuned_env.client.get(f"/v1/problems/{job['problem']['id']}", headers=other).json()["jobs"] == []


def test_configs_best(tuned_env: ApiEnv) -> None:
    r = tuned_env.client.get("/v1/configs/best", params={"problem": TUNED.key()})
    assert r.status_code == 200
    best = r.json()
    assert best["scope"] == "*" and best["problem"]["key"] == TUNED.key() and best["provisional"] is False
    same = tuned_env.client.get("/v1/configs/best", params={"problem": "N=32 C=512 H=7 W=7 K=512 R=3 S=3 pad=1",
                                                            "device": "NVIDIA H200", "family": "direct"}).json()
    assert same["config"] == best["config"] and same["scope"] == "direct"
    r = tuned_env.client.get("/v1/configs/best", params={"problem": TUNED.key(), "device": "NVIDIA A100"})
    assert r.status_code == 404 and r.json()["field"] == "problem"
    assert tuned_env.client.get("/v1/configs/best", params={"problem": TINY.key()}).status_code == 404
    r = tuned_env.client.get("/v1/configs/best", params={"problem": "N=1 C=8 H=8 W=8 K=8 R=3 S=0"})
    assert r.status_code == 422 and r.json()["field"] == "S"
    assert tuned_env.client.get("/v1/configs/best").json()["field"] == "problem"
