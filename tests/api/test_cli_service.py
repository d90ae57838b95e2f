"""``convtune serve | submit | jobs | batch`` against a live server (uvicorn on a free loopback port, model
backend, one in-process worker), bad input (one stderr line, exit 2), server errors (their JSON detail)."""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import uvicorn
from api_samples import TINY, TINY2, settings_for

from convtune.api.main import create_app
from convtune.cli import build_parser, main
from convtune.cli.service import serve_settings
from convtune.storage import make_engine, session_scope, upgrade
from convtune.storage import queries as repo

ROOT = Path(__file__).resolve().parents[2]
SUITE = ROOT / "benchmarks" / "suites" / "public.json"


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class Server:
    url: str
    key: str
    db_url: str


@pytest.fixture(scope="module")
def server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Server]:
    db_url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'convtune.db'}"
    upgrade(db_url)
    engine = make_engine(db_url)
    with session_scope(engine) as session:
        _, secret = repo.create_api_key(session, "cli")
    engine.dispose()
    app = create_app(settings_for(db_url, worker_in_process=True))
    port = free_port()
    server = uvicorn.Server(uvicorn.Config(app, host="127.0.0.1", port=port, log_level="warning"))
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    deadline = time.monotonic() + 30
    while not server.started:
        assert time.monotonic() < deadline and thread.is_alive(), "the server did not start"
        time.sleep(0.05)
    try:
        yield Server(f"http://127.0.0.1:{port}", secret, db_url)
    finally:
        server.should_exit = True
        thread.join(timeout=30)


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, str, str]:
    code = main(list(argv))
    out, err = capsys.readouterr()
    return code, out, err


def closed_window() -> str:
    """A daily window (UTC, the test server's zone) that does not contain the next two hours."""
    start = datetime.now(UTC) + timedelta(hours=3)
    return f"{start:%H}:00-{start + timedelta(hours=1):%H}:00"


def test_submit_an_unseen_shape_gets_a_provisional_config_and_a_job(server: Server, capsys) -> None:
    code, out, err = run(capsys, "submit", *TINY2.key().split(), "--url", server.url, "--key", server.key)
    assert code == 0, err
    assert "PROVISIONAL: predicted by the analytic model" in out
    assert "job " in out and "config    direct.fwd" in out


def test_submit_wait_returns_the_tuned_result(server: Server, capsys) -> None:
    code, out, err = run(capsys, "submit", *TINY.key().split(), "--wait", "60", "--json", "--url", server.url,
                         "--key", server.key)
    assert code == 0, err
    answer = json.loads(out)
    assert answer["run_id"] is not None and answer["predicted"] is True  # model backend
    code, out, _ = run(capsys, "submit", *TINY.key().split(), "--url", server.url, "--key", server.key)
    assert code == 0 and "PREDICTED by the model (model backend)" in out and "efficiency" in out


def test_jobs_lists_the_jobs(server: Server, capsys) -> None:
    run(capsys, "submit", *TINY2.key().split(), "--url", server.url, "--key", server.key)
    code, out, err = run(capsys, "jobs", "--url", server.url, "--key", server.key)
    assert code == 0, err
    lines = out.splitlines()
    assert lines[0].split()[:3] == ["id", "status", "trials"]
    assert any(TINY2.key() in line for line in lines[1:])
    code, out, _ = run(capsys, "jobs", "--status", "cancelled", "--json", "--url", server.url, "--key", server.key)
    assert code == 0 and all(j["status"] == "cancelled" for j in json.loads(out))


def test_batch_of_a_preset_inside_a_window(server: Server, capsys) -> None:
    window = closed_window()
    code, out, err = run(capsys, "batch", "--preset", "resnet18", "--window", window, "--name", "night",
                         "--url", server.url, "--key", server.key)
    assert code == 0, err
    assert out.splitlines()[0].startswith("batch ") and f"11 jobs queued, window {window} (UTC)" in out
    batch_id = int(out.split()[1])
    code, out, _ = run(capsys, "jobs", "--batch", str(batch_id), "--json", "--url", server.url, "--key", server.key)
    jobs = json.loads(out)
    assert len(jobs) == 11 and all(j["window"] == window and j["eligible"] is False for j in jobs)
    code, out, _ = run(capsys, "jobs", "--batch", str(batch_id), "--url", server.url, "--key", server.key)
    assert code == 0 and f"{window} UTC" in out and "waits" in out


