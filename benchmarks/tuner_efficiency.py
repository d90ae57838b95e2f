"""Tuner efficiency by replay: how many trials (and nvcc seconds) until within 3% of the best?

Universe: the uniform 2000-config sample of the unpruned direct space measured on the H200
(``tests/data/replay_h200_space_sample.json.gz``, from benchmarks/space_sample.py). Per shape and seed:

* **ours** — ``convtune.tuner.tune.tune`` itself (bound pruning + warm start with the best-predicted
  survivors + local search around the best measured (3 of 4 trials) and TPE (1 of 4)), replaying the
  sample: the survivors it can try are the sampled ones (so the local search's "nearest unevaluated
  survivor" is the nearest *sampled* one, rarely a one-step neighbour: the sample holds 2-5% of the
  valid configurations);
* **tpe** — Optuna TPE over the whole sample (no pruning, no warm start), same parameter encoding;
* **random** — random search over the whole sample.

Trials count every evaluated configuration; nvcc seconds sum the sampled configs' measured compile
times up to and including the first one within 3% of the sample's best. Runs on a CPU.

    python benchmarks/tuner_efficiency.py --seeds 20 --out benchmarks/results
"""

from __future__ import annotations

import argparse
import math
import random
import statistics
import sys
import tempfile
from pathlib import Path

import optuna

from convtune.kernels.registry import specs_for
from convtune.problem import ConvProblem
from convtune.storage.migrate import upgrade
from convtune.storage.session import make_engine
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.prune import build_candidates, prune
from convtune.tuner.study import ConfigSpace, make_sampler
from convtune.tuner.tune import tune

WITHIN = 1.03


def first_hit(order: list[str], rows: dict[str, dict], target_ms: float) -> tuple[int | None, float]:
    """(trials until the first config within WITHIN of the target, nvcc seconds spent until then)."""
    nvcc = 0.0
    for i, key in enumerate(order, 1):
        row = rows[key]
        nvcc += row.get("compile_s") or 0.0
        if row.get("status") == "ok" and row["median_ms"] <= target_ms * WITHIN:
            return i, nvcc
    return None, nvcc


def run_ours(table: ReplayTable, problem: ConvProblem, seed: int, max_trials: int, stop_at_ms: float) -> list[str]:
    with tempfile.TemporaryDirectory() as tmp:
        engine = make_engine(f"sqlite:///{tmp}/eff.db")
        upgrade(engine)
        bench = ReplayBenchmarker(table)
        tune(problem, bench, engine, budget_trials=max_trials, budget_s=1e9, patience=10**9, epsilon=0.0, seed=seed,
             stop_at_ms=stop_at_ms)
        engine.dispose()
        return [k for p, k in bench.measured if p == problem.key()]


def run_baseline(space: ConfigSpace, values: dict[str, float], sampler: str, seed: int, max_trials: int,
                 stop_at_ms: float) -> list[str]:
    if sampler == "random":
        keys = sorted(space.rank)
        random.Random(seed).shuffle(keys)
        return keys[:max_trials]
    optuna.logging.set_verbosity(optuna.logging.WARNING)
    study = optuna.create_study(sampler=make_sampler("tpe", seed), direction="minimize")
    order: list[str] = []
    evaluated: set[str] = set()
    while len(order) < max_trials:
        trial = study.ask()
        cand = space.nearest(space.suggest(trial), evaluated)
        if cand is None:
            break
        evaluated.add(cand.key)
        order.append(cand.key)
        value = values.get(cand.key)
        if value is None:
            study.tell(trial, state=optuna.trial.TrialState.FAIL)
        else:
            study.tell(trial, value)
            if value <= stop_at_ms:
                break
    return order


def spearman(a: list[float], b: list[float]) -> float:
    """Rank correlation (ties broken by position; the measured medians have none)."""
    ra = {i: r for r, i in enumerate(sorted(range(len(a)), key=a.__getitem__))}
    rb = {i: r for r, i in enumerate(sorted(range(len(b)), key=b.__getitem__))}
    n = len(a)
    return 1 - 6 * sum((ra[i] - rb[i]) ** 2 for i in range(n)) / (n * (n * n - 1))


