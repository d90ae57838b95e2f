"""The ``convtune`` command: :func:`main` runs it, :func:`build_parser` builds its parser (:mod:`.app`). One module
per command group: :mod:`.bounds`, :mod:`.tune` (tune, best, history, why, db), :mod:`.service` (serve, submit, jobs,
cancel, batch), :mod:`.worker` (worker, keys), :mod:`.analyze`, :mod:`.model` (tune-model), :mod:`.export`,
:mod:`.machines`; :mod:`._common`, :mod:`.errors` and :mod:`.progress` are what they share."""

from convtune.cli.app import build_parser, main

__all__ = ["build_parser", "main"]
