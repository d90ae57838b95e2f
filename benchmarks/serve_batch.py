"""The service end to end on a GPU host: ``convtune serve`` + ``POST /v1/batches {"preset": ...}``.

Starts ``convtune serve`` (GPU backend, one in-process worker, a fresh SQLite file under --out), creates
an API key, posts a batch of a preset network with a window that is open now, waits until every job
has finished, then saves what a user browses: the batch, every job, the best configs, each problem's
detail, trials and report, and the two HTML pages. Prints a per-layer table and writes it as markdown.

    python benchmarks/serve_batch.py --preset resnet18 --budget-s 25 --out benchmarks/results/batch_resnet18
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def http(method: str, url: str, *, key: str | None = None, body: Any = None,
         timeout_s: float = 30.0) -> tuple[int, bytes]:
    """One request; (status, body bytes). Errors with an answer return their status too."""
    data = json.dumps(body).encode() if body is not None else None
    req = urllib.request.Request(url, data=data, method=method)
    if data is not None:
        req.add_header("Content-Type", "application/json")
    if key:
        req.add_header("X-API-Key", key)
    try:
        with urllib.request.urlopen(req, timeout=timeout_s) as answer:
            return answer.status, answer.read()
    except urllib.error.HTTPError as exc:
        return exc.code, exc.read()


def get_json(url: str) -> Any:
    status, body = http("GET", url)
    if status != 200:
        raise RuntimeError(f"GET {url}: {status} {body[:300]!r}")
    return json.loads(body)


def open_window_now() -> str:
    """A HH:MM-HH:MM window in the server's (local) time zone that is open for the next 6 hours."""
    now = datetime.now()
    return f"{(now - timedelta(hours=1)):%H:%M}-{(now + timedelta(hours=6)):%H:%M}"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="resnet18")
    ap.add_argument("--budget-s", type=float, default=25.0, help="per-job time budget")
    ap.add_argument("--budget-trials", type=int, default=200)
    ap.add_argument("--backend", choices=("gpu", "model"), default="gpu", help="model: a dry run without a GPU")
    ap.add_argument("--port", type=int, default=8765)
    ap.add_argument("--timeout-s", type=float, default=540.0, help="give up waiting for the batch after this")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--db", type=Path, default=None,
                    help="SQLite file of the server (default: service.db under --out)")
    args = ap.parse_args(argv)

    out: Path = args.out
    out.mkdir(parents=True, exist_ok=True)
    db_path = args.db or out / "service.db"
    for stale in db_path.parent.glob(db_path.name + "*"):
        stale.unlink()
    env = dict(os.environ, CONVTUNE_DATABASE_URL=f"sqlite:///{db_path}")
    cli = [sys.executable, "-c", "import sys; from convtune.cli import main; sys.exit(main())"]
    key = subprocess.run([*cli, "keys", "create", "h200-batch"], env=env, check=True, capture_output=True,
                         text=True).stdout.strip().splitlines()[-1]
    base = f"http://127.0.0.1:{args.port}"
    with open(out / "serve.log", "w") as log:
        server = subprocess.Popen([*cli, "serve", "--port", str(args.port), "--backend", args.backend], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    try:
        for _ in range(300):
            if server.poll() is not None:
                raise RuntimeError(f"the server exited with status {server.returncode} (see serve.log)")
            try:
                if http("GET", f"{base}/healthz", timeout_s=2)[0] == 200:
                    break
            except OSError:
                pass
            time.sleep(0.2)
        else:
            raise RuntimeError("the server did not answer /healthz within 60 s (see serve.log)")
        window = open_window_now()
        status, body = http("POST", f"{base}/v1/batches", key=key, body={
            "preset": args.preset, "window": window, "budget_s": args.budget_s, "budget_trials": args.budget_trials,
            "backend": args.backend, "name": f"{args.preset} ({args.backend} backend)"})
        if status not in (201, 202):
            raise RuntimeError(f"POST /v1/batches: {status} {body[:500]!r}")
        batch = json.loads(body)
        (out / "batch_created.json").write_text(json.dumps(batch, indent=1))
        print(f"batch {batch['id']}: {len(batch['jobs'])} jobs, window {window} ({batch['timezone']})", flush=True)
        started = time.monotonic()
        while True:
            batch = get_json(f"{base}/v1/batches/{batch['id']}")
            print(f"  {time.monotonic() - started:6.0f} s  {batch['status']}  {batch['counts']}", flush=True)
            if all(j["status"] in ("finished", "failed", "cancelled") for j in batch["jobs"]):
                break
            if time.monotonic() - started > args.timeout_s:
                print("timed out waiting for the batch; saving what is there", flush=True)
                break
            time.sleep(5)
        save_browsable(base, batch, out)
        print(table(batch))
        (out / "batch.md").write_text(f"# `POST /v1/batches {{\"preset\": \"{args.preset}\"}}` on the GPU host — "
                                      f"{datetime.now().astimezone():%Y-%m-%d %H:%M %Z}\n\n"
                                      f"Per-job budget {args.budget_s:g} s / {args.budget_trials} trials, window "
                                      f"{window}. `python benchmarks/serve_batch.py --preset {args.preset} "
                                      f"--budget-s {args.budget_s:g}`.\n\n{table(batch)}\n")
    finally:
        server.send_signal(signal.SIGTERM)
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
    pack(out)
    return 0


def pack(out: Path) -> None:
    """Few files for the trip back from a GPU host: the pages, the per-problem JSON, the metrics and the
    server log in one tarball (the loose copies are removed)."""
    import shutil
    import tarfile

    names = ("problems", "problems.json", "batch_created.json", "metrics.txt", "serve.log")
    loose = [out / name for name in names if (out / name).exists()]
    with tarfile.open(out / "browsable.tar.gz", "w:gz") as tar:
        for path in loose:
            tar.add(path, arcname=path.name)
    for path in loose:
        shutil.rmtree(path) if path.is_dir() else path.unlink()


def save_browsable(base: str, batch: dict[str, Any], out: Path) -> None:
    """What the API and pages show after the batch: JSON per resource, HTML per page, SVG per problem."""
    (out / "batch.json").write_text(json.dumps(batch, indent=1))
    best = {}
    for job in batch["jobs"]:
        query = urllib.parse.urlencode({"problem": job["problem"]["key"]})
        status, body = http("GET", f"{base}/v1/configs/best?{query}")
        best[job["problem"]["key"]] = json.loads(body) if status == 200 else {"status": status}
    (out / "configs_best.json").write_text(json.dumps(best, indent=1))
    (out / "problems.json").write_text(json.dumps(get_json(f"{base}/v1/problems"), indent=1))
    (out / "metrics.txt").write_bytes(http("GET", f"{base}/metrics")[1])
    (out / "index.html").write_bytes(http("GET", f"{base}/")[1])
    pages = out / "problems"
    pages.mkdir(exist_ok=True)
    for job in batch["jobs"]:
        pid = job["problem"]["id"]
        (pages / f"{pid}.html").write_bytes(http("GET", f"{base}/problems/{pid}")[1])
        (pages / f"{pid}.json").write_text(json.dumps(get_json(f"{base}/v1/problems/{pid}"), indent=1))
        (pages / f"{pid}_trials.json").write_text(json.dumps(
            get_json(f"{base}/v1/problems/{pid}/trials?limit=200"), indent=1))
        (pages / f"{pid}_report.svg").write_bytes(http("GET", f"{base}/v1/problems/{pid}/report.svg")[1])


def table(batch: dict[str, Any]) -> str:
    rows = ["| job | problem | status | trials | best ms | floor ms | efficiency |", "|---|---|---|---|---|---|---|"]
    for j in batch["jobs"]:
        def f(x: Any, fmt: str) -> str:
            return format(x, fmt) if x is not None else "–"
        rows.append(f"| {j['id']} | `{j['problem']['key']}` | {j['status']} | {j['trials_done']} | "
                    f"{f(j['best_time_ms'], '.4f')} | {f(j['floor_ms'], '.4f')} | {f(j['efficiency'], '.2f')} |")
    done = sum(j["status"] == "finished" for j in batch["jobs"])
    rows.append(f"\n{done} of {len(batch['jobs'])} jobs finished; batch status {batch['status']}.")
    return "\n".join(rows)


if __name__ == "__main__":
    sys.exit(main())
