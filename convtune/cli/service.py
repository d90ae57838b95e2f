"""``convtune serve | submit | jobs | cancel | batch``: run the service, and talk to a running one.

``serve`` runs the API (uvicorn) on a SQLite file by default, with one in-process worker when a GPU is
present or with ``--backend model`` (no GPU: results flagged predicted). The client commands send HTTP
requests with the standard library (no extra dependency) to ``--url`` (default ``$CONVTUNE_URL``, else
http://127.0.0.1:8000) with ``--key`` (default ``$CONVTUNE_API_KEY``).

Exit status: 0 done; 2 bad input, checked here or answered 4xx by the server (one line on stderr, the
server's JSON detail included); 1 the server failed (5xx) or could not be reached, or a waited-for job failed.

``submit --wait S`` and ``batch --wait S`` / ``--watch`` poll the jobs (``GET /v1/jobs/{id}``,
``GET /v1/batches/{id}``) every ``--poll-s`` and show jobs done / total and each running job's trials on
stderr (tqdm, only on a terminal; ``--quiet`` / ``--no-progress`` turn it off).
"""

from __future__ import annotations

import argparse
import contextlib
import gc
import json
import os
import re
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from convtune.cli._common import PROBLEM_HELP, CliError, emit, read_json
from convtune.errors import InvalidInput
from convtune.problem import ITEMSIZE_BYTES, MATH_MODES, ConvProblem
from convtune.vocabulary import BACKENDS
from convtune.vocabulary import FINAL_JOB_STATUSES as FINAL_STATUSES
from convtune.vocabulary import JOB_STATUSES as JOB_STATUSES

DEFAULT_URL = "http://127.0.0.1:8000"
URL_ENV = "CONVTUNE_URL"
KEY_ENV = "CONVTUNE_API_KEY"
WINDOW_RE = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]-([01][0-9]|2[0-3]):[0-5][0-9]$")
PRESETS = ("resnet18", "resnet50", "vgg16", "mobilenet_v2", "convnext_tiny", "s4convd")
EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2



