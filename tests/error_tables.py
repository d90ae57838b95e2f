"""The error table the tensor-core GPU tests write: every case's relative errors (ours, cuDNN's) as JSON at the
path an environment variable names, merged across pytest-xdist workers under a lock; rows measured with another
kernel source are dropped."""

from __future__ import annotations

import fcntl
import json
import os
from pathlib import Path
from typing import Any


def write_error_table(env_var: str, records: list[dict[str, Any]], kernel: str, sha: str,
                      extra: dict[str, Any]) -> None:
    """Merge ``records`` (rows with an ``id``) into the table at ``$env_var``: {"kernel", "kernel_sha256", ...extra,
    "cases"}; nothing without the variable or rows."""
    target = os.environ.get(env_var)
    if not target or not records:
        return
    path = Path(target)
    path.parent.mkdir(parents=True, exist_ok=True)
    with open(path.with_name(path.name + ".lock"), "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        rows: dict[str, dict[str, Any]] = {}
        if path.exists():
            try:
                old = json.loads(path.read_text())
            except ValueError:
                old = {}
            if old.get("kernel_sha256") == sha:
                rows = {row["id"]: row for row in old.get("cases", [])}
        rows.update({row["id"]: row for row in records})
        table = {"kernel": kernel, "kernel_sha256": sha, **extra,
                 "cases": sorted(rows.values(), key=lambda row: row["id"])}
        path.write_text(json.dumps(table, indent=1) + "\n")
