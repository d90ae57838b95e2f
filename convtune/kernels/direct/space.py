"""The configuration space of the direct forward kernel for one problem and machine.

:func:`enumerate_plans` yields every valid configuration (resource limits of the machine respected,
tiles no larger than the next power of two of the output extent they cover), each with its plan.
:func:`ranked` orders them by the analytic model; :func:`model_best` is the default config of the
operator API when nothing measured is known.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.direct.launcher import WARP, DirectFwdConfig, DirectFwdPlan, derive_plan
from convtune.kernels.direct.model import DirectPrediction, predict
from convtune.kernels.search_space import Rule, SearchSpace, Values, channel_split_rules, pow2_at_least
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


def _threads(v: Values) -> int:
    return (v["tile_h"] // v["thread_h"]) * (v["tile_w"] // v["thread_w"]) * (v["tile_k"] // v["thread_k"])


_BLOCK = ("tile_h", "tile_w", "tile_k", "thread_h", "thread_w", "thread_k")


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The direct forward space of ``problem``: the values, the kernel's rules (``plan`` enforces them) and the
    search's pruning rules (tiles no larger than the next power of two of the extent they cover, 64..512
    threads, at most 64 accumulators per thread)."""
    p = problem
    max_h, max_w, max_k = pow2_at_least(p.P), max(4, pow2_at_least(p.Q)), max(16, pow2_at_least(p.K))

    rules = (
        Rule("groups", (), lambda v: p.groups == 1, f"direct kernel supports groups=1 only, got {p.groups}",
             field="groups"),
        Rule("dtype", (), lambda v: p.dtype == "float32", f"direct kernel supports float32 only, got {p.dtype}",
             field="dtype"),
        Rule("thread_h_divides", ("tile_h", "thread_h"), lambda v: v["tile_h"] % v["thread_h"] == 0,
             "thread_h={thread_h} must divide tile_h={tile_h}"),
        Rule("thread_w_divides", ("tile_w", "thread_w"), lambda v: v["tile_w"] % v["thread_w"] == 0,
             "thread_w={thread_w} must divide tile_w={tile_w}"),
        Rule("thread_k", ("tile_k", "thread_k"), lambda v: v["thread_k"] % 4 == 0 and v["tile_k"] % v["thread_k"] == 0,
             "thread_k={thread_k} must be a multiple of 4 dividing tile_k={tile_k}"),
        Rule("threads", _BLOCK, lambda v: 32 <= _threads(v) <= 1024 and _threads(v) % WARP == 0,
             lambda v: f"{_threads(v)} threads per block: must be a multiple of 32 in [32, 1024]", field="threads"),
        Rule("threads_load_tile_k", _BLOCK, lambda v: _threads(v) % (v["tile_k"] // 4) == 0,
             lambda v: f"threads={_threads(v)} must be a multiple of tile_k/4={v['tile_k'] // 4}", field="tile_k"),
        Rule("stages", ("stages",), lambda v: v["stages"] <= 4, "stages={stages}: allowed 1..4"),
        Rule("vec", ("vec",), lambda v: v["vec"] in (1, 4), "vec={vec}: allowed 1 or 4"),
        Rule("vec_aligned", ("vec",), lambda v: v["vec"] != 4 or p.W % 4 == 0, f"vec=4 needs W % 4 == 0, got W={p.W}"),
        *channel_split_rules(p.C),
    )
    prune = (
        Rule("tile_h_extent", ("tile_h",), lambda v: v["tile_h"] <= max_h, f"tile_h={{tile_h}} exceeds {max_h}"),
        Rule("tile_w_extent", ("tile_w",), lambda v: v["tile_w"] <= max_w, f"tile_w={{tile_w}} exceeds {max_w}"),
        Rule("tile_k_extent", ("tile_k",), lambda v: v["tile_k"] <= max_k, f"tile_k={{tile_k}} exceeds {max_k}"),
        Rule("threads_searched", _BLOCK, lambda v: MIN_THREADS <= _threads(v) <= MAX_THREADS,
             lambda v: f"{_threads(v)} threads: searched {MIN_THREADS}..{MAX_THREADS}", field="threads"),
        Rule("accumulators", ("thread_h", "thread_w", "thread_k"),
             lambda v: v["thread_h"] * v["thread_w"] * v["thread_k"] <= MAX_ACCUMULATORS,
             f"thread_h·thread_w·thread_k accumulators: searched up to {MAX_ACCUMULATORS}", field="thread_k"),
    )
    chunk_values = tuple(sorted(set(CHUNK_C) | ({p.C} if max(CHUNK_C) > p.C else set())))
    values = {"tile_h": TILE_H, "tile_w": TILE_W, "tile_k": TILE_K, "thread_h": THREAD_H, "thread_w": THREAD_W,
              "thread_k": THREAD_K, "chunk_c": chunk_values, "stages": STAGES, "vec": VEC, "splits": SPLITS}
    return SearchSpace(values, rules, prune)


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[DirectFwdPlan]:
    """Every valid (config, plan) of the direct forward kernel for ``problem`` on ``machine``."""
    for values in space(problem).configs():
        try:
            yield derive_plan(problem, DirectFwdConfig(**values), machine)  # the rules hold: configs() kept them
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
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


def plan(problem: ConvProblem, config: DirectFwdConfig, machine: MachineModel | None = None) -> DirectFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`convtune.kernels.direct.space.space`, then
    ``machine``'s limits on the derived geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)
