"""One table from several ``gpu_check.sh tune retime`` runs: per shape, the latest run that tuned it.

Each DIR holds ``tune_suite.json`` / ``tune_suite.md`` (benchmarks/tune_suite.py) and ``retime.json``
(benchmarks/retime.py: the tuned and the brute-force configs re-timed interleaved, same build, same
process). Later DIRs override earlier ones for the shapes they tuned. Nothing is measured here; every
figure is copied from those files.

    python benchmarks/tune_suite_summary.py benchmarks/results/tune_h200/part1_45s \\
        benchmarks/results/tune_h200/part2_45s benchmarks/results/tune_h200/rerun_110s
"""

from __future__ import annotations

import argparse
import json
import re
import sys
from pathlib import Path
from typing import Any

WITHIN = 1.03  # "within 3% of the brute-force best"


def load_run(folder: Path) -> dict[str, dict[str, Any]]:
    """Shape name -> the tune row of that run, with its budget and its retime figures attached."""
    header = (folder / "tune_suite.md").read_text()
    budget = re.search(r"Budget ([0-9.]+) s", header)
    patience = re.search(r"patience ([0-9]+) trials", header)
    retimed = {r["name"]: r for r in json.loads((folder / "retime.json").read_text())}
    rows = {}
    for r in json.loads((folder / "tune_suite.json").read_text()):
        r = dict(r, run=folder.name, budget_s=float(budget.group(1)) if budget else None,
                 patience=int(patience.group(1)) if patience else 60)
        if r["name"] in retimed:
            r["retime"] = retimed[r["name"]]
        rows[r["name"]] = r
    return rows


def table(rows: list[dict[str, Any]]) -> str:
    lines = ["| shape | run | budget s | trials | tuned ms | brute-force ms (committed) | ratio | retimed ratio |"
             " efficiency | cuDNN fp32 ms | speedup | stop |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        rt = r.get("retime")
        lines.append(
            f"| {r['name']} | {r['run']} | {r['budget_s']:g} | {r['trials']} | {r['time_ms']:.4f} | "
            f"{r['brute_force_ms']:.4f} | {r['vs_brute_force']:.3f} | {rt['ratio']:.3f} | {r['efficiency']:.2f} | "
            f"{r['cudnn_fp32_ms']:.4f} | {r['speedup_vs_cudnn']:.2f} | {r['stop_reason']} |"
            if rt else f"| {r['name']} | {r['run']} | | | | | | (no retime) | | | | |")
    both = [r for r in rows if r.get("retime") and max(r["vs_brute_force"], r["retime"]["ratio"]) <= WITHIN]
    lines += ["", f"Within 3% of the brute-force best, re-timed side by side: "
                  f"{sum(r['retime']['ratio'] <= WITHIN for r in rows if r.get('retime'))} of {len(rows)} shapes; "
                  f"by both measures (committed and re-timed): {len(both)} of {len(rows)}."]
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, default=None, help="also write this markdown file")
    args = ap.parse_args(argv)
    merged: dict[str, dict[str, Any]] = {}
    for folder in args.dirs:
        merged |= load_run(folder)
    text = table(list(merged.values()))
    print(text)
    if args.out:
        args.out.write_text(
            "# `convtune tune` on the public conv2d suite, NVIDIA H200 — per shape, the latest run\n\n"
            "Runs (folders beside this file): " + ", ".join(f"`{d.name}`" for d in args.dirs) + ". "
            "ratio = tuned / the committed brute-force best (vs_cudnn.json: the model's top configs; "
            "space_sample.json: a uniform sample of the whole space); retimed ratio = the same two configs "
            "re-timed interleaved in one process right after tuning. The three 110 s re-runs used a fresh "
            "database and patience 200; the cubin cache of the machine was warm from the 45 s runs.\n\n"
            f"`python benchmarks/tune_suite_summary.py {' '.join(str(d) for d in args.dirs)}`\n\n" + text + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
