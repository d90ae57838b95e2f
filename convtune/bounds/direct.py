"""I/O lower bounds for direct convolution (red-blue pebble game), in words; S is an argument, in words.

S is the fast memory of the level modelled: the per-block on-chip budget for L2↔SM traffic (blocks
share nothing on chip, so the per-block S bounds the sum over blocks), the L2 size for DRAM↔L2.

Quantities (``p`` a :class:`~convtune.problem.ConvProblem`):

- used taps: the kernel rows r (columns s) with which some output row (column) reads a real input,
  i.e. p·stride − pad + r·dil ∈ [0, H) for some p ∈ [0, P) (``p.used_taps_h``, ``p.used_taps_w``).
  A weight w[k,c,r,s] meets real input iff r and s are both used (the axes are independent), so only
  |W_used| = K·(C/groups)·|used_taps_h|·|used_taps_w| weights are vertices of the CDAG of real MACs:
  the others multiply padding only, and no schedule needs to load them.
- G = MACs that read a real (non-padding) input, ``p.macs_nonpad``: a MAC with a padding input needs
  no load, so only these are vertices of the CDAG the Loomis–Whitney argument covers. Groups are
  handled through C/groups (G and L use the channels per group).
- L = :func:`used_reduction_length` = (C/groups)·|used_taps_h|·|used_taps_w|: at least the real
  MACs of any one output's reduction chain (= (C/groups)·R·S when every tap is used); the safe bound's
  V_max(X) ≤ L·X uses it.
- L_chain = :func:`longest_reduction_chain` = (C/groups)·(most taps one output row meets real rows
  with)·(likewise for columns): the longest reduction chain of real MACs, ≤ L. The literature form's
  validity test uses it: when every output meets a different single tap (5×5 stride 5 pad 4 on a 2×2
  map: 2 used taps per axis, one per output) the chains have length C/groups although L = 4·C/groups,
  and a schedule that streams the outputs beats 2G/√(R_w·S) + |Out| (found by the property tests).
- R_w = :func:`window_reuse`: the most *used* taps of one residue class (mod the stride) along each
  axis, multiplied over the two axes. Grouping the taps by the residue of their input offset and
  applying Cauchy–Schwarz to the per-tap matrix-multiply Loomis–Whitney bounds gives
  |V| ≤ √(R_w·|α||β||γ|); a tap without real MACs adds nothing to the sum, so only used taps count.
  With every tap used, R_w = R·S at stride 1, = 1 when stride ≥ kernel with dilation 1, and equals
  the literature's R_reuse = Π max(1, k/μ) whenever the stride divides the kernel extent; otherwise R_w >
  R_reuse (e.g. 3 taps, stride 2: 2 vs 1.5; dilation 2 with stride 2: 3 vs 1.5) and using R_reuse
  would overstate the bound.
- |In_used| = ``p.input_elements_used`` (padding and stride-skipped pixels excluded).
- compulsory = |In_used| + |W_used| + |Out| words (``p.compulsory_elements``): every output is written.

Shapes whose every tap is used (almost every real layer) get exactly the numbers of the dense
formulas; the used-tap counts only lower the compulsory term and L on padding-dominated shapes (tiny
maps, large kernels, dilation ≥ the map, a causal decode step with L < K).

Bounds:

- literature: 2G/√(R_w·S) + |Out| words (Chen et al. HPCA'20 / Zhang et al. PPoPP'21 structure, [R]).
  Valid only when S < min(|In_used|, |W_used|, |Out|) and L_chain ≥ 2·√(R_w·S), from used taps. The
  weaker condition L ≥ √(R·S) is not enough: a schedule that keeps an input panel with all channels
  and streams one output channel at a time (outputs never revisited) moves less when L < 2√(R·S)
  (see :mod:`convtune.bounds.matmul`; checked by the property tests against exact tiled counts). With
  L counted over all taps, padding-only taps made short reductions look long (3×3 stride 3 pad 1 on
  1×1 maps: L = 9·C although each output meets C real MACs).
- safe: max(|In_used| + |W_used| + |Out|, max_{X>S} (X−S)·(G/min(√R_w·X^{3/2}/2, L·X) − 1)) words,
  valid for every shape (:mod:`convtune.bounds.pebble`).

:func:`direct_lower_bound` reports the max of the valid terms and names the binding one.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence

from convtune.bounds.matmul import REDUCTION_FACTOR
from convtune.bounds.pebble import reuse_term_words
from convtune.bounds.result import Assumption, BoundResult, check_fast_memory, combine
from convtune.problem import ConvProblem


def axis_window_reuse(taps: int | Sequence[int], stride: int, dilation: int) -> int:
    """Most taps whose offsets t·dilation agree mod stride: the most windows of one axis that read one
    input position. ``taps`` is a tap count (taps 0..taps−1) or the sequence of taps to count (the used
    ones); at least 1, so that a problem without real MACs gets R_w = 1 (its reuse term is 0 anyway)."""
    tap_list = range(taps) if isinstance(taps, int) else taps
    if not tap_list:
        return 1
    if stride == 1:
        return len(tap_list)
    return max(Counter((t * dilation) % stride for t in tap_list).values())


def window_reuse(problem: ConvProblem) -> int:
    """R_w over the used taps (see the module docstring); = the dense value when every tap is used."""
    return (axis_window_reuse(problem.used_taps_h, problem.stride_h, problem.dil_h)
            * axis_window_reuse(problem.used_taps_w, problem.stride_w, problem.dil_w))


def used_reduction_length(problem: ConvProblem) -> int:
    """L = (C/groups)·|used_taps_h|·|used_taps_w|: no output's reduction chain has more real MACs."""
    return problem.channels_per_group * len(problem.used_taps_h) * len(problem.used_taps_w)


