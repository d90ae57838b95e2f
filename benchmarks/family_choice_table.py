"""Direct vs Winograd per shape from ``convtune tune`` runs: the bound's choice against the measured winner.

Reads ``tune_suite.json`` of each DIR (benchmarks/tune_suite.py with every family; later DIRs override
earlier ones for the shapes they tuned). Per shape: the floor time of each algorithm (the bound's
choice is the lower one), each family's best measured time in that run, the tuned winner and cuDNN
fp32 measured in the same process; then the geometric-mean speedup over cuDNN and the share of 3×3
stride-1 shapes where the bound's choice is the measured winner. Nothing is measured here.

    python benchmarks/family_choice_table.py benchmarks/results/winograd_h200/tune_part1_30s \\
        benchmarks/results/winograd_h200/tune_part2_30s > benchmarks/results/winograd_h200/summary.md
"""

from __future__ import annotations

import argparse
import json
import math
import sys
from pathlib import Path
from typing import Any

from convtune.kernels.registry import get_spec


def load(folders: list[Path]) -> dict[str, dict[str, Any]]:
    rows: dict[str, dict[str, Any]] = {}
    for folder in folders:
        for r in json.loads((folder / "tune_suite.json").read_text()):
            if "error" not in r:
                rows[r["name"]] = r | {"source": folder.name}
    return rows


def _ms(v: float | None) -> str:
    return f"{v:.4f}" if v is not None else "—"


def table(rows: dict[str, dict[str, Any]]) -> str:
    lines = ["| shape | bound favours | direct floor ms | Winograd floor ms | direct best ms | fused best ms |"
             " unfused best ms | measured winner | agree | tuned ms | cuDNN fp32 ms | speedup | run |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups, agree, winograd_shapes = [], 0, 0
    for name, r in rows.items():
        fam = r.get("families", {})
        winner = r["best_config"].split(".", 1)[0]
        favoured = get_spec(r["bound_favours"]).algorithm if r.get("bound_favours") else "—"
        is_3x3 = "winograd" in fam
        ok = favoured == get_spec(winner).algorithm
        if is_3x3:
            winograd_shapes += 1
            agree += ok
        speedups.append(r["speedup_vs_cudnn"])
        floor_w = fam.get("winograd", {}).get("floor_ms")
        lines.append(
            f"| {name} | {favoured} | {_ms(fam.get('direct', {}).get('floor_ms'))} | {_ms(floor_w)} |"
            f" {_ms(fam.get('direct', {}).get('best_ms'))} | {_ms(fam.get('winograd', {}).get('best_ms'))} |"
            f" {_ms(fam.get('winograd_unfused', {}).get('best_ms'))} | {winner} | {'yes' if ok else 'NO'} |"
            f" {r['time_ms']:.4f} | {r['cudnn_fp32_ms']:.4f} | {r['speedup_vs_cudnn']:.2f} | {r['source']} |")
    geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
    three = [r["speedup_vs_cudnn"] for r in rows.values() if "winograd" in r.get("families", {})]
    lines += ["", f"Geometric-mean speedup over cuDNN fp32: **{geo:.2f}** over {len(speedups)} conv2d entries; "
                  f"3×3 stride-1 entries: min {min(three):.2f}, all ≥ 1.0: {'yes' if min(three) >= 1 else 'NO'}.",
              f"The bound's family choice matches the measured winner on {agree} of {winograd_shapes} 3×3 stride-1 "
              f"shapes ({100 * agree / max(1, winograd_shapes):.0f}%)."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dirs", nargs="+", type=Path)
    args = ap.parse_args()
    rows = load(args.dirs)
    print("# Direct vs Winograd on the H200 after `convtune tune` with every family\n")
    print("Per shape, one `convtune tune --backend gpu` (30 s budget, patience 60) over the direct, fused-Winograd "
          "and unfused-Winograd families; cuDNN fp32 (`allow_tf32=False`) timed in the same process. Floors: "
          "max(FLOPs / fp32 peak, I/O lower bound at S = L2 / copy bandwidth) with the run's measured ceilings "
          "(Winograd FLOPs = its α² multiplications, the better of F(2×2) and F(4×4)). Family bests are the "
          "best each family reached within that run (direct is explored only while its configs look competitive), "
          "so they are upper bounds on that family's time.\n")
    sys.stdout.write(table(rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
