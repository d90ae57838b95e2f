"""The declared values of the depthwise search spaces and the helpers their declarations share.

The spaces themselves are declared next to the plan function that enforces their rules (``conv1d.plan.spaces``,
``conv1d.fused.space``, ``conv2d.{tiled,fast,packed,dgrad,wgrad}.space``); this module holds what several of them
read (value tuples, tiles up to the extent they cover, the rules of a band of rows) and imports none of the plan
modules, so each plan module can import it and :mod:`~convtune.kernels.depthwise.space` can import the plan
modules.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from convtune.kernels.depthwise.configs import MODES
from convtune.kernels.search_space import Rule, SearchSpace, Values
from convtune.problem import ConvProblem

WARP = 32
THREADS = (64, 128, 256, 512)
SHARED_ROWS = (1, 2, 4, 8, 16, 32)
SHARED_TILE = (16, 32, 64, 128, 256)
SHARED_THREADS = (64, 128, 256)
WARPS = (1, 2, 4, 8)
WARP_V = (1, 2, 3, 4, 6, 8, 12, 16)      # warp fwd/dgrad and the register design of the warp wgrad
OUTPUTS_PER_LANE = (1, 2, 4, 8)          # warp wgrad, rows design
WARP_LANES = (2, 4, 8, 16, 32)
WARP_WGRAD_ROWS = (8, 32, 128, 512)
FAST_ROWS = (32, 64, 128, 256)
FAST_TILE = (4, 8, 12, 16, 24, 32, 48, 64)
FAST_LANES = (1, 2, 4, 8, 16, 32)
FAST_STAGES = (1, 2)
FAST_VEC = (1, 4)
FAST_BLOCKS_PER_SM = (1, 2, 3, 4, 6, 8)
TILE_2D = ((4, 8), (8, 8), (4, 16), (8, 16), (8, 32), (16, 32), (4, 32), (16, 16))
VW_2D = (1, 2, 4, 8)
PLANES_2D = (1, 2, 4, 8)
FAST2D_BAND = (1, 2, 4, 8, 16, 28, 32, 56, 64)
FAST2D_VH = (1, 2, 4, 7)
FAST2D_VW = (1, 2, 4, 7, 8)
FAST2D_PLANES = (1, 2, 4, 8, 16, 32, 64)
FAST2D_THREADS = (32, 64, 128, 256, 512)
PACKED2D_PLANES = (1, 2, 4, 8, 12, 16, 24, 32, 48, 64, 128)
PACKED2D_VH = (1, 2, 3, 4, 7, 14)
PACKED2D_THREADS = (32, 64, 128, 256, 512)
FUSED_ROWS = (32, 64, 128, 256)
FUSED_BLOCKS_PER_SM = (1, 2, 3, 4)
WGRAD_MODES = tuple(sorted(MODES))


def with_extent(values: tuple[int, ...], extent: int, multiple: int = 1) -> tuple[int, ...]:
    """``values`` up to ``extent``, plus ``extent`` rounded up to ``multiple`` when it is smaller than the largest
    (a tile exactly as long as the sequence)."""
    top = -(-extent // multiple) * multiple
    out = {v for v in values if v <= top}
    if top < max(values):
        out.add(top)
    return tuple(sorted(out or {min(values)}))


def bands(values: tuple[int, ...], extent: int, *extra: int) -> tuple[int, ...]:
    """``values`` up to ``extent``, plus ``extent`` itself and ``extra``."""
    return tuple(sorted({b for b in values if b <= extent} | {extent, *extra}))


def chained_configs(spaces: tuple[SearchSpace, ...]) -> Iterator[dict[str, int]]:
    """The configs of ``spaces``, one space after the other."""
    for s in spaces:
        yield from s.configs()


# ---- rules shared by several spaces ----------------------------------------------------------------------------

def mode_rule() -> Rule:
    """A weight gradient's ``mode`` is one of :data:`~convtune.kernels.depthwise.configs.MODES`."""
    return Rule("mode", ("mode",), lambda v: v["mode"] in MODES,
                lambda v: f"mode={v['mode']}: allowed {', '.join(f'{k} ({m})' for k, m in MODES.items())}")


def vec_aligned(p: ConvProblem) -> Rule:
    """``vec=4`` (16-byte copies) needs rows of a multiple of 4 floats (the 1-D fast and fused kernels)."""
    return Rule("vec_aligned", ("vec",), lambda v: v["vec"] != 4 or p.W % 4 == 0,
                f"vec=4 needs L % 4 == 0 (16-byte aligned rows), got L={p.W}")


def segment_extent(p: ConvProblem) -> Rule:
    """A warp segment of G·V outputs twice the row only idles lanes (segments of ≤ 2 outputs always kept)."""
    def ok(v: Values) -> bool:
        seg = v["lanes_per_row"] * v["outputs_per_lane"]
        return seg < 2 * p.W or seg <= 2
    return Rule("segment_extent", ("outputs_per_lane", "lanes_per_row"), ok,
                f"a segment of lanes_per_row·outputs_per_lane outputs is ≥ 2·L={2 * p.W} (and > 2)")


