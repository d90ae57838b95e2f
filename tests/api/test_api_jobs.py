"""Jobs and batches through the API with an in-test worker: the lifecycle (SQLite and PostgreSQL), cancel, batch
windows and not_before with injected time, presets."""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

import pytest
from api_samples import GROUPED, REPLAY, TINY, TINY2, TUNED, ApiEnv, key_body, make_env, run_worker_once
from sqlalchemy import URL

from convtune.api.presets import PRESETS, preset_layers, preset_problems
from convtune.problem import ConvProblem
from convtune.service.runner import Worker
from convtune.tuner.benchmark import ReplayBenchmarker

NOON = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
NIGHT = datetime(2026, 12, 1, 23, 0, tzinfo=UTC)


def test_job_lifecycle(db_url: str | URL) -> None:
    """Queue -> a worker claims and tunes (replay backend) -> finished with trials, best and efficiency; the
    result answers POST /v1/tune and shows under the problem."""
    with make_env(db_url, backend="replay") as env:
        r = env.client.post("/v1/jobs", json=key_body(TUNED) | {"budget_trials": 20, "budget_s": 60},
                            headers=env.headers)
        assert r.status_code == 202, r.text
        job = r.json()
        assert job["status"] == "queued" and job["backend"] == "replay" and job["budget_trials"] == 20
        assert job["attempts"] == 0 and job["trials_done"] == 0 and job["best_time_ms"] is None
        assert env.client.get("/v1/jobs", params={"status": "queued"}, headers=env.headers).json()[0]["id"] == job["id"]

        assert run_worker_once(env)
        done = env.client.get(f"/v1/jobs/{job['id']}", headers=env.headers).json()
        assert done["status"] == "finished", done
        assert done["trials_done"] == 20 and done["attempts"] == 1 and done["worker_id"] == "test-worker"
        assert done["best_time_ms"] > 0 and done["tuning_run_id"] is not None
        assert done["efficiency"] == pytest.approx(done["floor_ms"] / done["best_time_ms"])
        assert done["started_at"] and done["finished_at"] and done["error"] is None
        assert done["stop_reason"] == "budget_trials"  # why it stopped, as a code
        assert env.client.get("/v1/jobs", params={"status": "queued"}, headers=env.headers).json() == []
        assert not run_worker_once(env)  # nothing left

        tuned = env.client.post("/v1/tune", json=key_body(TUNED), headers=env.headers)
        assert tuned.status_code == 200
        assert tuned.json()["run_id"] == done["tuning_run_id"]
        assert tuned.json()["time_ms"] == pytest.approx(done["best_time_ms"])
        detail = env.client.get(f"/v1/problems/{job['problem']['id']}", headers=env.headers).json()
        assert [j["id"] for j in detail["jobs"]] == [job["id"]]
        assert detail["runs"][0]["id"] == done["tuning_run_id"] and detail["measurements"] == 20


def test_cancel_a_queued_job(env: ApiEnv) -> None:
    job = env.client.post("/v1/jobs", json=key_body(TINY), headers=env.headers).json()
    r = env.client.delete(f"/v1/jobs/{job['id']}", headers=env.headers)
    assert r.status_code == 200
    assert r.json()["status"] == "cancelled" and r.json()["cancel_requested"] is True
    assert not run_worker_once(env)  # a cancelled job is never claimed
    again = env.client.delete(f"/v1/jobs/{job['id']}", headers=env.headers)
    assert again.status_code == 409
    assert again.json() == {"detail": f"job {job['id']} is already cancelled", "field": "job_id"}


class _HeldReplay(ReplayBenchmarker):
    """Replay that holds its ``hold_at``-th answer until ``release`` is set (``reached`` says it got there), so
    a test acts mid-job on events, not on timing."""

    def __init__(self, hold_at: int) -> None:
        super().__init__(REPLAY)
        self.hold_at, self.calls = hold_at, 0
        self.reached, self.release = threading.Event(), threading.Event()

    def measure(self, problem, plan):  # type: ignore[no-untyped-def]
        self.calls += 1
        if self.calls == self.hold_at:
            self.reached.set()
            assert self.release.wait(120), "the test never released the trial"
        return super().measure(problem, plan)


