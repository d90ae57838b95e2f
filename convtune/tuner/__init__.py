"""The tuner: lower-bound pruning, Optuna trials (GPU, replay or model), every result in SQL.

Import :func:`convtune.tuner.tune.tune` for the loop; benchmarkers live in
:mod:`convtune.tuner.benchmark` (replay, model), :mod:`convtune.tuner.gpu` (CuPy) and
:mod:`convtune.tuner.trial_process` (the restartable trial subprocess).
"""
