"""The one config resolver of every op: the tuning database's best *measured* config, else the model's choice.

``convtune.conv2d(config=None)``, the ``convtune.ops.torch`` ops (dense and depthwise) and
:mod:`convtune.ops.depthwise` ask :func:`resolve` once per call signature (their prepared-launch caches keep
the answer), which answers in this order:

1. a config the service reported for this device (:func:`remember`: ``convtune.ops.torch.tune(model, url=...)``
   writes these) for the problem, else for the problems that may serve it, if the problem's kernels accept it;
2. when lookups are on and ``$CONVTUNE_CONFIGS`` (or :func:`use_configs_file`) names a file written by
   ``convtune export``: its fastest measured entry of the problem (and, for tf32, of the strict float32 problem) on
   this device name, among the families the caller allows, of the family's current kernel source
   (:mod:`convtune.ops.export`; entries of another source are skipped with one warning per file load; a bad file
   raises :class:`~convtune.ops.export.ConfigFileError`);
3. when lookups are on and a database is known: the fastest best row of the problem (its key carries the
   precision class: the dtype, and ``math=tf32`` for TF32) — and, for a tf32 problem, of the strict float32
   problem too (a strict config is valid for TF32; a tf32 row never serves a strict problem:
   :meth:`~convtune.problem.ConvProblem.serving_keys`) — on this device name whose measurement is a real GPU
   measurement (backend ``"gpu"``, not predicted, not provisional) of the *current* source of its family
   (:func:`convtune.storage.queries.results.find_measured_best`; replay and model rows, and rows of an older
   kernel source, never serve), among the families the caller allows; read once per process and kept;
4. the model's choice (the caller's ``model`` callable).

Settings:
    - database: the ``url`` argument, else :func:`use_database`, else ``$CONVTUNE_DATABASE_URL``, else the
      default SQLite file (``$XDG_DATA_HOME/convtune/convtune.db``) if it exists (never created here);
    - configs file: :func:`use_configs_file`, else ``$CONVTUNE_CONFIGS`` (read again when the file changes; the
      ops keep each answer for their call signature until :func:`clear_cache`);
    - lookups (the configs file and the database): :func:`set_lookup` (``False`` turns them off, ``None`` defers
      to the environment), else ``$CONVTUNE_LOOKUP`` (``off``, ``0``, ``false`` or ``no`` turn them off).

:func:`clear_cache` forgets every answer (and, through :func:`on_clear`, the ops' prepared launches), e.g.
after tuning in this process. An unreadable database (no schema, locked, unreachable) answers nothing and the
model's choice serves.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from convtune.errors import ConvtuneError
from convtune.ops.export import kernel_shas as kernel_shas  # the file's kernel versions are the resolver's
from convtune.problem import ConvProblem

DATABASE_URL_ENV = "CONVTUNE_DATABASE_URL"
CONFIGS_ENV = "CONVTUNE_CONFIGS"
LOOKUP_ENV = "CONVTUNE_LOOKUP"
_OFF = {"off", "0", "false", "no"}

_lookup: bool | None = None
_database: str | None = None
_configs_file: str | None = None
_remembered: dict[tuple[str, str], str] = {}
_listeners: list[Callable[[], None]] = []


@dataclass(frozen=True, slots=True)
class Resolution:
    """A resolved config and where it came from: ``"service"``, ``"file"``, ``"database"`` or ``"model"``."""

    config: Any
    source: str


# ---- settings ----------------------------------------------------------------------------------------------
def set_lookup(enabled: bool | None) -> None:
    """Turn database lookups on or off for this process (None: follow ``$CONVTUNE_LOOKUP`` again); clears the
    cached answers so that the setting takes effect at the next call of every op."""
    global _lookup
    _lookup = enabled
    clear_cache()


def lookup_enabled() -> bool:
    if _lookup is not None:
        return _lookup
    return os.environ.get(LOOKUP_ENV, "").strip().lower() not in _OFF


def use_database(url: str | None) -> None:
    """Read best configs from ``url`` in this process (None: back to ``$CONVTUNE_DATABASE_URL`` / the default
    file); clears the cached answers."""
    global _database
    _database = url
    clear_cache()


def database_url(url: str | None = None) -> str | None:
    """``url``, else :func:`use_database`'s, else ``$CONVTUNE_DATABASE_URL``, else the default SQLite file if it
    exists (never created here), else None."""
    if url:
        return url
    if _database:
        return _database
    env = os.environ.get(DATABASE_URL_ENV)
    if env:
        return env
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    path = Path(data_home) / "convtune" / "convtune.db"
    return f"sqlite:///{path}" if path.is_file() else None


def use_configs_file(path: str | os.PathLike[str] | None) -> None:
    """Serve the configs of a ``convtune export`` file in this process (None: back to ``$CONVTUNE_CONFIGS``);
    clears the cached answers."""
    global _configs_file
    _configs_file = os.fspath(path) if path is not None else None
    _config_file.cache_clear()
    clear_cache()


def configs_path() -> str | None:
    """:func:`use_configs_file`'s file, else ``$CONVTUNE_CONFIGS``, else None."""
    return _configs_file or os.environ.get(CONFIGS_ENV) or None


@lru_cache(maxsize=8)
def _config_file(path: str, stamp: tuple[int, int]) -> Any:
    """The loaded file, read again when its modification time or size (``stamp``) changes (one warning per load)."""
    from convtune.ops.export import load

    return load(path, kernel_shas())


