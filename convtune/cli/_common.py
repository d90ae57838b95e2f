"""What every command group of :mod:`convtune.cli` shares: the user-error type, the ``--db`` option and its engine,
reading a JSON file, a machine preset by name, the help of the problem tokens, a stored key's precision class, and
the one function that writes to the terminal."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from convtune.errors import ConvtuneError
from convtune.machine import MachineModel

#: Help of every command's FIELD=VALUE problem tokens (ConvProblem.parse), precision class included.
PROBLEM_HELP = ("problem fields: N C H W K R S [stride pad dilation groups dtype math], or B C L K [dilation dtype] "
                "of a causal 1-D depthwise problem; dtype=float32 (default), float16 or bfloat16; math=ieee "
                "(default: strict fp32) or math=tf32 (TF32 tensor cores, float32 only: PyTorch's default for "
                "convolutions)")


def precision_of(key: str) -> str | None:
    """The precision class of a stored problem key (``ConvProblem.precision``), None if it no longer parses."""
    from convtune.problem import ConvProblem

    try:
        return ConvProblem.parse(key).precision
    except ConvtuneError:
        return None


class CliError(Exception):
    """A user error: ``field`` names the offending input; printed as one line, exit status 2."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")


def machine_preset(name: str) -> MachineModel:
    try:
        return MachineModel.preset(name)
    except ConvtuneError as exc:
        raise CliError("--machine", str(exc)) from None


def read_json(path: str, field: str) -> Any:
    """The parsed JSON of a file; one-line :class:`CliError` naming ``field`` when unreadable."""
    try:
        with open(path, encoding="utf-8") as fh:
            return json.load(fh)
    except OSError as exc:
        raise CliError(field, f"cannot read {path!r}: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise CliError(field, f"{path!r} is not valid JSON: {exc}") from None


def emit(text: str, *, err: bool = False) -> None:
    """The one place the commands write to the terminal (stdout, or stderr with ``err``), flushed at once."""
    print(text, file=sys.stderr if err else sys.stdout, flush=True)


def add_db_arg(p: argparse.ArgumentParser) -> None:
    p.add_argument("--db", metavar="URL", default=None,
                   help="database URL (default: $CONVTUNE_DATABASE_URL, else a per-user SQLite file)")


def open_database(url: str | None) -> Any:
    """An engine on ``url`` (default: ``$CONVTUNE_DATABASE_URL``, else the per-user SQLite file) with its schema at
    head; idempotent, so a fresh SQLite file gets its schema here."""
    from convtune.storage.migrate import upgrade
    from convtune.storage.session import default_database_url, make_engine

    engine = make_engine(url or default_database_url())
    upgrade(engine)
    return engine
