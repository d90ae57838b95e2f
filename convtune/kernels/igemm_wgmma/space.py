"""The configuration space of the wgmma forward kernels (TF32 ``igemm_wgmma`` and ``igemm_wgmma_1x1``, 16-bit
``igemm_wgmma_half`` and ``igemm_wgmma_half_1x1``: the same parameters and rules; the general kernel's two families
add ``chunk`` (TF32 32, 16,
8 channels; 16-bit 64, 32, 16: rows of 128, 64, 32 bytes), 3 stages, ``row_taps`` — S where Cq ≤ 16 bytes of
channels hold C, a filter row's taps folded into one chunk, with the smallest chunk holding S·Cq columns — and
``tma`` — 1: the operands by TMA from a producer warpgroup, where the im2col box describes the convolution and taps
are not folded) for one problem and machine.

:func:`enumerate_plans` yields every valid configuration of a family (resource limits of the machine respected,
sm_90 only), each with its plan. Pruned: row tiles (64 · warpgroups · m_blocks) and column tiles larger than the next
power of two of the extent they cover (M = N·P·Q pixels, at least 64; K channels, at least 64; the 16-bit 1×1
family's GEMM is transposed: its rows are the K channels, its columns the pixels), and splits of a grid that already
has two blocks per SM.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from functools import cache, partial

from convtune.errors import InvalidConfig
from convtune.kernels.igemm_wgmma import half as _half
from convtune.kernels.igemm_wgmma import half_1x1 as _half_1x1
from convtune.kernels.igemm_wgmma import half_1x1_pingpong as _pingpong
from convtune.kernels.igemm_wgmma import half_1x1_resident as _resident
from convtune.kernels.igemm_wgmma import half_1x1_tma as _tma1x1
from convtune.kernels.igemm_wgmma import launcher as _tf32
from convtune.kernels.igemm_wgmma import n96 as _n96
from convtune.kernels.igemm_wgmma import tf32_1x1 as _tf32_1x1
from convtune.kernels.igemm_wgmma import tf32_1x1_resident as _tf32_resident
from convtune.kernels.igemm_wgmma import tf32_1x1_tma as _tf32_tma
from convtune.kernels.igemm_wgmma.launcher import (
    IgemmWgmmaFwdConfig,
    IgemmWgmmaFwdPlan,
    WgmmaConfig,
    chunk_elements,
    derive_plan,
    fold_channels,
)
from convtune.kernels.search_space import Rule, SearchSpace, Values, pow2_at_least
from convtune.kernels.tensor_map import im2col_limits
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TILE_N = (64, 128, 256)
M_BLOCKS = (1, 2)
WARPGROUPS = (1, 2)
STAGES = (4, 6)
SPLITS = (1, 2, 4, 8, 16)
MAX_ACCUMULATORS = 128   # fp32 accumulator registers per thread (MI · BN / 2): more leave too few for the rest
TMA = (0, 1)             # the general kernel: copies by every thread (0) or by TMA from a producer warpgroup (1)
TF32_FAMILY = IgemmWgmmaFwdConfig.family
#: family -> (config class, supports, what it runs, its plan derivation)
FAMILIES: dict[str, tuple[type[WgmmaConfig], Callable[[ConvProblem], bool], str,
                          Callable[..., IgemmWgmmaFwdPlan]]] = {
    TF32_FAMILY: (IgemmWgmmaFwdConfig, _tf32.supports, "dense float32 convolutions with TF32 arithmetic allowed "
                  "(math='tf32')", partial(derive_plan, plan_class=IgemmWgmmaFwdPlan)),
    _half.HALF_FAMILY: (_half.IgemmWgmmaHalfFwdConfig, _half.supports, "dense bfloat16 / float16 convolutions "
                        "(math='ieee')", partial(derive_plan, plan_class=_half.IgemmWgmmaHalfPlan)),
    _half_1x1.FAMILY: (_half_1x1.IgemmWgmmaHalf1x1FwdConfig, _half_1x1.supports, "bfloat16 / float16 1×1 "
                       "convolutions (stride 1, no padding, H·W a multiple of 4)", _half_1x1.derive_plan),
    _resident.FAMILY: (_resident.IgemmWgmmaHalf1x1ResidentFwdConfig, _resident.supports, "bfloat16 / float16 1×1 "
                       "convolutions (stride 1, no padding, H·W a multiple of 4) whose filter rows fit shared memory",
                       _resident.derive_plan),
    _pingpong.FAMILY: (_pingpong.IgemmWgmmaHalf1x1PingpongFwdConfig, _pingpong.supports, "bfloat16 / float16 1×1 "
                       "convolutions (stride 1, no padding, H·W a multiple of 4) whose filter rows fit shared memory",
                       _pingpong.derive_plan),
    _tma1x1.FAMILY: (_tma1x1.IgemmWgmmaHalf1x1TmaFwdConfig, _tma1x1.supports, "bfloat16 / float16 1×1 convolutions "
                     "(stride 1, no padding) with C a multiple of 64 and H·W of 8 whose filter rows fit shared memory",
                     _tma1x1.derive_plan),
    _tf32_1x1.FAMILY: (_tf32_1x1.IgemmWgmma1x1FwdConfig, _tf32_1x1.supports, "TF32 1×1 convolutions (math='tf32', "
                       "stride 1, no padding, H·W a multiple of 4)", _tf32_1x1.derive_plan),
    _tf32_resident.FAMILY: (_tf32_resident.IgemmWgmma1x1ResidentFwdConfig, _tf32_resident.supports, "TF32 1×1 "
                            "convolutions (math='tf32', stride 1, no padding, H·W a multiple of 4) whose filter rows "
                            "fit shared memory", _tf32_resident.derive_plan),
    _tf32_tma.FAMILY: (_tf32_tma.IgemmWgmma1x1TmaFwdConfig, _tf32_tma.supports, "TF32 1×1 convolutions "
                       "(math='tf32', stride 1, no padding) with C a multiple of 32 and H·W of 4 whose filter rows fit "
                       "shared memory", _tf32_tma.derive_plan),
}
# the general kernel with 96/192-column tiles: its family's problems, its own config and plan (source) classes
FAMILIES[_n96.FAMILY] = (_n96.IgemmWgmmaN96FwdConfig, *FAMILIES[TF32_FAMILY][1:3],
                         partial(derive_plan, plan_class=_n96.IgemmWgmmaN96Plan))
FAMILIES[_n96.HALF_FAMILY] = (_n96.IgemmWgmmaHalfN96FwdConfig, *FAMILIES[_half.HALF_FAMILY][1:3],
                              partial(derive_plan, plan_class=_n96.IgemmWgmmaHalfN96Plan))
#: the persistent families with filters resident in shared memory: the whole reduction in one block (no split)
RESIDENT = (_resident.FAMILY, _tf32_resident.FAMILY, _pingpong.FAMILY, _tma1x1.FAMILY, _tf32_tma.FAMILY)
#: the ping-pong family: every warpgroup covers all 64 · m_blocks rows (up to the 256 of a K ≤ 256 layer), and two or
#: three warpgroups take turns over the tiles
PINGPONG_M_BLOCKS = (1, 2, 4)
PINGPONG_WARPGROUPS = (2, 3)
#: the GEMMs whose rows are the K output channels (the 16-bit 1×1 kernels read x N-major)
TRANSPOSED = (_half_1x1.FAMILY, _resident.FAMILY, _pingpong.FAMILY, _tma1x1.FAMILY)
#: the general kernel's families: channels per chunk (rows of 128, 64, 32 bytes) and stages
CHUNKED = {TF32_FAMILY: (_tf32.CHUNKS, _tf32.GENERAL_STAGES), _half.HALF_FAMILY: (_half.CHUNKS, _tf32.GENERAL_STAGES)}
CHUNKED |= {_n96.FAMILY: CHUNKED[TF32_FAMILY], _n96.HALF_FAMILY: CHUNKED[_half.HALF_FAMILY]}
#: the column tiles of the families whose wgmma N is not a power of two (every other family: TILE_N)
FAMILY_TILE_N = {_n96.FAMILY: _n96.TILE_N, _n96.HALF_FAMILY: _n96.TILE_N}


def _tile_m(v: Values, config_class: type[WgmmaConfig]) -> int:
    """Rows of a block's tile, as the family's config reads ``m_blocks`` and ``warpgroups`` (64 · warpgroups ·
    m_blocks where the warpgroups split them, 64 · m_blocks where each covers all of them)."""
    return config_class(m_blocks=v["m_blocks"], warpgroups=v["warpgroups"]).tile_m


@cache
def space(problem: ConvProblem, machine: MachineModel | None = None, family: str = TF32_FAMILY) -> SearchSpace:
    """The space of ``problem`` in ``family``: the values, the kernel's rules (``plan`` enforces them) and the
    search's pruning rules (module docstring)."""
    p = problem
    config_class, supports, runs, _ = FAMILIES[family]
    general = family in CHUNKED     # the general kernel: chunk, row_taps and 3 stages
    chunk_values, stage_values = CHUNKED.get(family, ((), STAGES))
    pingpong = family == _pingpong.FAMILY
    m_blocks_values = PINGPONG_M_BLOCKS if pingpong else M_BLOCKS
    tile_n_values = FAMILY_TILE_N.get(family, TILE_N)
    warpgroup_values = PINGPONG_WARPGROUPS if pingpong else WARPGROUPS

    cq = fold_channels(p) if general and p.S > 1 else 0     # folded taps: a pixel's channels, 0 where C is more

    def folded(v: Values) -> bool:
        return general and v["row_taps"] > 1

    def chunks(v: Values) -> int:
        """Reduction chunks R·S·⌈C/ch⌉: ch the general kernel's ``chunk``, else one 128-byte row of the dtype;
        folded taps: R (one per filter row)."""
        if folded(v):
            return p.R
        return p.R * p.S * -(-p.C // (v["chunk"] if general else chunk_elements(p)))

    def splits_used(v: Values) -> int:
        n = chunks(v)
        return -(-n // -(-n // v["splits"]))

    split_keys = ("splits", "chunk", "row_taps") if general else ("splits",)

    rules: tuple[Rule, ...] = (
        Rule("problem", (), lambda v: supports(p), f"{family} runs {runs}, groups=1, not causal; got {p.key()}",
             field="problem"),
        Rule("tile_n", ("tile_n",), lambda v: v["tile_n"] in tile_n_values,
             f"tile_n={{tile_n}}: allowed {tile_n_values}"),
        Rule("m_blocks", ("m_blocks",), lambda v: v["m_blocks"] in m_blocks_values, f"m_blocks={{m_blocks}}: allowed "
             f"{m_blocks_values}"),
        Rule("warpgroups", ("warpgroups",), lambda v: v["warpgroups"] in warpgroup_values,
             f"warpgroups={{warpgroups}}: allowed {warpgroup_values}"),
        Rule("accumulators", ("m_blocks", "tile_n"), lambda v: v["m_blocks"] * v["tile_n"] // 2 <= MAX_ACCUMULATORS,
             lambda v: f"m_blocks·tile_n/2 = {v['m_blocks'] * v['tile_n'] // 2} accumulators per thread exceed "
                       f"{MAX_ACCUMULATORS}", field="tile_n"),
        Rule("stages", ("stages",), lambda v: 3 <= v["stages"] <= 8, "stages={stages}: allowed 3..8 (one computing, "
             "one in the tensor cores, the rest loading)"),
        Rule("splits_chunks", split_keys, lambda v: 1 <= v["splits"] <= chunks(v),
             lambda v: f"splits={v['splits']} outside 1..{chunks(v)} (the reduction's chunks)", field="splits"),
        Rule("splits_nonempty", split_keys, lambda v: splits_used(v) == v["splits"],
             lambda v: f"splits={v['splits']} leaves a split without chunks ({chunks(v)} chunks); use "
                       f"splits={splits_used(v)}", field="splits"),
    )
    if general:
        fold_most = max(_tf32.FOLD_BYTES) // p.itemsize_bytes    # the most channels a folded pixel holds
        tma_limit = im2col_limits((p.pad_h, p.pad_w), (p.dil_h, p.dil_w), (p.R, p.S), (p.stride_h, p.stride_w))
        rules += (
            Rule("chunk", ("chunk",), lambda v: v["chunk"] in chunk_values, f"chunk={{chunk}}: allowed {chunk_values}"),
            Rule("row_taps", ("row_taps",), lambda v: v["row_taps"] == 1 or (v["row_taps"] == p.S and cq > 0),
                 f"row_taps={{row_taps}}: allowed 1, or S={p.S} where C ≤ {fold_most} (C={p.C})"),
            Rule("row_taps_chunk", ("row_taps", "chunk"), lambda v: not folded(v) or p.S * cq <= v["chunk"],
                 lambda v: f"chunk={v['chunk']} holds fewer than S·Cq = {p.S}·{cq} columns of folded taps",
                 field="chunk"),
            Rule("tma", ("tma",), lambda v: v["tma"] in TMA, f"tma={{tma}}: allowed {TMA}"),
            Rule("tma_fold", ("tma", "row_taps"), lambda v: not (v["tma"] and folded(v)),
                 "tma=1 reads whole channel rows of one tap: not with folded taps (row_taps > 1)", field="tma"),
            Rule("tma_im2col", ("tma",), lambda v: not (v["tma"] and tma_limit),
                 f"tma=1: the TMA im2col box cannot describe this convolution ({tma_limit})", field="tma"),
        )
    m = p.N * p.P * p.Q
    # the 16-bit 1×1 GEMMs' rows are output channels
    rows, cols = (p.K, m) if family in TRANSPOSED else (m, p.K)
    max_m, max_n = max(64, pow2_at_least(rows)), max(64, pow2_at_least(cols))
    prune = [
        Rule("tile_m_extent", ("warpgroups", "m_blocks"), lambda v: _tile_m(v, config_class) <= max_m,
             lambda v: f"the {_tile_m(v, config_class)} rows of a tile exceed {max_m}", field="m_blocks"),
        Rule("tile_n_extent", ("tile_n",), lambda v: v["tile_n"] <= max_n, f"tile_n={{tile_n}} exceeds {max_n}"),
    ]
    if family in FAMILY_TILE_N:
        def pads_less(v: Values) -> bool:
            """A tile of 96 or 192 columns only where it pads K less than the power-of-two tile just wider (128,
            256) does: where that tile fits K as well, the family is the general one with a narrower tile."""
            wider = pow2_at_least(v["tile_n"])
            return -(-cols // v["tile_n"]) * v["tile_n"] < -(-cols // wider) * wider

        prune.append(Rule("tile_n_padding", ("tile_n",), pads_less,
                          lambda v: f"tile_n={v['tile_n']} pads K={cols} no less than tile_n="
                                    f"{pow2_at_least(v['tile_n'])} does", field="tile_n"))
    if machine is not None:
        sm_count = machine.sm_count

        def tiles(v: Values) -> int:
            return -(-rows // _tile_m(v, config_class)) * -(-cols // v["tile_n"])

        prune.append(Rule("split_needed", ("warpgroups", "m_blocks", "tile_n", "splits"),
                          lambda v: v["splits"] == 1 or tiles(v) < 2 * sm_count,
                          lambda v: f"{tiles(v)} tiles fill the GPU already: a split only adds atomics",
                          field="splits"))
    values: dict[str, tuple[int, ...]] = {"tile_n": tile_n_values, "m_blocks": m_blocks_values,
                                          "warpgroups": warpgroup_values, "stages": STAGES, "splits": SPLITS}
    if general:
        values["chunk"] = chunk_values
        values["stages"] = stage_values
        values["row_taps"] = (1, p.S) if cq and p.S * cq <= max(chunk_values) else (1,)
        values["tma"] = TMA

        def padded(chunk: int) -> int:
            return -(-p.C // chunk) * chunk

        def chunk_pads_less(v: Values) -> bool:
            """A chunk below the largest only where it pads C less than the next larger chunk does (small C: stems);
            folded: the smallest chunk that holds the S·Cq columns."""
            if folded(v):
                return v["chunk"] == min(ch for ch in chunk_values if ch >= p.S * cq)
            return v["chunk"] == max(chunk_values) or padded(v["chunk"]) < padded(2 * v["chunk"])

        prune.append(Rule("chunk_padding", ("chunk", "row_taps"), chunk_pads_less,
                          lambda v: f"chunk={v['chunk']} pads more than a smaller chunk for C={p.C}"
                                    f"{' (folded)' if folded(v) else ''}", field="chunk"))
    if family in RESIDENT:   # the whole reduction in one block
        values["splits"] = (1,)
        rules += (Rule("splits_resident", ("splits",), lambda v: v["splits"] == 1,
                       f"splits={{splits}}: {family} reduces all of C in one block (allowed 1)", field="splits"),)
    return SearchSpace(values, rules, tuple(prune))


def grid_size(problem: ConvProblem, family: str = TF32_FAMILY) -> int:
    """Size of the raw parameter grid (every combination, before any validity rule)."""
    return space(problem, None, family).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel,
                    family: str = TF32_FAMILY) -> Iterator[IgemmWgmmaFwdPlan]:
    """Every valid (config, plan) of ``family`` for ``problem`` on ``machine`` (none off compute capability 9.0)."""
    config_class, _, _, derive = FAMILIES[family]
    for values in space(problem, machine, family).configs():
        try:
            yield derive(problem, config_class(**values), machine)
        except InvalidConfig:  # a limit of the derived geometry or the machine
            continue


def plan(problem: ConvProblem, config: WgmmaConfig,
         machine: MachineModel | None = None) -> IgemmWgmmaFwdPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then ``machine``'s limits) and derive the
    launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    family = config.family
    if family not in FAMILIES:
        raise InvalidConfig("family", f"{family!r} is not a wgmma family: allowed {', '.join(FAMILIES)}")
    space(problem, None, family).check(config)
    return FAMILIES[family][3](problem, config, machine)
