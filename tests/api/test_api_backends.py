"""Measured vs replayed best rows through the API: with a replayed row and a GPU row of the same problem, the GPU
row is the answer (``measured: true``) and the replayed one is shown beside it flagged (``measured: false``), on
GET /v1/configs/best, POST /v1/tune and the pages."""

from __future__ import annotations

from typing import Any

import pytest
from api_samples import make_env
from best_rows import GPU_CONFIG, GPU_MS, PROBLEM, REPLAY_CONFIG, REPLAY_MS, replay_and_gpu, url_text


@pytest.fixture
def both(db_url: Any) -> Any:
    """The app (model backend) on a database holding a replayed and a GPU best row of PROBLEM."""
    replay_and_gpu(db_url)
    with make_env(url_text(db_url)) as env:
        yield env


def test_configs_best_answers_the_gpu_row_and_flags_the_replay_row(both: Any) -> None:
    r = both.client.get("/v1/configs/best", params={"problem": PROBLEM.key()}, headers=both.headers)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["config"]["key"], body["time_ms"], body["backend"], body["measured"]) == (
        GPU_CONFIG.key(), GPU_MS, "gpu", True)
    assert [(o["config"], o["time_ms"], o["backend"], o["measured"]) for o in body["others"]] == [
        (REPLAY_CONFIG.key(), REPLAY_MS, "replay", False)]


def test_configs_best_of_the_replay_backend_is_not_measured(both: Any) -> None:
    body = both.client.get("/v1/configs/best", params={"problem": PROBLEM.key(), "backend": "replay"},
                           headers=both.headers).json()
    assert (body["config"]["key"], body["backend"], body["measured"]) == (REPLAY_CONFIG.key(), "replay", False)
    assert [(o["backend"], o["measured"]) for o in body["others"]] == [("gpu", True)]
    r = both.client.get("/v1/configs/best", params={"problem": PROBLEM.key(), "backend": "model"},
                        headers=both.headers)
    assert r.status_code == 404 and "backend 'model'" in r.json()["detail"]


def test_tune_answers_the_measured_row(both: Any) -> None:
    r = both.client.post("/v1/tune", json={"problem": {"key": PROBLEM.key()}}, headers=both.headers)
    assert r.status_code == 200, r.text
    body = r.json()
    assert (body["config"]["key"], body["backend"], body["measured"], body["provisional"]) == (
        GPU_CONFIG.key(), "gpu", True, False)


@pytest.mark.parametrize("server", ["replay", "gpu"])
def test_a_replay_only_row_is_served_flagged_only_on_a_replay_server(db_url: Any, server: str) -> None:
    from best_rows import store

    store(db_url, REPLAY_CONFIG, "replay", REPLAY_MS)
    with make_env(url_text(db_url), backend=server) as env:
        r = env.client.post("/v1/tune", json={"problem": {"key": PROBLEM.key()}}, headers=env.headers)
        body = r.json()
        if server == "replay":  # a replay demo server answers its replayed row, flagged
            assert (r.status_code, body["backend"], body["measured"]) == (200, "replay", False)
            assert "not measured here" in body["note"]
        else:  # a GPU server never answers 200 with a replayed row: it queues a job to measure
            assert (r.status_code, body["provisional"], body["measured"]) == (202, True, False)


def test_pages_label_the_replay_row(both: Any) -> None:
    for path in ("/", "/problems/1"):
        page = both.client.get(path, headers=both.headers).text
        rows = [row for row in page.split("<tr") if GPU_CONFIG.key().split()[1] in row or "tile_h=8" in row]
        gpu = [row for row in rows if "tile_h=8" not in row and 'class="best"' in row]
        replay = [row for row in rows if "tile_h=8" in row and 'class="best"' in row]
        assert gpu and replay, path
        assert "measured" in gpu[0] and "not measured here" not in gpu[0]
        assert "replay (not measured here)" in replay[0]
