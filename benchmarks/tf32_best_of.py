"""Best of the TF32 families per shape, from vs_cudnn --math tf32 tables measured in separate runs: each family's
speedup over cuDNN TF32 is taken against the cuDNN time of its own run (same protocol, same GPU), and the shape's
best is the larger. Prints a per-shape table and the geomean.

    python benchmarks/tf32_best_of.py A/vs_cudnn_tf32.json B/vs_cudnn_tf32.json
"""

from __future__ import annotations

import argparse
import json
import math


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+")
    args = ap.parse_args(argv)
    per_shape: dict[str, dict[str, float]] = {}
    for path in args.tables:
        with open(path) as f:
            results = json.load(f)["results"]
        for r in results:
            if r.get("best") and r.get("speedup_vs_baseline"):
                family = r["best"]["config"].split(".")[0]
                per_shape.setdefault(r["name"], {})[f"{family} ({path.split('/')[-4]})"] = r["speedup_vs_baseline"]
    print("| shape | " + " | ".join(["best family", "speedup vs cuDNN TF32", "others"]) + " |")
    print("|---|---|---|---|")
    best_all = []
    for name, runs in per_shape.items():
        family, best = max(runs.items(), key=lambda kv: kv[1])
        best_all.append(best)
        others = ", ".join(f"{f} {v:.2f}" for f, v in runs.items() if f != family)
        print(f"| {name} | {family} | {best:.2f} | {others} |")
    geo = math.exp(sum(math.log(v) for v in best_all) / len(best_all))
    print(f"\nbest-of geomean over {len(best_all)} shapes: {geo:.2f}; lowest {min(best_all):.2f}; "
          f"below 0.8: {sum(v < 0.8 for v in best_all)}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