def summarize(hits: list[tuple[int | None, float]], cap: int) -> dict:
    trials = sorted(h if h is not None else cap + 1 for h, _ in hits)
    secs = sorted(s for _, s in hits)
    reached = sum(1 for h, _ in hits if h is not None)
    med = statistics.median(trials)
    return {"median_trials": med, "p25": trials[len(trials) // 4], "p75": trials[(3 * len(trials)) // 4],
            "median_nvcc_s": statistics.median(secs), "reached": reached, "runs": len(hits),
            "median_censored": med > cap}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--table", default="tests/data/replay_h200_space_sample.json.gz")
    ap.add_argument("--seeds", type=int, default=20)
    ap.add_argument("--max-trials", type=int, default=600, help="cap per run (runs not reaching count as cap+1)")
    ap.add_argument("--out", default="benchmarks/results")
    args = ap.parse_args()
    table = ReplayTable.load(args.table)
    machine = table.device.machine
    lines = ["# Tuner efficiency (replay of the H200 space sample)", "",
             f"Universe: {args.table} (uniform sample of the unpruned direct space, measured on {table.device.name};"
             f" {table.source}). {args.seeds} seeds per method; trials until the first config within 3% of the"
             f" sample's best; runs capped at {args.max_trials} trials (a run that never reaches counts as"
             f" {args.max_trials + 1}). model ρ: Spearman correlation of the direct model's predicted time with the"
             f" measured time over the sample's configs (the order pruning and the warm start trust)."
             f" `python benchmarks/tuner_efficiency.py --seeds {args.seeds}`.", "",
             "| shape | sample best ms | model ρ | pruned space keeps a ≤3% config | survivors in sample | method |"
             " median trials (p25–p75) | median nvcc s | reached |", "|---|---|---|---|---|---|---|---|---|"]
    for problem_key, rows in table.problems.items():
        problem = ConvProblem.parse(problem_key)
        ok = {k: r for k, r in rows.items() if r.get("status") == "ok"}
        target = min(r["median_ms"] for r in ok.values())
        good = {k for k, r in ok.items() if r["median_ms"] <= target * WITHIN}
        pruned = prune(problem, machine, specs_for(problem))
        kept = {c.key for c in pruned.survivors} & set(rows)
        everything = [c for c in build_candidates(problem, machine, specs_for(problem)) if c.key in rows]
        space = ConfigSpace(everything)
        values = {k: r["median_ms"] for k, r in ok.items()}
        ranked = [(c.predicted_s, values[c.key]) for c in everything
                  if c.key in values and math.isfinite(c.predicted_s)]
        rho = spearman([p for p, _ in ranked], [m for _, m in ranked])
        results = {}
        for method in ("ours", "tpe", "random"):
            hits = []
            for seed in range(args.seeds):
                if method == "ours":
                    order = run_ours(table, problem, seed, args.max_trials, target * WITHIN)
                else:
                    order = run_baseline(space, values, method, seed, args.max_trials, target * WITHIN)
                hits.append(first_hit(order, rows, target))
            results[method] = summarize(hits, args.max_trials)
            print(f"{problem_key[:40]} {method}: {results[method]}", file=sys.stderr)
        for method, s in results.items():
            med = f">{args.max_trials}" if s["median_censored"] else f"{s['median_trials']:g}"
            lines.append(f"| `{problem_key}` | {target:.4f} | {rho:.2f} | {'yes' if kept & good else 'NO'}"
                         f" ({len(kept & good)}) |"
                         f" {len(kept)} of {len(rows)} | {method} | {med} ({s['p25']}–{s['p75']}) |"
                         f" {s['median_nvcc_s']:.0f} | {s['reached']}/{s['runs']} |")
        ours, tpe = results["ours"]["median_trials"], results["tpe"]["median_trials"]
        lines.append(f"| | | | | | ours / tpe | {ours / tpe:.3f} | | |")
    text = "\n".join(lines) + "\n"
    Path(args.out, "tuner_efficiency.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
