"""Lookup latency of the API under a bounded loopback load: ``POST /v1/tune`` for a shape that is tuned.

1. A SQLite database in a temporary folder is brought to head and one shape is tuned by replaying the H200
   timings (``tests/data/replay_h200_vs_cudnn.json.gz``); an API key is created.
2. The server runs as it would in production: one uvicorn process (``convtune.api.main:create_app``,
   ``--factory``) on a free loopback port, access log off.
3. This process drives ``POST /v1/tune`` for the tuned shape at a fixed rate (default 200 requests/s for
   20 s after a 3 s warm-up) over keep-alive HTTP/1.1 connections, **open loop**: request *i* is due at
   ``t0 + i / rate`` whether or not earlier answers have come back (a connection is borrowed from the idle
   pool, or a new one is opened), and its latency is measured from that due time to the end of the answer.
   A slow server therefore shows up as latency and is not hidden by the client waiting (no coordinated
   omission). The client's own lateness (send time - due time) is reported apart.
4. Reported: achieved requests/s, p50/p90/p99/p99.9/max latency, errors (any status but 200, or a failed
   connection), the server's CPU time per request, and an unloaded baseline (one connection, closed loop).
   Written to ``benchmarks/results/api_load.md`` and ``.json``. Target: p99 < 20 ms at 200 requests/s.

``--profile`` samples the server with py-spy during a second, identical load run (``pip install py-spy``) and
adds the functions that dominate its time to the report.

    python benchmarks/api_load.py                      # 200 req/s for 20 s
    python benchmarks/api_load.py --rate 400 --duration 10 --profile
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
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
REPLAY = ROOT / "tests" / "data" / "replay_h200_vs_cudnn.json.gz"
RESULTS = ROOT / "benchmarks" / "results"
DEFAULT_SHAPE = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1"
TARGET_P99_MS = 20.0


# ---- set-up: a tuned database, a key, the server -----------------------------------------------------------
def prepare_database(directory: Path, shape: str) -> tuple[str, str, dict[str, Any]]:
    """(database URL, API key secret, the stored best) after a replay tune of ``shape``."""
    from convtune.problem import ConvProblem
    from convtune.storage import make_engine, session_scope, upgrade
    from convtune.storage import repository as repo
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


def start_server(url: str, port: int, log: Path) -> subprocess.Popen[bytes]:
    env = dict(os.environ, CONVTUNE_DATABASE_URL=url, CONVTUNE_BACKEND="replay", CONVTUNE_WORKER_IN_PROCESS="false")
    cmd = [sys.executable, "-m", "uvicorn", "convtune.api.main:create_app", "--factory", "--host", "127.0.0.1",
           "--port", str(port), "--no-access-log", "--log-level", "warning"]
    with log.open("wb") as out:
        proc = subprocess.Popen(cmd, env=env, stdout=out, stderr=subprocess.STDOUT, cwd=ROOT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"the server exited ({proc.returncode}): {log.read_text()[-2000:]}")
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc
        except OSError:
            time.sleep(0.1)
    proc.kill()
    raise RuntimeError("the server did not start within 30 s")


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


# ---- a minimal keep-alive HTTP/1.1 client ------------------------------------------------------------------
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
        if "content-length" in headers:
            body = await self.reader.readexactly(int(headers["content-length"]))
        elif headers.get("transfer-encoding", "").lower() == "chunked":
            body = b""
            while True:
                size = int((await self.reader.readuntil(b"\r\n")).strip(), 16)
                body += await self.reader.readexactly(size + 2)
                if size == 0:
                    break
        else:
            body = b""
        if headers.get("connection", "").lower() == "close":
            self.close()
        return status, body

    def close(self) -> None:
        self.writer.close()


def http_request(port: int, path: str, body: bytes, key: str) -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\nContent-Type: application/json\r\n"
            f"X-API-Key: {key}\r\nContent-Length: {len(body)}\r\n\r\n").encode() + body


@dataclass
class Sample:
    due: float
    sent: float
    done: float
    status: int


async def open_loop(port: int, data: bytes, rate: float, total_s: float) -> tuple[list[Sample], int]:
    """Send ``rate * total_s`` requests, request i due at t0 + i / rate; (samples, connections opened)."""
    loop = asyncio.get_running_loop()
    # FIFO: every idle connection is used in turn, so none sits idle long enough for the server's keep-alive
    # timeout (uvicorn: 5 s) to close it under the client
    idle: collections.deque[Connection] = collections.deque([await Connection.open(port) for _ in range(8)])
    opened = len(idle)
    count = int(rate * total_s)
    samples: list[Sample | None] = [None] * count

    async def one(i: int, due: float) -> None:
        nonlocal opened
        sent = loop.time()
        conn: Connection | None = None
        try:
            while idle and idle[0].reader.at_eof():  # closed by the server: drop it
                idle.popleft().close()
            if idle:
                conn = idle.popleft()
            else:
                conn = await Connection.open(port)
                opened += 1
            status, _ = await conn.request(data)
            if not conn.writer.is_closing():
                idle.append(conn)
        except (OSError, asyncio.IncompleteReadError, ValueError):
            status = -1
            if conn is not None:
                conn.close()
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


async def closed_loop(port: int, data: bytes, count: int) -> list[float]:
    """One connection, one request at a time: the unloaded service time (ms)."""
    conn = await Connection.open(port)
    out = []
    for _ in range(count):
        start = time.perf_counter()
        status, _ = await conn.request(data)
        out.append((time.perf_counter() - start) * 1e3)
        if status != 200:
            raise RuntimeError(f"unloaded request answered {status}")
    conn.close()
    return out


# ---- statistics ---------------------------------------------------------------------------------------------
def pct(values: list[float], q: float) -> float:
    """The q-quantile (0..1) by the nearest-rank method."""
    if not values:
        return float("nan")
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, max(0, int(-(-q * len(ordered) // 1)) - 1))]


@dataclass
class LoadResult:
    rate_target: float
    duration_s: float
    warmup_s: float
    sent: int
    completed: int
    achieved_rps: float
    errors: int
    statuses: dict[str, int]
    latency_ms: dict[str, float]
    service_ms: dict[str, float]
    client_lag_ms: dict[str, float]
    connections: int
    server_cpu_s: float
    server_cpu_ms_per_request: float
    server_cpu_share: float
    client_cpu_share: float
    background_cpu_share: float
    unloaded_ms: dict[str, float] = field(default_factory=dict)


def summarize(values: list[float]) -> dict[str, float]:
    return {"p50": pct(values, 0.50), "p90": pct(values, 0.90), "p99": pct(values, 0.99),
            "p99.9": pct(values, 0.999), "max": max(values) if values else float("nan"),
            "mean": statistics.fmean(values) if values else float("nan")}


def run_load(port: int, data: bytes, rate: float, duration: float, warmup: float, server_pid: int) -> LoadResult:
    gc.collect()
    gc.freeze()
    cpu0, wall0, busy0, own0 = cpu_seconds(server_pid), time.monotonic(), machine_busy_seconds(), _own_cpu()
    samples, opened = asyncio.run(open_loop(port, data, rate, warmup + duration))
    cpu = cpu_seconds(server_pid) - cpu0
    wall = time.monotonic() - wall0
    own = _own_cpu() - own0
    background = machine_busy_seconds() - busy0 - cpu - own
    gc.unfreeze()
    first = samples[0].due if samples else 0.0
    measured = [s for s in samples if s.due >= first + warmup]
    ok = [s for s in measured if s.status == 200]
    span = (max(s.done for s in measured) - min(s.due for s in measured)) if measured else float("nan")
    statuses = collections.Counter(str(s.status) for s in measured)
    return LoadResult(
        rate_target=rate, duration_s=duration, warmup_s=warmup, sent=len(measured), completed=len(ok),
        achieved_rps=len(ok) / span if span else 0.0, errors=len(measured) - len(ok), statuses=dict(statuses),
        latency_ms=summarize([(s.done - s.due) * 1e3 for s in measured]),
        service_ms=summarize([(s.done - s.sent) * 1e3 for s in measured]),
        client_lag_ms=summarize([(s.sent - s.due) * 1e3 for s in measured]), connections=opened,
        server_cpu_s=cpu, server_cpu_ms_per_request=cpu / len(samples) * 1e3 if samples else float("nan"),
        server_cpu_share=cpu / wall, client_cpu_share=own / wall, background_cpu_share=max(0.0, background) / wall)


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
    asyncio.run(open_loop(port, data, rate, duration))
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
    """``tune (convtune/api/tuning.py:58)`` -> ``tune (convtune/api/tuning.py)``: one entry per function."""
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


# ---- report -------------------------------------------------------------------------------------------------
def versions() -> dict[str, str]:
    from importlib.metadata import PackageNotFoundError, version

    out = {"python": platform.python_version(), "cpus": str(os.cpu_count())}
    for name in ("fastapi", "starlette", "uvicorn", "pydantic", "sqlalchemy", "uvloop", "httptools"):
        try:
            out[name] = version(name)
        except PackageNotFoundError:
            out[name] = "not installed"
    return out


def markdown(results: list[LoadResult], best: dict[str, Any], env: dict[str, str], command: str,
             profile: dict[str, list[tuple[str, float]]] | None) -> str:
    first = results[0]
    lines = [
        "# API load: `POST /v1/tune` for a tuned shape",
        "",
        f"`{command}` — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC, {env['cpus']} CPUs, Python {env['python']}, "
        f"FastAPI {env['fastapi']}, Starlette {env['starlette']}, uvicorn {env['uvicorn']} (uvloop "
        f"{env['uvloop']}, httptools {env['httptools']}), SQLAlchemy {env['sqlalchemy']}, SQLite.",
        "",
        f"One uvicorn process on loopback; the shape `{best['problem']}` tuned by replay ({best['trials']} trials, "
        f"best {best['time_ms']:.4g} ms, efficiency {best['efficiency']:.1%}); every request is answered 200 "
        "with the stored best. Open-loop load from a separate process: request *i* is due at t0 + i/rate on "
        "keep-alive connections (a new one when none is idle) and its latency runs from the due time to the end "
        f"of the answer, so a slow server cannot hide behind a waiting client. The first {first.warmup_s:g} s of "
        f"each run are warm-up and not counted; {len(results)} runs in a row on the same server.",
        "",
        "| run | target req/s | duration | requests | achieved req/s | errors | p50 ms | p90 ms | p99 ms "
        "| p99.9 ms | max ms | p99 < 20 ms | other processes' CPU |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for i, r in enumerate(results, start=1):
        lat = r.latency_ms
        lines.append(f"| {i} | {r.rate_target:g} | {r.duration_s:g} s | {r.sent} | {r.achieved_rps:.1f} | "
                     f"{r.errors} | {lat['p50']:.2f} | {lat['p90']:.2f} | {lat['p99']:.2f} | {lat['p99.9']:.2f} | "
                     f"{lat['max']:.2f} | {'met' if _met(r) else '**missed**'} | {r.background_cpu_share:.0%} |")
    statuses: collections.Counter[str] = collections.Counter()
    for r in results:
        statuses.update(r.statuses)
    svc = [r.service_ms for r in results]
    lag = [r.client_lag_ms for r in results]
    cpu = statistics.fmean(r.server_cpu_ms_per_request for r in results)
    lines += [
        "",
        f"- statuses over all runs: {', '.join(f'{k}: {v}' for k, v in sorted(statuses.items()))}",
        "- service time (send to answer), per run: " + "; ".join(f"p50 {s['p50']:.2f} / p99 {s['p99']:.2f} ms"
                                                                 for s in svc),
        "- client lateness (send - due, part of the latency above), per run: "
        + "; ".join(f"p99 {x['p99']:.2f} / max {x['max']:.2f} ms" for x in lag),
        f"- server CPU: {cpu:.2f} ms per request ({', '.join(f'{r.server_cpu_share:.0%}' for r in results)} of "
        f"one core during the runs): one process saturates near {1e3 / cpu:.0f} req/s",
        "- client CPU (this process): " + ", ".join(f"{r.client_cpu_share:.0%}" for r in results)
        + " of one core; **other processes on the machine** during each run: "
        + ", ".join(f"{r.background_cpu_share:.0%}" for r in results)
        + f" of one core (of {os.cpu_count()}): a run that competed with other work shows it here",
    ]
    if first.unloaded_ms:
        u = first.unloaded_ms
        lines.append(f"- unloaded (one connection, closed loop): p50 {u['p50']:.2f} ms, p99 {u['p99']:.2f} ms, "
                     f"max {u['max']:.2f} ms")
    if profile:
        lines += ["", "## Where the server's time goes", "",
                  "py-spy on the server during one more run (`--profile`), sampling the thread that holds the GIL: "
                  "shares of the server's Python work.", "",
                  "| self time in | share |", "|---|---|"]
        notes = {"threading": "threading (thread-pool hand-offs: `Condition.notify` waking a worker thread)",
                 "sqlalchemy": "sqlalchemy (ORM: statement cache keys, row loading)",
                 "asyncio": "asyncio (event loop)", "selectors": "selectors (epoll)"}
        lines += [f"| {notes.get(name, name)} | {share:.0%} |" for name, share in profile.get("self_by_package", [])]
        lines += ["", "| convtune function (inclusive) | share |", "|---|---|"]
        lines += [f"| `{frame}` | {share:.0%} |" for frame, share in profile.get("convtune", []) if share >= 0.01]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--rate", type=float, default=200.0, help="requests per second (default 200)")
    parser.add_argument("--duration", type=float, default=20.0, help="measured seconds (default 20)")
    parser.add_argument("--warmup", type=float, default=3.0, help="seconds of load before measuring (default 3)")
    parser.add_argument("--shape", default=DEFAULT_SHAPE, help=f"the tuned shape (default {DEFAULT_SHAPE!r})")
    parser.add_argument("--runs", type=int, default=3, help="load runs in a row on the same server (default 3)")
    parser.add_argument("--quiet-wait", type=float, default=300.0,
                        help="before each run, wait up to this many seconds for the rest of the machine to be idle "
                             "(< 25%% of a core for 3 s; default 300)")
    parser.add_argument("--unloaded", type=int, default=300, help="closed-loop requests for the baseline")
    parser.add_argument("--profile", action="store_true", help="also sample the server with py-spy")
    parser.add_argument("--out", type=Path, default=RESULTS / "api_load", help="output path without suffix")
    args = parser.parse_args(argv)
    # a terminated benchmark still stops its server (the finally below)
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))

    command = "python benchmarks/api_load.py" + "".join(f" {a}" for a in (argv if argv is not None else sys.argv[1:]))
    with tempfile.TemporaryDirectory(prefix="convtune-load-") as tmp:
        url, key, best = prepare_database(Path(tmp), args.shape)
        port = free_port()
        server = start_server(url, port, Path(tmp) / "server.log")
        try:
            data = http_request(port, "/v1/tune", json.dumps({"problem": {"key": best["problem"]}}).encode(), key)
            first = asyncio.run(_one(port, data))
            if first[0] != 200:
                raise SystemExit(f"POST /v1/tune answered {first[0]}: {first[1][:500]!r}")
            answer = json.loads(first[1])
            print(f"POST /v1/tune -> 200: {json.dumps(answer)[:300]}")
            unloaded = summarize(asyncio.run(closed_loop(port, data, args.unloaded))) if args.unloaded else {}
            results = []
            for run in range(1, args.runs + 1):
                waited = wait_for_quiet(args.quiet_wait) if args.quiet_wait > 0 else 0.0
                if waited > 5:
                    print(f"run {run}: waited {waited:.0f} s for other work on the machine to stop", flush=True)
                results.append(run_load(port, data, args.rate, args.duration, args.warmup, server.pid))
                results[-1].unloaded_ms = unloaded
                r = results[-1]
                print(f"run {run}: p50 {r.latency_ms['p50']:.2f} ms, p99 {r.latency_ms['p99']:.2f} ms, "
                      f"{r.achieved_rps:.1f} req/s, {r.errors} errors, other processes "
                      f"{r.background_cpu_share:.0%} of a core", flush=True)
            if args.profile and args.quiet_wait > 0:
                wait_for_quiet(args.quiet_wait)
            profile = (profile_load(port, data, args.rate, min(args.duration, 10.0), server.pid,
                                    Path(tmp) / "profile")
                       if args.profile else None)
        finally:
            server.terminate()
            try:
                server.wait(15)
            except subprocess.TimeoutExpired:
                server.kill()
        env = versions()
        text = markdown(results, best, env, command, profile)
        args.out.parent.mkdir(parents=True, exist_ok=True)
        args.out.with_suffix(".md").write_text(text)
        args.out.with_suffix(".json").write_text(json.dumps(
            {"command": command, "environment": env, "best": best, "runs": [asdict(r) for r in results],
             "target_p99_ms": TARGET_P99_MS, "profile": profile}, indent=1) + "\n")
        print(text)
        return 0 if all(_met(r) for r in results) else 1


def _met(result: LoadResult) -> bool:
    return result.latency_ms["p99"] < TARGET_P99_MS and result.errors == 0


async def _one(port: int, data: bytes) -> tuple[int, bytes]:
    conn = await Connection.open(port)
    try:
        return await conn.request(data)
    finally:
        conn.close()


if __name__ == "__main__":
    sys.exit(main())
