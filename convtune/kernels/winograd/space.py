"""The configuration spaces of the fused Winograd kernel and of the unfused path, for one problem and machine.

:func:`enumerate_plans` (fused) and :func:`enumerate_unfused_plans` yield every valid configuration (the
machine's shared-memory and register limits respected; block tiles no larger than the next power of two
of the tile count and of K), each with its plan.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least
from convtune.kernels.winograd.launcher import WARP, WinogradFwdConfig, WinogradFwdPlan, applies, derive_plan
from convtune.kernels.winograd.transforms import POINTS
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig, WinogradUnfusedPlan, pass_rule
from convtune.kernels.winograd.unfused import derive_plan as derive_unfused_plan
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


def problem_rules(p: ConvProblem, why: str | None, points: Any, name: str) -> tuple[Rule, ...]:
    """The problem rule (``why``: why the family cannot run ``p``, None when it can) and the m rule (``points``:
    the evaluation points of each m the family provides) of a Winograd F(m×m, r×r) family called ``name``."""
    return (
        Rule("problem", (), lambda v: why is None, f"Winograd {name}: {why}", field="problem"),
        Rule("m", ("m",), lambda v: v["m"] in points, f"m={{m}}: allowed {sorted(points)}"),
    )


def _problem_rules(p: ConvProblem) -> tuple[Rule, ...]:
    return problem_rules(p, applies(p), POINTS, "F(m×m,3×3)")


def _tiles(p: ConvProblem, m: int) -> int:
    return p.N * -(-p.P // m) * -(-p.Q // m)


def _fused_threads(v: Values) -> int:
    return (v["tile_n"] // v["thread_n"]) * (v["tile_k"] // v["thread_k"])


_FUSED_BLOCK = ("tile_n", "tile_k", "thread_n", "thread_k")


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The fused kernel's space for ``problem``: the values, the kernel's rules (``plan`` enforces them) and the
    search's pruning rules (tile_n no larger than the next power of two of the tile count, tile_k than that of
    K, 64..512 threads)."""
    p = problem
    max_k = max(8, pow2_at_least(p.K))
    rules = (
        *_problem_rules(p),
        Rule("thread_n", ("tile_n", "thread_n"), lambda v: v["tile_n"] % v["thread_n"] == 0,
             "thread_n={thread_n} must divide tile_n={tile_n}"),
        Rule("tile_k", ("tile_k", "thread_k"), lambda v: v["tile_k"] % 4 == 0 and v["tile_k"] % v["thread_k"] == 0,
             "tile_k={tile_k} must be a multiple of 4 and of thread_k={thread_k}", field="tile_k"),
        Rule("threads", _FUSED_BLOCK, lambda v: 32 <= _fused_threads(v) <= 1024 and _fused_threads(v) % WARP == 0,
             lambda v: f"{_fused_threads(v)} threads per block: must be a multiple of 32 in [32, 1024]",
             field="threads"),
        Rule("whole_windows", (*_FUSED_BLOCK, "chunk_c"),
             lambda v: (v["tile_n"] * v["chunk_c"]) % _fused_threads(v) == 0,
             lambda v: f"tile_n·chunk_c={v['tile_n'] * v['chunk_c']} must be a multiple of the "
                       f"{_fused_threads(v)} threads (each loads whole input windows)", field="chunk_c"),
        Rule("stages", ("stages",), lambda v: v["stages"] in (1, 2), "stages={stages}: allowed 1 or 2"),
    )
    prune = (
        Rule("tile_n_extent", ("m", "tile_n"), lambda v: v["tile_n"] <= max(16, pow2_at_least(_tiles(p, v["m"]))),
             lambda v: f"tile_n={v['tile_n']} exceeds {max(16, pow2_at_least(_tiles(p, v['m'])))}"),
        Rule("tile_k_extent", ("tile_k",), lambda v: v["tile_k"] <= max_k, f"tile_k={{tile_k}} exceeds {max_k}"),
        Rule("threads_searched", _FUSED_BLOCK, lambda v: MIN_THREADS <= _fused_threads(v) <= MAX_THREADS,
             lambda v: f"{_fused_threads(v)} threads: searched {MIN_THREADS}..{MAX_THREADS}", field="threads"),
    )
    values = {"m": M, "tile_n": TILE_N, "tile_k": TILE_K, "thread_n": THREAD_N, "thread_k": THREAD_K,
              "chunk_c": CHUNK_C, "stages": STAGES}
    return SearchSpace(values, rules, prune)


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradFwdPlan]:
    """Every valid (config, plan) of the fused Winograd kernel for ``problem`` on ``machine``."""
    for values in space(problem).configs():
        try:
            yield derive_plan(problem, WinogradFwdConfig(**values), machine)  # the rules hold: configs() kept them
        except InvalidConfig:  # a limit of the derived geometry (registers, shared memory, grid)
            continue


# ---- the unfused path (input transform, α² batched GEMMs, output transform) ----
GEMM_TILE_K = (32, 64, 128)
GEMM_TILE_T = (32, 64, 128)
GEMM_CHUNK_C = (8, 16)
GEMM_THREAD = (4, 8)
GEMM_STAGES = (2, 3, 4)
GEMM_MIN_THREADS, GEMM_MAX_THREADS = 64, 256


