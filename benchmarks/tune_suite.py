"""`convtune tune` on every conv2d entry of a suite on the GPU host, compared with brute force.

Each shape is tuned by the CLI itself (``convtune tune ... --backend gpu --json``, fresh SQLite file),
which also times cuDNN fp32 in the same process. The table compares the tuned time with the best of
the brute-force runs committed earlier on the same kind of GPU: ``vs_cudnn.json`` (the model's top
direct configurations, all measured), ``space_sample.json`` (a uniform sample of the whole direct space)
and ``winograd_h200/sweep_full/winograd_sweep.json`` (every fused and unfused Winograd configuration)
when present. Writes ``tune_suite.json`` and ``tune_suite.md`` under ``--out``.

    python benchmarks/tune_suite.py --out benchmarks/results --budget-s 60
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import io
import json
import math
import sys
import time
from pathlib import Path

from convtune.cli import main as convtune_main
from convtune.problem import ConvProblem


def brute_force_best(results_dir: Path) -> dict[str, tuple[float, str, str]]:
    """problem key -> (best median ms, config, source file) over the committed brute-force runs."""
    best: dict[str, tuple[float, str, str]] = {}
    for name in ("vs_cudnn.json", "space_sample.json", "winograd_h200/sweep_full/winograd_sweep.json"):
        path = results_dir / name
        if not path.is_file():
            continue
        for r in json.loads(path.read_text())["results"]:
            for c in r["candidates"]:
                if c.get("status") == "ok" and (r["problem"] not in best or c["median_ms"] < best[r["problem"]][0]):
                    best[r["problem"]] = (c["median_ms"], c["config"], name)
    return best


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/public.json")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--reference-dir", default="benchmarks/results", help="where vs_cudnn.json etc. are")
    ap.add_argument("--budget-s", type=float, default=60.0)
    ap.add_argument("--budget-trials", type=int, default=200)
    ap.add_argument("--patience", type=int, default=60, help="stop after this many trials without improvement")
    ap.add_argument("--db", default="sqlite:////tmp/convtune-tune-suite.db")
    ap.add_argument("--only", nargs="*")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    reference = brute_force_best(Path(args.reference_dir))
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if not args.only or e["name"] in args.only]
    rows = []
    for entry in entries:
        problem = ConvProblem.from_mapping(entry)
        argv = ["tune", *problem.key().split(), "--backend", "gpu", "--json", "--db", args.db,
                "--budget-s", str(args.budget_s), "--budget-trials", str(args.budget_trials),
                "--patience", str(args.patience)]
        buf = io.StringIO()
        t0 = time.perf_counter()
        with contextlib.redirect_stdout(buf):
            status = convtune_main(argv)
        wall = time.perf_counter() - t0
        if status != 0:
            rows.append({"name": entry["name"], "problem": problem.key(), "error": f"exit {status}", "wall_s": wall})
            continue
        summary = json.loads(buf.getvalue())
        ref = reference.get(problem.key())
        summary |= {"name": entry["name"], "wall_s": wall,
                    "brute_force_ms": ref[0] if ref else None, "brute_force_config": ref[1] if ref else None,
                    "brute_force_source": ref[2] if ref else None,
                    "vs_brute_force": summary["time_ms"] / ref[0] if ref and summary["time_ms"] else None}
        rows.append(summary)
        print(f"{entry['name']}: {summary['time_ms']:.4f} ms (brute force {ref[0] if ref else float('nan'):.4f}),"
              f" {summary['trials']} trials, {wall:.0f} s, stop: {summary['stop_reason']}", file=sys.stderr)
        (out / "tune_suite.json").write_text(json.dumps(rows, indent=1))
    lines = [f"# `convtune tune` on the public conv2d suite — {dt.datetime.now(dt.UTC):%Y-%m-%d %H:%M} UTC", "",
             f"Budget {args.budget_s:g} s / {args.budget_trials} trials per shape, patience {args.patience} "
             "trials (wall includes pruning, worker start and cuDNN timing). "
             "Brute force = the best measured of the committed exhaustive runs (vs_cudnn.json: the model's "
             "top configs; space_sample.json: a uniform sample of the whole space; winograd_sweep.json: every "
             "Winograd config). ratio = tuned / brute force (≤ 1.03 is within 3%). Family = the tuned winner's; "
             "bound = the family whose algorithm has the lowest floor time.", "",
             "| shape | family | tuned ms | brute-force ms | ratio | trials | wall s | efficiency | cuDNN fp32 ms"
             " | speedup | bound favours | stop |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups = []
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r['error']} | | | | | | | | | | |")
            continue
        if r.get("speedup_vs_cudnn"):
            speedups.append(r["speedup_vs_cudnn"])
        bf = f"{r['brute_force_ms']:.4f}" if r["brute_force_ms"] else "—"
        ratio = f"{r['vs_brute_force']:.3f}" if r["vs_brute_force"] else "—"
        cudnn = f"{r['cudnn_fp32_ms']:.4f}" if r.get("cudnn_fp32_ms") else "—"
        speed = f"{r['speedup_vs_cudnn']:.2f}" if r.get("speedup_vs_cudnn") else "—"
        family = (r.get("best_config") or "?").split(".", 1)[0]
        lines.append(f"| {r['name']} | {family} | {r['time_ms']:.4f} | {bf} | {ratio} | {r['trials']} |"
                     f" {r['wall_s']:.0f} | {r['efficiency']:.2f} | {cudnn} | {speed} | {r.get('bound_favours', '—')} |"
                     f" {r['stop_reason']} |")
    within = [r for r in rows if r.get("vs_brute_force") is not None]
    if within:
        ok = sum(1 for r in within if r["vs_brute_force"] <= 1.03)
        lines += ["", f"Within 3% of brute force: {ok} of {len(within)} shapes."]
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        lines.append(f"Geometric-mean speedup over cuDNN fp32: {geo:.2f} ({len(speedups)} shapes); "
                     f"min {min(speedups):.2f}.")
    (out / "tune_suite.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
