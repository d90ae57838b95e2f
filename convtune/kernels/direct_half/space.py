"""The configuration space of the 16-bit direct kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected), each with its
plan; pruned: channel blocks larger than the next power of two of K (at least 4), row tiles (TX·PT) larger than that
of Q (at least 8) and row counts (TY) larger than that of P.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.direct_half.launcher import (
    FAMILY,
    MAX_CHANNELS,
    MAX_REDUCTION,
    DirectHalfFwdConfig,
    DirectHalfFwdPlan,
    derive_plan,
    supports,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

K_BLOCK = (4, 8, 16, 32)
PIXELS = (1, 2, 4)
THREADS_X = (8, 16, 32)
THREADS_Y = (1, 2, 4, 8)
MAX_ACCUMULATORS = 64   # fp32 accumulators per thread (KB·PT): more leave too few registers for the row's span


def _threads(v: Values) -> int:
    return v["threads_x"] * v["threads_y"]


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None) -> SearchSpace:
    """The values, the kernel's rules (``plan`` enforces them) and the search's pruning rules (module docstring)."""
    p = problem
    rules = (
        Rule("problem", (), lambda v: supports(p), f"{FAMILY} runs bfloat16 / float16 convolutions with C ≤ "
             f"{MAX_CHANNELS} and C·R·S ≤ {MAX_REDUCTION}, groups=1, not causal; got {p.key()}", field="problem"),
        Rule("k_block", ("k_block",), lambda v: v["k_block"] in K_BLOCK, f"k_block={{k_block}}: allowed {K_BLOCK}"),
        Rule("pixels", ("pixels",), lambda v: v["pixels"] in PIXELS, f"pixels={{pixels}}: allowed {PIXELS}"),
        Rule("threads_x", ("threads_x",), lambda v: v["threads_x"] in THREADS_X,
             f"threads_x={{threads_x}}: allowed {THREADS_X}"),
        Rule("threads_y", ("threads_y",), lambda v: v["threads_y"] in THREADS_Y,
             f"threads_y={{threads_y}}: allowed {THREADS_Y}"),
        Rule("threads", ("threads_x", "threads_y"), lambda v: 32 <= _threads(v) <= 256,
             lambda v: f"{_threads(v)} threads per block (threads_x·threads_y): allowed 32..256", field="threads_y"),
        Rule("accumulators", ("k_block", "pixels"), lambda v: v["k_block"] * v["pixels"] <= MAX_ACCUMULATORS,
             lambda v: f"k_block·pixels = {v['k_block'] * v['pixels']} accumulators per thread exceed "
                       f"{MAX_ACCUMULATORS}", field="pixels"),
    )
    max_k, max_q, max_p = max(4, pow2_at_least(p.K)), max(8, pow2_at_least(p.Q)), pow2_at_least(p.P)
    prune = (
        Rule("k_block_extent", ("k_block",), lambda v: v["k_block"] <= max_k, f"k_block={{k_block}} exceeds {max_k}"),
        Rule("row_extent", ("threads_x", "pixels"), lambda v: v["threads_x"] * v["pixels"] <= max_q,
             lambda v: f"threads_x·pixels = {v['threads_x'] * v['pixels']} exceeds {max_q}", field="threads_x"),
        Rule("rows_extent", ("threads_y",), lambda v: v["threads_y"] <= max_p, f"threads_y={{threads_y}} exceeds "
             f"{max_p}"),
    )
    values = {"k_block": K_BLOCK, "pixels": PIXELS, "threads_x": THREADS_X, "threads_y": THREADS_Y}
    return SearchSpace(values, rules, prune)


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[DirectHalfFwdPlan]:
    """Every valid (config, plan) of the 16-bit direct kernel for ``problem`` on ``machine``."""
    for values in space(problem, machine).configs():
        try:
            yield derive_plan(problem, DirectHalfFwdConfig(**values), machine)
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
            continue


def plan(problem: ConvProblem, config: DirectHalfFwdConfig, machine: MachineModel | None = None) -> DirectHalfFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then ``machine``'s limits) and derive the
    launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)
