"""Best configs as a JSON file a deployment ships instead of the database (``convtune export``,
``CONVTUNE_CONFIGS``).

The file (:data:`SCHEMA`, :data:`SCHEMA_VERSION`)::

    {"schema": "convtune.best_configs", "schema_version": 1, "exported_at": "2026-12-01T12:00:00+00:00",
     "filters": {"device": null, "backend": "gpu"}, "kernel_versions": {"direct": "<sha256>", ...},
     "entries": [{"problem": "<ConvProblem key>", "device": "NVIDIA H200", "compute_capability": "9.0",
                  "scope": "*", "config": "<KernelConfig key>", "family": "direct", "time_ms": 0.031,
                  "floor_ms": 0.0105, "efficiency": 0.34, "kernel_version": "<sha256>", "backend": "gpu",
                  "measured": true, "provisional": false}, ...]}

Times are milliseconds; ``kernel_version`` is the SHA-256 of the family's source the time was measured with;
``measured`` says whether the row would serve an op (a GPU measurement of the config, status ok).
``kernel_versions`` records the exporting install's sources (informative).

:func:`load` validates a file (:class:`ConfigFileError` names the file and the field) and :meth:`ConfigFile.lookup`
answers the resolver (:mod:`convtune.ops.resolver`): the fastest measured entry of the problem (and of the problems
whose configs may serve it: a tf32 problem's strict float32 twin) on the device, among the caller's families, whose
kernel version is the family's current source. Entries of another kernel version
are skipped with one :class:`StaleConfigWarning` per file load.
"""

from __future__ import annotations

import json
import math
import os
import tempfile
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any

from convtune.errors import InvalidInput
from convtune.vocabulary import BACKENDS as BACKENDS
from convtune.vocabulary import OVERALL_SCOPE

SCHEMA = "convtune.best_configs"
SCHEMA_VERSION = 1
CONFIGS_ENV = "CONVTUNE_CONFIGS"


class ConfigFileError(InvalidInput):
    """A configs file cannot be used: ``path`` is the file, ``field`` the JSON field (e.g. ``entries[3].time_ms``)."""

    def __init__(self, path: str | os.PathLike[str], field: str, message: str) -> None:
        super().__init__(f"{CONFIGS_ENV} file {os.fspath(path)}: {field}", message)
        self.path = os.fspath(path)
        self.json_field = field


class StaleConfigWarning(UserWarning):
    """Entries of a configs file were measured with another kernel source than this install's: they never serve."""


@dataclass(frozen=True, slots=True)
class Entry:
    """One best config of the file (see the module docstring for the fields; times in milliseconds)."""

    problem: str
    device: str
    compute_capability: str | None
    scope: str
    config: str
    family: str
    time_ms: float
    floor_ms: float | None
    efficiency: float | None
    kernel_version: str | None
    backend: str
    measured: bool
    provisional: bool

    def to_dict(self) -> dict[str, Any]:
        return {name: getattr(self, name) for name in self.__slots__}


# ---- writing -------------------------------------------------------------------------------------------------
def entries_from_db(session: Any, *, device: str | None = None, backend: str | None = "gpu") -> list[Entry]:
    """The best rows of the database as entries (``backend=None``: every backend, each row flagged)."""
    from convtune.storage import queries as repo

    out = []
    for row in repo.list_export_rows(session, device_name=device, backend=backend):
        v = row.view
        out.append(Entry(problem=v.problem_key, device=v.device_name, compute_capability=v.compute_capability,
                         scope=v.scope, config=v.config_key, family=v.config_kind.partition(".")[0],
                         time_ms=float(v.time_ms), floor_ms=_finite(v.floor_ms), efficiency=_finite(v.efficiency),
                         kernel_version=row.kernel_version, backend=v.backend, measured=row.servable,
                         provisional=bool(v.provisional)))
    return out


