"""Padding-only taps: the issue-17 regression cases, a brute-force count of the compulsory words, and
the bounds of shapes without padding-only taps pinned to their values before the used-tap change."""

from __future__ import annotations

import itertools
import json
import math
from collections import Counter
from pathlib import Path

import pytest
from bounds_strategies import PADDING_PROPERTY, conv_problems, padding_dominated_problems
from hypothesis import given
from hypothesis import strategies as st

from convtune.bounds import (
    compulsory_words,
    depthwise_lower_bound,
    direct_literature_bound,
    direct_lower_bound,
    direct_safe_bound,
    tiled_traffic,
    window_reuse,
    winograd_cdag_bound,
)
from convtune.bounds.direct import longest_reduction_chain, used_reduction_length
from convtune.problem import ConvProblem

PINNED = Path(__file__).with_name("data") / "pinned_bounds.json"


def old_compulsory(p: ConvProblem) -> int:
    """The compulsory term before the fix: every weight K·(C/groups)·R·S charged."""
    return p.input_elements_used + p.weight_elements + p.output_elements


# ---- the cases of issue 17 -------------------------------------------------------------------------------
# (problem, tiled schedule, the ratio of its traffic to the bound reported before the fix)
ISSUE_CASES = {
    # every weight charged, only the centre tap meets the one pixel: 263,168 words vs 2,360,320 (0.11×)
    "3x3_pad1_on_1x1": (ConvProblem.parse("N=1 C=512 H=1 W=1 K=512 R=3 S=3 pad=1"), {"k": 1}, 0.111),
    # ASPP-like, 3×3 dilation 6 pad 6 on 6×6: only the centre tap meets the map (0.29×)
    "aspp_dil6_on_6x6": (ConvProblem.parse("N=2 C=64 H=6 W=6 K=64 R=3 S=3 pad=6 dilation=6"), {}, 0.289),
    # 7×7 pad 3 on 3×3: 25 of 49 taps meet the map (0.51×)
    "7x7_pad3_on_3x3": (ConvProblem.parse("N=1 C=512 H=3 W=3 K=512 R=7 S=7 pad=3"), {"k": 1}, 0.511),
    # causal 1-D decode step, L = 1 < K = 4: only w[:, K−1] meets the sample (0.50×)
    "causal_decode_L1_K4": (ConvProblem.depthwise1d(B=1, C=1024, L=1, K=4), {"k": 1}, 0.5),
}


@pytest.mark.parametrize("case", sorted(ISSUE_CASES))
def test_issue_cases_bound_below_the_known_traffic(case):
    p, tiles, old_ratio = ISSUE_CASES[case]
    t = tiled_traffic(p, tiles, "nkpqcrs", skip_padding=True)
    s = t.footprint_words
    # the schedule moves exactly the used words: compulsory traffic is achievable
    assert t.total_words == p.compulsory_elements == compulsory_words(p)
    # before the fix the reported bound exceeded what this schedule moves, by the issue's ratio
    assert t.total_words / old_compulsory(p) == pytest.approx(old_ratio, abs=2e-3)
    bound = depthwise_lower_bound(p, s) if p.is_depthwise else direct_lower_bound(p, s)
    assert bound.words <= t.total_words
    assert bound.words == t.total_words            # and it is tight here
    # larger S (the bound only falls) and the per-block S of the H200
    for bigger in (s + 1, 90_880, 15_728_640):
        assert direct_lower_bound(p, bigger).words <= t.total_words


def test_issue_case_numbers():
    """The issue's own numbers: 263,168 words moved vs 2,360,320 reported."""
    p = ISSUE_CASES["3x3_pad1_on_1x1"][0]
    assert p.compulsory_elements == 263_168 and old_compulsory(p) == 2_360_320
    assert p.used_taps_h == p.used_taps_w == (1,)


def test_issue_case_literature_validity_uses_used_taps():
    """1×1 maps, 3×3 stride 3 pad 1 (N=120 C=4 K=64), S = 61 words: with L = C·R·S = 36 ≥ 2√61 the
    literature form claimed validity and 15,547 words; an 11-pixel panel streaming one output channel
    at a time moves 10,976 (0.71×; the issue's LRU simulator found 0.69×). Used taps: L = C = 4."""
    p = ConvProblem.parse("N=120 C=4 H=1 W=1 K=64 R=3 S=3 stride=3 pad=1")
    t = tiled_traffic(p, {"n": 11, "k": 1}, "nkpqcrs", skip_padding=True)
    assert t.footprint_words <= 61
    assert t.total_words == 480 + 11 * 64 * 4 + 7680 == 10_976
    s = 61
    old_literature = 2 * p.macs_nonpad / math.sqrt(window_reuse(p) * s) + p.output_elements
    assert p.reduction_length >= 2 * math.sqrt(window_reuse(p) * s)       # the old validity test passed ...
    assert t.total_words / old_literature == pytest.approx(0.706, abs=1e-3)  # ... and the schedule beat it
    lit = direct_literature_bound(p, s)
    assert used_reduction_length(p) == 4 and not lit.valid
    assert direct_lower_bound(p, s).words <= t.total_words
    assert direct_lower_bound(p, t.footprint_words).words <= t.total_words


