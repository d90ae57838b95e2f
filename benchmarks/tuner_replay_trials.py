"""Trials the tuner needs to reach within 3% of each replay-table shape's best measured config (one seed).

``convtune.tuner.tune`` replays each shape of each table (only the measured configurations exist; see
``benchmarks/tuner_efficiency.py``, whose ``ours`` runs this is) and stops at the first config within 3%; a shape never
reached counts as 601 (the cap). Prints the trials per shape and their geomean per table. CPU, minutes per table.

    python benchmarks/tuner_replay_trials.py tests/data/replay_h200_tf32.json.gz tests/data/replay_h200_bf16.json.gz
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
import tuner_efficiency as te

CAP = 600


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    for path in args.tables:
        trials = []
        for key, rows in te._table(path).problems.items():
            best = min(r["median_ms"] for r in rows.values() if r.get("status") == "ok")
            order, _ = te.run_method(path, key, "ours", args.seed, CAP, best * te.WITHIN)
            hit, _ = te.first_hit(order, rows, best)
            trials.append(hit or CAP + 1)
        geomean = te.geomean(trials)
        print(f"{path}: {trials} geomean {geomean:.2f}, never reached {sum(t > CAP for t in trials)}", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