@cache
def kernel_shas() -> dict[str, str]:
    """family → SHA-256 of its current source (the kernel version), for every registered forward family
    (also :func:`convtune.ops.resolver.kernel_shas`)."""
    from convtune.kernels.registry import REGISTRY

    return {spec.family: spec.source_sha256() for (_, direction), spec in REGISTRY.items() if direction == "fwd"}


_current_shas = kernel_shas  # load()'s parameter of that name shadows the function


def document(entries: Iterable[Entry], *, device: str | None, backend: str | None) -> dict[str, Any]:
    """The file's JSON object."""
    return {"schema": SCHEMA, "schema_version": SCHEMA_VERSION,
            "exported_at": datetime.now(UTC).isoformat(timespec="seconds"),
            "filters": {"device": device, "backend": backend}, "kernel_versions": dict(sorted(kernel_shas().items())),
            "entries": [e.to_dict() for e in entries]}


def write(path: str | os.PathLike[str], doc: Mapping[str, Any]) -> None:
    """Write ``doc`` to ``path`` atomically (a reader never sees half a file)."""
    target = Path(path)
    fd, tmp = tempfile.mkstemp(prefix=f".{target.name}.", dir=target.parent or ".")
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as fh:
            json.dump(doc, fh, indent=1)
            fh.write("\n")
        os.replace(tmp, target)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise


def export(engine: Any, path: str | os.PathLike[str], *, device: str | None = None,
           backend: str | None = "gpu") -> dict[str, Any]:
    """Export the best rows of ``engine``'s database to ``path``; returns the document written."""
    from convtune.storage.session import session_scope

    with session_scope(engine) as session:
        entries = entries_from_db(session, device=device, backend=backend)
    doc = document(entries, device=device, backend=backend)
    write(path, doc)
    return doc


def _finite(value: Any) -> float | None:
    return float(value) if value is not None and math.isfinite(float(value)) else None


# ---- reading -------------------------------------------------------------------------------------------------
class ConfigFile:
    """A validated configs file, indexed by (problem key, device name)."""

    def __init__(self, path: str, entries: list[Entry]) -> None:
        self.path = path
        self.entries = entries
        self._by: dict[tuple[str, str], list[Entry]] = {}
        for e in sorted(entries, key=lambda e: e.time_ms):
            self._by.setdefault((e.problem, e.device), []).append(e)

    def servable(self, kernel_shas: Mapping[str, str]) -> tuple[int, int]:
        """(entries that may serve, measured entries skipped for a kernel version other than the current)."""
        measured = [e for e in self.entries if e.measured and e.backend == "gpu" and not e.provisional]
        current = [e for e in measured if e.kernel_version is not None
                   and kernel_shas.get(e.family) == e.kernel_version]
        return len(current), len(measured) - len(current)

    def lookup(self, problem_keys: str | Sequence[str], device_name: str, kernel_shas: Mapping[str, str],
               families: Iterable[str]) -> str | None:
        """The config key of the fastest measured entry of the problems on devices called ``device_name``, of one of
        ``families`` and of its family's current kernel version (``kernel_shas``: family → SHA-256); None if none.

        ``problem_keys``: one key, or every key that may serve the problem (``ConvProblem.serving_keys()``: a tf32
        problem's and the strict float32 problem's); the fastest entry among them wins."""
        wanted = set(families)
        keys = (problem_keys,) if isinstance(problem_keys, str) else tuple(problem_keys)
        best: Entry | None = None
        for key in keys:
            for e in self._by.get((key, device_name), ()):  # fastest first
                if (e.measured and e.backend == "gpu" and not e.provisional and e.family in wanted
                        and e.kernel_version is not None and kernel_shas.get(e.family) == e.kernel_version):
                    if best is None or e.time_ms < best.time_ms:
                        best = e
                    break
        return best.config if best is not None else None


