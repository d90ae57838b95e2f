"""The split atomics' cost in the tensor-core models (``SPLIT_ATOMICS_FACTOR`` of :mod:`convtune.kernels.igemm.model`,
shared by the wgmma model) on the measured tables. Changes nothing; prints a markdown table.

Per factor: (1) the regret of each (family, shape)'s model-first config among its measured configs (its measured
time / the best measured), over the igemm and wgmma families of the four tensor-core replay tables (H100 and H200,
TF32 and bf16; ≥ 8 measured configs a unit), with the factor chosen leave-one-shape-out; (2) the untuned choice
across families (:mod:`family_choice_calibration`'s regret with the shipped choice scales) on the vs_cudnn reports
the H100 and H200 tables are made from.

    PYTHONPATH=. python benchmarks/split_atomics_fit.py > benchmarks/results/igemm_wgmma_h200/split_atomics_fit.md
"""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path

import family_choice_calibration as choice
import numpy as np
import wgmma_model_fit as fit

from convtune.kernels.igemm import model as igemm_model
from convtune.kernels.igemm_wgmma import model as wgmma_model
from convtune.kernels.registry import get_spec

FACTORS = (1.0, 1.5, 2.0, 2.5, 3.0, 4.0)
TF32 = ("igemm_wgmma", "igemm_wgmma_1x1", "igemm", "igemm_nhwc", "igemm_1x1")
BF16 = ("igemm_wgmma_half", "igemm_wgmma_half_1x1", "igemm_half")
TABLES = (("tests/data/replay_h200_bf16.json.gz", BF16), ("tests/data/replay_h200_tf32.json.gz", TF32),
          ("tests/data/replay_h100_bf16.json.gz", (*BF16, "igemm_wgmma_half_n96")),
          ("tests/data/replay_h100_tf32.json.gz", (*TF32, "igemm_wgmma_n96")))
R = "benchmarks/results/igemm_wgmma_h200/"
REPORTS = {   # (machine preset, the vs_cudnn reports of a card and class, under R)
    "H100 TF32": ("h100", ["resident_1x1_tf32/v1/vs_cudnn_tf32.json", "six_families_h100/tf32_wide/vs_cudnn_tf32.json",
                           "six_families_h100/tf32_public/vs_cudnn_tf32.json", "n96_h100/n96_tf32/vs_cudnn_tf32.json"]),
    "H100 bf16": ("h100", ["six_families_h100/half_wide/vs_cudnn_bf16.json", "six_families_h100/half_public/"
                           "vs_cudnn_bf16.json", "n96_h100/n96_bfloat16/vs_cudnn_bf16.json"]),
    "H200 TF32": ("h200", ["six_families_h200/tf32_public/vs_cudnn_tf32.json",
                           "six_families_h200/tf32_wide/vs_cudnn_tf32.json"]),
    "H200 bf16": ("h200", ["six_families_h200/half_public/vs_cudnn_bf16.json",
                           "six_families_h200/half_wide/vs_cudnn_bf16.json"]),
}


def set_factor(factor: float) -> None:
    igemm_model.SPLIT_ATOMICS_FACTOR = wgmma_model.SPLIT_ATOMICS_FACTOR = factor


def within_family(units: list[fit.Unit]) -> np.ndarray:
    """Each unit's model-first config's measured time / its best measured, with the models as they stand."""
    out = []
    for u in units:
        spec = get_spec(u.family)
        predicted = np.array([spec.predict_s(pl, u.machine) for pl in u.plans])
        out.append(u.measured_ms[np.argmin(predicted)] / u.measured_ms.min())
    return np.array(out)


def across_families(reports: dict[str, tuple[str, list[dict]]]) -> dict[str, list[float]]:
    """The untuned choice's regret per shape of each report set, with the models as they stand."""
    out = {}
    for name, (preset, runs) in reports.items():
        shapes = choice.collect(runs, preset)
        scales = choice.shipped_calibration({f for s in shapes.values() for f in s})
        out[name] = [choice.regret(s, scales) for s in shapes.values()]
    return out


def fit_report(title: str, command: str, factors: tuple[float, ...], shipped: float,
               set_value: Callable[[float], None]) -> None:
    """Print the markdown table of a model factor: per value of ``factors`` (set by ``set_value``; ``shipped`` is
    restored after) the within-family regret (and the factor chosen leave-one-shape-out) and the untuned choice's
    regret per report set."""
    fit.TABLES = TABLES
    units = fit.units()
    reports = {name: (preset, [json.loads(Path(R + p).read_text()) for p in paths])
               for name, (preset, paths) in REPORTS.items()}
    own, chosen = {}, {}
    try:
        for f in factors:
            set_value(f)
            own[f] = within_family(units)
            chosen[f] = across_families(reports)
    finally:
        set_value(shipped)
    held = []
    for shape in sorted({u.shape for u in units}):
        test = [i for i, u in enumerate(units) if u.shape == shape]
        train = [i for i, u in enumerate(units) if u.shape != shape]
        best = min(factors, key=lambda f: (float(np.log(own[f][train]).mean()), abs(f - 1)))
        held += list(own[best][test])
    print(f"# {title} (CPU, the committed tables)\n")
    print(f"`{command}`\n")
    print(f"{len(units)} (family, shape) units; shipped factor {shipped:g}\n")
    print("| factor | model-first regret, geomean (max) | " + " | ".join(f"untuned choice {k}" for k in REPORTS) + " |")
    print("|---" * (2 + len(REPORTS)) + "|")
    for f in factors:
        cells = " | ".join(f"{choice.geomean(v):.3f} (max {max(v):.2f})" for v in chosen[f].values())
        print(f"| {f:g} | {fit.geomean(own[f]):.4f} ({own[f].max():.2f}) | {cells} |")
    print(f"\nheld out by shape (the factor chosen on the other shapes): model-first regret {fit.geomean(held):.4f}")


def main() -> int:
    fit_report("The split atomics' cost factor in the tensor-core models", "PYTHONPATH=. python "
               "benchmarks/split_atomics_fit.py", FACTORS, igemm_model.SPLIT_ATOMICS_FACTOR, set_factor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
