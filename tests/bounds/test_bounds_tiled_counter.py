"""The exact tiled-traffic counter against a per-element reference simulation, and hand-counted cases."""

from __future__ import annotations

import itertools

import pytest
from bounds_strategies import PROPERTY, problems_and_tilings, swap_axes
from hypothesis import given

from convtune.bounds import LOOPS, tiled_traffic
from convtune.bounds.tiled import loop_extents
from convtune.problem import ConvProblem


def reference_traffic(p: ConvProblem, tiles: dict[str, int], order: str) -> tuple[int, int, int, int, int]:
    """Element-by-element simulation: (input loads, weight loads, output loads, output stores, footprint)."""
    ext = loop_extents(p)
    ranges = {lp: [range(i, min(ext[lp], i + tiles[lp])) for i in range(0, ext[lp], tiles[lp])] for lp in LOOPS}
    kg, cg = p.K // p.groups, p.channels_per_group
    prev_in_key = prev_w_key = prev_out_key = None
    in_loads = w_loads = out_loads = out_stores = footprint = 0
    seen_out: set[tuple[int, ...]] = set()
    prev_out_size = 0
    for combo in itertools.product(*(range(len(ranges[lp])) for lp in order)):
        ix = dict(zip(order, combo, strict=True))
        box = {lp: ranges[lp][ix[lp]] for lp in LOOPS}
        inputs = set()
        for n, k, c, pp, qq, r, s in itertools.product(box["n"], box["k"], box["c"], box["p"], box["q"], box["r"],
                                                       box["s"]):
            row = pp * p.stride_h - p.pad_h + r * p.dil_h
            col = qq * p.stride_w - p.pad_w + s * p.dil_w
            if 0 <= row < p.H and 0 <= col < p.W:
                inputs.add((n, (k // kg) * cg + c, row, col))
        weights = len(box["k"]) * len(box["c"]) * len(box["r"]) * len(box["s"])
        outputs = len(box["n"]) * len(box["k"]) * len(box["p"]) * len(box["q"])
        groups_of_k = (box["k"][0] // kg, box["k"][-1] // kg)
        in_key = (ix["n"], ix["c"], ix["p"], ix["q"], ix["r"], ix["s"], groups_of_k)
        w_key = (ix["k"], ix["c"], ix["r"], ix["s"])
        out_key = (ix["n"], ix["k"], ix["p"], ix["q"])
        if in_key != prev_in_key:
            in_loads += len(inputs)
        if w_key != prev_w_key:
            w_loads += weights
        if out_key != prev_out_key:
            if prev_out_key is not None:
                out_stores += prev_out_size
            if out_key in seen_out:
                out_loads += outputs
            seen_out.add(out_key)
        prev_in_key, prev_w_key, prev_out_key, prev_out_size = in_key, w_key, out_key, outputs
        footprint = max(footprint, len(inputs) + weights + outputs)
    out_stores += prev_out_size
    return in_loads, w_loads, out_loads, out_stores, footprint


@PROPERTY
@given(problems_and_tilings(max_n=2, max_c=3, max_k=3, max_extra=3))
def test_counter_matches_element_simulation(case):
    p, tiles, order = case
    t = tiled_traffic(p, tiles, order)
    assert (t.input_load_words, t.weight_load_words, t.output_load_words, t.output_store_words,
            t.footprint_words) == reference_traffic(p, tiles, order)
    assert t.total_words == t.load_words + t.output_store_words


@PROPERTY
@given(problems_and_tilings())
def test_counter_basic_invariants(case):
    p, tiles, order = case
    t = tiled_traffic(p, tiles, order)
    # every used input, every weight read at least once; every output stored at least once
    assert t.input_load_words >= p.input_elements_used
    assert t.weight_load_words >= p.weight_elements
    assert t.output_store_words >= p.output_elements
    assert t.output_store_words == p.output_elements + t.output_load_words  # a revisit costs a load + a store
    assert t.total_words >= p.compulsory_elements
    # swapping rows and columns (with the tiles and the loop order) changes nothing
    q = swap_axes(p)
    swapped_tiles = {**tiles, "p": tiles["q"], "q": tiles["p"], "r": tiles["s"], "s": tiles["r"]}
    swapped_order = order.translate(str.maketrans("pqrs", "qpsr"))
    assert tiled_traffic(q, swapped_tiles, swapped_order) == t


def test_untiled_schedule_moves_exactly_compulsory():
    p = ConvProblem.parse("N=2 C=3 H=7 W=6 K=4 R=3 S=2 stride=2 pad=1")
    t = tiled_traffic(p, {}, "nkpqcrs")
    assert t.total_words == p.compulsory_elements
    assert t.footprint_words == p.compulsory_elements
    assert t.iterations == 1


def test_hand_counted_reduction_split():
    # 1×1 conv = matmul m=16 (4×4 pixels), n=K=8, k=C=6; c split in 2 chunks innermost -> outputs revisited.
    p = ConvProblem.parse("N=1 C=6 H=4 W=4 K=8 R=1 S=1")
    t = tiled_traffic(p, {"k": 4, "p": 2, "q": 4, "c": 3}, "nkpqcrs")
    # per (k, p) tile: 2 chunks; In chunk = 8 px × 3 ch = 24, W chunk = 4×3 = 12, Out tile = 4×8 = 32
    assert t.iterations == 2 * 2 * 2
    assert t.input_load_words == 8 * 24
    assert t.weight_load_words == 8 * 12
    assert t.output_load_words == 0          # c innermost: each output tile is one visit
    assert t.output_store_words == 128
    # c outermost: every output tile is visited twice -> one reload + one extra store each
    t2 = tiled_traffic(p, {"k": 4, "p": 2, "q": 4, "c": 3}, "cnkpqrs")
    assert t2.output_load_words == 128
    assert t2.output_store_words == 256
    assert t2.footprint_words == t.footprint_words == 24 + 12 + 32


def test_bad_arguments():
    p = ConvProblem.parse("N=1 C=2 H=4 W=4 K=2 R=1 S=1")
    with pytest.raises(ValueError, match="permutation"):
        tiled_traffic(p, {}, "nkpqcr")
    with pytest.raises(ValueError, match="unknown loops"):
        tiled_traffic(p, {"x": 2}, "nkpqcrs")
    with pytest.raises(ValueError, match=">= 1"):
        tiled_traffic(p, {"k": 0}, "nkpqcrs")
    with pytest.raises(ValueError, match="7 sizes"):
        tiled_traffic(p, [1, 1, 1], "nkpqcrs")
