"""The configuration space of the implicit-GEMM tensor-core forward kernel for one problem and machine.

Values: block tiles BM, BN ∈ {32, 64, 128, 256}, BK ∈ {8, 16, 32} (the kernel takes 8, 16, 32 or 64: divisors of
the packed filters' 64-row padding), warps 1..4 along each axis, 2..5 stages, splits 1..16. The kernel's rules
(``plan`` enforces them): warp tiles multiples of the 16 × 8 mma tile and at most 64 channels wide, 64..256
threads, ≤ 128 accumulators per thread (and then tile_k ≤ 16), every thread copying whole A rows, no split
without chunks. The search's pruning rules: tiles no larger than the next power of two of the extent they
cover (M = N·P·Q pixels, K channels), and with a machine no split of a grid that already fills every SM twice.
"""

from __future__ import annotations

from collections.abc import Iterator
from functools import cache

from convtune.errors import InvalidConfig
from convtune.kernels.igemm.launcher import (
    CHANNELS_LAST_FAMILY,
    MMA_M,
    MMA_N,
    POINTWISE_FAMILY,
    WARP,
    IgemmFwdConfig,
    IgemmFwdPlan,
    derive_plan,
    raw_regs_estimate,
    reduction_length,
    supports,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least, split_rules
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_M = (32, 64, 128, 256)
TILE_N = (32, 64, 128, 256)
TILE_K = (8, 16, 32)
WARPS = (1, 2, 4)
STAGES = (2, 3, 4, 5)
SPLITS = (1, 2, 4, 8, 16)
MAX_ACCUMULATORS = 128   # fp32 accumulators per thread: more leave too few registers for fragments and addresses
#: Channels of one warp's tile: 16 × 128 (NI = 16 mma tiles, 32 B-fragment registers) spills under ptxas (CUDA 13,
#: sm_90: 255 registers + 8 B stack at tile_k = 32); tiles up to 64 channels (and 128 pixels) compile clean.
MAX_WARP_TILE_N = 64
#: ptxas (CUDA 13, sm_90) spills 128-accumulator warps whose chunk unrolls four k-steps (tile_k = 32): 128×128
#: tiles over 2×2 and 1×4 warps spilled 8–16 B in a sample of 120 configs of the space; tile_k ≤ 16 compiled clean.
DEEP_CHUNK_MAX_TILE_K = 16
MAX_A_COPIES = 32        # 4-byte gathers per thread and chunk: each costs ~8 instructions and its table entry
#: The pipelined variants' register estimate (launcher.raw_regs_estimate) above which configs are refused. Over 180
#: sampled configs (ptxas, CUDA 13, sm_90) every one estimated at 292 or more that ptxas held within 255 registers
#: spilled in one of the two variants (24–1264 B); of those estimated 256–288, 1 of 14 spilled (8 B), the others fit
#: (the estimate is conservative at 128 accumulators: 272 for 128×128×16 over 2×2 warps, which takes 254–255).
MAX_PIPELINED_REGS_ESTIMATE = 288
MAX_NHWC_A_COPIES = 16   # 16-byte copies per thread and chunk of the NHWC variant: 4 registers each, all live


def _threads(v: Values) -> int:
    return WARP * v["warps_m"] * v["warps_n"]


def _warp_tile(v: Values) -> tuple[int, int]:
    return v["tile_m"] // v["warps_m"], v["tile_n"] // v["warps_n"]


def _accumulators(v: Values) -> int:
    wm, wn = _warp_tile(v)
    return 4 * (wm // MMA_M) * (wn // MMA_N)


def _nchw_copy_rules() -> tuple[Rule, ...]:
    """The NCHW kernel's A copies: each thread a fixed pixel column, whole rows of 4-byte gathers."""
    return (
        Rule("a_rows", ("tile_m", "tile_k", "warps_m", "warps_n"),
             lambda v: (_threads(v) % v["tile_m"] == 0 or v["tile_m"] % _threads(v) == 0)
             and (v["tile_k"] * v["tile_m"]) % _threads(v) == 0,
             lambda v: f"tile_k·tile_m = {v['tile_k'] * v['tile_m']} A elements do not split into whole rows "
                       f"over {_threads(v)} threads", field="tile_k"),
        Rule("a_copies", ("tile_m", "tile_k", "warps_m", "warps_n"),
             lambda v: v["tile_k"] * v["tile_m"] // _threads(v) <= MAX_A_COPIES,
             lambda v: f"{v['tile_k'] * v['tile_m'] // _threads(v)} A copies per thread and chunk exceed "
                       f"{MAX_A_COPIES}", field="tile_k"),
    )


def _piece_copy_rules(variant: str) -> tuple[Rule, ...]:
    """The NHWC and 1×1 kernels' A copies: 16-byte pieces, the same count for every thread; and their registers
    (the pipelined main loop double-buffers the fragments: configs estimated far past 255 registers spill)."""
    def pieces(v: Values) -> int:
        return v["tile_k"] * v["tile_m"] // 4

    def regs(v: Values) -> int:
        fields = {k: v[k] for k in ("tile_m", "tile_n", "tile_k", "warps_m", "warps_n")}
        return raw_regs_estimate(_config_classes()[variant](**fields))

    return (
        Rule("registers", ("tile_m", "tile_n", "tile_k", "warps_m", "warps_n"),
             lambda v: regs(v) <= MAX_PIPELINED_REGS_ESTIMATE,
             lambda v: f"~{regs(v)} registers per thread (double-buffered fragments, {v['tile_k'] // 8} unrolled k8 "
                       f"steps) spill: shrink the warp tile or tile_k", field="tile_k"),
        Rule("a_rows", ("tile_m", "tile_k", "warps_m", "warps_n"), lambda v: pieces(v) % _threads(v) == 0,
             lambda v: f"tile_k·tile_m/4 = {pieces(v)} 16-byte A pieces do not split evenly over {_threads(v)} "
                       f"threads", field="tile_k"),
        Rule("a_copies", ("tile_m", "tile_k", "warps_m", "warps_n"),
             lambda v: pieces(v) // _threads(v) <= MAX_NHWC_A_COPIES,
             lambda v: f"{pieces(v) // _threads(v)} 16-byte A copies per thread and chunk exceed "
                       f"{MAX_NHWC_A_COPIES}", field="tile_k"),
    )


def _config_classes() -> dict[str, type[IgemmFwdConfig]]:
    from convtune.kernels.igemm.nhwc import IgemmNhwcFwdConfig
    from convtune.kernels.igemm.pointwise import IgemmPointwiseFwdConfig

    return {"igemm": IgemmFwdConfig, CHANNELS_LAST_FAMILY: IgemmNhwcFwdConfig,
            POINTWISE_FAMILY: IgemmPointwiseFwdConfig}


#: what each variant adds to the NCHW kernel's problems, and the predicate
_VARIANT_PROBLEMS = {
    "igemm": ("", lambda p: True),
    CHANNELS_LAST_FAMILY: (", C a multiple of 4", lambda p: p.C % 4 == 0),
    POINTWISE_FAMILY: (", 1×1 filters, stride 1, no padding, H·W a multiple of 4",
                       lambda p: p.R == p.S == p.stride_h == p.stride_w == 1 and p.pad_h == p.pad_w == 0
                       and (p.H * p.W) % 4 == 0),
}


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None, variant: str = "igemm") -> SearchSpace:
    """The igemm forward space of ``problem`` (see the module docstring) for ``variant``, a family of
    :data:`~convtune.kernels.igemm.launcher.VARIANTS`: the NHWC and 1×1 variants copy A in 16-byte pieces."""
    p = problem
    max_m, max_n = max(32, pow2_at_least(p.N * p.P * p.Q)), max(32, pow2_at_least(p.K))
    needs, extra = _VARIANT_PROBLEMS[variant]
    rules = (
        Rule("problem", (), lambda v: supports(p) and extra(p), f"the tensor-core kernel runs float32 problems "
             f"with math=tf32, groups=1{needs}; got {p.key()}", field="problem"),
        Rule("tile_m", ("tile_m",), lambda v: v["tile_m"] % 32 == 0 and v["tile_m"] <= 256,
             "tile_m={tile_m} must be a multiple of 32 and at most 256"),
        Rule("tile_n", ("tile_n",), lambda v: v["tile_n"] % 32 == 0 and v["tile_n"] <= 256,
             "tile_n={tile_n} must be a multiple of 32 and at most 256"),
        Rule("tile_k", ("tile_k",), lambda v: v["tile_k"] in (8, 16, 32, 64),
             "tile_k={tile_k} must be 8, 16, 32 or 64 (a multiple of the mma's k = 8 dividing the 64-row padding "
             "of the packed filters)"),
        Rule("warp_tile_m", ("tile_m", "warps_m"), lambda v: v["tile_m"] % (MMA_M * v["warps_m"]) == 0,
             lambda v: f"tile_m/warps_m = {v['tile_m']}/{v['warps_m']} must be a multiple of {MMA_M}",
             field="warps_m"),
        Rule("warp_tile_n", ("tile_n", "warps_n"), lambda v: v["tile_n"] % (MMA_N * v["warps_n"]) == 0,
             lambda v: f"tile_n/warps_n = {v['tile_n']}/{v['warps_n']} must be a multiple of {MMA_N}",
             field="warps_n"),
        Rule("threads", ("warps_m", "warps_n"), lambda v: 64 <= _threads(v) <= 256,
             lambda v: f"{_threads(v)} threads per block (32 · warps_m · warps_n): allowed 64..256", field="warps_m"),
        Rule("warp_tile_n", ("tile_n", "warps_n"), lambda v: v["tile_n"] // v["warps_n"] <= MAX_WARP_TILE_N,
             lambda v: f"a warp tile {v['tile_n'] // v['warps_n']} channels wide exceeds {MAX_WARP_TILE_N}: its "
                       f"fragments spill", field="warps_n"),
        Rule("accumulators", ("tile_m", "tile_n", "warps_m", "warps_n"),
             lambda v: _accumulators(v) <= MAX_ACCUMULATORS,
             lambda v: f"{_accumulators(v)} accumulators per thread exceed {MAX_ACCUMULATORS}: add warps or shrink "
                       f"the tile", field="tile_m"),
        Rule("deep_chunk", ("tile_m", "tile_n", "warps_m", "warps_n", "tile_k"),
             lambda v: _accumulators(v) < MAX_ACCUMULATORS or v["tile_k"] <= DEEP_CHUNK_MAX_TILE_K,
             lambda v: f"{_accumulators(v)} accumulators per thread with tile_k={v['tile_k']} spill: at most "
                       f"tile_k={DEEP_CHUNK_MAX_TILE_K} with {MAX_ACCUMULATORS}", field="tile_k"),
        *(_nchw_copy_rules() if variant == "igemm" else _piece_copy_rules(variant)),
        Rule("stages", ("stages",), lambda v: 2 <= v["stages"] <= 5, "stages={stages}: allowed 2..5"),
        *split_rules(reduction_length(p), chunk="tile_k", extent="C·R·S", unit="reduction", empty="work"),
    )
    prune = [
        Rule("tile_m_extent", ("tile_m",), lambda v: v["tile_m"] <= max_m, f"tile_m={{tile_m}} exceeds {max_m}"),
        Rule("tile_n_extent", ("tile_n",), lambda v: v["tile_n"] <= max_n, f"tile_n={{tile_n}} exceeds {max_n}"),
    ]
    if machine is not None:
        sm_count = machine.sm_count

        def tiles(v: Values) -> int:
            return -(-p.N * p.P * p.Q // v["tile_m"]) * -(-p.K // v["tile_n"])

        prune.append(Rule("split_needed", ("tile_m", "tile_n", "splits"),
                          lambda v: v["splits"] == 1 or tiles(v) < 2 * sm_count,
                          lambda v: f"{tiles(v)} tiles fill the GPU already: a split only adds atomics",
                          field="splits"))
    values = {"tile_m": TILE_M, "tile_n": TILE_N, "tile_k": TILE_K, "warps_m": WARPS, "warps_n": WARPS,
              "stages": STAGES, "splits": SPLITS}
    return SearchSpace(values, rules, tuple(prune))


def grid_size(problem: ConvProblem) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel,
                    config_class: type[IgemmFwdConfig] = IgemmFwdConfig) -> Iterator[IgemmFwdPlan]:
    """Every valid (config, plan) of the igemm forward kernel (or, by ``config_class``, its NHWC or 1×1 variant)
    for ``problem`` on ``machine``."""
    for values in space(problem, machine, config_class.family).configs():
        try:
            yield derive_plan(problem, config_class(**values), machine)  # the rules hold: configs() kept them
        except InvalidConfig:  # a limit of the derived geometry (shared memory, registers, grid)
            continue


def plan(problem: ConvProblem, config: IgemmFwdConfig, machine: MachineModel | None = None) -> IgemmFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space` for the config's variant, then
    ``machine``'s limits on the derived geometry) and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem, None, config.family).check(config)
    return derive_plan(problem, config, machine)