# ---- parsers ---------------------------------------------------------------------------------------------
def add_service_parsers(sub: Any) -> None:
    """Register ``serve``, ``submit``, ``jobs``, ``cancel`` and ``batch`` (by :func:`convtune.cli.build_parser`)."""
    p = sub.add_parser("serve", help="run the HTTP API (and one worker when a GPU is present)",
                       epilog="example: convtune serve --backend model   (a demo without a GPU)")
    p.add_argument("--host", default="127.0.0.1")
    p.add_argument("--port", type=int, default=8000)
    p.add_argument("--db", metavar="URL", default=None,
                   help="database URL (default: $CONVTUNE_DATABASE_URL, else a per-user SQLite file)")
    p.add_argument("--backend", choices=BACKENDS, default=None,
                   help="what tuning jobs measure with (default: $CONVTUNE_BACKEND, else gpu); model: the analytic "
                        "model, for demos without a GPU (results flagged predicted)")
    p.add_argument("--replay", metavar="FILE", default=None, help="timing table for --backend replay")
    p.add_argument("--no-worker", action="store_true", help="do not run a worker inside the server")
    p.add_argument("--heartbeat-s", type=float, default=None, metavar="S",
                   help="the in-process worker's heartbeat interval (default: $CONVTUNE_WORKER_HEARTBEAT_S, else 10)")
    p.add_argument("--stale-after-s", type=float, default=None, metavar="S",
                   help="claim a running job again when its heartbeat is this old (default: "
                        "$CONVTUNE_WORKER_STALE_AFTER_S, else 120); a restarted server resumes its own job at once")
    p.add_argument("--graceful-s", type=float, default=5.0, metavar="S",
                   help="on SIGTERM, close connections still open after S seconds (waiting requests answer at "
                        "once; default 5)")
    p.add_argument("--log-level", default="info", choices=("critical", "error", "warning", "info", "debug"))
    p.set_defaults(func=cmd_serve)

    p = sub.add_parser("submit", help="ask a running server for the best config of a convolution (tunes if unseen)",
                       epilog="example: convtune submit N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 --wait 60")
    p.add_argument("problem", nargs="+", metavar="FIELD=VALUE", help=PROBLEM_HELP)
    p.add_argument("--wait", type=float, default=0.0, metavar="S", help="wait up to S seconds for the tuning job")
    p.add_argument("--device", default=None, help="machine preset or device name (default: any)")
    p.add_argument("--dtype", default=None, choices=tuple(ITEMSIZE_BYTES), help="overrides the problem's dtype")
    p.add_argument("--math", default=None, choices=MATH_MODES,
                   help="overrides the problem's math: ieee (strict fp32) or tf32 (TF32 tensor cores; float32 only)")
    p.add_argument("--poll-s", type=float, default=2.0, metavar="S",
                   help="with --wait on a terminal: how often the job's progress is read (default 2)")
    _client_args(p)
    p.set_defaults(func=cmd_submit)

    p = sub.add_parser("jobs", help="list your jobs on a running server, newest first (an admin key: everyone's)")
    p.add_argument("--status", choices=JOB_STATUSES, default=None)
    p.add_argument("--batch", type=int, default=None, metavar="ID", help="only the jobs of this batch")
    p.add_argument("--limit", type=int, default=50)
    _client_args(p)
    p.set_defaults(func=cmd_jobs)

    p = sub.add_parser("cancel", help="cancel jobs (or every job of a batch) on a running server",
                       epilog="examples: convtune cancel 12 13   ·   convtune cancel --batch 4")
    p.add_argument("job_ids", nargs="*", type=int, metavar="JOB_ID")
    p.add_argument("--batch", type=int, default=None, metavar="ID", help="cancel every job of this batch")
    _client_args(p)
    p.set_defaults(func=cmd_cancel)

    p = sub.add_parser("batch", help="queue one tuning job per problem of a file or per layer of a network",
                       epilog="example: convtune batch --preset resnet18 --window 22:00-06:00")
    p.add_argument("file", nargs="?", metavar="FILE",
                   help="a suite JSON file (benchmarks/suites/public.json format) or a JSON list of problems")
    p.add_argument("--preset", choices=PRESETS, default=None)
    p.add_argument("--batch-size", type=int, default=None, metavar="N", help="N of a preset's layers (default 1)")
    p.add_argument("--window", default=None, metavar="HH:MM-HH:MM",
                   help="run only inside this daily window, e.g. 22:00-06:00 (read in --tz, default the server's zone)")
    p.add_argument("--tz", default=None, metavar="ZONE",
                   help="IANA time zone of --window and of a --not-before without offset, e.g. Europe/Berlin "
                        "(default: the server's zone for the window, this machine's for --not-before)")
    p.add_argument("--not-before", default=None, metavar="ISO",
                   help="start no earlier (ISO 8601; without an offset it is read in --tz, else in this machine's "
                        "zone, and the zone used is printed)")
    p.add_argument("--name", default=None)
    p.add_argument("--budget-trials", type=int, default=None)
    p.add_argument("--budget-s", type=float, default=None,
                   help="seconds of search per job, after its pruning (the warm start is always measured)")
    waiting = p.add_mutually_exclusive_group()
    waiting.add_argument("--wait", type=float, default=None, metavar="S",
                         help="wait up to S seconds for every job to end, showing progress")
    waiting.add_argument("--watch", action="store_true", help="wait until every job ended, showing progress")
    p.add_argument("--poll-s", type=float, default=2.0, metavar="S",
                   help="with --wait/--watch: how often the jobs are read (default 2)")
    _client_args(p)
    p.set_defaults(func=cmd_batch)


def _client_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--url", default=None, help=f"server URL (default: ${URL_ENV}, else {DEFAULT_URL})")
    p.add_argument("--key", default=None, help=f"API key (default: ${KEY_ENV})")
    p.add_argument("--timeout", type=float, default=30.0, help="seconds to wait for an answer (plus --wait)")
    p.add_argument("--json", action="store_true", help="print the server's JSON answer")