def file_config_key(problem_key: str | tuple[str, ...], device_name: str, families: tuple[str, ...]) -> str | None:
    """The configs file's answer (step 2 of the module docstring) for a problem key or the keys that may serve it
    (``ConvProblem.serving_keys()``), or None when no file is set or it has none.

    Raises:
        ConfigFileError: the file is missing or malformed (named with the offending field).
    """
    path = configs_path()
    if path is None:
        return None
    try:
        st = os.stat(path)
    except OSError as exc:
        from convtune.ops.export import ConfigFileError

        raise ConfigFileError(path, "file", f"cannot be read: {exc.strerror or exc}") from None
    loaded = _config_file(path, (st.st_mtime_ns, st.st_size))
    return loaded.lookup(problem_key, device_name, kernel_shas(), families)


def on_clear(listener: Callable[[], None]) -> None:
    """Call ``listener`` whenever :func:`clear_cache` runs (the ops drop their prepared launches)."""
    if listener not in _listeners:
        _listeners.append(listener)


def clear_cache() -> None:
    """Forget every cached database answer and the ops' prepared launches (not :func:`remember`'s)."""
    for cached in (measured_config_key, _engine):
        if hasattr(cached, "cache_clear"):  # tests may have replaced one with a plain function
            cached.cache_clear()
    for listener in list(_listeners):
        listener()


# ---- the database ------------------------------------------------------------------------------------------
@lru_cache(maxsize=8)
def _engine(url: str) -> Any:
    from convtune.storage.session import make_engine

    return make_engine(url)


@lru_cache(maxsize=4096)
def measured_config_key(problem_key: str, device_name: str, url: str, families: tuple[str, ...]) -> str | None:
    """The key of the best measured config that may serve a problem on a device among ``families`` (current kernel
    versions only; a tf32 problem's own rows and the strict float32 problem's, a strict problem's own only:
    :func:`convtune.storage.queries.results.find_measured_best`); None when there is none or the database cannot be
    read. Cached per problem key, so a tf32 call and a strict call of one shape are two entries."""
    try:
        from convtune.storage import queries as repo
        from convtune.storage.session import session_scope

        shas = {f: sha for f, sha in kernel_shas().items() if f in families}
        with session_scope(_engine(url)) as session:
            view = repo.find_measured_best(session, problem_key=problem_key, device_name=device_name,
                                           kernel_shas=shas)
            return None if view is None else view.config_key
    except Exception:  # no schema yet, a locked file, an unreachable server: the model's choice serves
        return None


def remember(problem: ConvProblem | str, device_name: str, config_key: str) -> None:
    """Serve ``config_key`` for ``problem`` on devices called ``device_name`` in this process (a measured result
    the service reported); clears the cached answers."""
    key = problem.key() if isinstance(problem, ConvProblem) else problem
    _remembered[(key, device_name)] = config_key
    clear_cache()


def forget_remembered() -> None:
    _remembered.clear()
    clear_cache()


# ---- resolution --------------------------------------------------------------------------------------------
def _accepted(problem: ConvProblem, key: str, families: Iterable[str], machine: Any,
              validate: Callable[[ConvProblem, Any, Any], Any] | None) -> Any | None:
    """The config of ``key`` if it is of one of ``families`` and valid for the problem (else None)."""
    from convtune.kernels.config import parse_config_key

    try:
        config = parse_config_key(key)
        if config.family not in families or config.direction != "fwd":
            return None
        if validate is None:
            from convtune.kernels.registry import get_spec

            get_spec(config.family, config.direction).plan(problem, config, machine)
        else:
            validate(problem, config, machine)
        return config
    except (ConvtuneError, ValueError):
        return None


def stored(problem: ConvProblem, machine: Any, families: Iterable[str], url: str | None = None,
           validate: Callable[[ConvProblem, Any, Any], Any] | None = None) -> Resolution | None:
    """The service's or the database's config for ``problem`` on ``machine`` (steps 1–2 of the module
    docstring), validated for the problem (by the registry's plan function, or ``validate``); None if neither
    has one."""
    families = tuple(sorted(families))
    key = problem.key()
    keys = problem.serving_keys()  # the problem's own key first, then the stricter twin's (tf32: the float32 key)
    for serving_key in keys:
        remembered = _remembered.get((serving_key, machine.name))
        if remembered is not None:
            config = _accepted(problem, remembered, families, machine, validate)
            if config is not None:
                return Resolution(config, "service")
    if not lookup_enabled():
        return None
    from_file = file_config_key(keys, machine.name, families)
    if from_file is not None:
        config = _accepted(problem, from_file, families, machine, validate)
        if config is not None:
            return Resolution(config, "file")
    db = database_url(url)
    if db is None:
        return None
    found = measured_config_key(key, machine.name, db, families)
    if found is None:
        return None
    config = _accepted(problem, found, families, machine, validate)
    return Resolution(config, "database") if config is not None else None


def resolve(problem: ConvProblem, machine: Any, families: Iterable[str], model: Callable[[], Any],
            url: str | None = None, validate: Callable[[ConvProblem, Any, Any], Any] | None = None) -> Resolution:
    """The config an op runs for ``problem`` on ``machine`` (module docstring); ``model()`` gives the model's
    choice when nothing stored serves."""
    found = stored(problem, machine, families, url, validate)
    return found if found is not None else Resolution(model(), "model")
