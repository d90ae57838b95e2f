"""``convtune`` command line: the parser (one argparse sub-command per job, one module per command group under
:mod:`convtune.cli`) and the entry point.

Add a sub-command with an ``add_<name>_parser(subparsers)`` function that registers its arguments and
``set_defaults(func=cmd_<name>)``; ``cmd_<name>(args) -> int`` does the work. Import heavy modules
(the tuner, storage, the API) inside the ``cmd_`` function so that ``convtune bounds`` stays fast.

Errors a user can fix (bad problem, unknown machine, unreadable suite) print ONE line
``convtune: error: <field>: <what is wrong>`` on stderr and exit with status 2, like argparse's own
usage errors; runtime failures print one line and exit 1 (:mod:`convtune.cli.errors` is the one handler).
Global flags, accepted before or after the sub-command: ``--debug`` (the traceback instead of the one
line), ``--quiet`` / ``--no-progress`` (no progress bars on stderr).
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

import convtune
from convtune.cli.analyze import add_analyze_parser
from convtune.cli.bounds import add_bounds_parser
from convtune.cli.errors import run_command
from convtune.cli.export import add_export_parser
from convtune.cli.machines import add_machines_parser
from convtune.cli.model import add_model_parser
from convtune.cli.service import add_service_parsers
from convtune.cli.tune import add_tuning_parsers
from convtune.cli.worker import add_worker_parser


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="convtune", description="Auto-tuning of GPU convolutions driven by "
                                     "I/O lower bounds.")
    parser.add_argument("--version", action="version", version=f"%(prog)s {convtune.__version__}")
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    add_bounds_parser(sub)
    add_tuning_parsers(sub)
    add_service_parsers(sub)
    add_worker_parser(sub)
    add_analyze_parser(sub)
    add_model_parser(sub)
    add_export_parser(sub)
    add_machines_parser(sub)
    add_global_flags(parser)
    return parser


GLOBAL_FLAGS = (
    ("--debug", "on an error, show the Python traceback instead of one line"),
    ("--quiet", "no progress on stderr (results and errors are still printed)"),
    ("--no-progress", "no progress bars on stderr (same as --quiet)"),
)


def add_global_flags(parser: argparse.ArgumentParser, *, top: bool = True) -> None:
    """``--debug``, ``--quiet``, ``--no-progress`` on ``parser`` and every sub-parser below it, so they may
    come before or after the sub-command. Sub-parsers default to SUPPRESS: a flag given before the
    sub-command is not reset by the sub-parser's own default."""
    for flag, text in GLOBAL_FLAGS:
        if flag not in parser._option_string_actions:  # e.g. tune-model's own --no-progress
            parser.add_argument(flag, action="store_true", help=text,
                                default=False if top else argparse.SUPPRESS)
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for child in dict.fromkeys(action.choices.values()):  # aliases map to the same parser
                add_global_flags(child, top=False)


def main(argv: Sequence[str] | None = None) -> int:
    """Run ``convtune``; returns the exit status (0 ok, 1 runtime failure, 2 bad input, 130 interrupted)."""
    try:
        args = build_parser().parse_args(argv)
    except KeyboardInterrupt:  # Ctrl-C while the parser imports the sub-commands' modules
        print("convtune: interrupted", file=sys.stderr)
        return 130
    args.no_progress = bool(getattr(args, "no_progress", False) or getattr(args, "quiet", False))
    return run_command(args.func, args, debug=bool(getattr(args, "debug", False)))
