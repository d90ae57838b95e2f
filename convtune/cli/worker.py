"""``convtune worker`` and ``convtune keys``: run a tuning worker; create, list and revoke API keys.

``convtune worker`` claims jobs from the database (``--db``, default ``$CONVTUNE_DATABASE_URL`` or the
per-user SQLite file) until SIGTERM or SIGINT: the running trial finishes and is stored, the job goes back
to the queue, and the worker exits 0. Run one per GPU (``--gpu N``); on PostgreSQL, any number on any
hosts. Send the signal to the worker process itself (not its process group): a GPU worker's trial
child process must finish its trial.

Registered by :func:`convtune.cli.build_parser`; heavy imports happen inside the ``cmd_`` functions.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
from typing import Any

from convtune.cli._common import add_db_arg, emit, open_database
from convtune.errors import ConvtuneError, InvalidConfig
from convtune.machine import preset_help
from convtune.vocabulary import BACKENDS as BACKENDS


def add_worker_parser(sub: Any) -> None:
    """Register ``worker`` and ``keys`` (called by :func:`convtune.cli.build_parser`)."""
    p = sub.add_parser("worker", help="claim and run queued tuning jobs until stopped (SIGTERM: graceful)",
                       epilog="example: convtune worker --gpu 0 --db postgresql+psycopg2://tuner@db/convtune")
    p.add_argument("--gpu", type=int, default=None, metavar="N",
                   help="the GPU to measure on (sets CUDA_VISIBLE_DEVICES for the trial process)")
    add_db_arg(p)
    p.add_argument("--backend", action="append", choices=BACKENDS, default=None,
                   help="jobs of this backend (repeatable; default gpu)")
    p.add_argument("--replay", metavar="FILE", help="timing table for --backend replay (.json or .json.gz)")
    p.add_argument("--trial-delay-s", "--replay-delay-s", dest="trial_delay_s", type=float, default=0.0, metavar="S",
                   help="seconds each replay or model answer takes (tests: jobs long enough to interrupt)")
    p.add_argument("--machine", default="h200",
                   help=f"machine preset for --backend model ({preset_help()}; default h200)")
    p.add_argument("--device-name", default=None,
                   help="take jobs for this device name (default: the name the device reports)")
    p.add_argument("--worker-id", default=None, help="name in the jobs table (default host:pid:random)")
    p.add_argument("--poll-s", type=float, default=2.0, help="wait between claims when idle (default 2)")
    p.add_argument("--heartbeat-s", type=float, default=10.0, help="heartbeat interval (default 10)")
    p.add_argument("--stale-after-s", type=float, default=120.0,
                   help="claim a running job again when its heartbeat is this old (default 120)")
    p.add_argument("--exit-when-idle", action="store_true", help="exit 0 once no job is eligible")
    p.add_argument("--log-level", default="info", choices=("debug", "info", "warning", "error"))
    p.set_defaults(func=cmd_worker)

    p = sub.add_parser("keys", help="API keys: create (prints the secret once), list, revoke")
    keys = p.add_subparsers(dest="keys_command", required=True, metavar="ACTION")
    create = keys.add_parser("create", help="create a key and print its secret (shown only this once)")
    create.add_argument("name")
    create.add_argument("--max-queued", type=int, default=100, metavar="N",
                        help="queued + running jobs this key may have (default 100)")
    create.add_argument("--admin", action="store_true",
                        help="an admin key: sees and cancels every key's jobs and batches (others see their own)")
    add_db_arg(create)
    create.set_defaults(func=cmd_keys_create)
    listing = keys.add_parser("list", help="every key: name, prefix, limit, created, revoked")
    add_db_arg(listing)
    listing.set_defaults(func=cmd_keys_list)
    revoke = keys.add_parser("revoke", help="revoke a key by name (it stops working at once)")
    revoke.add_argument("name")
    add_db_arg(revoke)
    revoke.set_defaults(func=cmd_keys_revoke)



# ---- worker -----------------------------------------------------------------------------------------------
def cmd_worker(args: argparse.Namespace) -> int:
    from convtune.service.runner import Worker, benchmarker_factory

    backends = tuple(dict.fromkeys(args.backend or ["gpu"]))
    for name in ("poll_s", "heartbeat_s", "stale_after_s"):
        if not getattr(args, name) > 0:
            raise InvalidConfig(f"--{name.replace('_', '-')}", f"{getattr(args, name):g} must be > 0")
    if args.heartbeat_s >= args.stale_after_s:
        raise InvalidConfig("--heartbeat-s", f"{args.heartbeat_s:g} must be below --stale-after-s "
                                             f"({args.stale_after_s:g})")
    if args.trial_delay_s < 0:
        raise InvalidConfig("--trial-delay-s", f"{args.trial_delay_s:g} must be >= 0")
    if args.gpu is not None:
        if args.gpu < 0:
            raise InvalidConfig("--gpu", f"{args.gpu} must be a device index >= 0")
        os.environ["CUDA_VISIBLE_DEVICES"] = str(args.gpu)  # inherited by the trial child process
    logging.basicConfig(level=args.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    logging.getLogger("alembic").setLevel(logging.WARNING)  # the schema check on start is not news
    factory = benchmarker_factory(replay=args.replay, machine=args.machine, trial_delay_s=args.trial_delay_s)
    worker = Worker(open_database(args.db), factory, worker_id=args.worker_id, backends=backends,
                    device_name=args.device_name, poll_s=args.poll_s, heartbeat_s=args.heartbeat_s,
                    stale_after_s=args.stale_after_s)
    stop = threading.Event()

    def on_signal(signum: int, frame: Any) -> None:
        logging.getLogger(__name__).info("worker %s: %s received: stopping after the current trial",
                                         worker.worker_id, signal.Signals(signum).name)
        stop.set()

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    try:
        worker.open()  # before the loop: a missing GPU or replay table is a one-line error, exit 2
    except ConvtuneError:
        raise
    except Exception as exc:
        raise InvalidConfig("--backend", f"cannot start measuring ({', '.join(backends)}): "
                                         f"{type(exc).__name__}: {exc}") from None
    worker.run(stop, exit_when_idle=args.exit_when_idle)
    return 0


# ---- keys -------------------------------------------------------------------------------------------------
def cmd_keys_create(args: argparse.Namespace) -> int:
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    with session_scope(open_database(args.db)) as session:
        key, secret = repo.create_api_key(session, args.name, max_queued_jobs=args.max_queued, is_admin=args.admin)
        name, limit = key.name, key.max_queued_jobs
    emit(secret)
    emit(f"created {'an admin' if args.admin else 'an'} API key {name!r} (at most {limit} queued jobs). The secret "
          "above is shown only now: send it as 'X-API-Key: <secret>'.", err=True)
    return 0


def cmd_keys_list(args: argparse.Namespace) -> int:
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    with session_scope(open_database(args.db)) as session:
        rows = [(k.name + (" (admin)" if k.is_admin else ""), k.prefix, k.max_queued_jobs, k.created_at, k.revoked_at,
                 repo.count_active_jobs(session, k.id)) for k in repo.list_api_keys(session)]
    emit(f"{'name':<24} {'prefix':<9} {'max queued':>10} {'active':>6}  {'created':<19}  revoked")
    for name, prefix, limit, created, revoked, active in rows:
        emit(f"{name:<24} {prefix + '…':<9} {limit:>10} {active:>6}  {created.isoformat(timespec='seconds')[:19]:<19}"
              f"  {revoked.isoformat(timespec='seconds')[:19] if revoked else '—'}")
    return 0


def cmd_keys_revoke(args: argparse.Namespace) -> int:
    from convtune.errors import NotFound
    from convtune.storage import queries as repo
    from convtune.storage.session import session_scope

    try:
        with session_scope(open_database(args.db)) as session:
            repo.revoke_api_key(session, args.name)
    except NotFound:
        raise InvalidConfig("name", f"no API key named {args.name!r} (see `convtune keys list`)") from None
    emit(f"revoked API key {args.name!r}")
    return 0
