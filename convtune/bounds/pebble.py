"""The red-blue pebble X-partition bound for reduction CDAGs (Hong–Kung 1981, COSMA Lemma 3).

Model (Hong–Kung 1981; Kwasniewski et al., COSMA, SC'19): fast memory of S words (red pebbles; S is an
argument: per block, per SM or L2, whatever level the caller models), unbounded slow memory;
Q = loads + stores, in words; no recomputation. The CDAG is that of the *real* MACs: a MAC whose input
is padding, and a weight only such MACs use, are no vertices (callers pass the non-padding MAC count
and the reduction length over used taps).
Cut any schedule into segments of exactly X − S I/Os (X > S, the last segment may be shorter).
Each segment's computed vertices have a dominator of at most X vertices (S resident + X − S loaded)
and a minimum set of at most X (S resident at the end + X − S stored), so a segment computes at most
V_max(X) vertices and

    Q ≥ (X − S) · (|V| / V_max(X) − 1)          for every integer X > S.

For a multiply-accumulate CDAG with G MACs, window reuse R (every input element is read by at most
R taps of one residue class, see :func:`convtune.bounds.direct.window_reuse`) and reduction chains of
at most L MACs, a segment touching inputs α, weights β and outputs γ satisfies the generalised
Loomis–Whitney inequality |V| ≤ √(R·|α|·|β|·|γ|). A segment may *start* reduction chains, so only
α + β ≤ X is guaranteed by the dominator, while γ ≤ X comes from the minimum set (the last MAC of
each touched chain has its child outside the segment). Each chain has at most L MACs, hence

    V_max(X) ≤ min(√R · X^{3/2} / 2,  L · X).

:func:`reuse_term_words` maximises the bound over X exactly. Since G/min(A, B) = max(G/A, G/B), the
bound is max(φ₁(X), φ₂(X)) with φ₁ = (X−S)(2G/(√R·X^{3/2}) − 1) (unimodal; its maximiser is the root
of a monotone equation, found by bisection) and φ₂ = (X−S)(G/(L·X) − 1) (concave, maximal at
X = √(G·S/L)); the integer neighbours of both maximisers are evaluated.
Dropping the −1 and the integrality gives the closed form `max_X (X−S)·G/V_max(X)`, whose first
regime peaks at X = 3S with value 4G/(3√3·√(R·S)) ≈ 0.770·G/√(R·S).

**P processors** (``processors=P``; P SMs, each with its own S words, sharing only slow memory; docs/bounds.md
§11.2) [R]: cut each processor's own schedule into segments of X − S I/Os. Processor i computes |V_i| vertices
in h_i ≥ |V_i|/V_max(X) segments and moves Q_i ≥ (X − S)(h_i − 1) words (Q_i ≥ 0 when it computes nothing).
Summing over the P processors, with Σ|V_i| = |V| (no recomputation):

    Q_total ≥ (X − S) · (|V| / V_max(X) − P)       for every integer X > S,

the sequential bound less (P − 1)(X − S). Maximised like the sequential one (P replaces 1: φ₁'s stationarity
equation becomes P·X^{5/2} + c·X/2 = 3cS/2, φ₂ peaks at X = √(G·S/(L·P))), clamped at 0.
"""

from __future__ import annotations

import math


def segment_capacity(x_words: float, reuse: float, reduction_length: float) -> float:
    """V_max(X) = min(√R·X^{3/2}/2, L·X): the most MACs one segment with |Dom|, |Min| ≤ X computes."""
    return min(math.sqrt(reuse) * x_words**1.5 / 2.0, reduction_length * x_words)


def partition_bound(x_words: int, macs: float, reuse: float, reduction_length: float, fast_memory_words: int,
                    processors: int = 1) -> float:
    """(X − S)·(G/V_max(X) − P) for one X > S (P = ``processors``, 1: sequential); ≤ 0 proves nothing."""
    if x_words <= fast_memory_words:
        return 0.0
    cap = segment_capacity(x_words, reuse, reduction_length)
    return (x_words - fast_memory_words) * (macs / cap - float(processors))


def _bisect_increasing(fn, lo: float, hi: float, iterations: int = 200) -> float:
    """Root of an increasing function on [lo, hi] (fn(lo) ≤ 0 ≤ fn(hi))."""
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        if fn(mid) < 0:
            lo = mid
        else:
            hi = mid
        if hi - lo <= 1e-9 * max(1.0, hi):
            break
    return 0.5 * (lo + hi)


def reuse_term_words(macs: float, reuse: float, reduction_length: float, fast_memory_words: int,
                     processors: int = 1) -> tuple[float, int]:
    """max over integer X > S of (X − S)·(G/V_max(X) − P), and the maximising X (P = ``processors``).

    Args:
        macs: G, the multiply-accumulates of the CDAG (count only those that read real data).
        reuse: R ≥ 1, the window reuse (1 for matrix multiply).
        reduction_length: L ≥ 1, the most MACs of one reduction chain (k for matrix multiply).
        fast_memory_words: S, the fast memory in words (of each processor).
        processors: P ≥ 1 processors with S words each (the total traffic over all of them is bounded).

    Returns:
        (words, X): the bound (≥ 0) and the X attaining it (S + 1 when nothing is proved).
    """
    if processors < 1:
        raise ValueError(f"processors={processors} must be >= 1")
    s = float(fast_memory_words)
    pr = float(processors)
    a = math.sqrt(reuse) / 2.0
    if macs <= 0:
        return 0.0, fast_memory_words + 1
    candidates: set[int] = {fast_memory_words + 1}
    # φ₁(X) = (X−S)(c·X^{-3/2} − P), c = G/a; φ'(X) = 0 <=> P·X^{5/2} + c·X/2 = 3cS/2.
    c = macs / a
    x1 = _bisect_increasing(lambda x: pr * x**2.5 + 0.5 * c * x - 1.5 * c * s, 0.0,
                            max(3.0 * s, (1.5 * c * s) ** 0.4) + 1.0)
    # φ₂(X) = G/L − G·S/(L·X) − P·X + P·S, concave, maximal at X = √(G·S/(L·P)).
    x2 = math.sqrt(macs * s / (reduction_length * pr))
    for x in (x1, x2):
        for xi in (math.floor(x), math.ceil(x)):
            if xi > fast_memory_words:
                candidates.add(int(xi))
    best_x = max(candidates, key=lambda x: partition_bound(x, macs, reuse, reduction_length, fast_memory_words,
                                                           processors))
    best = partition_bound(best_x, macs, reuse, reduction_length, fast_memory_words, processors)
    return max(0.0, best), best_x
