"""The configuration space of the fused Winograd forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (the machine's shared-memory and register
limits respected; BN no larger than the next power of two of the tile count, BK no larger than that
of K), each with its plan. Not yet in the registry: the kernel awaits its first GPU run.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from convtune.errors import InvalidConfig
from convtune.kernels.winograd.launcher import WinogradFwdConfig, WinogradFwdPlan, applies, plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

M = (2, 4)
TILE_N = (16, 32, 64, 128)
TILE_K = (8, 16, 32, 64, 128)
CHUNK_C = (1, 2, 4, 8, 16)
THREAD_N = (1, 2, 4)
THREAD_K = (1, 2, 4, 8)
STAGES = (1, 2)
MIN_THREADS, MAX_THREADS = 64, 512


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    size = 1
    for values in (M, TILE_N, TILE_K, CHUNK_C, THREAD_N, THREAD_K, STAGES):
        size *= len(values)
    return size


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradFwdPlan]:
    """Every valid (config, plan) of the fused Winograd kernel for ``problem`` on ``machine``."""
    if applies(problem) is not None:
        return
    p = problem
    max_k = max(8, _pow2_at_least(p.K))
    for m, bn, bk, tn, tk in itertools.product(M, TILE_N, TILE_K, THREAD_N, THREAD_K):
        tiles = p.N * -(-p.P // m) * -(-p.Q // m)
        if bn > max(16, _pow2_at_least(tiles)) or bk > max_k or bn % tn or bk % tk:
            continue
        threads = (bn // tn) * (bk // tk)
        if not MIN_THREADS <= threads <= MAX_THREADS:
            continue
        for bc, stages in itertools.product(CHUNK_C, STAGES):
            try:
                yield plan(p, WinogradFwdConfig(m, bn, bk, bc, tn, tk, stages), machine)
            except InvalidConfig:
                continue
