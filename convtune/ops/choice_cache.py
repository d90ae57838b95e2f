"""The untuned choice, remembered across processes: a small JSON file of (problem, machine, families) → config key.

The analytic models' choice (:func:`convtune.ops.conv2d.model_choice`) is exhaustive, and on shapes where the direct
family's floor is under the best tensor-core prediction it scores its 10⁴–10⁵ plans: up to 2.9 s of host time on the
first call of a distinct untuned shape (median 0.12 s over the public and wide suites' 165 choices on a 2-core
machine; ``benchmarks/results/model_choice_host``).
A process caches the choice in memory; this file keeps it for the next process, so a model's second run pays
nothing. An entry is valid only for the code that made it: its key holds a fingerprint of convtune's source files
(the models, spaces and kernels that decide the choice), the machine model (name and every ceiling), and each
considered family's kind and choice calibration.

``CONVTUNE_CHOICE_CACHE``: the file (default ``$XDG_CACHE_HOME/convtune/model_choices.json``, else
``~/.cache/convtune/model_choices.json``); ``off`` (or empty) disables it. A file that cannot be read or written is
ignored: the choice is recomputed, never refused.
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import tempfile
import threading
from dataclasses import asdict
from functools import cache
from pathlib import Path
from typing import Any

from convtune.kernels import experimental
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

ENV = "CONVTUNE_CHOICE_CACHE"
#: entries kept; beyond it the oldest go (a file of ~100 bytes an entry)
MAX_ENTRIES = 20_000
_lock = threading.Lock()
_loaded: dict[str, dict[str, str]] = {}


def cache_path() -> Path | None:
    """The file, or None when ``CONVTUNE_CHOICE_CACHE`` turns it off."""
    raw = os.environ.get(ENV)
    if raw is not None:
        return None if raw.strip().lower() in ("", "off", "0", "none") else Path(raw).expanduser()
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "convtune" / "model_choices.json"


@cache
def code_fingerprint() -> str:
    """:func:`source_fingerprint` of the installed convtune package: any change to a model, space or kernel makes
    every stored choice stale."""
    return source_fingerprint(Path(__file__).resolve().parents[1])


def source_fingerprint(root: Path) -> str:
    """SHA-256 (20 hex digits) over the Python and CUDA sources under ``root``: relative path and bytes, sorted."""
    digest = hashlib.sha256()
    for path in sorted(p for p in root.rglob("*") if p.suffix in (".py", ".cu", ".cuh")):
        digest.update(str(path.relative_to(root)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:20]


def entry_key(problem: ConvProblem, machine: MachineModel, specs: list[Any]) -> str:
    """The code fingerprint, a hash of the machine model, of the families (kind, choice calibration, the classes
    the choice considers them in) and of what ``CONVTUNE_EXPERIMENTAL`` enables (a family, or a field of a space),
    and the problem's key."""
    families = [(s.kind, s.choice_scale, s.choice_offset_s, tuple(s.choice_classes), s.untuned_classes)
                for s in specs]
    context = json.dumps([asdict(machine), families, sorted(experimental.names())], sort_keys=True, default=str)
    return f"{code_fingerprint()}|{hashlib.sha256(context.encode()).hexdigest()[:16]}|{problem.key()}"


def _entries(path: Path) -> dict[str, str]:
    with _lock:
        if str(path) not in _loaded:
            try:
                data = json.loads(path.read_text())
                _loaded[str(path)] = {k: v for k, v in data.get("choices", {}).items() if isinstance(v, str)}
            except (OSError, ValueError, AttributeError):
                _loaded[str(path)] = {}
        return _loaded[str(path)]


def lookup(problem: ConvProblem, machine: MachineModel, specs: list[Any]) -> str | None:
    """The stored config key of this choice, or None."""
    path = cache_path()
    if path is None:
        return None
    return _entries(path).get(entry_key(problem, machine, specs))


def store(problem: ConvProblem, machine: MachineModel, specs: list[Any], config_key: str) -> None:
    """Remember a choice: merged into what the file holds now (another process may have written since), written to
    a temporary file and renamed over it (readers never see half a file)."""
    path = cache_path()
    if path is None:
        return
    key = entry_key(problem, machine, specs)
    with _lock:
        entries = _loaded.setdefault(str(path), {})
        entries[key] = config_key
        try:
            on_disk = json.loads(path.read_text()).get("choices", {})
        except (OSError, ValueError, AttributeError):
            on_disk = {}
        merged = {**on_disk, **entries}
        if len(merged) > MAX_ENTRIES:
            merged = dict(list(merged.items())[-MAX_ENTRIES:])
        with contextlib.suppress(OSError):
            path.parent.mkdir(parents=True, exist_ok=True)
            fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=".model_choices.", suffix=".tmp")
            try:
                with os.fdopen(fd, "w") as f:
                    json.dump({"format": "convtune-model-choices/1", "choices": merged}, f)
                os.replace(tmp, path)
            finally:
                with contextlib.suppress(OSError):
                    os.unlink(tmp)


def forget() -> None:
    """Drop what this process read (tests; a file changed behind its back)."""
    with _lock:
        _loaded.clear()
