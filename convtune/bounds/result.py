"""Result value objects shared by every bound: a number of words, its terms, and its assumptions.

Every bound in :mod:`convtune.bounds` returns a :class:`BoundResult`. ``words`` is the bound on the
words moved between slow memory (DRAM/L2) and a fast memory of ``fast_memory_words`` words (loads +
stores); ``bytes`` multiplies by the word size. ``terms`` holds the candidate terms that entered the
maximum (in words), ``omitted_terms`` those left out because an assumption they need fails, and
``binding_term`` names the largest of ``terms``. ``kind`` says what the number is:

- ``"lower_bound"``: no schedule of the computation moves fewer words (given ``valid``);
- ``"asymptotic"``: an Ω(·) form with constant 1, reported for reference, not a proven bound;
- ``"dataflow_floor"``: the least traffic of one dataflow family over all its tile shapes;
- ``"achievable"``: the traffic of one concrete schedule (an upper bound on the optimum).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from convtune.errors import ConvtuneError

KINDS = ("lower_bound", "asymptotic", "dataflow_floor", "achievable")


class NotApplicable(ConvtuneError, ValueError):
    """A bound does not apply to a problem (e.g. Winograd with stride 2); ``field`` names the cause."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


@dataclass(frozen=True, slots=True)
class Assumption:
    """One condition a bound relies on, and whether it holds for the problem and S at hand."""

    text: str
    holds: bool

    def to_dict(self) -> dict[str, Any]:
        return {"text": self.text, "holds": self.holds}


@dataclass(frozen=True, slots=True)
class BoundResult:
    """A traffic bound in words between slow memory and a fast memory of ``fast_memory_words`` words.

    ``words`` = max(``terms``.values()); the caller decides what to do when ``valid`` is False (the
    combined bounds such as :func:`~convtune.bounds.direct.direct_lower_bound` only ever put terms
    whose assumptions hold into ``terms``, so they are always valid).
    """

    name: str
    words: float
    word_bytes: int
    terms: Mapping[str, float] = field(hash=False)
    binding_term: str
    assumptions: tuple[Assumption, ...] = ()
    fast_memory_words: int = 0
    kind: str = "lower_bound"
    omitted_terms: Mapping[str, float] = field(default_factory=dict, hash=False)

    def __post_init__(self) -> None:
        if self.kind not in KINDS:
            raise ValueError(f"kind={self.kind!r}: allowed {KINDS}")
        if self.binding_term not in self.terms:
            raise ValueError(f"binding_term={self.binding_term!r} is not one of the terms {sorted(self.terms)}")

    @property
    def bytes(self) -> float:
        """The bound in bytes: ``words · word_bytes``."""
        return self.words * self.word_bytes

    @property
    def valid(self) -> bool:
        """True when every assumption holds."""
        return all(a.holds for a in self.assumptions)

    @property
    def failed_assumptions(self) -> tuple[Assumption, ...]:
        return tuple(a for a in self.assumptions if not a.holds)

    def to_dict(self) -> dict[str, Any]:
        """Plain, JSON-friendly dict (floats, strings, lists, bools)."""
        return {
            "name": self.name,
            "kind": self.kind,
            "words": float(self.words),
            "bytes": float(self.bytes),
            "word_bytes": self.word_bytes,
            "valid": self.valid,
            "binding_term": self.binding_term,
            "terms": {k: float(v) for k, v in self.terms.items()},
            "omitted_terms": {k: float(v) for k, v in self.omitted_terms.items()},
            "assumptions": [a.to_dict() for a in self.assumptions],
            "fast_memory_words": self.fast_memory_words,
        }


def combine(name: str, candidates: Mapping[str, tuple[float, bool]], *, word_bytes: int, fast_memory_words: int,
            assumptions: tuple[Assumption, ...] = (), kind: str = "lower_bound") -> BoundResult:
    """Max of the candidate terms whose flag is True; the others go to ``omitted_terms``.

    Args:
        candidates: term name -> (words, usable). At least one term must be usable.
    """
    terms = {k: float(v) for k, (v, ok) in candidates.items() if ok}
    omitted = {k: float(v) for k, (v, ok) in candidates.items() if not ok}
    if not terms:
        raise ValueError(f"{name}: no usable term among {sorted(candidates)}")
    binding = max(terms, key=lambda k: terms[k])
    return BoundResult(name=name, words=terms[binding], word_bytes=word_bytes, terms=terms, binding_term=binding,
                       assumptions=assumptions, fast_memory_words=fast_memory_words, kind=kind,
                       omitted_terms=omitted)


def check_fast_memory(fast_memory_words: int) -> int:
    """Validate S (words): a positive integer."""
    if isinstance(fast_memory_words, bool) or not isinstance(fast_memory_words, int | float):
        raise ValueError(f"fast_memory_words={fast_memory_words!r} must be a positive number of words")
    if fast_memory_words < 1:
        raise ValueError(f"fast_memory_words={fast_memory_words} is out of range: must be >= 1")
    return int(fast_memory_words)
