"""Would pruning keep the measured winners? Per replay-table shape, the least limits that keep one 3%-best config.

The tuner prunes a configuration whose modelled traffic exceeds ``traffic_ratio_max`` × the I/O bound for its own
on-chip memory, or whose predicted time exceeds ``predicted_factor`` × its family's best prediction
(:mod:`convtune.tuner.prune`). A replay table holds measured configurations; per shape, over the configurations within
3% of the shape's best measured time, this reports the least traffic ratio, the least predicted factor, and whether
some such config survives the earlier limits (16×, 1.5×) and the shipped ones. A shape where none survives can never be
tuned to within 3%: no search reaches a pruned configuration. Runs on a CPU in about a minute per table.

    python benchmarks/pruning_limits.py tests/data/replay_h200_*.json.gz \
        --out benchmarks/results/tuner_efficiency/pruning_limits.md
"""

from __future__ import annotations

import argparse
import math
from pathlib import Path

from convtune.kernels.registry import specs_for
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable
from convtune.tuner.prune import PruneSettings, build_candidates, prune

WITHIN = 1.03
EARLIER = PruneSettings(traffic_ratio_max=16.0, predicted_factor=1.5)


def good_keys(table: ReplayTable, problem_key: str) -> set[str]:
    """The shape's configs measured within 3% of its best."""
    ok = {k: r["median_ms"] for k, r in table.problems[problem_key].items() if r.get("status") == "ok"}
    best = min(ok.values())
    return {k for k, ms in ok.items() if ms <= best * WITHIN}


def specs_of(table: ReplayTable, problem_key: str) -> tuple[ConvProblem, list]:
    """The problem and the specs of the families the table measured for it."""
    problem = ConvProblem.parse(problem_key)
    return problem, specs_for(problem, {k.split(".")[0] for k in table.problems[problem_key]})


def kept(table: ReplayTable, problem_key: str, settings: PruneSettings) -> bool:
    """Whether :func:`~convtune.tuner.prune.prune` under ``settings`` keeps one of the shape's 3%-best configs."""
    problem, specs = specs_of(table, problem_key)
    survivors = {c.key for c in prune(problem, table.device.machine, specs, settings).survivors}
    return bool(survivors & good_keys(table, problem_key))


def shape_needs(table: ReplayTable, problem_key: str) -> list[tuple[float, float]]:
    """(traffic ratio, predicted time / its family's best feasible prediction) of every 3%-best config of the shape:
    the limits each would need (prune's predicted stage compares with the best prediction left after the traffic
    stage, never a better one, so these factors are upper bounds on what pruning computes)."""
    problem, specs = specs_of(table, problem_key)
    good = good_keys(table, problem_key)
    candidates = [c for c in build_candidates(problem, table.device.machine, specs) if math.isfinite(c.predicted_s)]
    family_best: dict[str, float] = {}
    for c in candidates:
        family_best[c.spec.family] = min(c.predicted_s, family_best.get(c.spec.family, math.inf))
    return [(c.traffic_ratio, c.predicted_s / family_best[c.spec.family]) for c in candidates if c.key in good]


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("tables", nargs="+")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    shipped = PruneSettings()
    lines = ["# Pruning limits against the measured winners (H200 replay tables)", "",
             f"Per shape, over its configs within 3% of the best measured: the least traffic ratio (modelled traffic / "
             f"the I/O bound for the config's own on-chip memory) and the least predicted factor (predicted time / its "
             f"family's best prediction), and whether one such config survives the earlier limits "
             f"({EARLIER.traffic_ratio_max:g}×, {EARLIER.predicted_factor:g}×) and the shipped ones "
             f"({shipped.traffic_ratio_max:g}×, {shipped.predicted_factor:g}×). "
             "`python benchmarks/pruning_limits.py " + " ".join(args.tables) + f" --out {args.out}`.", ""]
    summary = []
    for path in args.tables:
        table = ReplayTable.load(path)
        lines += [f"## {path}", "", "| shape | 3%-best configs | least traffic ratio | least predicted factor |"
                  f" kept ({EARLIER.traffic_ratio_max:g}×, {EARLIER.predicted_factor:g}×) |"
                  f" kept ({shipped.traffic_ratio_max:g}×, {shipped.predicted_factor:g}×) |",
                  "|---|---|---|---|---|---|"]
        lost_before = lost_now = 0
        for key in table.problems:
            needs = shape_needs(table, key)
            before, now = kept(table, key, EARLIER), kept(table, key, shipped)
            lost_before += not before
            lost_now += not now
            least_r = min((r for r, _ in needs), default=math.nan)
            least_f = min((f for _, f in needs), default=math.nan)
            lines.append(f"| `{key}` | {len(needs)} | {least_r:.1f} | {least_f:.2f} | {'yes' if before else '**no**'} |"
                         f" {'yes' if now else '**no**'} |")
        summary.append((path, len(table.problems), lost_before, lost_now))
        lines.append("")
    lines += ["## Summary: shapes whose every 3%-best config is pruned", "",
              "| table | shapes | earlier limits | shipped limits |", "|---|---|---|---|"]
    lines += [f"| {p} | {n} | {b} | {a} |" for p, n, b, a in summary]
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text("\n".join(lines) + "\n")
    print("\n".join(lines[-(len(summary) + 4):]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
