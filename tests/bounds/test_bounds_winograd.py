"""Winograd F(m×m, r×r): multiplication counts, CDAG bound vs dataflow floors, applicability."""

from __future__ import annotations

import json

import pytest
from bounds_strategies import PROPERTY, conv_problems
from hypothesis import given
from hypothesis import strategies as st

from convtune.bounds import (
    NotApplicable,
    direct_literature_bound,
    winograd_bounds,
    winograd_cdag_bound,
    winograd_shape,
    winograd_tile,
)
from convtune.bounds.winograd import cdag_reuse_assumptions
from convtune.problem import ConvProblem

ms = st.sampled_from([2, 4, 6])


@st.composite
def tiled_3x3(draw) -> tuple[ConvProblem, int]:
    """3×3 stride-1 layers whose output is a whole number of m×m tiles."""
    m = draw(ms)
    pad = draw(st.integers(0, 1))
    p_out, q_out = m * draw(st.integers(1, 8)), m * draw(st.integers(1, 8))
    problem = ConvProblem(N=draw(st.integers(1, 4)), C=draw(st.integers(1, 64)), H=p_out + 2 - 2 * pad,
                          W=q_out + 2 - 2 * pad, K=draw(st.integers(1, 64)), R=3, S=3, pad_h=pad, pad_w=pad)
    return problem, m


@PROPERTY
@given(tiled_3x3())
def test_fewer_multiplications_than_direct_for_3x3(case):
    p, m = case
    sh = winograd_shape(p, m)
    assert sh.multiplications < sh.direct_multiplications
    assert sh.multiplications * m * m * 9 == sh.direct_multiplications * sh.alpha**2   # α²/(m²r²) exactly


@PROPERTY
@given(tiled_3x3(), st.integers(16, 100_000))
def test_cdag_reuse_term_over_direct_is_alpha2_over_m2_r(case, s):
    p, m = case
    p = p.replace(H=p.P + 2, W=p.Q + 2, pad_h=0, pad_w=0)  # no padding: non-padding MACs = dense MACs
    wino = winograd_cdag_bound(p, s, m)
    wino_reuse = wino.terms.get("reuse", wino.omitted_terms.get("reuse")) - p.output_elements
    direct_reuse = direct_literature_bound(p, s).words - p.output_elements
    alpha = m + 2
    assert wino_reuse / direct_reuse == pytest.approx(alpha**2 / (m * m * 3), rel=1e-9)


@PROPERTY
@given(conv_problems(max_n=3, max_c=48, max_k=48, max_taps=5, max_extra=20, groups=(1, 1, 2),
                     square_unit_stride=True), st.integers(1, 200_000), ms, st.booleans())
def test_every_dataflow_floor_is_above_the_cdag_bound(p, s, m, pre):
    b = winograd_bounds(p, s, m, pretransformed_filters=pre)
    assert b.fused.words >= b.cdag.words
    assert b.unfused.words >= b.cdag.words
    assert b.cdag.words >= b.cdag.terms["compulsory"]
    assert b.cdag.valid and b.fused.kind == b.unfused.kind == "dataflow_floor"
    assert b.unfused.terms["sum_of_stages"] == pytest.approx(
        sum(b.unfused.terms[k] for k in ("filter_transform", "input_transform", "gemm", "output_transform")))
    json.dumps(b.to_dict())


@PROPERTY
@given(conv_problems(max_n=3, max_c=48, max_k=48, max_taps=5, max_extra=20, groups=(1, 1, 2), square_unit_stride=True),
       st.integers(1, 50_000), st.integers(1, 50_000), ms, st.sampled_from(["N", "C", "K"]), st.integers(1, 8))
def test_cdag_bound_monotone(p, s, extra, m, dim, step):
    assert winograd_cdag_bound(p, s + extra, m).words <= winograd_cdag_bound(p, s, m).words
    bigger = p.replace(**{dim: getattr(p, dim) + (step if dim == "N" else step * p.groups)})
    assert winograd_cdag_bound(bigger, s, m).words >= winograd_cdag_bound(p, s, m).words


def test_reference_numbers_64_channels():
    """docs/bounds.md §6: 2α²·K·C·P/√S + Out for 64→64 56², S = 12,288: 1.13e6 / 7.22e5 / 6.74e5 (m = 2/4/6)."""
    p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    for m, expected in ((2, 1.13e6), (4, 7.22e5), (6, 6.74e5)):
        cdag = winograd_cdag_bound(p, 12288, m)
        assert cdag.omitted_terms["reuse"] == pytest.approx(expected, rel=5e-3)
        assert cdag.binding_term == "compulsory"   # C = 64 < 2√S: the reuse term's conditions fail


def test_reuse_term_used_when_conditions_hold():
    p = ConvProblem.parse("N=32 C=512 H=28 W=28 K=512 R=3 S=3 pad=1")
    cdag = winograd_cdag_bound(p, 12288, 4)
    assert cdag.binding_term == "reuse"


def test_tile_waste_condition_is_needed():
    """Without 'm divides P and Q' a fused tile beats the CDAG reuse term although COSMA's conditions hold."""
    p = ConvProblem.parse("N=64 C=32 H=1 W=1 K=32 R=3 S=3 pad=1")
    cdag = winograd_cdag_bound(p, 100, 6)
    tile = winograd_tile(p, 100, 6, pretransformed_filters=False)
    assert tile.footprint_words <= 100
    assert tile.predicted_words < cdag.omitted_terms["reuse"]
    assert [a.holds for a in cdag_reuse_assumptions(p, winograd_shape(p, 6), 100)] == [True, True, False, True]
    assert cdag.binding_term == "compulsory" and tile.predicted_words >= cdag.words


@pytest.mark.parametrize(("spec", "m", "field"), [
    ("R=3 S=3 stride=2", 2, "stride_h"),
    ("R=3 S=3 dilation=2", 2, "dil_h"),
    ("R=3 S=5", 2, "S"),
    ("R=1 S=1", 2, "R"),
    ("R=3 S=3", 3, "m"),
])
def test_not_applicable(spec, m, field):
    p = ConvProblem.parse(f"N=1 C=4 H=16 W=16 K=4 {spec}")
    with pytest.raises(NotApplicable) as info:
        winograd_bounds(p, 1024, m)
    assert info.value.field == field


def test_not_applicable_causal():
    with pytest.raises(NotApplicable):
        winograd_bounds(ConvProblem.depthwise1d(B=1, C=4, L=32, K=4), 1024, 2)
