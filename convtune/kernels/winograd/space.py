"""The configuration spaces of the fused Winograd kernel and of the unfused path, for one problem and machine.

:func:`enumerate_plans` (fused) and :func:`enumerate_unfused_plans` yield every valid configuration (the
machine's shared-memory and register limits respected; block tiles no larger than the next power of two
of the tile count and of K), each with its plan.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from convtune.errors import InvalidConfig
from convtune.kernels.winograd.launcher import WinogradFwdConfig, WinogradFwdPlan, applies, plan
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig, WinogradUnfusedPlan
from convtune.kernels.winograd.unfused import plan as unfused_plan
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


# ---- the unfused path (input transform, α² batched GEMMs, output transform) ----
GEMM_TILE_K = (32, 64, 128)
GEMM_TILE_T = (32, 64, 128)
GEMM_CHUNK_C = (8, 16)
GEMM_THREAD = (4, 8)
GEMM_STAGES = (2, 3, 4)
GEMM_MIN_THREADS, GEMM_MAX_THREADS = 64, 256


def unfused_grid_size(problem: ConvProblem) -> int:
    """Size of the unfused path's raw parameter grid."""
    return len(M) * len(GEMM_TILE_K) * len(GEMM_TILE_T) * len(GEMM_CHUNK_C) * len(GEMM_THREAD) ** 2 * len(GEMM_STAGES)


def enumerate_unfused_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradUnfusedPlan]:
    """Every valid (config, plan) of the unfused path for ``problem`` on ``machine`` (BK no larger than the
    next power of two of K, BT no larger than that of the tile count)."""
    if applies(problem) is not None:
        return
    p = problem
    for m, bk, bt, bc, tk, tt, stages in itertools.product(M, GEMM_TILE_K, GEMM_TILE_T, GEMM_CHUNK_C, GEMM_THREAD,
                                                           GEMM_THREAD, GEMM_STAGES):
        tiles = p.N * -(-p.P // m) * -(-p.Q // m)
        if bk > max(32, _pow2_at_least(p.K)) or bt > max(32, _pow2_at_least(tiles)) or bk % tk or bt % tt:
            continue
        if not GEMM_MIN_THREADS <= (bk // tk) * (bt // tt) <= GEMM_MAX_THREADS:
            continue
        try:
            yield unfused_plan(p, WinogradUnfusedConfig(m, bk, bt, bc, tk, tt, stages), machine)
        except InvalidConfig:
            continue
