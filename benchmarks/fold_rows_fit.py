"""The folded row-copy factor of the wgmma model (``FOLD_ROW_COPY_FACTOR`` of
:mod:`convtune.kernels.igemm_wgmma.model`) on the measured tables. Changes nothing; prints a markdown table.

Per factor, as :mod:`split_atomics_fit` scores the split atomics: (1) the regret of each (family, shape)'s model-first
config among its measured configs, over the igemm and wgmma families of the four tensor-core replay tables, with the
factor chosen leave-one-shape-out; (2) the untuned choice across families on the vs_cudnn reports the tables are made
from (the shipped choice scales).

    PYTHONPATH=. python benchmarks/fold_rows_fit.py > benchmarks/results/igemm_wgmma_h200/fold_rows_fit.md
"""

from __future__ import annotations

import json
from pathlib import Path

import family_choice_calibration as choice
import numpy as np
import split_atomics_fit as atomics
import wgmma_model_fit as fit

from convtune.kernels.igemm_wgmma import model as wgmma_model

FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


def main() -> int:
    shipped = wgmma_model.FOLD_ROW_COPY_FACTOR
    fit.TABLES = atomics.TABLES
    units = fit.units()
    reports = {name: (preset, [json.loads(Path(atomics.R + p).read_text()) for p in paths])
               for name, (preset, paths) in atomics.REPORTS.items()}
    split_factor = wgmma_model.SPLIT_ATOMICS_FACTOR    # the shipped one: the scoring helpers set it
    own, chosen = {}, {}
    try:
        for f in FACTORS:
            wgmma_model.FOLD_ROW_COPY_FACTOR = f
            own[f] = atomics.within_family(units, split_factor)
            chosen[f] = atomics.across_families(reports, split_factor)
    finally:
        wgmma_model.FOLD_ROW_COPY_FACTOR = shipped
    held = []
    for shape in sorted({u.shape for u in units}):
        test = [i for i, u in enumerate(units) if u.shape == shape]
        train = [i for i, u in enumerate(units) if u.shape != shape]
        best = min(FACTORS, key=lambda f: (float(np.log(own[f][train]).mean()), abs(f - 1)))
        held += list(own[best][test])
    print("# The folded row-copy factor in the wgmma model (CPU, the committed tables)\n")
    print("`PYTHONPATH=. python benchmarks/fold_rows_fit.py`\n")
    print(f"{len(units)} (family, shape) units; shipped factor {shipped:g}\n")
    print("| factor | model-first regret, geomean (max) | " + " | ".join(f"untuned choice {k}" for k in reports) + " |")
    print("|---" * (2 + len(reports)) + "|")
    for f in FACTORS:
        cells = " | ".join(f"{choice.geomean(v):.3f} (max {max(v):.2f})" for v in chosen[f].values())
        print(f"| {f:g} | {fit.geomean(own[f]):.4f} ({own[f].max():.2f}) | {cells} |")
    print(f"\nheld out by shape (the factor chosen on the other shapes): model-first regret {fit.geomean(held):.4f}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
