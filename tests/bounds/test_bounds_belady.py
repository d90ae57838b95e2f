"""An independent word-level check of the bounds: Belady (farthest next use) replacement in a fast memory
of S words, on the real MACs of tiny problems (padding MACs skipped, as the issue's simulator does).

Each MAC y[n,k,p,q] += x[n,c',row,col]·w[k,c,r,s] needs its input, weight and output partial sum in fast
memory (S ≥ 3). A miss loads the word (an output's first touch is free: the partial sum starts at zero);
evicting a dirty output that is touched again costs a store now and a load later; every output is
stored once at the end (outputs no real MAC reaches are written as zeros). Belady's choice is not
always optimal when stores cost, but it is a legal schedule: no lower bound may exceed its traffic.
"""

from __future__ import annotations

import itertools

from bounds_strategies import PADDING_PROPERTY, conv_problems, padding_dominated_problems
from hypothesis import event, given
from hypothesis import strategies as st

from convtune.bounds import LOOPS, depthwise_lower_bound, direct_literature_bound, direct_lower_bound
from convtune.bounds.tiled import loop_extents
from convtune.problem import ConvProblem

MAX_MACS = 3000


def real_macs(p: ConvProblem, tiles: dict[str, int], order: str) -> list[tuple[tuple, tuple, tuple]]:
    """(input word, weight word, output word) of every real MAC, tile by tile in ``order`` and element by
    element (n, k, p, q, c, r, s) inside a tile."""
    ext = loop_extents(p)
    kg, cg = p.K // p.groups, p.channels_per_group
    starts = {lp: range(0, ext[lp], tiles[lp]) for lp in LOOPS}
    out = []
    for combo in itertools.product(*(starts[lp] for lp in order)):
        lo = dict(zip(order, combo, strict=True))
        box = [range(lo[lp], min(ext[lp], lo[lp] + tiles[lp])) for lp in LOOPS]
        for n, k, pp, qq, c, r, s in itertools.product(*box):
            row, col = pp * p.stride_h - p.pad_h + r * p.dil_h, qq * p.stride_w - p.pad_w + s * p.dil_w
            if 0 <= row < p.H and 0 <= col < p.W:
                out.append((("x", n, (k // kg) * cg + c, row, col), ("w", k, c, r, s), ("y", n, k, pp, qq)))
    return out


def belady_traffic(p: ConvProblem, macs: list[tuple[tuple, tuple, tuple]], s_words: int) -> int:
    """Loads + stores of the MAC sequence under Belady replacement in ``s_words`` words (module docstring)."""
    accesses = [word for mac in macs for word in mac]
    next_use = [0] * len(accesses)
    last: dict[tuple, int] = {}
    for i in range(len(accesses) - 1, -1, -1):
        next_use[i] = last.get(accesses[i], len(accesses))
        last[accesses[i]] = i
    resident: dict[tuple, int] = {}       # word -> index of its next use
    dirty: set[tuple] = set()
    touched: set[tuple] = set()
    traffic = 0
    for i in range(0, len(accesses), 3):
        mac = accesses[i:i + 3]
        for j, word in enumerate(mac):
            if word not in resident:
                if len(resident) >= s_words:
                    pinned = set(mac[:j])                       # this MAC's words already fetched stay
                    victim = max((v for v in resident if v not in pinned), key=resident.__getitem__)
                    if victim in dirty:
                        traffic += 1                            # store the partial sum (or the final value)
                        dirty.discard(victim)
                    del resident[victim]
                if word[0] != "y" or word in touched:
                    traffic += 1                                # load (an output's first touch starts at 0)
            resident[word] = next_use[i + j]
            touched.add(word)
        dirty.add(mac[2])
    traffic += len(dirty)                                       # final outputs still in fast memory
    return traffic + p.output_elements - len({m[2] for m in macs})   # zero outputs, written once


@st.composite
def tiny_cases(draw, literature: bool = False) -> tuple[ConvProblem, dict[str, int], str, int]:
    """Tiny problems, a tiled MAC order and S. ``literature``: more channels and S ≤ 12 words, where the
    literature form's conditions (S below every tensor, long real chains) hold more often."""
    if literature:
        p = draw(st.one_of(padding_dominated_problems(max_n=2, max_c=8, max_k=8),
                           conv_problems(max_n=2, max_c=8, max_k=8, max_taps=3, max_extra=2)))
    else:
        p = draw(st.one_of(padding_dominated_problems(max_n=2, max_c=3, max_k=3),
                           conv_problems(max_n=2, max_c=3, max_k=4, max_taps=3, max_extra=3)))
    ext = loop_extents(p)
    tiles = {lp: draw(st.integers(1, ext[lp])) for lp in LOOPS}
    order = "".join(draw(st.permutations(LOOPS)))
    return p, tiles, order, draw(st.integers(3, 12 if literature else 64))


@PADDING_PROPERTY
@given(st.one_of(tiny_cases(), tiny_cases(literature=True)))
def test_bounds_below_belady_traffic(case):
    p, tiles, order, s = case
    macs = real_macs(p, tiles, order)
    if len(macs) > MAX_MACS:
        event("too many MACs: skipped")
        return
    traffic = belady_traffic(p, macs, s)
    assert traffic >= p.compulsory_elements
    assert direct_lower_bound(p, s).words <= traffic
    if p.is_depthwise:
        assert depthwise_lower_bound(p, s).words <= traffic
    lit = direct_literature_bound(p, s)
    event(f"literature valid: {lit.valid}")
    if lit.valid:
        assert lit.words <= traffic


def test_belady_moves_the_issue_case_compulsory():
    """3×3 pad 1 on a 1×1 map (C = K = 4): the centre taps only, everything fits: exactly compulsory."""
    p = ConvProblem.parse("N=1 C=4 H=1 W=1 K=4 R=3 S=3 pad=1")
    macs = real_macs(p, {lp: 1 for lp in LOOPS}, "nkpqcrs")
    assert len(macs) == p.macs_nonpad == 16
    assert belady_traffic(p, macs, 64) == p.compulsory_elements == 4 + 16 + 4
    assert direct_lower_bound(p, 64).words == 24


def test_belady_counts_spills():
    """1×1 conv, C = 2, K = 1, 1 pixel, S = 3: x0 w0 y, then x1 w1 y: x0/w0 evicted (clean), no spill."""
    p = ConvProblem.parse("N=1 C=2 H=1 W=1 K=1 R=1 S=1")
    macs = real_macs(p, {lp: 1 for lp in LOOPS}, "nkpqcrs")
    assert belady_traffic(p, macs, 3) == 2 + 2 + 1
    # c outermost over two pixels with S = 3: y0 and y1 alternate, each spilled once and reloaded once
    q = ConvProblem.parse("N=1 C=2 H=1 W=2 K=1 R=1 S=1")
    order = real_macs(q, {lp: 1 for lp in LOOPS}, "cnkpqrs")
    assert [m[2][4] for m in order] == [0, 1, 0, 1]
    assert belady_traffic(q, order, 3) == 4 + 2 + 2 * 1 + 2 + 2   # x, w, 2 spills + 2 reloads, 2 final stores
