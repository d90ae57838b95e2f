"""/metrics through prometheus-client (request latency per route template, process metrics, the queue gauges,
one registry per app) and /docs, /redoc from the packaged assets (no CDN)."""

from __future__ import annotations

import asyncio
import re
from pathlib import Path

import pytest
from api_samples import TINY, ApiEnv, key_body, make_env
from prometheus_client.parser import text_string_to_metric_families

from convtune.api.docs import ASSETS, STATIC_PATH
from convtune.api.metrics import UNMATCHED, LatencyHistogram, LatencyMiddleware, ServiceMetrics
from convtune.storage import upgrade

HISTOGRAM = "convtune_http_request_duration_seconds"


def _families(text: str) -> dict[str, object]:
    return {f.name: f for f in text_string_to_metric_families(text)}


def _count(text: str, **labels: str) -> float:
    """The ``_count`` sample of the latency histogram with exactly ``labels`` (0 when absent)."""
    for family in text_string_to_metric_families(text):
        if family.name == HISTOGRAM:
            for s in family.samples:
                if s.name == HISTOGRAM + "_count" and s.labels == labels:
                    return float(s.value)
    return 0.0


def test_metrics_parse_and_hold_latency_process_and_queue_families(env: ApiEnv) -> None:
    assert env.client.get("/v1/problems/12345").status_code == 404
    assert env.client.post("/v1/jobs", json=key_body(TINY), headers=env.headers).status_code == 202
    r = env.client.get("/metrics")
    assert r.status_code == 200
    assert r.headers["content-type"].startswith("text/plain; version=0.0.4")
    families = _families(r.text)
    assert families[HISTOGRAM].type == "histogram"  # type: ignore[attr-defined]
    for name in ("process_cpu_seconds", "process_resident_memory_bytes", "process_start_time_seconds",
                 "python_info", "convtune_queue_depth", "convtune_jobs", "convtune_requests_shed_at_door"):
        assert name in families, name
    assert [s.value for s in families["convtune_queue_depth"].samples] == [1.0]  # type: ignore[attr-defined]
    # the route's template, not the raw path (a scan of ids must not grow the label set)
    assert _count(r.text, method="GET", route="/v1/problems/{problem_id}", status="404") == 1
    assert _count(r.text, method="POST", route="/v1/jobs", status="202") == 1
    # the histogram's buckets are cumulative and end in +Inf == count
    samples = [s for s in families[HISTOGRAM].samples  # type: ignore[attr-defined]
               if s.labels.get("route") == "/v1/jobs" and s.name.endswith("_bucket")]
    values = [s.value for s in samples]
    assert values == sorted(values) and samples[-1].labels["le"] == "+Inf" and values[-1] == 1


def test_this_scrape_counts_at_the_next(env: ApiEnv) -> None:
    first = env.client.get("/metrics").text
    assert _count(first, method="GET", route="/metrics", status="200") == 0  # timed once its answer is sent
    second = env.client.get("/metrics").text
    assert _count(second, method="GET", route="/metrics", status="200") == 1


def test_unknown_paths_share_one_label(env: ApiEnv) -> None:
    for path in ("/wp-admin", "/.env", "/v1/nothing/1"):
        assert env.client.get(path).status_code == 404
    assert _count(env.client.get("/metrics").text, method="GET", route=UNMATCHED, status="404") == 3


def test_each_app_has_its_own_registry(env: ApiEnv, tmp_path: Path) -> None:
    env.client.get("/healthz")
    other_url = f"sqlite:///{tmp_path / 'other.db'}"
    upgrade(other_url)
    with make_env(other_url) as other:
        text = other.client.get("/metrics").text
        assert _count(text, method="GET", route="/healthz", status="200") == 0
    assert _count(env.client.get("/metrics").text, method="GET", route="/healthz", status="200") == 1


def test_metrics_follow_closed_reads(sqlite_url: str) -> None:
    with make_env(sqlite_url, require_key_for_reads=True) as env:
        assert env.client.get("/metrics").status_code == 401
        r = env.client.get("/metrics", headers={"Authorization": f"Bearer {env.secret}"})
        assert r.status_code == 200 and HISTOGRAM in _families(r.text)
        # the docs and their assets carry no data: open
        assert env.client.get("/docs").status_code == 200
        assert env.client.get(f"{STATIC_PATH}/swagger-ui.css").status_code == 200


def test_latency_middleware_counts_an_exception_as_500() -> None:
    metrics = ServiceMetrics()

    async def failing(scope: object, receive: object, send: object) -> None:
        raise RuntimeError("boom")

    middleware = LatencyMiddleware(failing, metrics)  # type: ignore[arg-type]

    async def receive() -> dict[str, object]:
        return {"type": "http.request", "body": b""}

    async def send(message: object) -> None:
        raise AssertionError("nothing is sent")

    with pytest.raises(RuntimeError):
        asyncio.run(middleware({"type": "http", "method": "GET", "path": "/x"}, receive, send))  # type: ignore[arg-type]
    assert _count(metrics.exposition().decode(), method="GET", route=UNMATCHED, status="500") == 1


@pytest.mark.parametrize("page", ["/docs", "/redoc"])
def test_docs_pages_load_only_packaged_assets(env: ApiEnv, page: str) -> None:
    r = env.client.get(page)
    assert r.status_code == 200 and r.headers["content-type"].startswith("text/html")
    urls = re.findall(r'(?:src|href)="([^"]+)"', r.text)
    assert urls and all(u.startswith(STATIC_PATH + "/") for u in urls), urls
    assert "cdn" not in r.text.lower() and "fonts.googleapis" not in r.text
    for url in urls:
        asset = env.client.get(url)
        assert asset.status_code == 200 and len(asset.content) > 100, url
    if page == "/docs":
        assert '"validatorUrl": null' in r.text  # no schema sent to validator.swagger.io


def test_every_asset_is_served(env: ApiEnv) -> None:
    for name in ASSETS:
        assert env.client.get(f"{STATIC_PATH}/{name}").status_code == 200, name
    assert env.client.get(f"{STATIC_PATH}/nothing.js").status_code == 404


def test_latency_buckets_are_cumulative_and_inclusive() -> None:
    histogram = LatencyHistogram(buckets=(0.001, 0.01, 0.1))
    for seconds in (0.0005, 0.001, 0.002, 0.5):  # 0.001 lies on a bound: counted in le="0.001"
        histogram.observe("GET", "/x", 200, seconds)
    histogram.observe("GET", "/x", 404, 0.05)
    (family,) = histogram.collect()
    samples = {(s.name, s.labels.get("status"), s.labels.get("le")): s.value for s in family.samples}
    assert [samples[(HISTOGRAM + "_bucket", "200", le)] for le in ("0.001", "0.01", "0.1", "+Inf")] == [2, 3, 3, 4]
    assert samples[(HISTOGRAM + "_count", "200", None)] == 4
    assert samples[(HISTOGRAM + "_sum", "200", None)] == pytest.approx(0.5035)
    assert [samples[(HISTOGRAM + "_bucket", "404", le)] for le in ("0.001", "0.01", "0.1", "+Inf")] == [0, 0, 1, 1]