def test_literature_validity_uses_the_longest_real_chain():
    """Found by the targeted property at 2000 examples: 5×5 stride 5 pad 4 on a 2×2 map uses taps 0 and 4
    of each axis (L over used taps = 4) but every output meets one of them (chains of 1 MAC). With S = 3
    the literature form claimed 551.6 words; streaming the outputs moves 544."""
    p = ConvProblem.parse("N=8 C=1 H=2 W=2 K=8 R=5 S=5 stride=5 pad=4")
    assert p.used_taps_h == p.used_taps_w == (0, 4)
    assert used_reduction_length(p) == 4 and longest_reduction_chain(p) == 1
    t = tiled_traffic(p, {"n": 1, "k": 1, "p": 1, "q": 1, "c": 1, "r": 5, "s": 5}, "npqkcrs", skip_padding=True)
    assert (t.total_words, t.footprint_words) == (544, 3)
    assert 2 * p.macs_nonpad / math.sqrt(window_reuse(p) * 3) + p.output_elements > t.total_words
    assert not direct_literature_bound(p, 3).valid
    assert direct_lower_bound(p, 3).words <= t.total_words


def test_used_taps_lower_window_reuse_and_reduction_length():
    # only the centre column of a 3×3 window meets a 1-pixel-wide map: a 3×1 convolution in disguise
    p = ConvProblem.parse("N=1 C=8 H=9 W=1 K=8 R=3 S=3 pad=1")
    assert p.used_taps_h == (0, 1, 2) and p.used_taps_w == (1,)
    assert window_reuse(p) == 3 and used_reduction_length(p) == 8 * 3
    reduced = ConvProblem.parse("N=1 C=8 H=9 W=1 K=8 R=3 S=1 pad_h=1 pad_w=0")
    for s in (16, 64, 256, 4096):
        assert direct_lower_bound(p, s).words == pytest.approx(direct_lower_bound(reduced, s).words, rel=1e-12)
    # stride > map: taps 0 and 3 of 4 (dilation 1, stride 3, H = 1, pad 3) meet the one row
    q = ConvProblem.parse("N=1 C=1 H=1 W=1 K=1 R=4 S=1 stride_h=3 pad_h=3")
    assert q.P == 2 and q.used_taps_h == (0, 3)   # row p·3 − 3 + r = 0: r = 3 (p = 0), r = 0 (p = 1)