def test_cancel_a_running_job_stops_it_after_the_current_trial(sqlite_url: str) -> None:
    """A cancel requested during the 4th trial: that trial finishes and is stored, then the job ends cancelled
    (the worker reads the request at its next heartbeat); every trial measured so far stays stored."""
    with make_env(sqlite_url, backend="replay") as env:
        job = env.client.post("/v1/jobs", json=key_body(TUNED) | {"budget_trials": 40}, headers=env.headers).json()
        bench = _HeldReplay(hold_at=4)
        worker = Worker(env.engine, lambda backend: bench, backends=("replay",), worker_id="test-worker",
                        heartbeat_s=0.01)
        thread = threading.Thread(target=worker.run_once)
        thread.start()
        try:
            assert bench.reached.wait(120), "the worker never reached its 4th trial"
            r = env.client.delete(f"/v1/jobs/{job['id']}", headers=env.headers)
            assert r.status_code == 200
            assert r.json()["status"] == "running" and r.json()["cancel_requested"] is True
        finally:
            bench.release.set()
            thread.join(timeout=120)
            worker.close()
        done = env.client.get(f"/v1/jobs/{job['id']}", headers=env.headers).json()
        assert done["status"] == "cancelled" and done["stop_reason"] == "cancelled"
        assert done["trials_done"] == 4 == bench.calls
        page = env.client.get(f"/v1/problems/{job['problem']['id']}/trials").json()
        assert page["total_measurements"] >= done["trials_done"]


def test_cancel_unknown_job_is_404(env: ApiEnv) -> None:
    r = env.client.delete("/v1/jobs/12345", headers=env.headers)
    assert r.status_code == 404 and r.json()["field"] == "job_id"
    assert env.client.get("/v1/jobs/12345", headers=env.headers).status_code == 404


def test_jobs_filter_by_status_batch_and_problem(env: ApiEnv) -> None:
    auth = env.headers
    a = env.client.post("/v1/jobs", json=key_body(TINY), headers=env.headers).json()
    b = env.client.post("/v1/jobs", json=key_body(TINY2), headers=env.headers).json()
    env.client.delete(f"/v1/jobs/{a['id']}", headers=env.headers)
    assert [j["id"] for j in env.client.get("/v1/jobs", headers=env.headers).json()] == [b["id"], a["id"]]
    listed = env.client.get("/v1/jobs", params={"status": "cancelled"}, headers=auth).json()
    assert [j["id"] for j in listed] == [a["id"]]
    listed = env.client.get("/v1/jobs", params={"problem_id": b["problem"]["id"]}, headers=auth).json()
    assert [j["id"] for j in listed] == [b["id"]]
    assert env.client.get("/v1/jobs", params={"limit": 1, "offset": 1}, headers=env.headers).json()[0]["id"] == a["id"]
    assert env.client.get("/v1/jobs", params={"status": "sleeping"}, headers=env.headers).status_code == 422


def test_job_options_are_stored(env: ApiEnv) -> None:
    when = datetime(2026, 12, 24, 18, 0, tzinfo=UTC)
    body = key_body(TINY) | {"budget_trials": 7, "budget_s": 12.5, "families": ["direct"], "device": "h100",
                             "window": "22:00-06:00", "not_before": "2026-12-24T19:00:00+01:00", "backend": "replay"}
    job = env.client.post("/v1/jobs", json=body, headers=env.headers).json()
    assert job["budget_trials"] == 7 and job["budget_s"] == 12.5 and job["families"] == ["direct"]
    assert job["device_name"] == "NVIDIA H100" and job["backend"] == "replay"
    assert job["window"] == "22:00-06:00" and job["timezone"] == "UTC"
    assert datetime.fromisoformat(job["not_before"]) == when


