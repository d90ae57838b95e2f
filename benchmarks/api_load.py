"""The API under open-loop load on loopback: ``POST /v1/tune`` (a tuned shape) and ``GET /v1/configs/best``.

1. A SQLite database in a temporary folder is brought to head, one shape is tuned by replaying the H200
   timings (``tests/data/replay_h200_vs_cudnn.json.gz``), an API key is created.
2. The server runs as in production: one ``convtune serve`` process (uvicorn, uvloop, httptools) on a free
   loopback port with its default limits, no worker in process.
3. For each route and rate (default 200, 500 and 1000 requests/s, 20 s each after a 3 s warm-up) this
   process sends requests **open loop** over keep-alive HTTP/1.1 connections: request *i* is due at
   ``t0 + i / rate`` whether or not earlier answers have come back, and its latency runs from that due time
   to the end of the answer (no coordinated omission). Every request has a timeout (default 2 s): a request
   not answered by then counts as an error (``timeout``).
4. Throughout, and for 10 s after each run, a separate connection asks ``GET /healthz`` every 50 ms (the
   server must answer within 100 ms, always); after the run the route itself is asked every 100 ms: the
   *recovery* is the time from the end of the load until every later probe is answered 200 within 100 ms.
5. Reported per run: answered req/s, statuses (200, 503 = shed with ``Retry-After``, other, timeout), latency
   percentiles of the answers and of the sheds, the worst ``/healthz`` during and after the load, the
   recovery time, the server's CPU per request. Targets: 0 errors and p99 < 20 ms at 500 req/s; above
   capacity only fast 503s; ``/healthz`` within 100 ms throughout; recovery within 5 s. Written to
   ``benchmarks/results/api_load.md`` and ``.json``.

    python benchmarks/api_load.py                          # 200, 500, 1000 req/s, both routes
    python benchmarks/api_load.py --rates 500 --duration 10 --routes tune --profile
"""

from __future__ import annotations

import argparse
import asyncio
import collections
import datetime as dt
import gc
import json
import os
import platform
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "tests" / "data" / "replay_h200_vs_cudnn.json.gz"
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_SHAPE = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1"
TARGET_P99_MS = 20.0
TARGET_RATE = 500.0  # the rate at and below which nothing may be shed
HEALTHZ_TARGET_MS = 100.0
SHED_TARGET_MS = 100.0
RECOVERY_TARGET_S = 5.0
TIMEOUT_S = 2.0