# ---- serve -----------------------------------------------------------------------------------------------
def cuda_device_count() -> int:
    """CUDA devices CuPy sees; 0 without CuPy, a driver or a device."""
    try:
        import cupy

        return int(cupy.cuda.runtime.getDeviceCount())
    except Exception:  # ImportError, CUDARuntimeError, a missing driver library, ...
        return 0


def serve_settings(args: argparse.Namespace) -> Any:
    """The :class:`~convtune.api.settings.Settings` of ``convtune serve`` (the environment, then the flags)."""
    from convtune.api.settings import Settings

    overrides: dict[str, Any] = {}
    if args.db:
        overrides["database_url"] = args.db
    if args.backend:
        overrides["backend"] = args.backend
    if args.replay:
        overrides["replay_path"] = args.replay
    for flag, name in (("heartbeat_s", "worker_heartbeat_s"), ("stale_after_s", "worker_stale_after_s")):
        value = getattr(args, flag, None)
        if value is not None:
            if not value > 0:
                raise InvalidInput(f"--{flag.replace('_', '-')}", f"{value:g} must be > 0")
            overrides[name] = value
    try:
        settings = Settings(**overrides)
    except ValueError as exc:  # pydantic's ValidationError: one line naming the setting
        raise InvalidInput("settings", " ".join(str(exc).split())) from None
    if settings.backend == "replay" and not settings.replay_path:
        raise InvalidInput("--replay", "required with --backend replay (a timing table .json[.gz])")
    if not 0 < args.port < 65536:
        raise InvalidInput("--port", f"{args.port} must be in 1..65535")
    if args.no_worker:
        in_process = False
    elif settings.backend != "gpu":
        in_process = True
    else:
        in_process = cuda_device_count() > 0
        if not in_process:
            emit("convtune serve: no GPU here: no worker in this process; jobs wait for `convtune worker` on a GPU "
                  "host (or use --backend model for a demo)", err=True)
    return settings.model_copy(update={"worker_in_process": in_process})


def check_database(url: str) -> None:
    """Connect once before uvicorn starts: a malformed or unreachable ``--db`` is then the CLI's one-line error
    (exit 2 or 1), not a traceback from the app's start-up inside uvicorn."""
    from convtune.storage.session import make_engine

    engine = make_engine(url)
    try:
        with engine.connect():
            pass
    finally:
        engine.dispose()


def cmd_serve(args: argparse.Namespace) -> int:
    import uvicorn

    from convtune.api.main import create_app
    from convtune.api.shutdown import signal_shutdown

    settings = serve_settings(args)
    if not args.graceful_s > 0:
        raise InvalidInput("--graceful-s", f"{args.graceful_s:g} must be > 0")
    check_database(settings.database_url)
    app = create_app(settings)

    class Server(uvicorn.Server):
        """uvicorn, told at the signal (not after the connections drained) that the app is stopping: waiting
        requests answer with their job at once and the in-process worker stops after its trial."""

        def handle_exit(self, sig: int, frame: Any) -> None:
            signal_shutdown(app)
            worker = getattr(app.state, "worker", None)
            if worker is not None:
                worker.stop()
            super().handle_exit(sig, frame)

        @contextlib.contextmanager
        def capture_signals(self) -> Iterator[None]:
            # uvicorn raises the signal again once it has shut down; a graceful stop exits 0 instead, as
            # `convtune worker` does
            with super().capture_signals():
                yield
                self._captured_signals.clear()

    emit(f"convtune serve: http://{args.host}:{args.port} (backend {settings.backend}, "
          f"{'one worker in process' if settings.worker_in_process else 'no worker in process'})", err=True)
    # the event loop needs the GIL for microseconds at a time; with the default 5 ms switch interval it waits
    # behind every busy database thread, which is what a probe of /healthz would see under load
    sys.setswitchinterval(0.0005)
    # everything imported so far lives as long as the process: out of the collector's sight, so that a full
    # collection under load walks the requests' objects only (it stalled the loop for 100+ ms without this)
    gc.collect()
    gc.freeze()
    config = uvicorn.Config(app, host=args.host, port=args.port, log_level=args.log_level,
                            timeout_graceful_shutdown=args.graceful_s)
    Server(config).run()
    return EXIT_OK


