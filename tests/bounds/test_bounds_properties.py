"""Properties every bound must have (docs/bounds.md §10): monotone, ≥ compulsory, reductions, symmetry."""

from __future__ import annotations

import json
import math

import pytest
from bounds_strategies import PROPERTY, conv_problems, swap_axes
from hypothesis import given
from hypothesis import strategies as st

from convtune.bounds import (
    Assumption,
    BoundResult,
    cosma_bound,
    depthwise_lower_bound,
    direct_literature_bound,
    direct_lower_bound,
    direct_safe_bound,
    hong_kung_bound,
    matmul_lower_bound,
    matmul_safe_bound,
    reuse_term_words,
    window_reuse,
)
from convtune.bounds.pebble import partition_bound
from convtune.problem import ConvProblem

fast_memories = st.integers(1, 5000)


def all_direct(p: ConvProblem, s: int) -> list[BoundResult]:
    return [direct_lower_bound(p, s), direct_safe_bound(p, s)]


@PROPERTY
@given(conv_problems(max_c=8, max_k=8, max_extra=10), fast_memories, st.integers(1, 5000))
def test_bounds_never_increase_with_fast_memory(p, s, extra):
    for small, large in zip(all_direct(p, s), all_direct(p, s + extra), strict=True):
        assert large.words <= small.words
    m, n, k = p.N * p.P * p.Q, p.K, p.C
    assert matmul_lower_bound(m, n, k, s + extra).words <= matmul_lower_bound(m, n, k, s).words


@PROPERTY
@given(conv_problems(max_c=8, max_k=8, max_extra=10), fast_memories, st.sampled_from(["N", "C", "K"]),
       st.integers(1, 4))
def test_bounds_never_decrease_with_n_c_k(p, s, dim, step):
    bigger = p.replace(**{dim: getattr(p, dim) + (step if dim == "N" else step * p.groups)})
    for small, large in zip(all_direct(p, s), all_direct(bigger, s), strict=True):
        assert large.words >= small.words


@PROPERTY
@given(conv_problems(max_c=8, max_k=8, max_extra=10), fast_memories)
def test_bounds_at_least_compulsory_and_equal_when_everything_fits(p, s):
    compulsory = p.compulsory_elements
    for b in all_direct(p, s):
        assert b.words >= compulsory
        assert b.valid
        assert b.bytes == b.words * p.itemsize_bytes
    for b in all_direct(p, compulsory + s - 1):   # S >= |In_used| + |W| + |Out|
        assert b.words == compulsory
        assert b.binding_term == "compulsory"


@PROPERTY
@given(st.integers(1, 3), st.integers(1, 48), st.integers(1, 48), st.integers(1, 48), st.integers(1, 96),
       st.integers(1, 4000))
def test_one_by_one_conv_is_matrix_multiply(n, c, h, w, k, s):
    p = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=1)
    m = n * p.P * p.Q
    direct, mm = direct_lower_bound(p, s), matmul_lower_bound(m, k, c, s)
    assert direct.words == pytest.approx(mm.words, rel=1e-12)
    assert direct.binding_term == {"cosma": "literature"}.get(mm.binding_term, mm.binding_term)
    lit, cosma = direct_literature_bound(p, s), cosma_bound(m, k, c, s)
    assert lit.words == pytest.approx(cosma.words, rel=1e-12)
    assert lit.valid == cosma.valid
    assert direct_safe_bound(p, s).words == pytest.approx(matmul_safe_bound(m, k, c, s).words, rel=1e-12)


@PROPERTY
@given(conv_problems(max_c=8, max_k=8, max_extra=10), fast_memories)
def test_swapping_rows_and_columns_changes_nothing(p, s):
    q = swap_axes(p)
    assert window_reuse(q) == window_reuse(p)
    for a, b in zip([*all_direct(p, s), direct_literature_bound(p, s)],
                    [*all_direct(q, s), direct_literature_bound(q, s)], strict=True):
        assert a.words == pytest.approx(b.words, rel=1e-12)
        assert a.valid == b.valid


@PROPERTY
@given(st.floats(1, 1e9), st.integers(1, 64), st.integers(1, 5000), st.integers(1, 5000))
def test_partition_bound_is_maximised_over_x(g, reuse_l, s, probe):
    """reuse_term_words returns the max over integer X > S (checked against probes)."""
    reuse, length = float(reuse_l), float(reuse_l * 3)
    words, x = reuse_term_words(g, reuse, length, s)
    assert x > s
    assert words == pytest.approx(max(0.0, partition_bound(x, g, reuse, length, s)))
    assert words >= partition_bound(s + probe, g, reuse, length, s) - 1e-6 * max(1.0, words)
    assert words >= partition_bound(3 * s, g, reuse, length, s) - 1e-6 * max(1.0, words)


