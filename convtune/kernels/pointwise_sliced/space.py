"""The configuration space of the sliced pointwise forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (the kernel's static rules and the machine's limits
respected), each with its plan. The family is for small GEMMs, so the search keeps only grids of at most
:data:`MAX_WAVES` waves of one block per SM; tiles larger than the next power of two of the extent they cover
(M = N·P·Q pixels, K channels) are left out, and slices beyond the channel chunks C holds.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.pointwise_sliced.launcher import (
    PointwiseSlicedFwdConfig,
    PointwiseSlicedFwdPlan,
    derive_plan,
    supports,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_M = (16, 32, 64, 128)
TILE_N = (16, 32, 64, 128)
CHUNK_C = (4, 8, 16)
SLICES = (1, 2, 4, 8)
THREAD_TILE = (2, 4)
MAX_THREADS = 512
#: the search's grid cap, in blocks per SM: past it the pointwise and tensor-core families' larger tiles win
MAX_WAVES = 8


def _group(v: Values) -> int:
    return (v["tile_m"] // v["thread_m"]) * (v["tile_n"] // v["thread_n"])


def _threads(v: Values) -> int:
    return _group(v) * v["slices"]


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None) -> SearchSpace:
    """The sliced pointwise space of ``problem``: the values, the kernel's rules (``plan`` enforces them) and the
    search's pruning rules (tiles no larger than the next power of two of M and of K, no more slices than channel
    chunks of C; with ``machine``, at most :data:`MAX_WAVES` blocks per SM)."""
    p = problem

    def ck(v: Values) -> int:
        return v["chunk_c"] * v["slices"]

    rules = (
        Rule("problem", (), lambda v: supports(p), f"the sliced pointwise kernel runs 1×1 filters without padding, "
             f"groups=1, float32 / bfloat16 / float16; got {p.key()}", field="problem"),
        Rule("thread_m", ("thread_m",), lambda v: v["thread_m"] in THREAD_TILE, "thread_m={thread_m}: allowed 2 or 4"),
        Rule("thread_n", ("thread_n",), lambda v: v["thread_n"] in THREAD_TILE, "thread_n={thread_n}: allowed 2 or 4"),
        Rule("tile_m", ("tile_m", "thread_m"), lambda v: v["tile_m"] % v["thread_m"] == 0 and v["tile_m"] <= 256,
             "tile_m={tile_m} must be a multiple of thread_m={thread_m} and at most 256"),
        Rule("tile_n", ("tile_n", "thread_n"), lambda v: v["tile_n"] % v["thread_n"] == 0 and v["tile_n"] <= 256,
             "tile_n={tile_n} must be a multiple of thread_n={thread_n} and at most 256"),
        Rule("group_warps", ("tile_m", "tile_n", "thread_m", "thread_n"), lambda v: _group(v) % 32 == 0,
             lambda v: f"a slice's {_group(v)} threads ((tile_m/thread_m)·(tile_n/thread_n)) must be whole warps",
             field="tile_m"),
        Rule("threads", ("tile_m", "tile_n", "thread_m", "thread_n", "slices"),
             lambda v: _threads(v) <= MAX_THREADS and _threads(v) % v["tile_m"] == 0
             and _threads(v) % v["tile_n"] == 0,
             lambda v: f"{_threads(v)} threads per block: at most {MAX_THREADS}, a multiple of tile_m and tile_n",
             field="slices"),
        Rule("copies", ("tile_m", "tile_n", "thread_m", "thread_n", "slices", "chunk_c"),
             lambda v: ck(v) * v["tile_m"] % _threads(v) == 0 and ck(v) * v["tile_n"] % _threads(v) == 0,
             lambda v: f"chunk_c·slices = {ck(v)} channels of a chunk do not split evenly over the copy passes of "
                       f"{_threads(v)} threads", field="chunk_c"),
    )
    m = p.N * p.P * p.Q
    max_m, max_n = max(16, pow2_at_least(m)), max(16, pow2_at_least(p.K))
    prune = [
        Rule("tile_m_extent", ("tile_m",), lambda v: v["tile_m"] <= max_m, f"tile_m={{tile_m}} exceeds {max_m}"),
        Rule("tile_n_extent", ("tile_n",), lambda v: v["tile_n"] <= max_n, f"tile_n={{tile_n}} exceeds {max_n}"),
        Rule("slices_chunks", ("chunk_c", "slices"), lambda v: v["slices"] == 1 or ck(v) <= pow2_at_least(p.C),
             lambda v: f"slices={v['slices']} of chunk_c={v['chunk_c']} channels exceed C={p.C}", field="slices"),
    ]
    if machine is not None:
        cap = MAX_WAVES * machine.sm_count
        prune.append(Rule("small_grid", ("tile_m", "tile_n"), lambda v: -(-m // v["tile_m"]) * -(-p.K // v["tile_n"])
                          <= cap, f"more than {cap} blocks: a GEMM this large is the other families'", field="tile_m"))
    values = {"tile_m": TILE_M, "tile_n": TILE_N, "chunk_c": CHUNK_C, "slices": SLICES, "thread_m": THREAD_TILE,
              "thread_n": THREAD_TILE}
    return SearchSpace(values, rules, tuple(prune))


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[PointwiseSlicedFwdPlan]:
    """Every valid (config, plan) of the sliced pointwise kernel for ``problem`` on ``machine``."""
    for values in space(problem, machine).configs():
        try:
            yield derive_plan(problem, PointwiseSlicedFwdConfig(**values), machine)
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
            continue


def plan(problem: ConvProblem, config: PointwiseSlicedFwdConfig,
         machine: MachineModel | None = None) -> PointwiseSlicedFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then ``machine``'s limits on the derived
    geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)