def axis_longest_chain(extent: int, out: int, taps: int, stride: int, pad: int, dil: int) -> int:
    """max over windows o ∈ [0, out) of the taps t with o·stride − pad + t·dil ∈ [0, extent)."""
    # each tap is real for an interval of windows; count the intervals covering each window
    cover = [0] * (out + 1)
    for t in range(taps):
        offset = t * dil - pad
        lo = 0 if offset >= 0 else (-offset + stride - 1) // stride
        hi = min(out - 1, (extent - 1 - offset) // stride) if extent - 1 - offset >= 0 else -1
        if lo <= hi:
            cover[lo] += 1
            cover[hi + 1] -= 1
    best = running = 0
    for delta in cover[:out]:
        running += delta
        best = max(best, running)
    return best


def longest_reduction_chain(problem: ConvProblem) -> int:
    """L_chain = (C/groups)·(most real row taps of one output row)·(most real column taps of one output
    column): the most real MACs any one output accumulates (the axes are independent)."""
    p = problem
    return (p.channels_per_group * axis_longest_chain(p.H, p.P, p.R, p.stride_h, p.pad_h, p.dil_h)
            * axis_longest_chain(p.W, p.Q, p.S, p.stride_w, p.pad_w, p.dil_w))


def compulsory_words(problem: ConvProblem) -> int:
    """|In_used| + |W_used| + |Out| words: what any schedule loads and stores at least once."""
    return problem.compulsory_elements


def literature_assumptions(problem: ConvProblem, fast_memory_words: int) -> tuple[Assumption, ...]:
    """S < min(|In_used|, |W_used|, |Out|) and L_chain ≥ 2·√(R_w·S), with R_w from the used taps and
    L_chain the longest chain of real MACs."""
    s = fast_memory_words
    smallest = min(problem.input_elements_used, problem.weight_elements_used, problem.output_elements)
    need = REDUCTION_FACTOR * math.sqrt(window_reuse(problem) * s)
    length = longest_reduction_chain(problem)
    return (
        Assumption(f"S={s} < min(|In_used|, |W_used|, |Out|)={smallest}", s < smallest),
        Assumption(f"reduction L={length} (longest real chain) >= {REDUCTION_FACTOR:g}·√(R_w·S)={need:.1f}",
                   length >= need),
    )


def direct_literature_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """2G/√(R_w·S) + |Out| words; ``valid`` only under :func:`literature_assumptions`."""
    s = check_fast_memory(fast_memory_words)
    words = 2.0 * problem.macs_nonpad / math.sqrt(window_reuse(problem) * s) + problem.output_elements
    return BoundResult(name="direct.literature", words=words, word_bytes=problem.itemsize_bytes,
                       terms={"2G/sqrt(RS)+Out": words}, binding_term="2G/sqrt(RS)+Out",
                       assumptions=literature_assumptions(problem, s), fast_memory_words=s)


def direct_safe_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """max(compulsory, X-partition reuse term) words, G, R_w and L from real MACs and used taps: valid for
    every shape."""
    s = check_fast_memory(fast_memory_words)
    # a problem without real MACs has L = 0: any positive L gives the same (zero) reuse term
    length = max(1, used_reduction_length(problem))
    reuse, _ = reuse_term_words(problem.macs_nonpad, window_reuse(problem), length, s)
    return combine("direct.safe", {"compulsory": (compulsory_words(problem), True), "reuse": (reuse, True)},
                   word_bytes=problem.itemsize_bytes, fast_memory_words=s)


def direct_lower_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """The best valid lower bound on the words any direct-convolution schedule moves.

    max(compulsory, safe reuse term, literature form when its assumptions hold); ``binding_term`` is
    one of ``compulsory``, ``reuse``, ``literature``; an invalid literature value is kept in
    ``omitted_terms``.

    Example:
        >>> p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
        >>> direct_lower_bound(p, 12288).binding_term
        'compulsory'
    """
    safe = direct_safe_bound(problem, fast_memory_words)
    lit = direct_literature_bound(problem, fast_memory_words)
    return combine("direct", {"compulsory": (safe.terms["compulsory"], True), "reuse": (safe.terms["reuse"], True),
                              "literature": (lit.words, lit.valid)},
                   word_bytes=problem.itemsize_bytes, fast_memory_words=safe.fast_memory_words,
                   assumptions=())
