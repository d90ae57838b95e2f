"""Re-time given configurations of given problems, interleaved, with the current build (GPU host).

Used to compare a tuned config with a brute-force best measured by an earlier build on equal terms.

    python benchmarks/retime.py --pairs-from benchmarks/results/tune_suite.json --out benchmarks/results
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from convtune.problem import ConvProblem
from convtune.tuner.gpu import CupyBenchmarker, plan_for


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--pairs-from", required=True, help="tune_suite.json: rows with best_config and brute_force_config")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    rows = [r for r in json.loads(Path(args.pairs_from).read_text())
            if r.get("brute_force_config") and (not args.only or r["name"] in args.only)]
    bench = CupyBenchmarker()
    out = []
    for r in rows:
        problem = ConvProblem.parse(r["problem"])
        keys = [r["best_config"], r["brute_force_config"]]
        plans = [plan_for(problem, k, bench.machine) for k in keys]
        for pl in plans:
            bench.measure(problem, pl)  # compile + verify
        tuned, brute = (t.median_ms for t in bench.retime(problem, plans, rounds=args.rounds))
        out.append({"name": r["name"], "problem": r["problem"], "tuned_config": keys[0], "tuned_ms": tuned,
                    "brute_force_config": keys[1], "brute_force_ms_now": brute, "ratio": tuned / brute})
        print(f"{r['name']}: tuned {tuned:.4f} ms vs brute-force config {brute:.4f} ms now -> {tuned / brute:.3f}",
              file=sys.stderr)
    Path(args.out, "retime.json").write_text(json.dumps(out, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