# ---- set-up: a tuned database, a key, the server -----------------------------------------------------------
def prepare_database(directory: Path, shape: str) -> tuple[str, str, dict[str, Any]]:
    """(database URL, API key secret, the stored best) after a replay tune of ``shape``."""
    from convtune.problem import ConvProblem
    from convtune.storage import make_engine, session_scope, upgrade
    from convtune.storage import queries as repo
    from convtune.tuner.benchmark import ReplayBenchmarker
    from convtune.tuner.tune import tune

    url = f"sqlite:///{directory / 'convtune.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        problem = ConvProblem.parse(shape)
        result = tune(problem, ReplayBenchmarker(REPLAY), engine, budget_trials=60, seed=0)
        with session_scope(engine) as session:
            _, secret = repo.create_api_key(session, "api-load")
            best = repo.get_best_config(session, problem_key=problem)
        return url, secret, {"problem": problem.key(), "config": best.config_key, "time_ms": best.time_ms,
                             "efficiency": best.efficiency, "trials": result.trials}
    finally:
        engine.dispose()


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def machine_busy_seconds() -> float:
    """CPU seconds all cores spent busy since boot (Linux /proc/stat: everything but idle and iowait)."""
    values = [int(v) for v in Path("/proc/stat").read_text().splitlines()[0].split()[1:]]
    idle = values[3] + (values[4] if len(values) > 4 else 0)
    return (sum(values[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def wait_for_quiet(limit_s: float, threshold: float = 0.25, window_s: float = 3.0) -> float:
    """Wait (up to ``limit_s``) until the machine's other work stays under ``threshold`` of one core for
    ``window_s``; the seconds waited. The machine may be shared: a run next to a test suite measures that."""
    start = time.monotonic()
    while time.monotonic() - start < limit_s:
        busy0 = machine_busy_seconds()
        time.sleep(window_s)
        if (machine_busy_seconds() - busy0) / window_s < threshold:
            break
    return time.monotonic() - start


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of a process (Linux /proc), all its threads."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


# ---- a minimal keep-alive HTTP/1.1 client with a timeout per request --------------------------------------
class Connection:
    def __init__(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        self.reader, self.writer = reader, writer

    @classmethod
    async def open(cls, port: int) -> Connection:
        reader, writer = await asyncio.open_connection("127.0.0.1", port)
        sock = writer.get_extra_info("socket")
        if sock is not None:
            sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        return cls(reader, writer)

    async def request(self, data: bytes) -> tuple[int, bytes]:
        self.writer.write(data)
        head = await self.reader.readuntil(b"\r\n\r\n")
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split(" ", 2)[1])
        headers = {k.strip().lower(): v.strip() for k, _, v in (line.partition(":") for line in lines[1:] if line)}
        body = b""
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                body += await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    def close(self) -> None:
        self.writer.close()


TIMEOUT, FAILED = -2, -1  # statuses of a request not answered in time, or whose connection failed


async def timed(conn: Connection, data: bytes, timeout_s: float) -> int:
    """The status of one request, ``TIMEOUT`` or ``FAILED``; the connection is closed unless it is reusable."""
    try:
        status, _ = await asyncio.wait_for(conn.request(data), timeout_s)
        return status
    except TimeoutError:
        conn.close()
        return TIMEOUT
    except (OSError, asyncio.IncompleteReadError, ValueError):
        conn.close()
        return FAILED


def http_post(port: int, path: str, body: bytes, key: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"X-API-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


def http_get(port: int, path: str, key: str | None = None) -> bytes:
    auth = f"X-API-Key: {key}\r\n" if key else ""
    return f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n{auth}\r\n".encode()


@dataclass
class Sample:
    due: float
    sent: float
    done: float
    status: int


async def open_loop(port: int, data: bytes, rate: float, total_s: float, timeout_s: float,
                    connections: int = 16, max_connections: int = 256) -> tuple[list[Sample], int]:
    """Send ``rate * total_s`` requests, request i due at t0 + i / rate; (samples, connections opened).

    Like a client's connection pool: at most ``max_connections`` open at once; a request due when all are
    busy waits for one (its latency still counts from its due time, and it times out like any other)."""
    loop = asyncio.get_running_loop()
    # FIFO: every idle connection is used in turn, so none idles past the server's keep-alive timeout
    idle: collections.deque[Connection] = collections.deque([await Connection.open(port) for _ in range(connections)])
    opened = len(idle)
    open_now = len(idle)
    freed = asyncio.Condition()
    count = int(rate * total_s)
    samples: list[Sample | None] = [None] * count

    async def one(i: int, due: float) -> None:
        nonlocal opened, open_now
        sent = loop.time()
        deadline = sent + timeout_s
        conn: Connection | None = None
        while conn is None:
            while idle and (idle[0].reader.at_eof() or idle[0].writer.is_closing()):
                idle.popleft().close()
                open_now -= 1
            if idle:
                conn = idle.popleft()
            elif open_now < max_connections:
                open_now += 1
                try:
                    conn = await asyncio.wait_for(Connection.open(port), max(0.001, deadline - loop.time()))
                except (OSError, TimeoutError):
                    open_now -= 1
                    samples[i] = Sample(due, sent, loop.time(), FAILED)
                    return
                opened += 1
            else:
                async with freed:
                    try:
                        await asyncio.wait_for(freed.wait(), max(0.001, deadline - loop.time()))
                    except TimeoutError:
                        samples[i] = Sample(due, sent, loop.time(), TIMEOUT)
                        return
        status = await timed(conn, data, max(0.001, deadline - loop.time()))
        if status > 0 and not conn.writer.is_closing():
            idle.append(conn)
        else:
            open_now -= 1
        async with freed:
            freed.notify()
        samples[i] = Sample(due, sent, loop.time(), status)

    tasks = []
    t0 = loop.time() + 0.2
    for i in range(count):
        due = t0 + i / rate
        delay = due - loop.time()
        if delay > 0:
            await asyncio.sleep(delay)
        tasks.append(asyncio.create_task(one(i, due)))
    await asyncio.gather(*tasks)
    for conn in idle:
        conn.close()
    return [s for s in samples if s is not None], opened


async def prober(port: int, data: bytes, every_s: float, until: asyncio.Event, timeout_s: float,
                 out: list[tuple[float, float, int]]) -> None:
    """Ask ``data`` every ``every_s`` on one connection until ``until`` is set: (time, latency s, status)."""
    loop = asyncio.get_running_loop()
    conn: Connection | None = None
    while not until.is_set():
        start = loop.time()
        if conn is None or conn.writer.is_closing():
            try:
                conn = await asyncio.wait_for(Connection.open(port), timeout_s)
            except (OSError, TimeoutError):
                out.append((start, loop.time() - start, FAILED))
                conn = None
                await asyncio.sleep(every_s)
                continue
        status = await timed(conn, data, timeout_s)
        out.append((start, loop.time() - start, status))
        await asyncio.sleep(max(0.0, every_s - (loop.time() - start)))


# ---- statistics ---------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest-rank method."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


def summarize(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 0.50), "p90": pct(values, 0.90), "p99": pct(values, 0.99),
            "p99.9": pct(values, 0.999), "max": max(values) if values else float("nan"),
            "mean": statistics.fmean(values) if values else float("nan")}


def recovery_s(probes: list[tuple[float, float, int]], end: float, fast_s: float) -> float | None:
    """Seconds from ``end`` until every later probe was answered 200 within ``fast_s`` (None: never; the
    bound is the one /healthz is held to, so one garbage-collection pause does not count as overload)."""
    after = [p for p in probes if p[0] >= end]
    if not after:
        return None
    last_bad = max((p[0] + p[1] for p in after if p[2] != 200 or p[1] > fast_s), default=None)
    if last_bad is None:
        return 0.0
    if last_bad >= after[-1][0]:
        return None
    return last_bad - end


@dataclass
class LoadResult:
    route: str
    rate_target: float
    duration_s: float
    sent: int
    answered_rps: float
    statuses: dict[str, int]
    errors: int  # anything but 200 (503 sheds included)
    latency_ms: dict[str, float]  # of the 200 answers, from the due time
    all_latency_ms: dict[str, float]  # of every request
    shed_latency_ms: dict[str, float]  # of the 503 answers
    client_lag_ms: dict[str, float]
    healthz_during_ms: dict[str, float]
    healthz_after_ms: dict[str, float]
    healthz_failures: int
    recovery_s: float | None
    connections: int
    server_cpu_ms_per_request: float
    server_cpu_share: float
    client_cpu_share: float
    background_cpu_share: float

    @property
    def met(self) -> bool:
        """Below capacity: no error and p99 < 20 ms; above it: only fast sheds; always: a live /healthz and a
        recovery within 5 s."""
        health = (self.healthz_failures == 0 and self.healthz_during_ms["max"] < HEALTHZ_TARGET_MS
                  and self.healthz_after_ms["max"] < HEALTHZ_TARGET_MS)
        recovered = self.recovery_s is not None and self.recovery_s <= RECOVERY_TARGET_S
        if self.rate_target <= TARGET_RATE:
            return health and recovered and self.errors == 0 and self.all_latency_ms["p99"] < TARGET_P99_MS
        only_sheds = set(self.statuses) <= {"200", "503"}
        fast_sheds = not self.shed_latency_ms or not (self.shed_latency_ms["p99"] >= SHED_TARGET_MS)
        return health and recovered and only_sheds and fast_sheds


def _stats(values: list[float]) -> dict[str, float]:
    return summarize(values) if values else {}


async def _run(port: int, data: bytes, health: bytes, rate: float, duration: float, warmup: float,
               timeout_s: float, after_s: float) -> tuple[list[Sample], int, list, list, float]:
    loop = asyncio.get_running_loop()
    stop_health, stop_route = asyncio.Event(), asyncio.Event()
    health_probes: list[tuple[float, float, int]] = []
    route_probes: list[tuple[float, float, int]] = []
    health_task = asyncio.create_task(prober(port, health, 0.05, stop_health, 1.0, health_probes))
    samples, opened = await open_loop(port, data, rate, warmup + duration, timeout_s)
    end = loop.time()
    route_task = asyncio.create_task(prober(port, data, 0.1, stop_route, timeout_s, route_probes))
    await asyncio.sleep(after_s)
    stop_health.set()
    stop_route.set()
    await asyncio.gather(health_task, route_task)
    return samples, opened, health_probes, route_probes, end


def run_load(route: str, port: int, data: bytes, health: bytes, rate: float, duration: float, warmup: float,
             timeout_s: float, after_s: float, server_pid: int) -> LoadResult:
    gc.collect()
    gc.freeze()
    cpu0, wall0, busy0, own0 = cpu_seconds(server_pid), time.monotonic(), machine_busy_seconds(), _own_cpu()
    samples, opened, health_probes, route_probes, end = asyncio.run(
        _run(port, data, health, rate, duration, warmup, timeout_s, after_s))
    cpu = cpu_seconds(server_pid) - cpu0
    wall = time.monotonic() - wall0
    own = _own_cpu() - own0
    background = machine_busy_seconds() - busy0 - cpu - own
    gc.unfreeze()
    first = samples[0].due if samples else 0.0
    measured = [s for s in samples if s.due >= first + warmup]
    ok = [s for s in measured if s.status == 200]
    span = (max(s.done for s in measured) - min(s.due for s in measured)) if measured else float("nan")
    names = {TIMEOUT: "timeout", FAILED: "failed"}
    statuses = collections.Counter(names.get(s.status, str(s.status)) for s in measured)
    during = [lat * 1e3 for t, lat, st in health_probes if t < end]
    after = [lat * 1e3 for t, lat, st in health_probes if t >= end]
    requests = len(samples) + len(route_probes)
    return LoadResult(
        route=route, rate_target=rate, duration_s=duration, sent=len(measured),
        answered_rps=len(ok) / span if span else 0.0, statuses=dict(statuses),
        errors=len(measured) - len(ok), latency_ms=_stats([(s.done - s.due) * 1e3 for s in ok]),
        all_latency_ms=_stats([(s.done - s.due) * 1e3 for s in measured]),
        shed_latency_ms=_stats([(s.done - s.due) * 1e3 for s in measured if s.status == 503]),
        client_lag_ms=_stats([(s.sent - s.due) * 1e3 for s in measured]),
        healthz_during_ms=_stats(during), healthz_after_ms=_stats(after),
        healthz_failures=sum(st != 200 for _, _, st in health_probes),
        recovery_s=recovery_s(route_probes, end, HEALTHZ_TARGET_MS / 1e3), connections=opened,
        server_cpu_ms_per_request=cpu / requests * 1e3 if requests else float("nan"), server_cpu_share=cpu / wall,
        client_cpu_share=own / wall, background_cpu_share=max(0.0, background) / wall)


def _own_cpu() -> float:
    times = os.times()
    return times.user + times.system


# ---- profile ------------------------------------------------------------------------------------------------
def profile_load(port: int, data: bytes, rate: float, duration: float, pid: int,
                 out: Path) -> dict[str, list[tuple[str, float]]]:
    """Sample the server with py-spy (only the thread holding the GIL: the server's Python work) during a load
    run. Returns the busiest functions (inclusive share), the self time per package, and the hottest of our
    own functions."""
    py_spy = shutil.which("py-spy") or str(Path(sys.executable).with_name("py-spy"))
    if not Path(py_spy).exists():
        raise SystemExit("--profile needs py-spy: pip install py-spy")
    raw = out.with_suffix(".txt")
    spy = subprocess.Popen([py_spy, "record", "--pid", str(pid), "--duration", str(int(duration) + 1), "--rate",
                            "500", "--gil", "--format", "raw", "--output", str(raw), "--nonblocking"],
                           stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(1.0)
    asyncio.run(open_loop(port, data, rate, duration, 5.0))
    spy.wait(60)
    return summarize_profile(raw.read_text())


_PACKAGES = ("convtune", "sqlalchemy", "pydantic", "pydantic_core", "fastapi", "starlette", "uvicorn", "h11",
             "anyio", "asyncio", "json", "sqlite3", "threading", "logging")


def _package(frame: str) -> str:
    """``select (sqlalchemy/sql/selectable.py:123)`` -> ``sqlalchemy``."""
    where = frame.rpartition("(")[2]
    path = where.split(":")[0]
    head = path.split("/")[0]
    for name in _PACKAGES:
        if head == name or path.startswith(name + "."):
            return name
    return head.removesuffix(".py") or "?"


def _function(frame: str) -> str:
    """``tune (convtune/api/handlers.py:58)`` -> ``tune (convtune/api/handlers.py)``: one entry per function."""
    name, _, where = frame.rpartition(" (")
    return f"{name} ({where.split(':')[0].rstrip(')')})" if name else frame


def summarize_profile(text: str) -> dict[str, list[tuple[str, float]]]:
    inclusive: collections.Counter[str] = collections.Counter()
    own: collections.Counter[str] = collections.Counter()
    packages: collections.Counter[str] = collections.Counter()
    total = 0
    for line in text.splitlines():
        stack, _, count = line.rpartition(" ")
        if not stack or not count.isdigit():
            continue
        n = int(count)
        frames = stack.split(";")
        total += n
        functions = {_function(f) for f in frames}
        for function in functions:
            inclusive[function] += n
            if "convtune/" in function:
                own[function] += n
        packages[_package(frames[-1])] += n
    if not total:
        return {}
    share = {k: v / total for k, v in inclusive.items()}
    return {"busiest": [(f, share[f]) for f, _ in inclusive.most_common(80)],
            "self_by_package": [(p, n / total) for p, n in packages.most_common(12)],
            "convtune": [(f, n / total) for f, n in own.most_common(15)]}


# ---- report
def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "cpus": str(os.cpu_count())}
    for name in ("fastapi", "starlette", "uvicorn", "pydantic", "sqlalchemy", "uvloop", "httptools"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


# ---- report -------------------------------------------------------------------------------------------------
def _f(value: float | None, fmt: str = "{:.2f}") -> str:
    return "—" if value is None or value != value else fmt.format(value)


def markdown(results: list[LoadResult], best: dict[str, Any], env: dict[str, str], command: str,
             profile: dict[str, list[tuple[str, float]]] | None, settings: dict[str, Any]) -> str:
    lines = [
        "# API under load: `POST /v1/tune` (tuned shape) and `GET /v1/configs/best`",
        "",
        f"`{command}` — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {env['cpus']} CPUs, Python {env['python']}, "
        f"FastAPI {env['fastapi']}, Starlette {env['starlette']}, uvicorn {env['uvicorn']} (uvloop {env['uvloop']}, "
        f"httptools {env['httptools']}), SQLAlchemy {env['sqlalchemy']}, SQLite.",
        "",
        f"One `convtune serve` process on loopback with its default limits ({settings}); the shape "
        f"`{best['problem']}` tuned by replay ({best['trials']} trials, best {best['time_ms']:.4g} ms). Open-loop "
        "load from this process on the same 2-core machine: request *i* is due at t0 + i/rate, its latency runs "
        "from the due time to the end of the answer, every request times out after "
        f"{TIMEOUT_S:g} s. `/healthz` is asked every 50 ms during the load and 10 s "
        "after; the route every 100 ms after it (recovery: until every answer is a 200 within 100 ms).",
        "",
        "| route | target req/s | requests | answered req/s | 200 | 503 (shed) | other / timeout | p50 ms | p99 ms "
        "| p99.9 ms | max ms | shed p99 ms | /healthz max ms (during / after) | recovery s | server CPU ms/req "
        "| met |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in results:
        other = r.sent - r.statuses.get("200", 0) - r.statuses.get("503", 0)
        lat = r.all_latency_ms
        lines.append(
            f"| {r.route} | {r.rate_target:g} | {r.sent} | {r.answered_rps:.0f} | {r.statuses.get('200', 0)} | "
            f"{r.statuses.get('503', 0)} | {other} | {_f(lat.get('p50'))} | {_f(lat.get('p99'))} | "
            f"{_f(lat.get('p99.9'))} | {_f(lat.get('max'))} | {_f(r.shed_latency_ms.get('p99'))} | "
            f"{_f(r.healthz_during_ms.get('max'), '{:.1f}')} / {_f(r.healthz_after_ms.get('max'), '{:.1f}')} | "
            f"{_f(r.recovery_s)} | {r.server_cpu_ms_per_request:.2f} | {'met' if r.met else '**missed**'} |")
    lines += [
        "",
        "Targets: at ≤ 500 req/s 0 errors and p99 < 20 ms; above, only 503 sheds (p99 < 100 ms); `/healthz` always "
        "within 100 ms and never failing; recovery within 5 s of the load's end.",
        "",
        "- statuses per run: " + "; ".join(f"{r.route} {r.rate_target:g}: "
                                            + ", ".join(f"{k} {v}" for k, v in sorted(r.statuses.items()))
                                            for r in results),
        "- client lateness (send − due, part of the latency), p99 per run: "
        + ", ".join(_f(r.client_lag_ms.get("p99")) for r in results) + " ms",
        "- CPU during each run (share of one core): server " + ", ".join(f"{r.server_cpu_share:.0%}" for r in results)
        + "; this client " + ", ".join(f"{r.client_cpu_share:.0%}" for r in results)
        + "; **other processes** " + ", ".join(f"{r.background_cpu_share:.0%}" for r in results),
    ]
    if profile:
        lines += ["", "## Where the server's time goes", "",
                  "py-spy on the server during one more run (`--profile`), the thread that holds the GIL.", "",
                  "| self time in | share |", "|---|---|"]
        lines += [f"| {name} | {share:.0%} |" for name, share in profile.get("self_by_package", [])]
        lines += ["", "| convtune function (inclusive) | share |", "|---|---|"]
        lines += [f"| `{frame}` | {share:.0%} |" for frame, share in profile.get("convtune", []) if share >= 0.01]
    return "\n".join(lines) + "\n"


def start_serve(url: str, port: int, log: Path, extra_env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
    """``convtune serve`` (no worker: the load is on the answers) on ``url``, as a user starts it."""
    env = dict(os.environ, CONVTUNE_DATABASE_URL=url, **(extra_env or {}))
    cmd = [sys.executable, "-m", "convtune.cli", "serve", "--backend", "replay", "--replay", str(REPLAY),
           "--no-worker", "--host", "127.0.0.1", "--port", str(port), "--log-level", "warning"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start within 60 s")


def main(argv: list[str] | None = None) -> int:
    global TIMEOUT_S
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rates", default="200,500,1000", help="requests per second, comma-separated")
    parser.add_argument("--routes", default="tune,best", help="tune (POST /v1/tune), best (GET /v1/configs/best)")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds per run (default 20)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring (default 3)")
    parser.add_argument("--timeout", type=float, default=2.0, help="seconds a request may take (default 2)")
    parser.add_argument("--after", type=float, default=10.0, help="seconds of probes after each run (default 10)")
    parser.add_argument("--shape", default=DEFAULT_SHAPE, help=f"the tuned shape (default {DEFAULT_SHAPE!r})")
    parser.add_argument("--quiet-wait", type=float, default=120.0,
                        help="before each run, wait up to this many seconds for the rest of the machine to be idle "
                             "(< 25%% of a core for 3 s; default 120)")
    parser.add_argument("--server-env", action="append", default=[], metavar="NAME=VALUE",
                        help="a setting of the server, e.g. CONVTUNE_ANSWER_CACHE_S=0 (repeatable)")
    parser.add_argument("--profile", action="store_true", help="also sample the server with py-spy (POST, 500/s)")
    parser.add_argument("--out", type=Path, default=RESULTS / "api_load", help="output path without suffix")
    args = parser.parse_args(argv)
    TIMEOUT_S = args.timeout
    rates = [float(r) for r in args.rates.split(",") if r]
    routes = [r for r in args.routes.split(",") if r]
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # a terminated benchmark still stops its server

    command = "python benchmarks/api_load.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    with tempfile.TemporaryDirectory(prefix="convtune-load-") as tmp:
        url, key, best = prepare_database(Path(tmp), args.shape)
        port = free_port()
        extra = dict(item.split("=", 1) for item in args.server_env)
        server = start_serve(url, port, Path(tmp) / "server.log", extra)
        try:
            from urllib.parse import quote

            requests = {"tune": http_post(port, "/v1/tune", json.dumps({"problem": {"key": best["problem"]}}).encode(),
                                          key),
                        "best": http_get(port, "/v1/configs/best?problem=" + quote(best["problem"]))}
            health = http_get(port, "/healthz")
            for route in routes:
                status, body = asyncio.run(_one(port, requests[route]))
                if status != 200:
                    raise SystemExit(f"{route} answered {status}: {body[:500]!r}")
            results = []
            for route in routes:
                for rate in rates:
                    waited = wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else 0.0
                    if waited > 5:
                        print(f"waited {waited:.0f} s for other work on the machine to stop", flush=True)
                    r = run_load(route, port, requests[route], health, rate, args.duration, args.warmup, args.timeout,
                                 args.after, server.pid)
                    results.append(r)
                    print(f"{route} {rate:g}/s: answered {r.answered_rps:.0f}/s, p99 {_f(r.all_latency_ms.get('p99'))} "
                          f"ms, statuses {r.statuses}, /healthz max {_f(r.healthz_during_ms.get('max'))} / "
                          f"{_f(r.healthz_after_ms.get('max'))} ms, recovery {_f(r.recovery_s)} s, "
                          f"{'met' if r.met else 'MISSED'}", flush=True)
            profile = (profile_load(port, requests["tune"], 500.0, min(args.duration, 10.0), server.pid,
                                    Path(tmp) / "profile") if args.profile else None)
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        from convtune.api.settings import Settings

        defaults = Settings(database_url="sqlite://")
        limits = {name: getattr(defaults, name) for name in ("max_concurrent", "max_in_flight", "max_waiting",
                                                             "queue_timeout_s", "answer_cache_s", "key_cache_s")}
        limits |= {k.removeprefix("CONVTUNE_").lower(): v for k, v in extra.items()}
        env = versions()
        text = markdown(results, best, env, command, profile, limits)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(
            {"command": command, "environment": env, "best": best, "limits": limits,
             "runs": [asdict(r) | {"met": r.met} for r in results], "profile": profile}, indent=1) + "\n")
        print(text)
        return 0 if all(r.met for r in results) else 1


async def _one(port: int, data: bytes) -> tuple[int, bytes]:
    conn = await Connection.open(port)
    try:
        return await conn.request(data)
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