# ---- HTTP ------------------------------------------------------------------------------------------------
class ServerAnswer(Exception):
    """An error answer (4xx/5xx) or no answer at all; ``exit_status`` says which."""

    def __init__(self, message: str, exit_status: int) -> None:
        super().__init__(message)
        self.exit_status = exit_status


def request(args: argparse.Namespace, method: str, path: str, *, body: Any = None,
            query: dict[str, Any] | None = None, extra_timeout: float = 0.0) -> tuple[int, Any]:
    """(status, JSON answer) of one request to the server named by ``--url``; raises :class:`ServerAnswer`."""
    base = (args.url or os.environ.get(URL_ENV) or DEFAULT_URL).rstrip("/")
    if not base.startswith(("http://", "https://")):
        raise InvalidInput("--url", f"{base!r} must start with http:// or https://")
    params = {k: v for k, v in (query or {}).items() if v is not None}
    url = base + path + ("?" + urllib.parse.urlencode(params) if params else "")
    headers = {"Accept": "application/json"}
    key = args.key or os.environ.get(KEY_ENV)
    if key:
        headers["X-API-Key"] = key
    data = None
    if body is not None:
        data = json.dumps(body).encode()
        headers["Content-Type"] = "application/json"
    req = urllib.request.Request(url, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=args.timeout + extra_timeout) as resp:
            raw = resp.read()
            return resp.status, json.loads(raw) if raw else None
    except urllib.error.HTTPError as exc:
        raw = exc.read()
        try:
            detail = json.dumps(json.loads(raw))
        except ValueError:
            detail = raw.decode("utf-8", "replace").strip() or exc.reason
        raise ServerAnswer(f"HTTP {exc.code} from {method} {path}: {detail}",
                           EXIT_USAGE if 400 <= exc.code < 500 else EXIT_FAILED) from None
    except (urllib.error.URLError, TimeoutError, ConnectionError) as exc:
        reason = getattr(exc, "reason", exc)
        raise ServerAnswer(f"cannot reach {base}: {reason}", EXIT_FAILED) from None


def _run(func: Any, args: argparse.Namespace) -> int:
    try:
        return int(func(args))
    except ServerAnswer as exc:
        emit("convtune: error: " + " ".join(str(exc).split()), err=True)
        return exc.exit_status


# ---- submit ----------------------------------------------------------------------------------------------
def cmd_submit(args: argparse.Namespace) -> int:
    problem = ConvProblem.parse(" ".join(args.problem))
    overrides = {name: value for name, value in (("dtype", args.dtype), ("math", args.math)) if value}
    if overrides:
        problem = problem.replace(**overrides)  # one replace: --dtype float16 --math ieee of a tf32 key is valid
    if not 0 <= args.wait <= 600:
        raise InvalidInput("--wait", f"{args.wait:g} must be in 0..600 seconds")
    body: dict[str, Any] = {"problem": {"key": problem.key()}}
    if args.device:
        body["device"] = args.device
    return _run(lambda a: _submit(a, body), args)


def _submit(args: argparse.Namespace, body: dict[str, Any]) -> int:
    from convtune.cli.progress import JobsProgress, progress_enabled

    if args.wait and progress_enabled(args):
        # poll the job instead of one long request, so its trials can be shown while it runs
        status, answer = request(args, "POST", "/v1/tune", body=body)
        job = answer.get("job") if status == 202 else None
        if job:
            bar = JobsProgress(True, 1, desc=f"job {job['id']}")
            jobs = wait_for_jobs(lambda: [request(args, "GET", f"/v1/jobs/{job['id']}")[1]], bar, args.wait,
                                 args.poll_s)
            bar.close()
            if jobs[0]["status"] == "finished":  # the stored best now answers
                status, answer = request(args, "POST", "/v1/tune", body=body)
            else:
                answer = {**answer, "job": jobs[0]}
    else:
        status, answer = request(args, "POST", "/v1/tune", body=body, query={"wait": args.wait or None},
                                 extra_timeout=args.wait)
    if args.json:
        emit(json.dumps(answer, indent=1))
        return EXIT_OK
    emit(format_tune(status, answer))
    return EXIT_OK


