"""An overnight batch on every GPU of one host: one database, one ``convtune worker --gpu N`` per GPU (GPU host).

For each worker count (the host's GPU count, then 1 for comparison), on a fresh database:

1. the database: ``--db URL`` (a fresh PostgreSQL database is created there per run), else a PostgreSQL server
   started from the ``pgserver`` wheel (``../shared/tools/device-wheels pgserver psycopg2-binary``), else SQLite;
2. ``convtune serve --no-worker`` over it, an API key, ``POST /v1/batches {"preset": ..., "window": <open now>}``;
3. ``convtune worker --gpu i --exit-when-idle`` for i in 0..N−1, until every worker exits;
4. from the database: jobs per worker and device, measurements per job and device, jobs run more than once,
   measurements stored twice (the ``measurements`` identity), wall time from the first claim to the last end,
   trials (stored measurements) per second per GPU and in total; every best row's device.

Acceptance (issue 19): every job once, 0 measurements lost or duplicated, each job's measurements on one device,
the N-GPU wall time ≤ 0.6× the 1-GPU wall time (N = 2). Writes ``multi_gpu_batch.md`` / ``.json`` under ``--out``.

    python benchmarks/multi_gpu_batch.py --preset resnet50 --budget-s 20 --out benchmarks/results/multi_gpu
    python benchmarks/multi_gpu_batch.py --backend model --gpus 2 --db postgresql+psycopg2://postgres@127.0.0.1/x
        # a rehearsal without GPUs (model backend: "--gpu N" only pins CUDA_VISIBLE_DEVICES)
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

from serve_batch import http, open_window_now
from sqlalchemy import create_engine, func, select, text
from sqlalchemy.engine import make_url

from convtune.storage.models import BestConfig, Device, Job, Measurement, TuningRun

CLI = [sys.executable, "-c", "import sys; from convtune.cli import main; sys.exit(main())"]


def gpu_count() -> int:
    """GPUs nvidia-smi lists (0 without a driver)."""
    if shutil.which("nvidia-smi") is None:
        return 0
    out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, check=False).stdout
    return sum(1 for line in out.splitlines() if line.startswith("GPU "))


def fresh_database(base: str | None, name: str, work: Path) -> tuple[str, Any]:
    """(URL, keeper) of an empty database for one run; the keeper (a pgserver server) must stay referenced."""
    if base:
        url = make_url(base)
        if url.get_backend_name() == "postgresql":
            admin = create_engine(url, isolation_level="AUTOCOMMIT")
            with admin.connect() as conn:
                conn.execute(text(f'DROP DATABASE IF EXISTS "{name}"'))
                conn.execute(text(f'CREATE DATABASE "{name}"'))
            admin.dispose()
            return url.set(database=name).render_as_string(hide_password=False), None
        print(f"convtune: error: --db: {url.get_backend_name()} is not a server to create a database on per run: "
              "give a PostgreSQL URL, or leave --db out (pgserver, else SQLite)", file=sys.stderr)
        raise SystemExit(2)
    try:
        import pgserver  # type: ignore[import-not-found]
    except ImportError:
        path = work / f"{name}.db"
        path.unlink(missing_ok=True)
        print("pgserver is not installed: SQLite (several workers then share one file)", file=sys.stderr)
        return f"sqlite:///{path}", None
    server = pgserver.get_server(str(work / "pgdata"), cleanup_mode="stop")
    server.psql(f'DROP DATABASE IF EXISTS "{name}";')
    server.psql(f'CREATE DATABASE "{name}";')
    uri = server.get_uri(name)
    return uri.replace("postgresql://", "postgresql+psycopg2://", 1), server


def wait_healthy(base: str, server: subprocess.Popen[bytes]) -> None:
    for _ in range(300):
        if server.poll() is not None:
            raise RuntimeError(f"convtune serve exited with status {server.returncode}")
        try:
            if http("GET", f"{base}/healthz", timeout_s=2)[0] == 200:
                return
        except OSError:
            pass
        time.sleep(0.2)
    raise RuntimeError("convtune serve did not answer /healthz within 60 s")


def run_batch(args: argparse.Namespace, workers: int, work: Path) -> dict[str, Any]:
    """One batch with ``workers`` GPU workers on a fresh database; the figures of its report row."""
    url, keeper = fresh_database(args.db, f"convtune_multi_gpu_{workers}", work)
    env = dict(os.environ, CONVTUNE_DATABASE_URL=url)
    subprocess.run([*CLI, "db", "upgrade", "--db", url], env=env, check=True, capture_output=True)
    key = subprocess.run([*CLI, "keys", "create", f"multi-gpu-{workers}", "--db", url], env=env, check=True,
                         capture_output=True, text=True).stdout.strip().splitlines()[-1]
    base = f"http://127.0.0.1:{args.port}"
    logs = work / f"workers_{workers}"
    logs.mkdir(parents=True, exist_ok=True)
    with open(logs / "serve.log", "w") as log:
        server = subprocess.Popen([*CLI, "serve", "--no-worker", "--port", str(args.port), "--db", url], env=env,
                                  stdout=log, stderr=subprocess.STDOUT)
    procs: list[subprocess.Popen[bytes]] = []
    try:
        wait_healthy(base, server)
        status, body = http("POST", f"{base}/v1/batches", key=key, body={
            "preset": args.preset, "window": open_window_now(), "budget_s": args.budget_s,
            "budget_trials": args.budget_trials, "backend": args.backend,
            "name": f"{args.preset} on {workers} GPU(s)"})
        if status not in (201, 202):
            raise RuntimeError(f"POST /v1/batches: {status} {body[:400]!r}")
        batch_id = json.loads(body)["id"]
        started = time.monotonic()
        for gpu in range(workers):
            with open(logs / f"worker_{gpu}.log", "w") as log:
                procs.append(subprocess.Popen(
                    [*CLI, "worker", "--gpu", str(gpu), "--db", url, "--backend", args.backend, "--exit-when-idle",
                     "--worker-id", f"gpu{gpu}", "--poll-s", "1"], env=env, stdout=log, stderr=subprocess.STDOUT))
        deadline = started + args.timeout_s
        while any(p.poll() is None for p in procs) and time.monotonic() < deadline:
            time.sleep(2)
        timed_out = any(p.poll() is None for p in procs)
        wall_s = time.monotonic() - started
        status, body = http("GET", f"{base}/v1/batches/{batch_id}", key=key)  # batches belong to their key
        if status != 200:
            raise RuntimeError(f"GET /v1/batches/{batch_id}: {status} {body[:300]!r}")
        batch = json.loads(body)
    finally:
        for p in [*procs, server]:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in [*procs, server]:
            try:
                p.wait(timeout=60)
            except subprocess.TimeoutExpired:
                p.kill()
    row = audit(url, batch_id) | {"workers": workers, "wall_s": wall_s, "timed_out": timed_out,
                                  "worker_exit_codes": [p.returncode for p in procs], "batch_status": batch["status"]}
    row["trials_per_s"] = row["measurements"] / wall_s if wall_s else 0.0
    row["trials_per_s_per_gpu"] = row["trials_per_s"] / workers
    del keeper
    return row


def audit(url: str, batch_id: int) -> dict[str, Any]:
    """What the database says about the batch: lost, repeated or duplicated work and where each job ran."""
    engine = create_engine(url)
    with engine.connect() as conn:
        jobs = conn.execute(select(Job.id, Job.status, Job.worker_id, Job.attempts, Job.trials_done, Job.claimed_at,
                                   Job.finished_at).where(Job.batch_id == batch_id)).all()
        job_ids = [j.id for j in jobs]
        per_job = conn.execute(
            select(TuningRun.job_id, func.count(Measurement.id), func.count(func.distinct(Measurement.device_id)))
            .join(Measurement, Measurement.tuning_run_id == TuningRun.id)
            .where(TuningRun.job_id.in_(job_ids)).group_by(TuningRun.job_id)).all()
        duplicates = conn.execute(select(func.count()).select_from(
            select(Measurement.device_id, Measurement.problem_id, Measurement.kernel_version_id, Measurement.config_id,
                   Measurement.backend).group_by(Measurement.device_id, Measurement.problem_id,
                                                 Measurement.kernel_version_id, Measurement.config_id,
                                                 Measurement.backend)
            .having(func.count() > 1).subquery())).scalar_one()
        best_devices = conn.execute(select(Device.name, func.count())
                                    .join(BestConfig, BestConfig.device_id == Device.id).group_by(Device.name)).all()
    engine.dispose()
    measured = {job_id: (count, devices) for job_id, count, devices in per_job}
    by_worker: dict[str, int] = {}
    for j in jobs:
        by_worker[j.worker_id or "-"] = by_worker.get(j.worker_id or "-", 0) + 1
    claimed = [j.claimed_at for j in jobs if j.claimed_at]
    ended = [j.finished_at for j in jobs if j.finished_at]
    return {
        "jobs": len(jobs),
        "jobs_finished": sum(j.status == "finished" for j in jobs),
        "jobs_run_more_than_once": sum(j.attempts > 1 for j in jobs),
        "jobs_on_several_devices": sum(1 for c, d in measured.values() if d > 1),
        "trials_counted_vs_stored_mismatches": sum(1 for j in jobs if j.trials_done != measured.get(j.id, (0, 0))[0]),
        "measurements": sum(c for c, _ in measured.values()),
        "duplicated_measurements": duplicates,
        "jobs_per_worker": by_worker,
        "claim_to_last_end_s": (max(ended) - min(claimed)).total_seconds() if claimed and ended else None,
        "best_rows_per_device": {name: n for name, n in best_devices},
    }


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Batch `{meta['preset']}` on several GPUs of one host ({meta['date']})", "",
             f"Per-job budget {meta['budget_s']:g} s / {meta['budget_trials']} trials, backend {meta['backend']}, "
             f"database {meta['database']}. `python benchmarks/multi_gpu_batch.py --preset {meta['preset']} "
             f"--budget-s {meta['budget_s']:g}`.", "",
             "| GPUs | jobs (finished) | run twice | on >1 device | duplicated measurements | trial count mismatches "
             "| measurements | wall s | trials/s | trials/s per GPU | jobs per worker |",
             "|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['workers']} | {r['jobs']} ({r['jobs_finished']}) | {r['jobs_run_more_than_once']} | "
                     f"{r['jobs_on_several_devices']} | {r['duplicated_measurements']} | "
                     f"{r['trials_counted_vs_stored_mismatches']} | {r['measurements']} | {r['wall_s']:.1f} | "
                     f"{r['trials_per_s']:.2f} | {r['trials_per_s_per_gpu']:.2f} | {r['jobs_per_worker']} |")
    if len(rows) == 2 and rows[1]["wall_s"]:
        ratio = rows[0]["wall_s"] / rows[1]["wall_s"]
        lines += ["", f"{rows[0]['workers']}-GPU wall time / 1-GPU wall time: **{ratio:.2f}** (target ≤ 0.6 on 2 GPUs)"]
    lines += ["", "Best rows per device: " + "; ".join(f"{r['workers']} GPU(s): {r['best_rows_per_device']}"
                                                      for r in rows)]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--preset", default="resnet50")
    ap.add_argument("--budget-s", type=float, default=20.0, help="per-job search budget (after pruning)")
    ap.add_argument("--budget-trials", type=int, default=64)
    ap.add_argument("--backend", choices=("gpu", "model"), default="gpu", help="model: a rehearsal without GPUs")
    ap.add_argument("--gpus", type=int, default=None, help="workers of the multi-GPU run (default: every GPU)")
    ap.add_argument("--db", default=None, help="a PostgreSQL server URL to create each run's fresh database on "
                                               "(default: pgserver, else a SQLite file per run)")
    ap.add_argument("--port", type=int, default=8766)
    ap.add_argument("--timeout-s", type=float, default=3600.0, help="per run")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/multi_gpu"))
    args = ap.parse_args(argv)
    gpus = args.gpus if args.gpus is not None else gpu_count()
    if gpus < 2:
        print(f"convtune: error: --gpus: {gpus} GPU(s) here; the comparison needs 2 or more", file=sys.stderr)
        return 2
    args.out.mkdir(parents=True, exist_ok=True)
    work = args.out / "work"
    rows = [run_batch(args, gpus, work), run_batch(args, 1, work)]
    meta = {"preset": args.preset, "budget_s": args.budget_s, "budget_trials": args.budget_trials,
            "backend": args.backend, "database": "given server" if args.db else "pgserver or SQLite",
            "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    (args.out / "multi_gpu_batch.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1, default=str))
    report = markdown(rows, meta)
    (args.out / "multi_gpu_batch.md").write_text(report)
    print(report)
    return 0


if __name__ == "__main__":
    sys.exit(main())