def test_reuse_term_large_s_regime_matches_closed_form():
    """For long reductions the peak is at X ≈ 3S: ≈ 4G/(3√3·√(R·S)) − 2S."""
    g, r, s = 1e12, 9.0, 12288
    words, x = reuse_term_words(g, r, 1e9, s)
    assert x == pytest.approx(3 * s, rel=1e-3)
    assert words == pytest.approx(4 * g / (3 * math.sqrt(3) * math.sqrt(r * s)) - 2 * s, rel=1e-6)


def test_window_reuse():
    cases = {"R=3 S=3": 9, "R=3 S=3 stride=2": 4, "R=7 S=7 stride=2": 16, "R=2 S=2 stride=2": 1,
             "R=3 S=3 stride=3": 1, "R=3 S=3 stride=2 dilation=2": 9, "R=1 S=1": 1, "R=3 S=1 stride_h=2 stride_w=1": 2}
    for spec, expected in cases.items():
        p = ConvProblem.parse(f"N=1 C=1 H=20 W=20 K=1 {spec}")
        assert window_reuse(p) == expected, spec
        assert window_reuse(p) >= p.reuse_factor


def test_reference_table_values():
    """docs/bounds.md §6 (S = 12,288 words): literature 8.96e5 for 64→64 56² (we count non-padding MACs and now
    require L ≥ 2√(R·S), so it is reported but not used); compulsory 2.41e6 dominates 512→512 7²."""
    p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    lit = direct_literature_bound(p, 12288)
    dense = 2 * p.macs / math.sqrt(9 * 12288) + p.output_elements
    assert dense == pytest.approx(8.96e5, rel=2e-3)
    assert not lit.valid
    assert direct_lower_bound(p, 12288).words == p.compulsory_elements == 438272
    deep = ConvProblem.parse("N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1")
    assert direct_lower_bound(deep, 12288).binding_term == "compulsory"
    assert direct_lower_bound(deep, 12288).words == pytest.approx(2.41e6, rel=2e-3)
    one = ConvProblem.parse("N=1 C=256 H=56 W=56 K=64 R=1 S=1")
    assert direct_lower_bound(one, 12288).binding_term == "literature"
    assert direct_lower_bound(one, 12288).words == pytest.approx(1.13e6, rel=3e-3)


def test_hong_kung_is_reported_as_asymptotic_only():
    hk = hong_kung_bound(64, 64, 64, 256)
    assert hk.kind == "asymptotic" and not hk.valid
    assert hk.words == 64**3 / 16
    assert "hong_kung" not in matmul_lower_bound(64, 64, 64, 256).terms


def test_matmul_cosma_conditions():
    ok = cosma_bound(512, 512, 512, 1024)
    assert ok.valid and ok.words == 2 * 512**3 / 32 + 512**2
    short = cosma_bound(900, 256, 32, 1024)   # k = √S < 2√S
    assert not short.valid
    assert not cosma_bound(8, 8, 8, 1024).valid  # everything fits
    mm = matmul_lower_bound(4096, 4096, 4096, 12288)
    assert mm.binding_term == "cosma" and mm.valid


def test_results_are_json_friendly():
    p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    for b in [*all_direct(p, 12288), direct_literature_bound(p, 12288), matmul_lower_bound(10, 10, 10, 12)]:
        d = json.loads(json.dumps(b.to_dict()))
        assert d["words"] == b.words and d["valid"] == b.valid and d["binding_term"] == b.binding_term
    assert Assumption("x", True).to_dict() == {"text": "x", "holds": True}


def test_bad_fast_memory_and_kind():
    p = ConvProblem.parse("N=1 C=4 H=8 W=8 K=4 R=3 S=3")
    with pytest.raises(ValueError, match="fast_memory_words"):
        direct_lower_bound(p, 0)
    with pytest.raises(ValueError, match="kind"):
        BoundResult("x", 1.0, 4, {"a": 1.0}, "a", kind="guess")
    with pytest.raises(ValueError, match="binding_term"):
        BoundResult("x", 1.0, 4, {"a": 1.0}, "b")
    with pytest.raises(ValueError, match="m="):
        matmul_lower_bound(0, 1, 1, 10)


def test_depthwise_bound_is_direct_safe_for_depthwise():
    p = ConvProblem.parse("N=2 C=8 H=10 W=10 K=8 R=3 S=3 pad=1 groups=8")
    assert depthwise_lower_bound(p, 100).words == direct_safe_bound(p, 100).words == p.compulsory_elements
