"""The folded row-copy factor of the wgmma model (``FOLD_ROW_COPY_FACTOR`` of
:mod:`convtune.kernels.igemm_wgmma.model`) on the measured tables. Changes nothing; prints a markdown table.

Per factor, as :mod:`split_atomics_fit` scores the split atomics: (1) the regret of each (family, shape)'s model-first
config among its measured configs, over the igemm and wgmma families of the four tensor-core replay tables, with the
factor chosen leave-one-shape-out; (2) the untuned choice across families on the vs_cudnn reports the tables are made
from (the shipped choice scales).

    PYTHONPATH=. python benchmarks/fold_rows_fit.py > benchmarks/results/igemm_wgmma_h200/fold_rows_fit.md
"""

from __future__ import annotations

import split_atomics_fit as atomics

from convtune.kernels.igemm_wgmma import model as wgmma_model

FACTORS = (1.0, 1.25, 1.5, 2.0, 3.0, 4.0)


def set_factor(factor: float) -> None:
    wgmma_model.FOLD_ROW_COPY_FACTOR = factor


def main() -> int:
    atomics.fit_report("The folded row-copy factor in the wgmma model", "PYTHONPATH=. python "
                       "benchmarks/fold_rows_fit.py", FACTORS, wgmma_model.FOLD_ROW_COPY_FACTOR, set_factor)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
