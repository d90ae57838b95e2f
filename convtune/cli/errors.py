"""The ``convtune`` command line's one error handler: every failure becomes ONE line on stderr.

:func:`run_command` runs a sub-command's ``cmd_`` function and maps what it raises to an exit status:

* 2 — bad input the user can fix by changing the command: a :class:`~convtune.cli._common.CliError`, the typed
  input errors of :mod:`convtune.errors` (problem, config, input, machine, not found), a backend this
  host cannot run (no CuPy, no GPU, a GPU older than sm_80: :class:`~convtune.errors.DeviceUnavailable`),
  a malformed ``--db`` URL or a database driver that is not installed;
* 1 — a runtime failure: the database cannot be reached, a kernel failed to compile or launch, the
  trial worker died, or an unexpected exception (named, with a hint at ``--debug``);
* 130 — interrupted (Ctrl-C);
* a closed stdout (``convtune bounds ... | head -1``) ends quietly, as Python's documentation of
  ``SIGPIPE`` recommends: devnull is put over stdout so the interpreter's last flush cannot fail again.

With ``debug`` nothing is caught: Python prints the traceback.
"""

from __future__ import annotations

import argparse
import io
import os
import sys
from collections.abc import Callable

from convtune.cli._common import CliError
from convtune.errors import (
    ConvtuneError,
    DeviceUnavailable,
    InvalidConfig,
    InvalidInput,
    InvalidProblem,
    NotFound,
    UnknownMachine,
)

EXIT_OK, EXIT_FAILED, EXIT_USAGE, EXIT_INTERRUPTED = 0, 1, 2, 130
#: Errors a user fixes by changing the command line (exit 2); other ConvtuneErrors are runtime (exit 1).
USAGE_ERRORS: tuple[type[BaseException], ...] = (InvalidProblem, InvalidConfig, InvalidInput, UnknownMachine,
                                                  NotFound, DeviceUnavailable)
#: Longest error line printed (a driver's message can be kilobytes; the first sentence says it; a list of every
#: kernel family must fit).
MAX_LINE = 600


def one_line(text: str) -> str:
    """``text`` on one line: whitespace runs (newlines included) become one space, cut at :data:`MAX_LINE`."""
    line = " ".join(str(text).split())
    return line if len(line) <= MAX_LINE else line[:MAX_LINE - 1] + "…"


def _first_line(text: str) -> str:
    """The first non-empty line of a driver message (psycopg2's carry a hint and a context below it)."""
    return next((line.strip() for line in str(text).splitlines() if line.strip()), str(text))


def _chain(exc: BaseException) -> list[BaseException]:
    """``exc`` and its causes / contexts, outermost first (cycles cut)."""
    seen: list[BaseException] = []
    cur: BaseException | None = exc
    while cur is not None and all(cur is not s for s in seen):
        seen.append(cur)
        cur = cur.__cause__ or cur.__context__
    return seen


def database_error(exc: BaseException) -> tuple[int, str] | None:
    """(exit status, message) when ``exc`` is, or was caused by, a SQLAlchemy error; else ``None``.

    A malformed URL (``nonsense://``, a missing driver) is bad input; anything else (connection refused,
    unknown host, authentication, a locked file) is a runtime failure of the database.
    """
    sa_exc = sys.modules.get("sqlalchemy.exc")
    if sa_exc is None:  # SQLAlchemy was never imported: no database was touched
        return None
    for cause in _chain(exc):
        if isinstance(cause, sa_exc.ArgumentError):
            return EXIT_USAGE, f"--db: not a usable database URL: {_first_line(cause)}"
        if isinstance(cause, sa_exc.DBAPIError):
            orig = getattr(cause, "orig", None) or cause
            return EXIT_FAILED, f"database: cannot use the database: {type(orig).__name__}: {_first_line(orig)}"
        if isinstance(cause, sa_exc.SQLAlchemyError):
            return EXIT_FAILED, f"database: {_first_line(cause)}"
    return None


def classify(exc: BaseException) -> tuple[int, str]:
    """(exit status, one-line message without the ``convtune: error:`` prefix) of a failure."""

    if isinstance(exc, (CliError, *USAGE_ERRORS)):
        return EXIT_USAGE, one_line(str(exc))
    found = database_error(exc)
    if found is not None:
        return found[0], one_line(found[1])
    if isinstance(exc, ConvtuneError):
        return EXIT_FAILED, one_line(str(exc))
    if isinstance(exc, ModuleNotFoundError) and exc.name:  # an optional dependency, e.g. a database driver
        return EXIT_USAGE, one_line(f"{exc.name}: the Python module is not installed ({exc})")
    return EXIT_FAILED, one_line(f"internal error: {type(exc).__name__}: {exc} (run with --debug for the "
                                 "traceback and report it)")


def _quiet_stdout() -> None:
    """Point stdout's file descriptor at devnull (Python docs, "Note on SIGPIPE"), so that the interpreter's
    flush at exit does not raise BrokenPipeError again."""
    try:
        fd = sys.stdout.fileno()
    except (AttributeError, ValueError, io.UnsupportedOperation):  # captured by a test: nothing to redirect
        return
    devnull = os.open(os.devnull, os.O_WRONLY)
    os.dup2(devnull, fd)
    os.close(devnull)


def run_command(func: Callable[[argparse.Namespace], int], args: argparse.Namespace, *, debug: bool = False) -> int:
    """Run ``func(args)``; returns its exit status, or the status of what it raised (see the module docstring)."""
    try:
        status = int(func(args))
        sys.stdout.flush()  # inside the handler: a closed pipe must surface here, not at interpreter exit
        return status
    except BrokenPipeError:
        _quiet_stdout()
        return EXIT_FAILED  # what Python itself returns on EPIPE; nothing is printed
    except KeyboardInterrupt:
        if debug:
            raise
        sys.stderr.write("convtune: interrupted\n")
        return EXIT_INTERRUPTED
    except Exception as exc:
        if debug:
            raise
        try:
            status, message = classify(exc)
        except Exception:  # the handler must never be the traceback it exists to avoid
            status, message = EXIT_FAILED, one_line(f"{type(exc).__name__}: {exc}")
        sys.stderr.write(f"convtune: error: {message}\n")
        return status
