"""Depthwise (2-D and 1-D causal): compulsory lower bound and achievable halo-tiled traffic."""

from __future__ import annotations

import pytest
from bounds_strategies import PADDING_PROPERTY, PROPERTY, tilings
from hypothesis import given
from hypothesis import strategies as st

from convtune.bounds import (
    NotApplicable,
    depthwise_lower_bound,
    depthwise_tile_footprint_words,
    depthwise_tiled_traffic,
    tiled_traffic,
)
from convtune.problem import ConvProblem


@st.composite
def depthwise_problems(draw) -> ConvProblem:
    if draw(st.booleans()):
        return ConvProblem.depthwise1d(B=draw(st.integers(1, 3)), C=draw(st.integers(1, 6)), L=draw(st.integers(1, 40)),
                                       K=draw(st.integers(1, 8)), dilation=draw(st.integers(1, 3)))
    c = draw(st.integers(2, 6))   # groups == C > 1 (C = 1 is an ordinary conv for ConvProblem.is_depthwise)
    r, s = draw(st.integers(1, 5)), draw(st.integers(1, 5))
    stride, dil, pad = draw(st.integers(1, 3)), draw(st.integers(1, 2)), draw(st.integers(0, 3))
    h = max(1, dil * (r - 1) + 1 - 2 * pad + draw(st.integers(0, 12)))
    w = max(1, dil * (s - 1) + 1 - 2 * pad + draw(st.integers(0, 12)))
    return ConvProblem(N=draw(st.integers(1, 3)), C=c, H=h, W=w, K=c * draw(st.integers(1, 2)), R=r, S=s,
                       stride_h=stride, stride_w=stride, pad_h=pad, pad_w=pad, dil_h=dil, dil_w=dil, groups=c)


@PROPERTY
@given(depthwise_problems(), st.integers(1, 40), st.integers(1, 40), st.integers(1, 10_000), st.booleans())
def test_halo_tiled_traffic_is_exact_and_above_the_bound(p, tile_h, tile_w, s, per_tile):
    lb = depthwise_lower_bound(p, s)
    assert lb.words >= p.compulsory_elements
    if s >= (p.R * p.S) ** 2:   # no reduction over channels: the reuse term collapses below compulsory
        assert lb.words == p.compulsory_elements
    tiled = depthwise_tiled_traffic(p, tile_w=tile_w, tile_h=tile_h, weights_per_tile=per_tile)
    assert tiled.kind == "achievable"
    assert tiled.words >= depthwise_lower_bound(p, tiled.fast_memory_words).words   # the tile fits in its footprint
    assert tiled.fast_memory_words == depthwise_tile_footprint_words(p, tile_h, tile_w)
    if not per_tile:
        # the same schedule as a 7-loop tiling: k outermost (weights once), one channel per tile
        th, tw = min(tile_h, p.P), min(tile_w, p.Q)
        count = tiled_traffic(p, {"n": 1, "k": 1, "p": th, "q": tw, "c": 1}, "knpqcrs")
        unused = p.weight_elements - p.weight_elements_used   # the dense loop nest loads them, the tile not
        if p.K == p.C:
            assert count.total_words - unused == tiled.words
        else:  # multiplier > 1: the loop nest may keep an input tile across the channel's output channels
            assert count.total_words - unused <= tiled.words
        assert count.footprint_words <= tiled.fast_memory_words


@st.composite
def depthwise_problems_and_tilings(draw):
    p = draw(depthwise_problems())
    tiles, order = draw(tilings(p))
    return p, tiles, order


@PADDING_PROPERTY
@given(depthwise_problems_and_tilings())
def test_depthwise_bound_below_every_tiling_dense_and_padding_aware(case):
    """Decode steps (L < K), tiny maps under large padded kernels: the bound stays below both counts."""
    p, tiles, order = case
    for skip in (False, True):
        t = tiled_traffic(p, tiles, order, skip_padding=skip)
        assert depthwise_lower_bound(p, t.footprint_words).words <= t.total_words


@PROPERTY
@given(st.integers(1, 4), st.integers(1, 8), st.integers(1, 300), st.integers(1, 64), st.integers(1, 300))
def test_causal_1d_tile_formula(b, c, length, k, tile):
    """B·C·⌈L/T⌉·(T + K − 1), less the causal left padding and the clipped last tile."""
    p = ConvProblem.depthwise1d(B=b, C=c, L=length, K=k)
    t = min(tile, length)
    per_row = sum(min(length, start + t) - max(0, start - (k - 1)) for start in range(0, length, t))
    tiled = depthwise_tiled_traffic(p, tile_w=tile)
    assert tiled.terms["input_halo"] == b * c * per_row
    if length % t == 0 and t >= k - 1:
        assert per_row == (length // t) * (t + k - 1) - (k - 1)
    assert tiled.words == b * c * per_row + c * min(k, length) + b * c * length   # taps j < K − L meet padding only


def test_bound_numbers_for_the_suite_anchor():
    """s4convd_paper: compulsory = one read of x, one write of y (+ C·K weights): 805.3 MB in fp32."""
    p = ConvProblem.depthwise1d(B=16384, C=128, L=48, K=48)
    lb = depthwise_lower_bound(p, 90_880)
    assert lb.bytes == 4 * (2 * 16384 * 128 * 48 + 128 * 48)
    assert lb.name == "depthwise1d_causal"


def test_halo_gap_for_32x32_tile():
    """docs/bounds.md §8: a 32×32 tile of a 3×3 stride-1 layer reads (34·34)/(32·32) = 1.13× the pixels (interior)."""
    p = ConvProblem.parse("N=1 C=2 H=96 W=96 K=2 R=3 S=3 groups=2")   # no padding: every tile interior
    t = depthwise_tiled_traffic(p, tile_w=47, tile_h=47)                # P = Q = 94 = 2 tiles of 47
    assert t.terms["input_halo"] == 2 * (2 * 49) ** 2
    assert t.terms["input_halo"] / p.input_elements_used == pytest.approx((98 / 96) ** 2)


def test_not_depthwise_and_bad_tile():
    with pytest.raises(NotApplicable):
        depthwise_lower_bound(ConvProblem.parse("N=1 C=4 H=8 W=8 K=4 R=3 S=3"), 100)
    with pytest.raises(ValueError, match="tile"):
        depthwise_tiled_traffic(ConvProblem.depthwise1d(B=1, C=2, L=8, K=2), tile_w=0)
