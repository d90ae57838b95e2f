"""The configuration space of the pointwise forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected), each with
its plan; tiles larger than the next power of two of the extent they cover (M = N·P·Q pixels, K channels) are
left out, as are splits of a grid that already has two blocks per SM.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.pointwise.launcher import (
    MAX_COPIES,
    THREAD_TILE,
    PointwiseFwdConfig,
    PointwiseFwdPlan,
    copy_width,
    derive_plan,
    supports,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, channel_split_rules, pixel_gemm_prune_rules
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_M = (32, 64, 128)
TILE_N = (32, 64, 128)
CHUNK_C = (8, 16)
STAGES = (2, 3, 4)
SPLITS = (1, 2, 4, 8)


def _threads(v: Values) -> int:
    return (v["tile_m"] // THREAD_TILE) * (v["tile_n"] // THREAD_TILE)


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None) -> SearchSpace:
    """The pointwise forward space of ``problem``: the values, the kernel's rules (``plan`` enforces them) and the
    search's pruning rules (tiles no larger than the next power of two of M = N·P·Q and of K; with ``machine``,
    no split of a grid that already has two blocks per SM)."""
    p = problem
    vec = copy_width(p) if supports(p) else 1

    def a_copies(v: Values) -> int:
        return -(-(v["chunk_c"] * v["tile_m"] // vec) // _threads(v))

    def b_copies(v: Values) -> int:
        return -(-(v["chunk_c"] * v["tile_n"] // 4) // _threads(v))

    def tile_rule(name: str) -> Rule:
        return Rule(name, (name,), lambda v: v[name] % THREAD_TILE == 0 and v[name] <= 256,
                    f"{name}={{{name}}} must be a multiple of {THREAD_TILE} and at most 256")

    rules = (
        Rule("problem", (), lambda v: supports(p), f"the pointwise kernel runs 1×1 filters without padding, "
             f"groups=1, float32; got {p.key()}", field="problem"),
        tile_rule("tile_m"),
        tile_rule("tile_n"),
        Rule("threads", ("tile_m", "tile_n"), lambda v: 32 <= _threads(v) <= 512,
             lambda v: f"{_threads(v)} threads per block (tile_m/8 · tile_n/8): allowed 32..512", field="tile_m"),
        Rule("chunk_c", ("chunk_c",), lambda v: v["chunk_c"] % 4 == 0, "chunk_c={chunk_c} must be a multiple of 4"),
        Rule("stages", ("stages",), lambda v: 2 <= v["stages"] <= 4, "stages={stages}: allowed 2..4"),
        Rule("input_copies", ("tile_m", "tile_n", "chunk_c"),
             lambda v: v["tile_m"] % vec == 0 and a_copies(v) <= MAX_COPIES,
             lambda v: f"{a_copies(v)} input copies per thread and chunk exceed {MAX_COPIES}: lower chunk_c or "
                       f"raise the tile", field="chunk_c"),
        Rule("weight_copies", ("tile_m", "tile_n", "chunk_c"), lambda v: b_copies(v) <= MAX_COPIES,
             lambda v: f"too many weight copies per thread ({b_copies(v)})", field="chunk_c"),
        *channel_split_rules(p.C),
    )
    values = {"tile_m": TILE_M, "tile_n": TILE_N, "chunk_c": CHUNK_C, "stages": STAGES, "splits": SPLITS}
    return SearchSpace(values, rules, pixel_gemm_prune_rules(p, machine))


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[PointwiseFwdPlan]:
    """Every valid (config, plan) of the pointwise forward kernel for ``problem`` on ``machine``."""
    for values in space(problem, machine).configs():
        try:
            yield derive_plan(problem, PointwiseFwdConfig(**values), machine)  # the rules hold: configs() kept them
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
            continue


def plan(problem: ConvProblem, config: PointwiseFwdConfig, machine: MachineModel | None = None) -> PointwiseFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`convtune.kernels.pointwise.space.space`, then
    ``machine``'s limits on the derived geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)
