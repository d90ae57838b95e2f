"""Merge ``user_suite.py`` runs of one suite and class whose tuning budgets each reached part of it.

A TF32 suite tuned within one device call's time may leave shapes on the model's choice (``config_source`` "model");
a later run with ``--only`` tunes the rest. Each shape's row is taken from the last run that served it a tuned config
(``config_source`` "database" or "table"), else from the first run. Every ratio stays the one measured in its own
process: a row's convtune and cuDNN times come from the same run. Prints the merged geomeans and lowest shapes of the
tuned columns (kernel by the CUDA profiler, CUDA graph, eager) as a markdown table.

    python benchmarks/user_suite_merge.py RUN_A/user_suite.json RUN_B/user_suite.json
"""

from __future__ import annotations

import argparse
import json
import math
from pathlib import Path
from typing import Any

TUNED_SOURCES = ("database", "table")
COLUMNS = (("kernel", "speedup_kernel"), ("graph", "speedup_graph"), ("eager", "speedup_eager"))


def merge(runs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The first run's shapes in its order, each row from the last run that tuned it (else the first run's)."""
    first = runs[0]["rows"]
    merged = []
    for row in first:
        tuned = [r for run in runs for r in run["rows"]
                 if r["name"] == row["name"] and r.get("config_source") in TUNED_SOURCES]
        merged.append(tuned[-1] if tuned else row)
    return merged


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def summary(rows: list[dict[str, Any]]) -> str:
    """A markdown table: per column, the geomean speedup and the lowest shape; and how many shapes were tuned."""
    tuned = sum(r.get("config_source") in TUNED_SOURCES for r in rows)
    lines = [f"{len(rows)} shapes, {tuned} tuned (the others: the model's choice)", "",
             "| column | geomean × baseline | lowest |", "|---|---|---|"]
    for label, key in COLUMNS:
        values = [r[key] for r in rows if r.get(key) and r[key] == r[key]]
        if values:
            low = min((r for r in rows if r.get(key) == min(values)), key=lambda r: r[key])
            lines.append(f"| {label} | {geomean(values):.2f} | {min(values):.2f} ({low['name']}) |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("runs", nargs="+", type=Path, help="user_suite.json files of one suite and class, oldest first")
    args = ap.parse_args(argv)
    runs = [json.loads(path.read_text()) for path in args.runs]
    classes = {run["meta"].get("class") for run in runs}
    if len(classes) != 1:
        raise SystemExit(f"the runs are of different classes: {sorted(map(str, classes))}")
    print(summary(merge(runs)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
