"""GET /healthz, /readyz and /metrics (Prometheus text), the OpenAPI document, JSON errors for unknown routes."""

from __future__ import annotations

from api_samples import TINY, TINY2, ApiEnv, key_body
from prometheus_client.parser import text_string_to_metric_families

from convtune.api.deps import get_clock
from convtune.api.routes.health import render_metrics
from convtune.storage.migrate import head_revision


def parse_metrics(text: str) -> dict[str, float]:
    """``{'name{labels}': value}`` of a text exposition (labels sorted, as prometheus-client writes them);
    prometheus-client's parser raises on a line that is neither a comment nor a sample."""
    samples = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(s.labels.items()))
            samples[s.name + (f"{{{labels}}}" if labels else "")] = float(s.value)
    return samples


def test_healthz_answers_without_the_database_and_readyz_asks_it(env: ApiEnv) -> None:
    expected = {"status": "ok", "revision": head_revision(), "backend": "model", "worker_in_process": False,
                "timezone": "UTC", "in_flight": 0, "waiting": 0}
    r = env.client.get("/healthz")
    assert r.status_code == 200
    assert r.json() == expected | {"database": "not checked", "version": r.json()["version"]}
    r = env.client.get("/readyz")
    assert r.status_code == 200
    assert r.json() == expected | {"database": "ok", "version": r.json()["version"]}


def test_metrics_count_jobs_by_status_and_queue_depth(env: ApiEnv, clock) -> None:
    env.app.dependency_overrides[get_clock] = lambda: clock
    for problem in (TINY, TINY2):
        assert env.client.post("/v1/jobs", json=key_body(problem), headers=env.headers).status_code == 202
    job = env.client.get("/v1/jobs", headers=env.headers).json()[0]
    assert env.client.delete(f"/v1/jobs/{job['id']}", headers=env.headers).status_code == 200
    r = env.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    m = parse_metrics(r.text)
    assert m["convtune_queue_depth"] == 1
    assert m['convtune_jobs{status="queued"}'] == 1
    assert m['convtune_jobs{status="cancelled"}'] == 1
    assert m['convtune_jobs{status="running"}'] == 0
    assert m["convtune_trials_per_second"] == 0


def test_metrics_rate_is_measurements_per_second_over_a_minute() -> None:
    text = render_metrics({"jobs_by_status": {"queued": 3, "running": 1}, "queue_depth": 3,
                           "measurements_last_60s": 30})
    m = parse_metrics(text)
    assert m["convtune_trials_per_second"] == 0.5
    assert m["convtune_measurements_last_minute"] == 30
    assert m['convtune_jobs{status="finished"}'] == 0
    assert text.endswith("\n")


def test_openapi_lists_every_endpoint_with_examples(env: ApiEnv) -> None:
    schema = env.client.get("/openapi.json").json()
    paths = schema["paths"]
    for path, method in [("/v1/tune", "post"), ("/v1/configs/best", "get"), ("/v1/problems", "get"),
                         ("/v1/problems/{problem_id}", "get"), ("/v1/problems/{problem_id}/trials", "get"),
                         ("/v1/problems/{problem_id}/report.svg", "get"), ("/v1/jobs", "post"), ("/v1/jobs", "get"),
                         ("/v1/jobs/{job_id}", "get"), ("/v1/jobs/{job_id}", "delete"), ("/v1/batches", "post"),
                         ("/v1/batches/{batch_id}", "get"), ("/v1/batches/{batch_id}", "delete"), ("/healthz", "get"),
                         ("/readyz", "get"), ("/metrics", "get")]:
        assert method in paths[path], (path, method)
    components = schema["components"]["schemas"]
    assert components["TuneRequest"]["examples"]
    assert components["BatchCreate"]["examples"]
    assert components["TuneRequest"]["properties"]["problem"]["examples"]
    # writes and the per-key job and batch routes declare the key, the shared reads (open by default) do not
    assert paths["/v1/tune"]["post"]["security"]
    assert paths["/v1/jobs"]["get"]["security"] and paths["/v1/batches/{batch_id}"]["get"]["security"]
    assert "security" not in paths["/v1/problems"]["get"]
    assert {"202", "401", "413", "422", "429"} <= set(paths["/v1/tune"]["post"]["responses"])


def test_unknown_routes_and_methods_answer_json(env: ApiEnv) -> None:
    r = env.client.get("/v1/nothing")
    assert r.status_code == 404
    assert r.json() == {"detail": "Not Found", "field": None}
    r = env.client.put("/v1/jobs", json={})
    assert r.status_code == 405
    assert r.json()["detail"] == "Method Not Allowed"