def format_tune(status: int, a: dict[str, Any]) -> str:
    """The human-readable form of a POST /v1/tune answer."""
    lines = [f"problem   {a['problem']['key']} (id {a['problem']['id']})"]
    job = a.get("job")
    if status == 200:
        kind = "PREDICTED by the model (model backend)" if a.get("predicted") else "measured"
        lines.append(f"result    {kind} on {a.get('device')}, run {a.get('run_id')}")
    else:
        target = f" for {a['device']}" if a.get("device") else ""
        lines.append(f"result    PROVISIONAL: predicted by the analytic model{target}")
    if job:
        lines.append(f"job       {job['id']} {job['status']} ({job['trials_done']}/{job['budget_trials']} trials)")
    config = a.get("config")
    lines.append(f"config    {config['key'] if config else '—'}")
    if a.get("time_ms"):
        lines.append(f"time      {a['time_ms']:.4f} ms  {a['tflops'] or 0:.2f} TFLOP/s  {a['gbps'] or 0:.0f} GB/s")
    if a.get("floor_ms"):
        eff = f"{a['efficiency']:.2f}" if a.get("efficiency") is not None else "—"
        lines.append(f"bound     floor {a['floor_ms']:.4f} ms  efficiency {eff}")
    if a.get("note") and status != 200:
        lines.append(f"note      {a['note']}")
    return "\n".join(lines)


# ---- jobs ------------------------------------------------------------------------------------------------
def cmd_jobs(args: argparse.Namespace) -> int:
    if not 1 <= args.limit <= 1000:
        raise InvalidInput("--limit", f"{args.limit} must be in 1..1000")
    return _run(_jobs, args)


def _jobs(args: argparse.Namespace) -> int:
    _, jobs = request(args, "GET", "/v1/jobs", query={"status": args.status, "batch_id": args.batch,
                                                      "limit": args.limit})
    if args.json:
        emit(json.dumps(jobs, indent=1))
        return EXIT_OK
    emit(format_jobs(jobs))
    return EXIT_OK


def _schedule(j: dict[str, Any]) -> str:
    """When a job may run: its window (and zone) and not-before; for a queued job whether it may start now; for
    an ended one why it stopped."""
    parts = []
    if j.get("window"):
        parts.append(f"{j['window']} {j.get('timezone') or 'UTC'}")
    if j.get("not_before"):
        parts.append(f"after {j['not_before'][:16].replace('T', ' ')}Z")
    if j["status"] == "queued":
        parts.append("starts now" if j.get("eligible") else "waits")
    if j.get("stop_reason"):  # an ended job: why it stopped (budget_s, budget_trials, exhausted, ...)
        parts.append(f"stop: {j['stop_reason']}")
    return ", ".join(parts) or "—"


def format_jobs(jobs: list[dict[str, Any]]) -> str:
    header = (f"{'id':>5}  {'status':9}  {'trials':>11}  {'best ms':>9}  {'eff':>5}  {'batch':>5}  "
              f"{'schedule':28}  problem")
    lines = [header]
    for j in jobs:
        best = f"{j['best_time_ms']:.4f}" if j.get("best_time_ms") else "—"
        eff = f"{j['efficiency']:.2f}" if j.get("efficiency") is not None else "—"
        status = j["status"] + ("*" if j.get("cancel_requested") and j["status"] == "running" else "")
        trials = f"{j['trials_done']}/{j['budget_trials']}"
        lines.append(f"{j['id']:>5}  {status:9}  {trials:>11}  {best:>9}  {eff:>5}  {j.get('batch_id') or '':>5}  "
                     f"{_schedule(j):28}  {j['problem']['key']}")
    if not jobs:
        lines.append("(no jobs)")
    return "\n".join(lines)


