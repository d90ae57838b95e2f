"""The server under a burst and at shutdown, as a process (``convtune serve``, model backend, loopback):
200 concurrent requests over every kind of route are answered or shed (503 + Retry-After) within 10 s and
the server is healthy afterwards; SIGTERM answers a waiting ``?wait=`` request with its job at once and the
process exits cleanly."""

from __future__ import annotations

import asyncio
import collections
import contextlib
import signal
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from api_samples import TINY

from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope, upgrade
from convtune.storage import queries as repo
from convtune.tuner.benchmark import ModelBenchmarker
from convtune.tuner.tune import tune

ROOT = Path(__file__).resolve().parents[2]
#: Each request must be answered (or shed) within this; a wedged server fails the test by timing out.
ANSWER_WITHIN_S = 10.0
NEW_SHAPES = [ConvProblem(N=1, C=8 * c, H=h, W=h, K=8, R=3, S=3, pad_h=1, pad_w=1)
              for c in (1, 2) for h in range(9, 19)]


@dataclass
class Served:
    url: str
    key: str
    proc: subprocess.Popen[bytes]
    log: Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@contextlib.contextmanager
def serve(tmp_path: Path, *args: str) -> Iterator[Served]:
    """``convtune serve --backend model`` on a fresh SQLite file with a key and TINY tuned (model rows)."""
    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        tune(TINY, ModelBenchmarker(MachineModel.preset("h200")), engine, budget_trials=4)
        with session_scope(engine) as session:
            _, secret = repo.create_api_key(session, "burst", max_queued_jobs=1000)
    finally:
        engine.dispose()
    port = _free_port()
    log = tmp_path / "server.log"
    with log.open("wb") as out:
        proc = subprocess.Popen([sys.executable, "-m", "convtune.cli", "serve", "--backend", "model", "--db", url,
                                 "--port", str(port), "--log-level", "warning", *args],
                                cwd=ROOT, stdout=out, stderr=subprocess.STDOUT)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 60
        while True:
            assert proc.poll() is None, log.read_text()[-3000:]
            assert time.monotonic() < deadline, "the server did not start within 60 s"
            with contextlib.suppress(httpx.HTTPError):
                if httpx.get(base + "/healthz", timeout=1).status_code == 200:
                    break
            time.sleep(0.1)
        yield Served(base, secret, proc, log)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(30)


def _requests(key: str) -> list[tuple[str, str, dict[str, Any]]]:
    """200 requests over every kind of route: stored answers, new shapes, lists, pages, probes, writes."""
    auth = {"X-API-Key": key}
    tuned = {"problem": {"key": TINY.key()}}
    kinds: list[tuple[str, str, dict[str, Any]]] = [
        ("POST", "/v1/tune", {"json": tuned, "headers": auth}),
        ("GET", "/v1/configs/best", {"params": {"problem": TINY.key()}}),
        ("GET", "/v1/jobs", {"headers": auth}),
        ("GET", "/v1/problems", {}),
        ("GET", "/v1/problems/1", {}),
        ("GET", "/", {}),
        ("GET", "/healthz", {}),
        ("GET", "/readyz", {}),
        ("GET", "/metrics", {}),
    ]
    out = [kinds[i % len(kinds)] for i in range(180)]
    out += [("POST", "/v1/tune", {"json": {"problem": {"key": p.key()}}, "headers": auth}) for p in NEW_SHAPES]
    return out


async def _burst(base: str, requests: list[tuple[str, str, dict[str, Any]]]) -> list[int]:
    limits = httpx.Limits(max_connections=len(requests), max_keepalive_connections=len(requests))
    async with httpx.AsyncClient(base_url=base, timeout=ANSWER_WITHIN_S, limits=limits) as client:
        async def one(method: str, path: str, kw: dict[str, Any]) -> int:
            r = await client.request(method, path, **kw)
            if r.status_code == 503:
                assert r.headers.get("retry-after") == "1", r.text
            return r.status_code

        return list(await asyncio.gather(*(one(m, p, kw) for m, p, kw in requests)))


def test_a_burst_of_200_mixed_requests_is_answered_or_shed_and_the_server_recovers(tmp_path: Path) -> None:
    with serve(tmp_path, "--no-worker") as served:
        statuses = asyncio.run(_burst(served.url, _requests(served.key)))
        counts = collections.Counter(statuses)
        assert len(statuses) == 200 and set(counts) <= {200, 202, 503}, (counts, served.log.read_text()[-3000:])
        # beyond max_concurrent (64) requests inside, the door sheds at once; the admitted ones are answered
        assert counts[200] + counts[202] >= 50, counts
        # healthy afterwards: probes, a stored answer, a new shape
        assert httpx.get(served.url + "/healthz", timeout=ANSWER_WITHIN_S).status_code == 200
        assert httpx.get(served.url + "/readyz", timeout=ANSWER_WITHIN_S).status_code == 200
        auth = {"X-API-Key": served.key}
        r = httpx.post(served.url + "/v1/tune", json={"problem": {"key": TINY.key()}}, headers=auth,
                       timeout=ANSWER_WITHIN_S)
        assert r.status_code == 200, r.text
        r = httpx.post(served.url + "/v1/tune", json={"problem": {"key": "N=3 C=8 H=8 W=8 K=8 R=3 S=3 pad=1"}},
                       headers=auth, timeout=ANSWER_WITHIN_S)
        assert r.status_code == 202, r.text
        assert "Traceback" not in served.log.read_text()


def test_sigterm_answers_a_waiting_request_with_its_job_and_the_server_exits(tmp_path: Path) -> None:
    with serve(tmp_path, "--no-worker", "--graceful-s", "5") as served:
        answer: dict[str, Any] = {}

        def wait_for_a_job() -> None:  # nothing runs the job (--no-worker): the request would wait 60 s
            r = httpx.post(served.url + "/v1/tune", params={"wait": 60},
                           json={"problem": {"key": "N=2 C=16 H=9 W=9 K=8 R=3 S=3 pad=1"}},
                           headers={"X-API-Key": served.key}, timeout=30)
            answer.update(status=r.status_code, body=r.json())

        waiter = threading.Thread(target=wait_for_a_job, daemon=True)
        waiter.start()
        deadline = time.monotonic() + 30
        while not httpx.get(served.url + "/v1/jobs", headers={"X-API-Key": served.key}, timeout=5).json():
            assert time.monotonic() < deadline, "the job was not queued"
            time.sleep(0.05)
        served.proc.send_signal(signal.SIGTERM)
        waiter.join(20)  # bounded: without the shutdown signal the request would hold for its whole wait
        assert not waiter.is_alive(), "the waiting request was not answered at shutdown"
        assert answer["status"] == 202 and answer["body"]["job"]["status"] == "queued"
        assert "shutting down" in answer["body"]["note"]
        assert served.proc.wait(20) == 0
        assert "Traceback" not in served.log.read_text()


@pytest.mark.parametrize("flag", ["--stale-after-s=0", "--heartbeat-s=-1", "--graceful-s=0"])
def test_serve_refuses_bad_timings_in_one_line(flag: str, tmp_path: Path) -> None:
    proc = subprocess.run([sys.executable, "-m", "convtune.cli", "serve", "--backend", "model", "--db",
                           f"sqlite:///{tmp_path / 'x.db'}", flag], cwd=ROOT, capture_output=True, text=True,
                          timeout=60)
    assert proc.returncode == 2 and len(proc.stderr.strip().splitlines()) == 1, proc.stderr
    assert flag.split("=")[0] in proc.stderr
