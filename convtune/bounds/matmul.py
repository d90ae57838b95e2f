"""I/O lower bounds for matrix multiply C = A·B, A: m×k, B: k×n (Hong–Kung 1981, COSMA SC'19).

All sizes are in words; S (``fast_memory_words``) is the fast memory of whatever level the caller
models (per block, per SM or L2), given as an argument. ``batch`` independent products of the same
shape (Winograd's α² frequencies) are one CDAG with batch·m·n·k MACs; by Hölder the per-segment
Loomis–Whitney bound of one product also holds for the batch, so every bound below applies with
the batched sizes.

- Hong–Kung (1981): Q = Ω(mnk/√S). Reported with constant 1 as ``kind="asymptotic"``; the constant is
  not proven, so :func:`matmul_lower_bound` never uses it.
- COSMA (Kwasniewski et al., SC'19, Thm 1): Q ≥ 2mnk/√S + mn, stated for S < min(mn, mk, nk). That
  condition alone is not enough: with a short reduction a schedule that keeps an a×k panel of A and
  streams single columns of B and C (outputs never revisited) moves mk + mnk/a + mn words with
  a ≈ S/k, below the formula whenever k < 2√S (e.g. m=900, n=256, k=32, S=1024: 0.73×). Splitting
  the reduction into j equal chunks costs mn·(k²/(jS) + 2j − 1), which stays ≥ 2mnk/√S + mn exactly
  when k ≥ 2√S. We therefore also require k ≥ 2√S (an [R] condition, checked by the property tests
  against exact tiled-schedule counts, not proven).
- Safe: max(mk + kn + mn, X-partition reuse term) from :mod:`convtune.bounds.pebble` with R = 1 and
  L = k: valid for every shape, about 0.77·mnk/√S in the large-S regime.
"""

from __future__ import annotations

import math

from convtune.bounds.pebble import reuse_term_words
from convtune.bounds.result import Assumption, BoundResult, check_fast_memory, combine

#: The reduction must be at least this many √(R·S) long for the COSMA / literature closed forms.
REDUCTION_FACTOR = 2.0


def _check_dims(**dims: int) -> None:
    for name, value in dims.items():
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise ValueError(f"{name}={value!r} must be an integer >= 1")


def matmul_compulsory_words(m: int, n: int, k: int, batch: int = 1) -> int:
    """batch·(mk + kn + mn): every operand read once, every result written once."""
    return batch * (m * k + k * n + m * n)


def hong_kung_bound(m: int, n: int, k: int, fast_memory_words: int, *, batch: int = 1,
                    word_bytes: int = 4) -> BoundResult:
    """Hong–Kung's asymptotic form batch·mnk/√S (constant 1, not proven: ``kind="asymptotic"``)."""
    _check_dims(m=m, n=n, k=k, batch=batch)
    s = check_fast_memory(fast_memory_words)
    words = batch * m * n * k / math.sqrt(s)
    return BoundResult(
        name="matmul.hong_kung", words=words, word_bytes=word_bytes, terms={"mnk/sqrt(S)": words},
        binding_term="mnk/sqrt(S)", fast_memory_words=s, kind="asymptotic",
        assumptions=(Assumption("asymptotic Ω(mnk/√S) with constant 1: not a proven bound", False),))


def cosma_assumptions(m: int, n: int, k: int, fast_memory_words: int) -> tuple[Assumption, ...]:
    """COSMA's S < min(mn, mk, nk) and the reduction condition k ≥ 2√S (see the module docstring)."""
    s = fast_memory_words
    smallest = min(m * n, m * k, n * k)
    need = REDUCTION_FACTOR * math.sqrt(s)
    return (
        Assumption(f"S={s} < min(mn, mk, nk)={smallest}", s < smallest),
        Assumption(f"reduction k={k} >= {REDUCTION_FACTOR:g}·√S={need:.1f}", k >= need),
    )


def cosma_bound(m: int, n: int, k: int, fast_memory_words: int, *, batch: int = 1,
                word_bytes: int = 4) -> BoundResult:
    """COSMA: batch·(2mnk/√S + mn), ``valid`` iff S < min(mn, mk, nk) and k ≥ 2√S."""
    _check_dims(m=m, n=n, k=k, batch=batch)
    s = check_fast_memory(fast_memory_words)
    words = batch * (2.0 * m * n * k / math.sqrt(s) + m * n)
    return BoundResult(name="matmul.cosma", words=words, word_bytes=word_bytes, terms={"2mnk/sqrt(S)+mn": words},
                       binding_term="2mnk/sqrt(S)+mn", assumptions=cosma_assumptions(m, n, k, s),
                       fast_memory_words=s)


def matmul_safe_bound(m: int, n: int, k: int, fast_memory_words: int, *, batch: int = 1,
                      word_bytes: int = 4) -> BoundResult:
    """max(compulsory, X-partition reuse term with R = 1, L = k): valid for every shape."""
    _check_dims(m=m, n=n, k=k, batch=batch)
    s = check_fast_memory(fast_memory_words)
    reuse, _ = reuse_term_words(batch * m * n * k, 1.0, k, s)
    return combine("matmul.safe", {"compulsory": (matmul_compulsory_words(m, n, k, batch), True),
                                   "reuse": (reuse, True)}, word_bytes=word_bytes, fast_memory_words=s)


def matmul_lower_bound(m: int, n: int, k: int, fast_memory_words: int, *, batch: int = 1,
                       word_bytes: int = 4) -> BoundResult:
    """The best valid lower bound: max(compulsory, safe reuse term, COSMA when its assumptions hold).

    Args:
        m, n, k: C (m×n) = A (m×k) · B (k×n).
        fast_memory_words: S in words (per block, per SM or L2: the caller's choice).
        batch: number of independent products of this shape.
        word_bytes: bytes per word for :attr:`BoundResult.bytes`.

    Example:
        >>> round(matmul_lower_bound(4096, 4096, 4096, 12288).words / 1e9, 2)
        1.26
    """
    safe = matmul_safe_bound(m, n, k, fast_memory_words, batch=batch, word_bytes=word_bytes)
    cosma = cosma_bound(m, n, k, fast_memory_words, batch=batch, word_bytes=word_bytes)
    return combine("matmul", {"compulsory": (safe.terms["compulsory"], True), "reuse": (safe.terms["reuse"], True),
                              "cosma": (cosma.words, cosma.valid)},
                   word_bytes=word_bytes, fast_memory_words=safe.fast_memory_words)
