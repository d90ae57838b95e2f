"""The configuration space of the direct forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected,
tiles no larger than the next power of two of the output extent they cover), each with its plan.
:func:`ranked` orders them by the analytic model; :func:`model_best` is the default config of the
operator API when nothing measured is known.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.direct.launcher import DirectFwdConfig, DirectFwdPlan, plan
from convtune.kernels.direct.model import DirectPrediction, predict
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_H = (1, 2, 4, 8, 16)
TILE_W = (4, 8, 16, 32, 64)
TILE_K = (16, 32, 64, 128)
CHUNK_C = (1, 2, 4, 8, 16)
THREAD_H = (1, 2)
THREAD_W = (1, 2, 4, 8)
THREAD_K = (4, 8)
STAGES = (1, 2, 3)
VEC = (1, 4)
SPLITS = (1, 2, 4, 8, 16, 32)
MAX_ACCUMULATORS = 64
MIN_THREADS, MAX_THREADS = 64, 512


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    chunk_values = set(CHUNK_C) | ({problem.C} if max(CHUNK_C) > problem.C else set())
    size = len(chunk_values)
    for values in (TILE_H, TILE_W, TILE_K, THREAD_H, THREAD_W, THREAD_K, STAGES, VEC, SPLITS):
        size *= len(values)
    return size


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[DirectFwdPlan]:
    """Every valid (config, plan) of the direct forward kernel for ``problem`` on ``machine``."""
    if problem.groups != 1 or problem.dtype != "float32":
        return
    p = problem
    max_h, max_w, max_k = _pow2_at_least(p.P), max(4, _pow2_at_least(p.Q)), max(16, _pow2_at_least(p.K))
    chunk_values = sorted(set(CHUNK_C) | ({p.C} if max(CHUNK_C) > p.C else set()))
    chunks_of = {cb: -(-p.C // cb) for cb in chunk_values}
    for th, tw, tk, py, px, kx in itertools.product(TILE_H, TILE_W, TILE_K, THREAD_H, THREAD_W, THREAD_K):
        if th > max_h or tw > max_w or tk > max_k or th % py or tw % px or tk % kx:
            continue
        threads = (th // py) * (tw // px) * (tk // kx)
        if not MIN_THREADS <= threads <= MAX_THREADS or threads % (tk // 4) or py * px * kx > MAX_ACCUMULATORS:
            continue
        for cb, stages, vec, splits in itertools.product(chunk_values, STAGES, VEC, SPLITS):
            if splits > chunks_of[cb] or (vec == 4 and p.W % 4):
                continue
            config = DirectFwdConfig(th, tw, tk, cb, py, px, kx, stages, vec, splits)
            try:
                yield plan(p, config, machine)
            except InvalidConfig:
                continue


def ranked(problem: ConvProblem, machine: MachineModel) -> list[tuple[DirectPrediction, DirectFwdPlan]]:
    """All valid plans, fastest predicted first (ties broken by the config key, so the order is stable)."""
    scored = [(predict(pl, machine), pl) for pl in enumerate_plans(problem, machine)]
    scored.sort(key=lambda item: (item[0].time_s, item[1].config.key()))
    return scored


@cache
def model_best(problem: ConvProblem, machine: MachineModel) -> DirectFwdConfig:
    """The configuration the model predicts fastest.

    Raises:
        InvalidConfig: the direct kernel cannot run this problem (e.g. groups > 1).
    """
    best = ranked(problem, machine)
    if not best:
        raise InvalidConfig("problem", f"no valid direct configuration for {problem.key()}")
    return best[0][1].config