@pytest.mark.parametrize(("extra", "field"), [
    ({"families": ["winograd9"]}, "families"),
    ({"window": "22:00-22:00"}, "window"),
    ({"window": "25:00-06:00"}, "window"),
    ({"not_before": "2026-12-24T19:00:00"}, "not_before"),
    ({"budget_trials": 0}, "budget_trials"),
    ({"budget_s": 0}, "budget_s"),
    ({"backend": "tpu"}, "backend"),
])
def test_bad_job_options_are_422(env: ApiEnv, extra: dict, field: str) -> None:
    r = env.client.post("/v1/jobs", json=key_body(TINY) | extra, headers=env.headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert env.client.get("/v1/jobs", headers=env.headers).json() == []


def test_a_batch_runs_only_inside_its_window(env: ApiEnv) -> None:
    """22:00-06:00 in the server's zone (UTC here): nothing is claimed at noon, everything at 23:00 and at
    03:00 the next day (the window wraps midnight); time is injected into the worker, never waited for."""
    auth = env.headers
    body = {"problems": [key_body(TINY)["problem"], {"N": 2, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3,
                                                     "pad": 1}],
            "window": "22:00-06:00", "name": "nightly", "budget_trials": 5}
    r = env.client.post("/v1/batches", json=body, headers=env.headers)
    assert r.status_code == 202, r.text
    batch = r.json()
    assert batch["status"] == "queued" and batch["window"] == "22:00-06:00" and batch["timezone"] == "UTC"
    assert batch["name"] == "nightly" and len(batch["jobs"]) == 2 and batch["counts"] == {"queued": 2}
    assert all(j["window"] == "22:00-06:00" and j["batch_id"] == batch["id"] for j in batch["jobs"])

    assert not run_worker_once(env, NOON)
    assert not run_worker_once(env, NIGHT.replace(hour=6))  # the end is excluded
    assert env.client.get(f"/v1/batches/{batch['id']}", headers=env.headers).json()["counts"] == {"queued": 2}
    assert run_worker_once(env, NIGHT)
    mid = env.client.get(f"/v1/batches/{batch['id']}", headers=env.headers).json()
    assert mid["status"] == "running" and mid["counts"] == {"finished": 1, "queued": 1}
    assert run_worker_once(env, NIGHT + timedelta(hours=4))
    done = env.client.get(f"/v1/batches/{batch['id']}", headers=env.headers).json()
    assert done["status"] == "finished" and done["counts"] == {"finished": 2}
    assert [j["trials_done"] for j in done["jobs"]] == [5, 5]
    assert env.client.get("/v1/jobs", params={"batch_id": batch["id"]}, headers=auth).json()[0]["status"] == "finished"


def test_a_batch_waits_for_not_before(env: ApiEnv) -> None:
    body = {"problems": [key_body(TINY)["problem"]], "not_before": "2026-12-02T00:00:00Z"}
    batch = env.client.post("/v1/batches", json=body, headers=env.headers).json()
    assert datetime.fromisoformat(batch["not_before"]) == datetime(2026, 12, 2, tzinfo=UTC)
    assert not run_worker_once(env, NIGHT)
    assert run_worker_once(env, datetime(2026, 12, 2, 0, 1, tzinfo=UTC))


def test_a_window_is_read_in_the_servers_time_zone(sqlite_url: str) -> None:
    with make_env(sqlite_url, timezone="Europe/Berlin") as env:  # UTC+1 in December
        batch = env.client.post("/v1/batches", json={"problems": [key_body(TINY)["problem"]], "window": "22:00-06:00"},
                                headers=env.headers).json()
        assert batch["timezone"] == "Europe/Berlin"
        assert not run_worker_once(env, datetime(2026, 12, 1, 20, 30, tzinfo=UTC))  # 21:30 in Berlin
        assert run_worker_once(env, datetime(2026, 12, 1, 21, 30, tzinfo=UTC))  # 22:30 in Berlin


def test_a_preset_batch_queues_every_layer_a_family_runs(env: ApiEnv) -> None:
    r = env.client.post("/v1/batches", json={"preset": "mobilenet_v2", "window": "22:00-06:00"}, headers=env.headers)
    assert r.status_code == 202, r.text
    batch = r.json()
    problems = preset_problems("mobilenet_v2")
    assert any(p.groups > 1 for p in problems)  # the depthwise layers run on the depthwise2d_tiled family
    assert batch["preset"] == "mobilenet_v2"
    assert len(batch["jobs"]) == len(problems)
    assert batch["skipped"] == []
    assert [b["id"] for b in env.client.get("/v1/batches", headers=env.headers).json()] == [batch["id"]]


def test_a_batch_skips_problems_no_family_runs(env: ApiEnv) -> None:
    auth = env.headers
    r = env.client.post("/v1/batches", json={"problems": [key_body(TINY)["problem"], key_body(GROUPED)["problem"]]},
                        headers=env.headers)
    assert r.status_code == 202, r.text
    batch = r.json()
    assert len(batch["jobs"]) == 1
    assert [s["key"] for s in batch["skipped"]] == [GROUPED.key()]
    assert all("no kernel family" in s["reason"] for s in batch["skipped"])
    assert env.client.get(f"/v1/batches/{batch['id']}", headers=auth).json()["skipped"] == []  # only in the POST answer


def test_a_batch_of_problems_dedupes_and_checks_each_problem(env: ApiEnv) -> None:
    r = env.client.post("/v1/batches", json={"problems": [key_body(TINY)["problem"], key_body(TINY)["problem"]]},
                        headers=env.headers)
    assert len(r.json()["jobs"]) == 1
    r = env.client.post("/v1/batches", json={"problems": [key_body(TINY)["problem"], {"key": "N=1 C=8 H=8"}]},
                        headers=env.headers)
    assert r.status_code == 422
    assert r.json()["field"] == "problems[1].W"


@pytest.mark.parametrize(("body", "field"), [
    ({}, "problems"),
    ({"preset": "resnet18", "problems": [{"key": TINY.key()}]}, "preset"),
    ({"preset": "alexnet"}, "preset"),
    ({"problems": []}, "problems"),
    ({"problems": [{"key": TINY.key()}], "batch_size": 4}, "batch_size"),
    ({"problems": [{"key": GROUPED.key()}]}, "problems"),  # no family runs its one problem
    ({"preset": "resnet18", "name": "a\x00b"}, "name"),
])
def test_bad_batches_are_422(env: ApiEnv, body: dict, field: str) -> None:
    r = env.client.post("/v1/batches", json=body, headers=env.headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert env.client.get("/v1/batches", headers=env.headers).json() == []


def test_get_unknown_batch_is_404(env: ApiEnv) -> None:
    assert env.client.get("/v1/batches/77", headers=env.headers).status_code == 404


# ---- presets ---------------------------------------------------------------------------------------------
def test_presets_hold_each_networks_distinct_conv_layers() -> None:
    counts = {name: (len(preset_layers(name)), len(preset_problems(name))) for name in PRESETS}
    assert counts == {"resnet18": (20, 11), "resnet50": (53, 23), "vgg16": (13, 9), "mobilenet_v2": (52, 30),
                      "convnext_tiny": (58, 16), "s4convd": (4, 1)}
    assert preset_layers("resnet18")[0].problem == ConvProblem.parse("N=1 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3")
    assert ConvProblem.parse("N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1") in preset_problems("resnet18")
    assert ConvProblem.parse("N=1 C=2048 H=7 W=7 K=512 R=1 S=1") in preset_problems("resnet50")
    assert ConvProblem.parse("N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1") in preset_problems("vgg16")
    convnext = preset_problems("convnext_tiny")
    assert ConvProblem.parse("N=1 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96") in convnext  # depthwise 7x7
    assert ConvProblem.parse("N=1 C=96 H=56 W=56 K=384 R=1 S=1") in convnext  # pointwise 1x1
    assert ConvProblem.parse("N=1 C=3 H=224 W=224 K=96 R=4 S=4 stride=4") in convnext  # stem
    mobilenet = preset_problems("mobilenet_v2")
    assert ConvProblem.parse("N=1 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144") in mobilenet
    assert ConvProblem.parse("N=1 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960") in mobilenet
    assert preset_problems("s4convd") == [ConvProblem.depthwise1d(B=16384, C=128, L=48, K=48)]


def test_preset_batch_size_sets_n() -> None:
    assert {p.N for p in preset_problems("vgg16", batch_size=32)} == {32}
    assert preset_problems("s4convd", batch_size=64)[0].N == 64
