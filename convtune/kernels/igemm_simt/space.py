"""The configuration space of the implicit-GEMM CUDA-core forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected), each with
its plan; tiles larger than the next power of two of the extent they cover (M = N·P·Q pixels, K channels) are
left out, as are splits of a grid that already has two blocks per SM.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.igemm_simt.launcher import (
    MAX_COPIES,
    THREAD_TILE,
    IgemmSimtFwdConfig,
    IgemmSimtFwdPlan,
    a_copies,
    b_copies,
    derive_plan,
    supports,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, pixel_gemm_prune_rules, split_rules
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_M = (32, 64, 128, 256)
TILE_N = (32, 64, 128)
CHUNK_CRS = (4, 8, 16)
STAGES = (2, 3, 4)
SPLITS = (1, 2, 4, 8)


def _config(v: Values) -> IgemmSimtFwdConfig:
    return IgemmSimtFwdConfig(tile_m=v["tile_m"], tile_n=v["tile_n"], chunk_crs=v["chunk_crs"])


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None) -> SearchSpace:
    """The space of ``problem``: the values, the kernel's rules (``plan`` enforces them) and the search's pruning
    rules (tiles no larger than the next power of two of M = N·P·Q and of K; with ``machine``, no split of a grid
    that already has two blocks per SM)."""
    p = problem
    crs = p.C * p.R * p.S

    def threads(v: Values) -> int:
        return (v["tile_m"] // THREAD_TILE) * (v["tile_n"] // THREAD_TILE)

    rules = (
        Rule("problem", (), lambda v: supports(p), f"the CUDA-core implicit GEMM runs dense float32 convolutions "
             f"whose input has fewer than 2^31 elements; got {p.key()}", field="problem"),
        Rule("tile_m", ("tile_m",), lambda v: v["tile_m"] % 32 == 0 and v["tile_m"] <= 256,
             "tile_m={tile_m} must be a multiple of 32 (a warp's pixel row) and at most 256"),
        Rule("tile_n", ("tile_n",), lambda v: v["tile_n"] % THREAD_TILE == 0 and v["tile_n"] <= 256,
             f"tile_n={{tile_n}} must be a multiple of {THREAD_TILE} and at most 256"),
        Rule("threads", ("tile_m", "tile_n"), lambda v: 32 <= threads(v) <= 512,
             lambda v: f"{threads(v)} threads per block (tile_m/8 · tile_n/8): allowed 32..512", field="tile_n"),
        Rule("chunk_crs", ("chunk_crs",), lambda v: v["chunk_crs"] % 4 == 0,
             "chunk_crs={chunk_crs} must be a multiple of 4"),
        Rule("stages", ("stages",), lambda v: 2 <= v["stages"] <= 4, "stages={stages}: allowed 2..4"),
        Rule("input_copies", ("tile_m", "tile_n", "chunk_crs"), lambda v: a_copies(_config(v)) <= MAX_COPIES,
             lambda v: f"{a_copies(_config(v))} input copies per thread and chunk (64·chunk_crs/tile_n) exceed "
                       f"{MAX_COPIES}: lower chunk_crs or raise tile_n", field="chunk_crs"),
        Rule("weight_copies", ("tile_m", "tile_n", "chunk_crs"), lambda v: b_copies(_config(v)) <= MAX_COPIES,
             lambda v: f"too many weight copies per thread ({b_copies(_config(v))})", field="chunk_crs"),
        *split_rules(crs, chunk="chunk_crs", extent="C·R·S", unit="reduction-row", empty="reduction rows"),
    )
    values = {"tile_m": TILE_M, "tile_n": TILE_N, "chunk_crs": CHUNK_CRS, "stages": STAGES, "splits": SPLITS}
    return SearchSpace(values, rules, pixel_gemm_prune_rules(p, machine))


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[IgemmSimtFwdPlan]:
    """Every valid (config, plan) of the kernel for ``problem`` on ``machine``."""
    for values in space(problem, machine).configs():
        try:
            yield derive_plan(problem, IgemmSimtFwdConfig(**values), machine)  # the rules hold: configs() kept them
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
            continue


def plan(problem: ConvProblem, config: IgemmSimtFwdConfig,
         machine: MachineModel | None = None) -> IgemmSimtFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then ``machine``'s limits on the derived
    geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)