def test_depthwise_used_taps():
    """1-D causal: taps j with (K−1−j)·dil ≤ L−1 meet data; 2-D: separable, like conv2d."""
    for b, c, length, k, dil in ((1, 37, 1, 4, 1), (2, 5, 3, 8, 1), (2, 5, 3, 8, 2), (1, 3, 100, 4, 1)):
        p = ConvProblem.depthwise1d(B=b, C=c, L=length, K=k, dilation=dil)
        used = min(k, (length - 1) // dil + 1)
        assert len(p.used_taps_w) == used and p.weight_elements_used == c * used
        assert depthwise_lower_bound(p, 1024).words == b * c * length * 2 + c * used
    dw = ConvProblem.parse("N=4 C=32 H=2 W=2 K=32 R=5 S=5 pad=2 groups=32")
    assert dw.used_taps_h == (1, 2, 3) and dw.weight_elements_used == 32 * 9   # rows p − 2 + r ∈ [0, 2), p < 2
    assert depthwise_lower_bound(dw, 1024).words == 4 * 32 * 4 * 2 + 32 * 9


# ---- brute force: the compulsory words from the real (weight, input) pairs ------------------------------
def brute_force_words(p: ConvProblem) -> tuple[int, int, int, int, int]:
    """(distinct inputs, distinct weights, outputs, real MACs, longest chain of real MACs) of every MAC whose
    input is not padding, enumerated one by one, independently of the per-axis formulas."""
    kg, cg = p.K // p.groups, p.channels_per_group
    inputs: set[tuple[int, int, int, int]] = set()
    weights: set[tuple[int, int, int, int]] = set()
    chains: Counter[tuple[int, int, int, int]] = Counter()
    macs = 0
    for n, k, pp, qq, c, r, s in itertools.product(range(p.N), range(p.K), range(p.P), range(p.Q), range(cg),
                                                   range(p.R), range(p.S)):
        row, col = pp * p.stride_h - p.pad_h + r * p.dil_h, qq * p.stride_w - p.pad_w + s * p.dil_w
        if 0 <= row < p.H and 0 <= col < p.W:
            inputs.add((n, (k // kg) * cg + c, row, col))
            weights.add((k, c, r, s))
            chains[n, k, pp, qq] += 1
            macs += 1
    return len(inputs), len(weights), p.N * p.K * p.P * p.Q, macs, max(chains.values(), default=0)


@PADDING_PROPERTY
@given(st.one_of(padding_dominated_problems(), conv_problems(max_c=4, max_k=4, max_extra=4)))
def test_compulsory_words_match_brute_force(p):
    n_in, n_w, n_out, macs, chain = brute_force_words(p)
    assert (p.input_elements_used, p.weight_elements_used, p.output_elements) == (n_in, n_w, n_out)
    assert compulsory_words(p) == n_in + n_w + n_out
    assert p.macs_nonpad == macs
    assert longest_reduction_chain(p) == chain <= used_reduction_length(p)
    # the untiled padding-aware schedule moves exactly these words, and the bound never exceeds them
    assert tiled_traffic(p, {}, "nkpqcrs", skip_padding=True).total_words == n_in + n_w + n_out
    assert direct_lower_bound(p, 1).words >= n_in + n_w + n_out
    assert direct_lower_bound(p, n_in + n_w + n_out).words == n_in + n_w + n_out


# ---- shapes without padding-only taps: the bounds did not move --------------------------------------------
def pinned_cases() -> list[tuple[str, list]]:
    return sorted(json.loads(PINNED.read_text()).items())


def test_pinned_shapes_have_no_padding_only_taps():
    keys = {key.split(" @ ")[0] for key, _ in pinned_cases()}
    assert len(keys) >= 20
    for key in keys:
        p = ConvProblem.parse(key)
        assert len(p.used_taps_h) == p.R and len(p.used_taps_w) == p.S, key
        assert p.weight_elements_used == p.weight_elements


@pytest.mark.parametrize(("case", "expected"), pinned_cases(), ids=[k for k, _ in pinned_cases()])
def test_bounds_unchanged_where_every_tap_is_used(case, expected):
    """Values computed before the used-tap change (public suite shapes + strided, 5×5, dilated, 1×7,
    11×11 s4, grouped, 1×1 s2 layers at S = 1,024 / 12,288 / 90,880 / 15,728,640 words)."""
    key, _, rest = case.partition(" @ ")
    p = ConvProblem.parse(key)
    s_text, _, wino = rest.partition(" ")
    s = int(s_text)
    if wino:
        b = winograd_cdag_bound(p, s, int(wino.removeprefix("wino")), pretransformed_filters=True)
        assert [b.words, b.binding_term] == expected
    elif p.is_depthwise:
        b = depthwise_lower_bound(p, s)
        assert [b.words, b.binding_term] == expected
    else:
        b, lit = direct_lower_bound(p, s), direct_literature_bound(p, s)
        assert [b.words, b.binding_term, lit.words, lit.valid, direct_safe_bound(p, s).words] == expected


# ---- pruning: the traffic stage must not empty a padding-dominated shape ---------------------------------
def test_pruning_keeps_padding_dominated_shapes():
    """With the bound charging 1 of 49 taps, every dense-kernel configuration of a 7×7 pad-3 layer on a 1×1
    map moved > 16× the bound and the traffic stage pruned all of them; the yardstick charges every tap."""
    from convtune.kernels.registry import specs_for
    from convtune.machine import MachineModel
    from convtune.tuner.prune import prune, traffic_yardstick_words

    machine = MachineModel.preset("h200")
    p = ConvProblem.parse("N=1 C=256 H=1 W=1 K=256 R=7 S=7 pad=3")
    result = prune(p, machine, specs_for(p))
    assert result.stage_counts["traffic"] == result.stage_counts["feasible"] > 0 and result.survivors
    for c in result.survivors:
        assert c.bound_words >= old_compulsory(p) > direct_lower_bound(p, c.spec.onchip_words(c.plan)).words
    # where every tap is used the yardstick is the bound itself
    q = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    for s in (1024, 12288, 90880):
        assert traffic_yardstick_words(q, direct_lower_bound(q, s).words) == direct_lower_bound(q, s).words