def _gemm_threads(v: Values) -> int:
    return (v["tile_k"] // v["thread_k"]) * (v["tile_t"] // v["thread_t"])


_GEMM_BLOCK = ("tile_k", "tile_t", "thread_k", "thread_t")


@experimental.cached_per_names
def unfused_space(problem: ConvProblem) -> SearchSpace:
    """The unfused path's space for ``problem`` (its GEMM's tiles: BK no larger than the next power of two of K,
    BT than that of the tile count, 64..256 threads searched)."""
    return unfused_space_with(problem, _problem_rules(problem), r=3)


def unfused_space_with(problem: ConvProblem, problem_rules: tuple[Rule, ...],
                       extra_values: dict[str, tuple[int, ...]] | None = None, r: int | None = None) -> SearchSpace:
    """The unfused GEMM's space (values, kernel rules, pruning) under a family's own problem and m rules
    (``problem_rules``) and extra fields (``extra_values``): the 3×3 path's and the large-filter family's; ``r``: the
    square filter size of a family whose batch may run in passes (``images_per_pass``, :func:`~convtune.kernels.
    winograd.unfused.pass_rule`; None: one pass only)."""
    p = problem
    if r is not None:
        rule, choices = pass_rule(p, r, M)
    else:   # a family whose tiles are not square (the 1-D one): one pass
        rule, choices = Rule("images_per_pass", ("images_per_pass",), lambda v: v["images_per_pass"] == 0,
                             "images_per_pass={images_per_pass}: this family runs the batch in one pass (0)"), (0,)
    passes, pass_values = (rule,), {"images_per_pass": choices}

    def thread_rule(name: str, tile: str) -> Rule:
        return Rule(name, (tile, name), lambda v: v[name] % 4 == 0 and v[tile] % v[name] == 0,
                    lambda v: f"{name}={v[name]} must be a multiple of 4 that divides {v[tile]}")

    rules = (
        *problem_rules,
        thread_rule("thread_k", "tile_k"),
        thread_rule("thread_t", "tile_t"),
        Rule("threads", _GEMM_BLOCK, lambda v: 32 <= _gemm_threads(v) <= 1024 and _gemm_threads(v) % 32 == 0,
             lambda v: f"{_gemm_threads(v)} GEMM threads per block: must be a multiple of 32 in [32, 1024]",
             field="threads"),
        Rule("stages", ("stages",), lambda v: 2 <= v["stages"] <= 4, "stages={stages}: allowed 2..4"),
        Rule("chunk_c", ("chunk_c",), lambda v: v["chunk_c"] <= 32, "chunk_c={chunk_c}: allowed 1..32"),
        *passes,
    )
    max_k = max(32, pow2_at_least(p.K))
    prune = (
        Rule("tile_k_extent", ("tile_k",), lambda v: v["tile_k"] <= max_k, f"tile_k={{tile_k}} exceeds {max_k}"),
        Rule("tile_t_extent", ("m", "tile_t"), lambda v: v["tile_t"] <= max(32, pow2_at_least(_tiles(p, v["m"]))),
             lambda v: f"tile_t={v['tile_t']} exceeds {max(32, pow2_at_least(_tiles(p, v['m'])))}"),
        Rule("threads_searched", _GEMM_BLOCK, lambda v: GEMM_MIN_THREADS <= _gemm_threads(v) <= GEMM_MAX_THREADS,
             lambda v: f"{_gemm_threads(v)} GEMM threads: searched {GEMM_MIN_THREADS}..{GEMM_MAX_THREADS}",
             field="threads"),
    )
    values = {"m": M, "tile_k": GEMM_TILE_K, "tile_t": GEMM_TILE_T, "chunk_c": GEMM_CHUNK_C, "thread_k": GEMM_THREAD,
              "thread_t": GEMM_THREAD, "stages": GEMM_STAGES, **pass_values, **(extra_values or {})}
    return SearchSpace(values, rules, prune)


def unfused_grid_size(problem: ConvProblem) -> int:
    """Size of the unfused path's raw parameter grid."""
    return unfused_space(problem).grid_size()


def enumerate_unfused_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[WinogradUnfusedPlan]:
    """Every valid (config, plan) of the unfused path for ``problem`` on ``machine``."""
    for values in unfused_space(problem).configs():
        try:
            yield derive_unfused_plan(problem, WinogradUnfusedConfig(**values), machine)
        except InvalidConfig:  # a limit of the derived geometry (registers, shared memory, grid)
            continue


def plan(problem: ConvProblem, config: WinogradFwdConfig, machine: MachineModel | None = None) -> WinogradFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`convtune.kernels.winograd.space.space`, then
    the register and ``machine``'s limits on the derived geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)


def plan_unfused(problem: ConvProblem, config: WinogradUnfusedConfig,
                 machine: MachineModel | None = None) -> WinogradUnfusedPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`convtune.kernels.winograd.space.unfused_space`, then
    the register and ``machine``'s limits on the derived geometry) and derive the plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    unfused_space(problem).check(config)
    return derive_unfused_plan(problem, config, machine)
