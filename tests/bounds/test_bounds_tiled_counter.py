"""The exact tiled-traffic counter against a per-element reference simulation, and hand-counted cases."""

from __future__ import annotations

import itertools

import pytest
from bounds_strategies import PADDING_PROPERTY, PROPERTY, padding_problems_and_tilings, problems_and_tilings, swap_axes
from hypothesis import given
from hypothesis import strategies as st

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


def reference_padding_aware(p: ConvProblem, tiles: dict[str, int], order: str) -> tuple[int, int, int, int, int]:
    """Element-by-element simulation of the padding-aware schedule (tiled.py's module docstring): only the
    real MACs of each tile run; an iteration without one is skipped; the weights held are exactly those
    its real MACs use (reloaded when that set changes); outputs no real MAC reaches are stored once."""
    ext = loop_extents(p)
    ranges = {lp: [range(i, min(ext[lp], i + tiles[lp])) for i in range(0, ext[lp], tiles[lp])] for lp in LOOPS}
    kg, cg = p.K // p.groups, p.channels_per_group

    def real(pp: int, qq: int, r: int, s: int) -> bool:
        return (0 <= pp * p.stride_h - p.pad_h + r * p.dil_h < p.H
                and 0 <= qq * p.stride_w - p.pad_w + s * p.dil_w < p.W)

    live = {(pp, qq) for pp in range(p.P) for qq in range(p.Q)
            if any(real(pp, qq, r, s) for r in range(p.R) for s in range(p.S))}
    prev_in_key = prev_w_key = prev_out_key = None
    in_loads = w_loads = out_loads = out_stores = footprint = 0
    seen_out: set[tuple[int, ...]] = set()
    prev_out_size = 0
    for combo in itertools.product(*(range(len(ranges[lp])) for lp in order)):
        ix = dict(zip(order, combo, strict=True))
        box = {lp: ranges[lp][ix[lp]] for lp in LOOPS}
        inputs, weights = set(), set()
        for pp, qq, r, s in itertools.product(box["p"], box["q"], box["r"], box["s"]):
            if not real(pp, qq, r, s):
                continue
            row, col = pp * p.stride_h - p.pad_h + r * p.dil_h, qq * p.stride_w - p.pad_w + s * p.dil_w
            for n, k, c in itertools.product(box["n"], box["k"], box["c"]):
                inputs.add((n, (k // kg) * cg + c, row, col))
                weights.add((k, c, r, s))
        if not weights:
            continue                                   # no real MAC: the iteration is skipped
        outputs = len(box["n"]) * len(box["k"]) * sum((pp, qq) in live for pp in box["p"] for qq in box["q"])
        in_key = (ix["n"], ix["c"], ix["p"], ix["q"], ix["r"], ix["s"], (box["k"][0] // kg, box["k"][-1] // kg))
        w_key = frozenset(weights)
        out_key = (ix["n"], ix["k"], ix["p"], ix["q"])
        if in_key != prev_in_key:
            in_loads += len(inputs)
        if w_key != prev_w_key:
            w_loads += len(weights)
        if out_key != prev_out_key:
            if prev_out_key is not None:
                out_stores += prev_out_size
            if out_key in seen_out:
                out_loads += outputs
            seen_out.add(out_key)
        prev_in_key, prev_w_key, prev_out_key, prev_out_size = in_key, w_key, out_key, outputs
        footprint = max(footprint, len(inputs) + len(weights) + outputs)
    out_stores += prev_out_size
    dead = p.output_elements - p.N * p.K * len(live)
    return in_loads, w_loads, out_loads, out_stores + dead, max(footprint, 1 if dead else 0)


def _counted(t) -> tuple[int, int, int, int, int]:
    return (t.input_load_words, t.weight_load_words, t.output_load_words, t.output_store_words, t.footprint_words)


@PROPERTY
@given(st.one_of(problems_and_tilings(max_n=2, max_c=3, max_k=3, max_extra=3), padding_problems_and_tilings()))
def test_padding_aware_counter_matches_element_simulation(case):
    p, tiles, order = case
    t = tiled_traffic(p, tiles, order, skip_padding=True)
    assert _counted(t) == reference_padding_aware(p, tiles, order)
    # it never loads a weight or an input only padding meets, and writes every output
    assert t.input_load_words >= p.input_elements_used and t.weight_load_words >= p.weight_elements_used
    assert t.output_store_words >= p.output_elements
    assert t.total_words >= p.compulsory_elements


@PADDING_PROPERTY
@given(padding_problems_and_tilings())
def test_dense_counter_matches_element_simulation_on_padding_dominated_shapes(case):
    p, tiles, order = case
    assert _counted(tiled_traffic(p, tiles, order)) == reference_traffic(p, tiles, order)


def test_padding_aware_untiled_schedule_moves_exactly_compulsory():
    """All in fast memory at once: each used input and used weight once, each output once."""
    for spec in ("N=2 C=3 H=1 W=1 K=4 R=3 S=3 pad=1", "N=1 C=2 H=6 W=6 K=2 R=3 S=3 pad=6 dilation=6",
                 "N=1 C=2 H=3 W=3 K=3 R=7 S=7 pad=3", "N=2 C=3 H=7 W=6 K=4 R=3 S=2 stride=2 pad=1"):
        p = ConvProblem.parse(spec)
        t = tiled_traffic(p, {}, "nkpqcrs", skip_padding=True)
        assert t.total_words == t.footprint_words == p.compulsory_elements, spec
    decode = ConvProblem.depthwise1d(B=2, C=3, L=1, K=4)   # only w[:, K−1] meets the one sample
    t = tiled_traffic(decode, {}, "nkpqcrs", skip_padding=True)
    assert t.weight_load_words == 3 and t.total_words == 2 * 3 + 3 + 2 * 3 == decode.compulsory_elements


def test_padding_aware_counter_skips_padding_only_iterations():
    """3×3 pad 1 on a 1×1 map, r and s untiled into single taps: 8 of the 9 tap iterations only meet padding."""
    p = ConvProblem.parse("N=1 C=2 H=1 W=1 K=2 R=3 S=3 pad=1")
    dense = tiled_traffic(p, {"r": 1, "s": 1}, "nkpqcrs")
    aware = tiled_traffic(p, {"r": 1, "s": 1}, "nkpqcrs", skip_padding=True)
    assert dense.weight_load_words == 2 * 2 * 9 and aware.weight_load_words == 2 * 2
    assert aware.input_load_words == dense.input_load_words == 2      # inputs were already real-only
    assert aware.total_words == 2 + 4 + 2


def test_zero_outputs_are_stored_once():
    """H = W = 1, 1×1 kernel, stride 2, pad 1: both outputs of each axis read padding only (no real MAC)."""
    p = ConvProblem.parse("N=1 C=3 H=1 W=1 K=2 R=1 S=1 stride=2 pad=1")
    assert p.macs_nonpad == 0 and p.compulsory_elements == p.output_elements == 2 * 2 * 2
    t = tiled_traffic(p, {"p": 1}, "nkpqcrs", skip_padding=True)
    assert (t.load_words, t.output_store_words, t.footprint_words) == (0, 8, 1)


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
    assert (tiled_traffic(q, swapped_tiles, swapped_order, skip_padding=True)
            == tiled_traffic(p, tiles, order, skip_padding=True))


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