# ---- cancel ----------------------------------------------------------------------------------------------
def cmd_cancel(args: argparse.Namespace) -> int:
    if bool(args.job_ids) == (args.batch is not None):
        raise InvalidInput("JOB_ID", "give job ids or --batch ID (not both)")
    for value in [*args.job_ids, *([args.batch] if args.batch is not None else [])]:
        if not 1 <= value <= 2**31 - 1:
            raise InvalidInput("JOB_ID" if args.batch is None else "--batch", f"{value} is not an id (1..2^31-1)")
    return _run(_cancel, args)


def _cancel(args: argparse.Namespace) -> int:
    if args.batch is not None:
        _, batch = request(args, "DELETE", f"/v1/batches/{args.batch}")
        emit(json.dumps(batch, indent=1) if args.json else
              f"batch {batch['id']}: {batch['status']} ({', '.join(f'{k} {v}' for k, v in batch['counts'].items())})")
        return EXIT_OK
    for job_id in args.job_ids:
        _, job = request(args, "DELETE", f"/v1/jobs/{job_id}")
        emit(json.dumps(job, indent=1) if args.json else
              f"job {job['id']}: {job['status']}" + (" (stops after its current trial)"
                                                      if job["status"] == "running" else ""))
    return EXIT_OK


# ---- batch -----------------------------------------------------------------------------------------------
def batch_body(args: argparse.Namespace) -> dict[str, Any]:
    """The POST /v1/batches body of ``convtune batch``; :class:`InvalidInput` names a bad option."""
    if bool(args.file) == bool(args.preset):
        raise InvalidInput("FILE", "give either a FILE or --preset NAME")
    body: dict[str, Any] = {}
    if args.preset:
        body["preset"] = args.preset
        if args.batch_size is not None:
            body["batch_size"] = args.batch_size
    else:
        if args.batch_size is not None:
            raise InvalidInput("--batch-size", "applies to --preset only")
        body["problems"] = [{"key": p.key()} for p in load_problems(args.file)]
    if args.window is not None:
        if not WINDOW_RE.match(args.window):
            raise InvalidInput("--window", f"{args.window!r} must be HH:MM-HH:MM, e.g. 22:00-06:00")
        body["window"] = args.window
    zone = None
    if args.tz is not None:
        try:
            zone = ZoneInfo(args.tz)
        except (ZoneInfoNotFoundError, ValueError):
            raise InvalidInput("--tz", f"{args.tz!r} is not an IANA time zone, e.g. Europe/Berlin or UTC") from None
        body["timezone"] = args.tz
    if args.not_before is not None:
        try:
            when = datetime.fromisoformat(args.not_before)
        except ValueError:
            raise InvalidInput("--not-before", f"{args.not_before!r} is not an ISO 8601 time, e.g. "
                                               "2026-12-01T22:00:00+01:00") from None
        if when.tzinfo is None:  # say which zone a time without offset was read in
            when = when.replace(tzinfo=zone) if zone is not None else when.astimezone()
            where = args.tz if zone is not None else "this machine's time zone"
            emit(f"convtune batch: --not-before without an offset read in {where}: {when.isoformat()}", err=True)
        body["not_before"] = when.isoformat()
    for name, value in (("name", args.name), ("budget_trials", args.budget_trials), ("budget_s", args.budget_s)):
        if value is not None:
            body[name] = value
    return body