def test_batch_of_a_suite_file_and_of_a_problem_list(server: Server, capsys, tmp_path: Path) -> None:
    not_before = (datetime.now(UTC) + timedelta(days=1)).replace(tzinfo=None).isoformat(timespec="seconds")
    code, out, err = run(capsys, "batch", str(SUITE), "--not-before", not_before, "--json", "--url", server.url,
                         "--key", server.key)
    assert code == 0, err
    batch = json.loads(out)
    suite = json.loads(SUITE.read_text())
    # every public shape has a family now: direct/Winograd, depthwise2d_tiled, depthwise1d_*
    assert len(batch["jobs"]) == len(suite["conv2d"]) + len(suite["depthwise2d"]) + len(suite["depthwise1d_causal"])
    assert batch["skipped"] == []
    listed = tmp_path / "problems.json"
    grouped = {"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "groups": 2}  # no family runs it
    listed.write_text(json.dumps([TINY.key(), {"N": 3, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3}, grouped]))
    code, out, err = run(capsys, "batch", str(listed), "--window", closed_window(), "--url", server.url,
                         "--key", server.key)
    assert code == 0, err
    assert " 2 jobs queued" in out and "skipped" in out


def test_batch_tz_reads_the_window_and_a_bare_not_before_in_that_zone(server: Server, capsys) -> None:
    code, out, err = run(capsys, "batch", "--preset", "resnet18", "--window", "22:00-06:00", "--tz", "Asia/Tokyo",
                         "--not-before", "2031-01-02T03:04:00", "--json", "--url", server.url, "--key", server.key)
    assert code == 0, err
    batch = json.loads(out)
    assert (batch["window"], batch["timezone"]) == ("22:00-06:00", "Asia/Tokyo")
    assert batch["not_before"].startswith("2031-01-01T18:04:00")  # 03:04 in Tokyo is 18:04 UTC the day before
    assert "read in Asia/Tokyo" in err  # the CLI says how it read a time without offset
    code, out, err = run(capsys, "cancel", "--batch", str(batch["id"]), "--url", server.url, "--key", server.key)
    assert code == 0, err
    assert out.startswith(f"batch {batch['id']}: cancelled")


def test_cancel_jobs_by_id_and_another_keys_job_is_not_found(server: Server, capsys) -> None:
    code, out, err = run(capsys, "batch", "--preset", "resnet18", "--window", closed_window(), "--json",
                         "--url", server.url, "--key", server.key)
    assert code == 0, err
    first, second = (j["id"] for j in json.loads(out)["jobs"][:2])
    code, out, err = run(capsys, "cancel", str(first), str(second), "--url", server.url, "--key", server.key)
    assert code == 0, err
    assert out.splitlines() == [f"job {first}: cancelled", f"job {second}: cancelled"]
    engine = make_engine(server.db_url)
    with session_scope(engine) as session:
        _, other = repo.create_api_key(session, "cli-other")
    engine.dispose()
    code, out, err = run(capsys, "cancel", str(first), "--url", server.url, "--key", other)
    assert code == 2 and "HTTP 404" in err and '"field": "job_id"' in err
    code, _, err = run(capsys, "cancel", "--url", server.url, "--key", server.key)
    assert code == 2 and "JOB_ID" in err


def test_the_key_may_come_from_the_environment(server: Server, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONVTUNE_API_KEY", server.key)
    monkeypatch.setenv("CONVTUNE_URL", server.url)
    code, _, err = run(capsys, "submit", *TINY2.key().split())
    assert code == 0, err


@pytest.mark.parametrize("argv", [
    ["submit", "N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=0"],
    ["submit", "N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "--wait", "601"],
    ["jobs", "--limit", "0"],
    ["batch"],
    ["batch", str(SUITE), "--preset", "vgg16"],
    ["batch", "--preset", "vgg16", "--window", "22-06"],
    ["batch", "--preset", "vgg16", "--not-before", "tomorrow"],
    ["batch", "--preset", "vgg16", "--tz", "Mars/Olympus"],
    ["cancel", "0"],
    ["batch", "/nonexistent/problems.json"],
    ["batch", str(SUITE), "--batch-size", "4"],
    ["submit", "N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "--url", "ftp://example"],
])
def test_bad_input_is_one_line_and_exit_2(capsys, argv: list[str]) -> None:
    code, out, err = run(capsys, *argv, *([] if "--url" in argv else ["--url", "http://127.0.0.1:9"]))
    assert code == 2
    assert out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith("convtune: error: ")


def test_server_errors_print_the_json_detail(server: Server, capsys, tmp_path: Path) -> None:
    code, out, err = run(capsys, "submit", *TINY.key().split(), "--url", server.url)  # no key
    assert code == 2 and out == ""
    line = err.strip()
    assert len(line.splitlines()) == 1 and line.startswith("convtune: error: HTTP 401 from POST /v1/tune: ")
    assert json.loads(line.split(": ", 3)[3])["field"] == "X-API-Key"
    code, _, err = run(capsys, "submit", *TINY.key().split(), "--device", "tpu", "--url", server.url, "--key",
                       server.key)
    assert code == 2 and '"field": "device"' in err
    grouped = tmp_path / "grouped.json"  # no kernel family runs a grouped, non-depthwise layer
    grouped.write_text(json.dumps([{"N": 1, "C": 8, "H": 8, "W": 8, "K": 8, "R": 3, "S": 3, "groups": 2}]))
    code, _, err = run(capsys, "batch", str(grouped), "--url", server.url, "--key", server.key)
    assert code == 2 and "HTTP 422" in err


def test_an_unreachable_server_is_exit_1(capsys) -> None:
    code, out, err = run(capsys, "jobs", "--url", f"http://127.0.0.1:{free_port()}", "--timeout", "5")
    assert code == 1 and out == ""
    assert err.startswith("convtune: error: cannot reach http://127.0.0.1:")


# ---- serve -----------------------------------------------------------------------------------------------
def _serve_args(*argv: str):
    return build_parser().parse_args(["serve", *argv])


def test_serve_runs_a_worker_for_the_model_backend_or_a_gpu(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    monkeypatch.setenv("CONVTUNE_DATABASE_URL", "sqlite:////tmp/unused.db")
    assert serve_settings(_serve_args("--backend", "model")).worker_in_process is True
    assert serve_settings(_serve_args("--backend", "model", "--no-worker")).worker_in_process is False
    monkeypatch.setattr("convtune.cli.service.cuda_device_count", lambda: 0)
    settings = serve_settings(_serve_args())
    assert settings.backend == "gpu" and settings.worker_in_process is False
    assert "no GPU" in capsys.readouterr().err
    monkeypatch.setattr("convtune.cli.service.cuda_device_count", lambda: 1)
    assert serve_settings(_serve_args()).worker_in_process is True
    settings = serve_settings(_serve_args("--db", "sqlite:////tmp/other.db", "--backend", "replay", "--replay",
                                          "t.json"))
    assert settings.database_url == "sqlite:////tmp/other.db" and settings.replay_path == "t.json"


def test_serve_rejects_replay_without_a_table(capsys) -> None:
    code, _, err = run(capsys, "serve", "--backend", "replay", "--db", "sqlite:////tmp/unused.db")
    assert code == 2 and "--replay" in err


def test_convtune_serve_starts_answers_and_stops(tmp_path: Path) -> None:
    port = free_port()
    env = {**os.environ, "CONVTUNE_TIMEZONE": "UTC"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "convtune.cli", "serve", "--port", str(port), "--backend", "model", "--db",
         f"sqlite:///{tmp_path / 'serve.db'}", "--log-level", "info"],
        cwd=ROOT, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=2) as resp:
                    health = json.loads(resp.read())
                break
            except OSError:
                assert proc.poll() is None, proc.communicate()
                assert time.monotonic() < deadline, "convtune serve did not answer"
                time.sleep(0.2)
        assert health["status"] == "ok" and health["backend"] == "model" and health["worker_in_process"] is True
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=60)
    # uvicorn shuts down gracefully (the lifespan stops the worker), then re-raises the signal
    assert proc.returncode in (0, -signal.SIGTERM), err
    assert "convtune serve: http://127.0.0.1" in err and "Application shutdown complete" in err