def load(path: str | os.PathLike[str], kernel_shas: Mapping[str, str] | None = None) -> ConfigFile:
    """Read and check a configs file; warns once (:class:`StaleConfigWarning`) when measured entries are of another
    kernel version than ``kernel_shas`` (default: this install's current sources).

    Raises:
        ConfigFileError: the file is missing or unreadable, not JSON, of another schema or a newer version, or
            an entry lacks a field or has one of the wrong type (the error names it).
    """
    name = os.fspath(path)
    try:
        with open(name, encoding="utf-8") as fh:
            doc = json.load(fh)
    except OSError as exc:
        raise ConfigFileError(name, "file", f"cannot be read: {exc.strerror or exc}") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as exc:
        raise ConfigFileError(name, "file", f"is not valid JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise ConfigFileError(name, "file", "must be a JSON object (written by `convtune export`)")
    if doc.get("schema") != SCHEMA:
        raise ConfigFileError(name, "schema", f"{doc.get('schema')!r} is not {SCHEMA!r}: not a `convtune export` file")
    version = doc.get("schema_version")
    if not isinstance(version, int) or isinstance(version, bool) or version < 1:
        raise ConfigFileError(name, "schema_version", f"{version!r} must be an integer >= 1")
    if version > SCHEMA_VERSION:
        raise ConfigFileError(name, "schema_version", f"{version} is newer than this convtune reads "
                                                      f"({SCHEMA_VERSION}): upgrade convtune")
    raw = doc.get("entries")
    if not isinstance(raw, list):
        raise ConfigFileError(name, "entries", "must be a list")
    entries = [_entry(name, f"entries[{i}]", item) for i, item in enumerate(raw)]
    loaded = ConfigFile(name, entries)
    if kernel_shas is None:
        kernel_shas = _current_shas()
    _, stale = loaded.servable(kernel_shas)
    if stale:
        warnings.warn(f"{CONFIGS_ENV} file {name}: {stale} measured entr{'y' if stale == 1 else 'ies'} of another "
                      "kernel version than this convtune's are skipped (tune again and re-export)",
                      StaleConfigWarning, stacklevel=2)
    return loaded


_STR, _OPT_STR, _NUM, _OPT_NUM, _BOOL = "a string", "a string or null", "a number", "a number or null", "true/false"


def _entry(path: str, where: str, item: Any) -> Entry:
    if not isinstance(item, dict):
        raise ConfigFileError(path, where, "must be an object")

    def get(field: str, kind: str, default: Any = ...) -> Any:
        if field not in item:
            if default is not ...:
                return default
            raise ConfigFileError(path, f"{where}.{field}", "is missing")
        value = item[field]
        ok = {_STR: isinstance(value, str) and value != "",
              _OPT_STR: value is None or isinstance(value, str),
              _NUM: isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value),
              _OPT_NUM: value is None or (isinstance(value, int | float) and not isinstance(value, bool)),
              _BOOL: isinstance(value, bool)}[kind]
        if not ok:
            raise ConfigFileError(path, f"{where}.{field}", f"{value!r} must be {kind}")
        return value

    config = get("config", _STR)
    from convtune.kernels.config import parse_config_key

    try:
        family = parse_config_key(config).family
    except ValueError as exc:  # InvalidConfig is a ValueError too
        raise ConfigFileError(path, f"{where}.config", f"{config!r} is not a config key: {exc}") from None
    time_ms = get("time_ms", _NUM)
    if time_ms <= 0:
        raise ConfigFileError(path, f"{where}.time_ms", f"{time_ms!r} must be > 0")
    backend = get("backend", _STR)
    if backend not in BACKENDS:
        raise ConfigFileError(path, f"{where}.backend", f"{backend!r} must be one of {', '.join(BACKENDS)}")
    return Entry(problem=get("problem", _STR), device=get("device", _STR),
                 compute_capability=get("compute_capability", _OPT_STR, None), scope=get("scope", _STR, OVERALL_SCOPE),
                 config=config, family=family, time_ms=float(time_ms), floor_ms=get("floor_ms", _OPT_NUM, None),
                 efficiency=get("efficiency", _OPT_NUM, None), kernel_version=get("kernel_version", _OPT_STR),
                 backend=backend, measured=get("measured", _BOOL), provisional=get("provisional", _BOOL, False))