BAND_MULTIPLE = Rule("band_multiple", ("band_h", "rows_per_thread"), lambda v: v["band_h"] % v["rows_per_thread"] == 0,
                     "band_h={band_h} must be a multiple of rows_per_thread={rows_per_thread}", field="band_h")


def band_extent(height: int, name: str, what: str) -> Rule:
    """A band no taller than the plane height ``name`` = ``height`` rounded up to the rows per item."""
    def ok(v: Values) -> bool:
        return v["band_h"] <= -(-height // v["rows_per_thread"]) * v["rows_per_thread"]
    return Rule("band_extent", ("band_h", "rows_per_thread"), ok,
                lambda v: f"band_h={v['band_h']} exceeds the {what} {name}={height} (rounded up to rows_per_thread): "
                          f"allowed {v['rows_per_thread']}..{height}", field="band_h")


def accumulators(max_acc: int, unit: str = "") -> Rule:
    """At most ``max_acc`` accumulators (rows × outputs) per item (``unit``: the word after the count)."""
    return Rule("accumulators", ("rows_per_thread", "outputs_per_thread"),
                lambda v: v["rows_per_thread"] * v["outputs_per_thread"] <= max_acc,
                lambda v: f"rows_per_thread·outputs_per_thread = {v['rows_per_thread'] * v['outputs_per_thread']} "
                          f"{unit}exceed {max_acc}", field="outputs_per_thread")


def vw_two_rows(width: int, name: str) -> Rule:
    """Outputs per item at most twice the row they cover (``name`` = ``width``), one output always allowed."""
    return Rule("vw_two_rows", ("outputs_per_thread",),
                lambda v: v["outputs_per_thread"] <= 2 * width or v["outputs_per_thread"] == 1,
                f"outputs_per_thread={{outputs_per_thread}} exceeds 2·{name}={2 * width}")


THREADS_WARPS = Rule("threads_warps", ("threads",), lambda v: 32 <= v["threads"] <= 1024 and v["threads"] % 32 == 0,
                     "threads={threads}: must be a multiple of 32 in [32, 1024]")


def vw_extent(width: int, name: str) -> Rule:
    """Outputs per item no wider than the row they cover (``name`` = ``width``), one output always kept."""
    return Rule("vw_extent", ("outputs_per_thread",),
                lambda v: v["outputs_per_thread"] <= width or v["outputs_per_thread"] == 1,
                f"outputs_per_thread={{outputs_per_thread}} exceeds {name}={width}")


def planes_small_blocks(width: int) -> Rule:
    """Several planes (batch entries) per block only while a block has fewer than 64 items per plane pair."""
    def ok(v: Values) -> bool:
        per_plane = v["band_h"] // v["rows_per_thread"] * -(-width // v["outputs_per_thread"])
        return v["planes"] == 1 or per_plane * (v["planes"] // 2) < 64
    return Rule("planes_small_blocks", ("band_h", "rows_per_thread", "outputs_per_thread", "planes"), ok,
                "planes={planes}: several planes per block only while a block has < 64 items per plane pair",
                field="planes")


def block_threads(name: str, threads: Callable[[Values], int] | None = None) -> Rule:
    """32..1024 threads per block, a multiple of 32 (``threads``: the block's threads from the values, default the
    parameter ``name`` itself); reported on ``name``."""
    count = threads or (lambda v: v[name])
    return Rule(f"{name}_threads", (name,), lambda v: WARP <= count(v) <= 1024 and count(v) % WARP == 0,
                lambda v: f"{count(v)} threads per block: must be a multiple of 32 in [{WARP}, 1024]")


def allowed(name: str, values: tuple[int, ...], message: str = "") -> Rule:
    """``name`` takes one of ``values`` (``message``: the allowed values as the error states them)."""
    listed = message or ", ".join(map(str, values))
    return Rule(f"{name}_allowed", (name,), lambda v: v[name] in values, f"{name}={{{name}}}: allowed {listed}")


def at_most(name: str, limit: int, what: str) -> Rule:
    """``name`` no larger than ``limit`` (``what``: the limit as the error names it, e.g. ``the batch B=3``)."""
    return Rule(f"{name}_extent", (name,), lambda v: v[name] <= limit,
                f"{name}={{{name}}} exceeds {what}: allowed 1..{limit}")


LANES_POW2 = Rule("lanes_pow2", ("lanes_per_row",),
                  lambda v: v["lanes_per_row"] <= WARP and not v["lanes_per_row"] & (v["lanes_per_row"] - 1),
                  "lanes_per_row={lanes_per_row}: allowed 1, 2, 4, 8, 16, 32")
