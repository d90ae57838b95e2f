"""POST /v1/tune: measured answers (200), provisional answers with a job (202), joining, waiting, bad input (422)."""

from __future__ import annotations

import threading
import time

import pytest
from api_samples import GROUPED, TINY, TINY2, TUNED, ApiEnv, key_body, run_worker_once

from convtune.api.provisional import predict
from convtune.kernels.direct.space import model_best
from convtune.machine import MachineModel
from convtune.storage import queries as repo
from convtune.storage import session_scope


def test_a_tuned_shape_answers_200_with_the_measured_best(tuned_env: ApiEnv) -> None:
    r = tuned_env.client.post("/v1/tune", json=key_body(TUNED), headers=tuned_env.headers)
    assert r.status_code == 200, r.text
    a = r.json()
    with session_scope(tuned_env.engine) as session:
        best = repo.get_best_config(session, problem_key=TUNED)
    assert a["provisional"] is False and a["predicted"] is False
    assert a["config"]["key"] == best.config_key and a["config"]["kind"] == "direct.fwd"
    assert a["config"]["params"] == best.params
    assert a["time_ms"] == pytest.approx(best.time_ms)
    assert a["floor_ms"] == pytest.approx(best.floor_ms)
    assert a["efficiency"] == pytest.approx(best.floor_ms / best.time_ms)
    assert a["tflops"] == pytest.approx(TUNED.flops / (best.time_ms * 1e-3) / 1e12)
    assert a["gbps"] == pytest.approx(TUNED.compulsory_bytes / (best.time_ms * 1e-3) / 1e9)
    assert a["run_id"] == best.tuning_run_id and a["run_id"] is not None
    assert a["device"] == best.device_name
    assert a["job"] is None and a["job_id"] is None
    assert a["problem"]["key"] == TUNED.key()
    choice = a["family_choice"]      # 3×3 stride 1: Winograd's floor is the lower one, with both listed
    assert choice["favoured"] == "winograd" and "direct floor" in choice["reason"]
    assert {f["algorithm"] for f in choice["floors"]} == {"direct", "winograd"}


def test_the_problem_may_be_given_by_fields_or_key_alike(tuned_env: ApiEnv) -> None:
    fields = {"N": 32, "C": 512, "H": 7, "W": 7, "K": 512, "R": 3, "S": 3, "stride": 1, "pad": 1, "name": "x"}
    by_fields = tuned_env.client.post("/v1/tune", json={"problem": fields}, headers=tuned_env.headers)
    by_key = tuned_env.client.post("/v1/tune", json=key_body(TUNED), headers=tuned_env.headers)
    assert by_fields.status_code == by_key.status_code == 200
    assert by_fields.json() == by_key.json()


def test_the_device_filters_the_answer(tuned_env: ApiEnv) -> None:
    assert tuned_env.client.post("/v1/tune", json=key_body(TUNED) | {"device": "h200"},
                                 headers=tuned_env.headers).status_code == 200
    r = tuned_env.client.post("/v1/tune", json=key_body(TUNED) | {"device": "a100"}, headers=tuned_env.headers)
    assert r.status_code == 202
    assert r.json()["job"]["device_name"] == "NVIDIA A100"
    assert r.json()["device"] == "NVIDIA A100"


def test_an_unseen_shape_answers_202_with_the_models_config_and_a_job(env: ApiEnv) -> None:
    r = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers)
    assert r.status_code == 202, r.text
    a = r.json()
    h200 = MachineModel.preset("h200")
    prediction = predict(TINY, h200)
    assert prediction is not None
    assert a["provisional"] is True and a["predicted"] is True
    assert a["config"]["key"] == model_best(TINY, h200).key() == prediction.config.key()
    assert a["time_ms"] == pytest.approx(prediction.time_ms)
    assert a["floor_ms"] == pytest.approx(prediction.floor_ms)
    assert a["efficiency"] == pytest.approx(prediction.floor_ms / prediction.time_ms)
    assert a["device"] == "NVIDIA H200"
    assert a["run_id"] is None
    job = a["job"]
    assert a["job_id"] == job["id"]
    assert job["status"] == "queued" and job["backend"] == "model" and job["device_name"] is None
    assert job["budget_trials"] == env.settings.default_budget_trials
    assert job["budget_s"] == env.settings.default_budget_s
    assert job["problem"] == a["problem"]
    assert env.client.get(f"/v1/jobs/{job['id']}", headers=env.headers).json()["status"] == "queued"


def test_a_second_request_joins_the_active_job(env: ApiEnv) -> None:
    first = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()
    fields = {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "pad": 1}
    second = env.client.post("/v1/tune", json={"problem": fields}, headers=env.headers).json()
    assert second["job_id"] == first["job_id"]
    other = env.client.post("/v1/tune", json=key_body(TINY2), headers=env.headers).json()
    assert other["job_id"] != first["job_id"]
    assert len(env.client.get("/v1/jobs", headers=env.headers).json()) == 2


