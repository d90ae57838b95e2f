"""The P-processor (on-chip) lower bound, docs/bounds.md §11.2: never above the traffic of a real parallel schedule.

A parallel schedule: the problem's images (and, for groups = 1, its output channels) are split into P parts, one
per SM; every SM runs the same tiled loop nest (padding-aware, ``skip_padding=True``) on its part with its own fast
memory, so the SMs' total traffic is the sum of the parts' exact counts and S is the largest footprint.
"""

from __future__ import annotations

import os

import pytest
from bounds_strategies import conv_problems, padding_dominated_problems, property_settings, small_tilings
from hypothesis import given
from hypothesis import strategies as st

from convtune.bounds import direct_lower_bound, reuse_term_words, tiled_traffic
from convtune.bounds.depthwise import depthwise_lower_bound
from convtune.bounds.parallel import direct_parallel_bound, direct_partition_term_words
from convtune.problem import ConvProblem

#: ≥ 200 examples in the default run; the slow variant runs ≥ 1000 (or $CONVTUNE_BOUNDS_EXAMPLES).
PARALLEL = property_settings(200)
PARALLEL_SLOW = property_settings(max(1000, int(os.environ.get("CONVTUNE_BOUNDS_EXAMPLES") or 0)))


def _split(extent: int, parts: int) -> list[int]:
    base, extra = divmod(extent, parts)
    return [base + (1 if i < extra else 0) for i in range(parts)]


@st.composite
def parallel_schedules(draw):
    problem = draw(st.one_of(conv_problems(max_n=3, max_c=4, max_k=4, max_extra=4), padding_dominated_problems()))
    n_parts = draw(st.integers(1, problem.N))
    k_parts = draw(st.integers(1, problem.K)) if problem.groups == 1 else 1
    tiles, order = draw(small_tilings(problem))
    return problem, n_parts, k_parts, tiles, order


def _parallel_traffic(problem: ConvProblem, n_parts: int, k_parts: int, tiles: dict[str, int],
                      order: str) -> tuple[int, int, int]:
    """(total words over the parts, largest footprint, number of parts)."""
    total, footprint, parts = 0, 1, 0
    for n in _split(problem.N, n_parts):
        for k in _split(problem.K, k_parts):
            t = tiled_traffic(problem.replace(N=n, K=k), tiles, order, skip_padding=True)
            total += t.total_words
            footprint = max(footprint, t.footprint_words)
            parts += 1
    return total, footprint, parts


def _check(case) -> None:
    problem, n_parts, k_parts, tiles, order = case
    total, s, parts = _parallel_traffic(problem, n_parts, k_parts, tiles, order)
    bound = direct_parallel_bound(problem, s, parts)
    assert bound.words <= total, (problem.key(), parts, s, bound.terms, total)
    # more SMs than the schedule uses: the bound only falls
    assert direct_parallel_bound(problem, s, parts + 3).words <= bound.words


@PARALLEL
@given(parallel_schedules())
def test_parallel_bound_below_parallel_tiled_traffic(case):
    _check(case)


@pytest.mark.slow
@PARALLEL_SLOW
@given(parallel_schedules())
def test_parallel_bound_below_parallel_tiled_traffic_many(case):
    _check(case)


@PARALLEL
@given(st.one_of(conv_problems(), padding_dominated_problems()), st.integers(1, 64), st.integers(1, 8))
def test_partition_term_is_the_sequential_one_less_p_segments(p, s, processors):
    one = direct_partition_term_words(p, s, 1)
    many = direct_partition_term_words(p, s, processors)
    assert 0.0 <= many <= one + 1e-9
    sequential = depthwise_lower_bound(p, s) if p.is_depthwise else direct_lower_bound(p, s)
    assert direct_parallel_bound(p, s, 1).words == pytest.approx(sequential.words, rel=1e-12)


def test_partition_term_binds_somewhere():
    """A short reduction (literature form invalid at P·S) with G large next to P·S: the partition term (−P
    segments) beats the simulation at P·S and compulsory."""
    p = ConvProblem.parse("N=4 C=4 H=16 W=16 K=64 R=3 S=3 pad=1")
    b = direct_parallel_bound(p, 16, 4)
    assert b.binding_term == "partition", b.terms
    words, x = reuse_term_words(p.macs_nonpad, 9, 36, 16, processors=4)
    assert words == b.words and x > 16


def test_sm_level_floor_collapses_to_compulsory_on_real_layers():
    """132 SMs × 123,904 words (H200): the on-chip bound of a ResNet layer is its compulsory traffic."""
    p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    b = direct_parallel_bound(p, 123_904, 132)
    assert b.binding_term == "compulsory" and b.terms["partition"] == 0.0


def test_partition_binding_case_below_a_real_parallel_schedule():
    p = ConvProblem.parse("N=4 C=4 H=16 W=16 K=64 R=3 S=3 pad=1")
    total, s, parts = _parallel_traffic(p, 4, 1, {"n": 1, "k": 1, "p": 1, "q": 2, "c": 1, "r": 1, "s": 3}, "nkpqcrs")
    b = direct_parallel_bound(p, s, parts)
    assert b.terms["partition"] > b.terms["compulsory"] and b.words <= total, (s, b.terms, total)
