"""``convtune export``: the best configs as a JSON file the ops load without a database, or one config's CUDA
source and launch parameters.

    convtune export [--device NAME] [--backend gpu|replay|model|all] --out FILE.json [--db URL]
    convtune export --source PROBLEM_FIELDS... CONFIG_KEY... [--machine h200] [--json] [--out FILE]

Registered by :func:`convtune.cli.build_parser`; the logic is in :mod:`convtune.ops.export` and
:mod:`convtune.kernels.describe`.
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from convtune.errors import InvalidConfig
from convtune.vocabulary import BACKENDS

BACKEND_CHOICES = (*BACKENDS, "all")


def add_export_parser(sub: Any) -> None:
    p = sub.add_parser(
        "export", help="write the best configs to a JSON file (CONVTUNE_CONFIGS=FILE serves them to the ops), or "
                       "print a config's CUDA source and launch parameters (--source)",
        epilog="examples: convtune export --device 'NVIDIA H200' --out h200.json; convtune export --source "
               "N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 "
               "thread_w=4 thread_k=8 stages=2 vec=1 splits=1")
    p.add_argument("--out", metavar="FILE", help="the JSON file to write (with --source: the .cu/.json file; "
                                                 "default stdout)")
    p.add_argument("--device", default=None, help="only this device name (default: every device)")
    p.add_argument("--backend", choices=BACKEND_CHOICES, default="gpu",
                   help="only rows of this backend (default gpu: measured on a GPU, what the ops serve; all: every "
                        "row, flagged by backend and measured)")
    p.add_argument("--source", nargs="+", metavar="TOKEN", default=None,
                   help="problem FIELD=VALUE tokens, then a config key: print its CUDA source and launches")
    p.add_argument("--machine", default="h200", help="machine preset the --source config is planned for")
    p.add_argument("--json", action="store_true", help="with --source: one JSON object (source included)")
    p.add_argument("--db", metavar="URL", default=None,
                   help="database URL (default: $CONVTUNE_DATABASE_URL, else the per-user SQLite file)")
    p.set_defaults(func=cmd_export)


def cmd_export(args: argparse.Namespace) -> int:
    if args.source is not None:
        return _source(args)
    if not args.out:
        raise InvalidConfig("--out", "required: the JSON file to write (or --source PROBLEM CONFIG)")
    from convtune.ops.export import export
    from convtune.storage.migrate import upgrade
    from convtune.storage.session import default_database_url, make_engine

    engine = make_engine(args.db or default_database_url())
    try:
        upgrade(engine)  # idempotent; an old database is brought to the schema this export reads
        doc = export(engine, args.out, device=args.device, backend=None if args.backend == "all" else args.backend)
    except OSError as exc:
        raise InvalidConfig("--out", f"cannot write {args.out!r}: {exc.strerror or exc}") from None
    finally:
        engine.dispose()
    entries = doc["entries"]
    devices = len({e["device"] for e in entries})
    measured = sum(e["measured"] for e in entries)
    problems = len({e["problem"] for e in entries})
    sys.stdout.write(f"wrote {len(entries)} best configs ({measured} measured, {problems} problems, {devices} "
                     f"device{'s' if devices != 1 else ''}) to {args.out}; serve them with "
                     f"CONVTUNE_CONFIGS={args.out}\n")
    return 0 if entries else 1


def _source(args: argparse.Namespace) -> int:
    from convtune.kernels.config import parse_config_key
    from convtune.kernels.describe import describe, format_text
    from convtune.machine import MachineModel
    from convtune.problem import ConvProblem

    tokens = args.source
    split = next((i for i, t in enumerate(tokens) if "." in t and "=" not in t), None)
    if split is None or split == 0:
        raise InvalidConfig("--source", "give the problem FIELD=VALUE tokens, then a config key starting with e.g. "
                                        "'direct.fwd'")
    problem = ConvProblem.parse(" ".join(tokens[:split]))
    config = parse_config_key(" ".join(tokens[split:]))
    src = describe(problem, config, MachineModel.preset(args.machine))
    text = json.dumps(src.to_dict(), indent=1) + "\n" if args.json else format_text(src)
    if args.out:
        try:
            with open(args.out, "w", encoding="utf-8") as fh:
                fh.write(text)
        except OSError as exc:
            raise InvalidConfig("--out", f"cannot write {args.out!r}: {exc.strerror or exc}") from None
        sys.stderr.write(f"wrote the source of {config.key()} ({len(src.kernels)} kernel text(s), "
                         f"{len(src.steps)} step(s)) to {args.out}\n")
    else:
        sys.stdout.write(text)
    return 0
