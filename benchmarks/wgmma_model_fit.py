"""The wgmma model's fitted constants (``L2_FRACTION``, ``CHUNK_LATENCY_S``, ``TMA_OVERHEAD_FRACTION``) on the H200
replay tables.

Per (family, shape) of the bf16 and TF32 tables (each wgmma family's measured configs, at least 8): Spearman ρ of
predicted vs measured time and the regret of the model's first config (its measured time / the best measured). A
grid over the three constants, then leave-one-shape-out: the point chosen on the other shapes (least geometric-mean
regret), scored on the held-out one. Prints a table; changes nothing.

    PYTHONPATH=. python benchmarks/wgmma_model_fit.py > benchmarks/results/igemm_wgmma_h200/model_v3/fit.md
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass
from typing import Any

import numpy as np

from convtune.kernels.config import parse_config_key
from convtune.kernels.igemm_wgmma import half_1x1, model, tf32_1x1
from convtune.kernels.igemm_wgmma.launcher import traffic_words
from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

TABLES = (("tests/data/replay_h200_bf16.json.gz", ("igemm_wgmma_half", "igemm_wgmma_half_1x1")),
          ("tests/data/replay_h200_tf32.json.gz", ("igemm_wgmma", "igemm_wgmma_1x1")))
#: each family's request count (the 1×1 kernels have no layout change)
TRAFFIC = {"igemm_wgmma_half_1x1": half_1x1.traffic_elements, "igemm_wgmma_1x1": tf32_1x1.traffic_words}
L2_FRACTIONS = (0.4, 0.25, 0.15, 0.1)
LATENCIES_S = (0.0, 0.5e-6, 1e-6, 2e-6, 3e-6, 4e-6)
TMA_FRACTIONS = (0.1, 0.25, 0.5, 1.0)
FIRST_MODEL = (0.4, 0.0, 0.25)    # the constants before the first fit (TMA's fraction as first shipped)
MIN_CONFIGS = 8


@dataclass(frozen=True)
class Unit:
    family: str
    shape: str
    measured_ms: np.ndarray
    plans: list[Any]
    machine: Any


def units() -> list[Unit]:
    out = []
    for path, families in TABLES:
        table = ReplayTable.load(path)
        machine = table.device.machine
        for key, rows in table.problems.items():
            problem = ConvProblem.parse(key)
            for family in families:
                ok = [(r["median_ms"], c) for c, r in rows.items()
                      if r["status"] == "ok" and c.split()[0] == f"{family}.fwd"]
                if len(ok) < MIN_CONFIGS:
                    continue
                spec = get_spec(family)
                plans = [spec.plan(problem, parse_config_key(c), machine) for _, c in ok]
                out.append(Unit(family, key, np.array([ms for ms, _ in ok]), plans, machine))
    return out


def spearman(a: np.ndarray, b: np.ndarray) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def score(us: list[Unit], l2_fraction: float, latency_s: float,
          tma_fraction: float) -> tuple[np.ndarray, np.ndarray]:
    """(ρ, regret) per unit with the model's constants set to the point."""
    saved = model.L2_FRACTION, model.CHUNK_LATENCY_S, model.TMA_OVERHEAD_FRACTION
    model.L2_FRACTION, model.CHUNK_LATENCY_S, model.TMA_OVERHEAD_FRACTION = l2_fraction, latency_s, tma_fraction
    try:
        rhos, regrets = [], []
        for u in us:
            traffic = TRAFFIC.get(u.family, traffic_words)
            predicted = np.array([model.predict(pl, u.machine, traffic).time_s for pl in u.plans])
            rhos.append(spearman(predicted, u.measured_ms))
            regrets.append(u.measured_ms[np.argmin(predicted)] / u.measured_ms.min())
        return np.array(rhos), np.array(regrets)
    finally:
        model.L2_FRACTION, model.CHUNK_LATENCY_S, model.TMA_OVERHEAD_FRACTION = saved


def geomean(x: Any) -> float:
    return math.exp(float(np.log(np.asarray(x)).mean()))


def main() -> int:
    us = units()
    grid = list(itertools.product(L2_FRACTIONS, LATENCIES_S, TMA_FRACTIONS))
    results = {point: score(us, *point) for point in grid}
    print(f"{len(us)} (family, shape) units from {', '.join(p for p, _ in TABLES)}\n")
    print("| L2 fraction | chunk latency µs | TMA overhead fraction | mean ρ | geomean regret |")
    print("|---:|---:|---:|---:|---:|")
    for (l2, lat, tma), (rho, regret) in results.items():
        print(f"| {l2} | {lat * 1e6:g} | {tma} | {rho.mean():.3f} | {geomean(regret):.3f} |")
    held, first = [], []
    for shape in sorted({u.shape for u in us}):
        test = [i for i, u in enumerate(us) if u.shape == shape]
        train = [i for i, u in enumerate(us) if u.shape != shape]
        best = min(grid, key=lambda point: float(np.log(results[point][1][train]).mean()))
        held += list(results[best][1][test])
        first += list(results[FIRST_MODEL][1][test])
    shipped = (model.L2_FRACTION, model.CHUNK_LATENCY_S, model.TMA_OVERHEAD_FRACTION)
    overall = min(grid, key=lambda point: float(np.log(results[point][1]).mean()))
    print(f"\nleave-one-shape-out geomean regret: the first model {FIRST_MODEL} {geomean(first):.3f} → fitted "
          f"{geomean(held):.3f}; shipped (L2 fraction, latency s, TMA fraction) = {shipped}: "
          f"{geomean(results[shipped][1]):.3f} in-sample, mean ρ {results[shipped][0].mean():.3f}; fitted on every "
          f"shape {overall}: {geomean(results[overall][1]):.3f}, mean ρ {results[overall][0].mean():.3f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
