"""The configuration space of the pointwise forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected), each with
its plan; tiles larger than the next power of two of the extent they cover (M = N·P·Q pixels, K channels) are
left out, as are splits of a grid that already has two blocks per SM.
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator

from convtune.errors import InvalidConfig
from convtune.kernels.pointwise.launcher import PointwiseFwdConfig, PointwiseFwdPlan, plan, supports
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_M = (32, 64, 128)
TILE_N = (32, 64, 128)
CHUNK_C = (8, 16)
STAGES = (2, 3, 4)
SPLITS = (1, 2, 4, 8)


def _pow2_at_least(n: int) -> int:
    return 1 << max(0, (n - 1).bit_length())


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return len(TILE_M) * len(TILE_N) * len(CHUNK_C) * len(STAGES) * len(SPLITS)


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[PointwiseFwdPlan]:
    """Every valid (config, plan) of the pointwise forward kernel for ``problem`` on ``machine``."""
    if not supports(problem):
        return
    p = problem
    max_m, max_n = max(32, _pow2_at_least(p.N * p.P * p.Q)), max(32, _pow2_at_least(p.K))
    for bm, bn, bk, stages, splits in itertools.product(TILE_M, TILE_N, CHUNK_C, STAGES, SPLITS):
        if bm > max_m or bn > max_n:
            continue
        if splits > 1:
            tiles = -(-p.N * p.P * p.Q // bm) * -(-p.K // bn)
            if tiles >= 2 * machine.sm_count:
                continue  # the grid fills the GPU already: a split only adds atomics
        try:
            yield plan(p, PointwiseFwdConfig(bm, bn, bk, stages, splits), machine)
        except InvalidConfig:
            continue