def test_after_a_job_ended_a_new_request_queues_a_new_one(env: ApiEnv) -> None:
    first = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()
    assert env.client.delete(f"/v1/jobs/{first['job_id']}", headers=env.headers).json()["status"] == "cancelled"
    second = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()
    assert second["job_id"] != first["job_id"]


def test_a_model_backend_server_answers_200_predicted_once_the_job_ran(env: ApiEnv) -> None:
    job_id = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers).json()["job_id"]
    assert run_worker_once(env)
    assert env.client.get(f"/v1/jobs/{job_id}", headers=env.headers).json()["status"] == "finished"
    r = env.client.post("/v1/tune", json=key_body(TINY), headers=env.headers)
    assert r.status_code == 200, r.text
    a = r.json()
    assert a["predicted"] is True and a["provisional"] is True
    assert a["run_id"] is not None and a["time_ms"] > 0 and a["config"]["key"].startswith("direct.fwd")
    assert "model" in a["note"]


def test_wait_returns_the_result_once_the_job_finished(env: ApiEnv) -> None:
    def worker() -> None:
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and not run_worker_once(env):
            time.sleep(0.05)

    thread = threading.Thread(target=worker)
    thread.start()
    try:
        r = env.client.post("/v1/tune", params={"wait": 60}, json=key_body(TINY), headers=env.headers)
    finally:
        thread.join()
    # 200 with a run: the wait ended on the job's end (a timeout would answer 202 with the queued job)
    assert r.status_code == 200, r.text
    assert r.json()["run_id"] is not None


def test_wait_gives_up_after_the_time_given(env: ApiEnv) -> None:
    start = time.monotonic()
    r = env.client.post("/v1/tune", params={"wait": 0.5}, json=key_body(TINY), headers=env.headers)
    elapsed = time.monotonic() - start
    assert r.status_code == 202
    assert r.json()["job"]["status"] == "queued"
    assert elapsed >= 0.5  # it waited the time given (no upper bound: a busy machine is slow, not wrong)


@pytest.mark.parametrize(("body", "field"), [
    ({"problem": {"key": "N=1 C=64 H=56 W=56 K=64 R=3 S=0"}}, "S"),
    ({"problem": {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "stride": 0}}, "stride_h"),
    ({"problem": {"N": 1, "C": 8, "H": 2, "W": 8, "K": 8, "R": 5, "S": 3}}, "H"),
    ({"problem": {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3}}, "S"),
    ({"problem": {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "colour": 1}}, "colour"),
    ({"problem": {"N": 1.5, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3}}, "N"),
    ({"problem": {"N": 1, "C": 6, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "groups": 4}}, "groups"),
    ({"problem": {"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3", "N": 2}}, "N"),
    ({"problem": {"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3 dtype=float32"}, "dtype": "float16"}, "dtype"),
    ({"problem": {"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3"}, "dtype": "float64"}, "dtype"),
    ({"problem": {"key": "N=1 C=1 H=1 W=1 K=1 R=70000 S=1 pad=40000"}}, "R"),
    ({"problem": {"key": "N=100000 C=100000 H=100 W=100 K=1 R=1 S=1"}}, "input"),
    ({"problem": {"B": 16, "C": 8, "L": 32}}, "K"),
    ({"problem": {"key": ""}}, "key"),
    ({"problem": "N=1"}, "problem"),
    ({}, "problem"),
    ({"problem": {"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3"}, "device": "tpu"}, "device"),
    ({"problem": {"key": "N=1 C=8 H=8 W=8 K=8 R=3 S=3"}, "extra": 1}, "extra"),
])
def test_invalid_input_is_422_naming_the_field(env: ApiEnv, body: dict, field: str) -> None:
    r = env.client.post("/v1/tune", json=body, headers=env.headers)
    assert r.status_code == 422, r.text
    assert r.json()["field"] == field
    assert r.json()["detail"]


def test_a_problem_no_family_can_run_is_422(env: ApiEnv) -> None:
    # grouped (not depthwise), in float32 and in float16 (a 16-bit dense problem of any C has a family now: the wgmma
    # one pads the channels)
    grouped16 = GROUPED.key()[:-len("dtype=float32")]
    for body in (key_body(GROUPED), {"problem": {"key": grouped16}, "dtype": "float16"}):
        r = env.client.post("/v1/tune", json=body, headers=env.headers)
        assert r.status_code == 422
        assert r.json()["field"] == "problem"
        assert "no kernel family" in r.json()["detail"]
    assert env.client.get("/v1/jobs", headers=env.headers).json() == []


def test_wait_is_bounded(env: ApiEnv) -> None:
    r = env.client.post("/v1/tune", params={"wait": 601}, json=key_body(TINY), headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "wait"
    r = env.client.post("/v1/tune", params={"wait": -1}, json=key_body(TINY), headers=env.headers)
    assert r.status_code == 422 and r.json()["field"] == "wait"


def test_malformed_json_is_422(env: ApiEnv) -> None:
    r = env.client.post("/v1/tune", content=b'{"problem": ', headers=env.headers | {"content-type": "application/json"})
    assert r.status_code == 422
    assert r.json()["field"] == "body"
