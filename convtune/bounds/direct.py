"""I/O lower bounds for direct convolution (bounds.md §2), in words; S is an argument, in words.

S is the fast memory of the level modelled: the per-block on-chip budget for L2↔SM traffic (blocks
share nothing on chip, so the per-block S bounds the sum over blocks), the L2 size for DRAM↔L2.

Quantities (``p`` a :class:`~convtune.problem.ConvProblem`):

- G = MACs that read a real (non-padding) input, ``p.macs_nonpad``: a MAC with a padding input needs
  no load, so only these are vertices of the CDAG the Loomis–Whitney argument covers. Groups are
  handled through C/groups (G and L use the channels per group).
- L = (C/groups)·R·S: the length of each output's reduction chain.
- R_w = :func:`window_reuse`: the most taps of one residue class (mod the stride) along each axis,
  multiplied over the two axes. Grouping the taps by the residue of their input offset and applying
  Cauchy–Schwarz to the per-tap matrix-multiply Loomis–Whitney bounds gives |V| ≤ √(R_w·|α||β||γ|).
  R_w = R·S at stride 1, = 1 when stride ≥ kernel with dilation 1, and equals bounds.md's
  R_reuse = Π max(1, k/μ) whenever the stride divides the kernel extent; otherwise R_w > R_reuse
  (e.g. 3 taps, stride 2: 2 vs 1.5; dilation 2 with stride 2: 3 vs 1.5) and using R_reuse would
  overstate the bound.
- |In_used| = ``p.input_elements_used`` (padding and stride-skipped pixels excluded).

Bounds:

- literature: 2G/√(R_w·S) + |Out| (Chen et al. HPCA'20 / Zhang et al. PPoPP'21 structure, [R]). Valid
  only when S < min(|In_used|, |W|, |Out|) and L ≥ 2·√(R_w·S). bounds.md's condition L ≥ √(R·S) is
  not enough: a schedule that keeps an input panel with all channels and streams one output channel
  at a time (outputs never revisited) moves less when L < 2√(R·S) (see
  :mod:`convtune.bounds.matmul`; checked by the property tests against exact tiled counts).
- safe: max(|In_used| + |W| + |Out|, max_{X>S} (X−S)·(G/min(√R_w·X^{3/2}/2, L·X) − 1)), valid for every
  shape (:mod:`convtune.bounds.pebble`).

:func:`direct_lower_bound` reports the max of the valid terms and names the binding one.
"""

from __future__ import annotations

import math
from collections import Counter

from convtune.bounds.matmul import REDUCTION_FACTOR
from convtune.bounds.pebble import reuse_term_words
from convtune.bounds.result import Assumption, BoundResult, check_fast_memory, combine
from convtune.problem import ConvProblem


def axis_window_reuse(taps: int, stride: int, dilation: int) -> int:
    """Most taps t ∈ [0, taps) whose offsets t·dilation agree mod stride: the most windows of one
    axis that read one input position."""
    if stride == 1:
        return taps
    return max(Counter((t * dilation) % stride for t in range(taps)).values())


def window_reuse(problem: ConvProblem) -> int:
    """R_w: the Loomis–Whitney reuse constant (see the module docstring)."""
    return (axis_window_reuse(problem.R, problem.stride_h, problem.dil_h)
            * axis_window_reuse(problem.S, problem.stride_w, problem.dil_w))


def compulsory_words(problem: ConvProblem) -> int:
    """|In_used| + |W| + |Out|."""
    return problem.compulsory_elements


def literature_assumptions(problem: ConvProblem, fast_memory_words: int) -> tuple[Assumption, ...]:
    """S < min(|In_used|, |W|, |Out|) and L ≥ 2·√(R_w·S)."""
    s = fast_memory_words
    smallest = min(problem.input_elements_used, problem.weight_elements, problem.output_elements)
    need = REDUCTION_FACTOR * math.sqrt(window_reuse(problem) * s)
    return (
        Assumption(f"S={s} < min(|In_used|, |W|, |Out|)={smallest}", s < smallest),
        Assumption(f"reduction L={problem.reduction_length} >= {REDUCTION_FACTOR:g}·√(R_w·S)={need:.1f}",
                   problem.reduction_length >= need),
    )


def direct_literature_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """2G/√(R_w·S) + |Out|; ``valid`` only under :func:`literature_assumptions`."""
    s = check_fast_memory(fast_memory_words)
    words = 2.0 * problem.macs_nonpad / math.sqrt(window_reuse(problem) * s) + problem.output_elements
    return BoundResult(name="direct.literature", words=words, word_bytes=problem.itemsize_bytes,
                       terms={"2G/sqrt(RS)+Out": words}, binding_term="2G/sqrt(RS)+Out",
                       assumptions=literature_assumptions(problem, s), fast_memory_words=s)


def direct_safe_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """max(compulsory, X-partition reuse term): valid for every shape."""
    s = check_fast_memory(fast_memory_words)
    reuse, _ = reuse_term_words(problem.macs_nonpad, window_reuse(problem), problem.reduction_length, s)
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