def load_problems(path: str) -> list[ConvProblem]:
    """The problems of a suite file (``benchmarks/suites/public.json`` format) or of a JSON list of problem
    keys / field objects."""
    from convtune.cli.bounds import suite_entries

    try:
        data = read_json(path, "FILE")
        if isinstance(data, dict):
            return [problem for _, _, problem in suite_entries(data, path)]
    except CliError as exc:
        raise InvalidInput("FILE", str(exc).removeprefix("FILE: ")) from None
    if not isinstance(data, list) or not data:
        raise InvalidInput("FILE", f"{path!r}: expected a suite object or a non-empty list of problems")
    problems = []
    for i, item in enumerate(data):
        if isinstance(item, str):
            problems.append(ConvProblem.parse(item))
        elif isinstance(item, dict):
            problems.append(ConvProblem.from_mapping(item))
        else:
            raise InvalidInput(f"FILE[{i}]", "must be a problem key (string) or an object of problem fields")
    return problems


def cmd_batch(args: argparse.Namespace) -> int:
    body = batch_body(args)
    if args.wait is not None and not args.wait > 0:
        raise InvalidInput("--wait", f"{args.wait:g} must be > 0 seconds")
    return _run(lambda a: _batch(a, body), args)


def wait_for_jobs(fetch: Callable[[], list[dict[str, Any]]], progress: Any, wait_s: float | None, poll_s: float,
                  *, sleep: Callable[[float], None] = time.sleep,
                  clock: Callable[[], float] = time.monotonic) -> list[dict[str, Any]]:
    """Poll ``fetch()`` (the jobs' JSON) every ``poll_s`` seconds until every job ended or ``wait_s`` seconds
    passed (``None``: no limit); each answer goes to ``progress.update``. Returns the last answer.
    ``sleep`` and ``clock`` (seconds) are injectable for tests."""
    if not poll_s > 0:
        raise InvalidInput("--poll-s", f"{poll_s:g} must be > 0")
    deadline = None if wait_s is None else clock() + wait_s
    while True:
        jobs = fetch()
        progress.update(jobs)
        if all(j["status"] in FINAL_STATUSES for j in jobs):
            return jobs
        now = clock()
        if deadline is not None and now >= deadline:
            return jobs
        sleep(poll_s if deadline is None else min(poll_s, deadline - now))


def _watch_batch(args: argparse.Namespace, batch: dict[str, Any]) -> tuple[dict[str, Any], int]:
    """``--wait`` / ``--watch``: the batch once its jobs ended (or the wait ran out), and the exit status."""
    from convtune.cli.progress import JobsProgress, progress_enabled

    bar = JobsProgress(progress_enabled(args), len(batch["jobs"]), desc=f"batch {batch['id']}")
    latest = batch

    def fetch() -> list[dict[str, Any]]:
        nonlocal latest
        latest = request(args, "GET", f"/v1/batches/{batch['id']}")[1]
        return list(latest["jobs"])

    jobs = wait_for_jobs(fetch, bar, None if args.watch else args.wait, args.poll_s)
    done = sum(j["status"] in FINAL_STATUSES for j in jobs)
    bar.close()
    if done < len(jobs):
        emit(f"convtune batch: {done}/{len(jobs)} jobs ended after {args.wait:g} s; the rest go on "
              f"(convtune jobs --batch {batch['id']})", err=True)
    failed = [j for j in jobs if j["status"] in ("failed", "cancelled")]
    return latest, EXIT_FAILED if failed else EXIT_OK


def _batch(args: argparse.Namespace, body: dict[str, Any]) -> int:
    _, batch = request(args, "POST", "/v1/batches", body=body)
    status = EXIT_OK
    if args.wait is not None or args.watch:
        batch, status = _watch_batch(args, batch)
    if args.json:
        emit(json.dumps(batch, indent=1))
        return status
    window = f", window {batch['window']} ({batch['timezone']})" if batch.get("window") else ""
    if batch.get("not_before"):
        window += f", not before {batch['not_before']}"
    emit(f"batch {batch['id']}{' ' + batch['name'] if batch.get('name') else ''}: {len(batch['jobs'])} jobs "
          f"{batch['status']}{window}")
    for s in batch.get("skipped", []):
        emit(f"skipped   {s['key']}: {s['reason']}")
    emit(format_jobs(batch["jobs"]))
    return status
