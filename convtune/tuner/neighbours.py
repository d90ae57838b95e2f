"""Local search: after the warm start, measure the neighbours of the best configurations measured so far.

The analytic model ranks the survivors well enough to find the right *region* (its best-ranked
configurations are measured first, the warm start) but not the best configuration in it: its
errors are systematic per parameter (a split count, a thread shape) and a one-step change of one
parameter often fixes them. So after the warm start most trials go to the unevaluated survivor
closest to the *elite* (the ``elite`` fastest configurations measured so far), in the distance
:meth:`~convtune.tuner.study.ConfigSpace.nearest` uses: the L1 distance of log2 parameter values
(one step of a power-of-two grid is 1), ties to the better predicted rank. In the full space the
closest ones are the one-parameter-one-step neighbours; where only a subset is available (a replay
table) they are the closest available ones. When a trial beats the elite, the neighbourhood moves
with it. On a plateau (many configurations within timing noise of each other) the strict three fastest
are a coin toss, so every configuration within ``tie`` of the fastest is a centre too (at most
``MAX_CENTRES``). The remaining ``1 - share`` of the trials are left to the sampler (TPE), which also sees
every local trial: exploration beyond the neighbourhood (iterated local search, as in Kernel
Tuner's or ATF's local strategies).
"""

from __future__ import annotations

import math

import numpy as np

from convtune.tuner.prune import Candidate
from convtune.tuner.study import ConfigSpace

ELITE = 3      # neighbourhoods of the best three measured configurations
TIE = 0.02     # ... and of every configuration within 2% of the fastest (run-to-run noise is ~1%)
MAX_CENTRES = 8
SHARE = 0.75   # of the trials after the warm start; the rest go to the sampler


class LocalSearch:
    """Proposes the unevaluated survivor nearest to the best measured configurations."""

    def __init__(self, space: ConfigSpace, elite: int = ELITE, share: float = SHARE, tie: float = TIE) -> None:
        if elite < 1:
            raise ValueError(f"elite={elite}: must be >= 1")
        if not 0.0 <= share <= 1.0:
            raise ValueError(f"share={share}: must be within [0, 1]")
        if not 0.0 <= tie < 1.0:
            raise ValueError(f"tie={tie}: must be within [0, 1)")
        self.space = space
        self.elite = elite
        self.share = share
        self.tie = tie
        self.measured: dict[str, float] = {}   # config key -> median ms, successful trials only
        self.slots = 0                          # trials after the warm start handed out so far
        self._rank = {fam: np.array([space.rank[c.key] for c in cands]) for fam, cands in space.by_family.items()}
        self._row = {c.key: (fam, i) for fam, cands in space.by_family.items() for i, c in enumerate(cands)}

    def record(self, key: str, median_ms: float) -> None:
        """A successful measurement of a survivor (others are ignored: they are no neighbourhood centre)."""
        if key in self._row and math.isfinite(median_ms):
            self.measured[key] = min(median_ms, self.measured.get(key, math.inf))

    def is_local(self, slot: int) -> bool:
        """Whether the ``slot``-th trial (from 0) after the warm start is a local one: ``share`` of them,
        spread evenly, the first one local (share 0.75: local, local, local, sampler, ...)."""
        return math.ceil((slot + 1) * self.share - 1e-9) > math.ceil(slot * self.share - 1e-9)

    def next_is_local(self) -> bool:
        """Take the next trial slot after the warm start; whether it is a local one."""
        self.slots += 1
        return self.is_local(self.slots - 1)

    def elites(self) -> list[str]:
        """The ``elite`` fastest, and every other one within ``tie`` of the fastest (``MAX_CENTRES`` at most)."""
        ranked = sorted(self.measured, key=lambda k: (self.measured[k], k))
        if not ranked:
            return []
        limit = self.measured[ranked[0]] * (1 + self.tie)
        ties = sum(1 for k in ranked if self.measured[k] <= limit)
        return ranked[:max(self.elite, min(ties, MAX_CENTRES))]

    def propose(self, exclude: set[str]) -> Candidate | None:
        """The survivor not in ``exclude`` nearest to an elite configuration (ties to the better predicted
        rank); ``None`` before anything was measured or when every survivor is excluded."""
        centres: dict[str, list[int]] = {}
        for key in self.elites():
            fam, i = self._row[key]
            centres.setdefault(fam, []).append(i)
        best: tuple[float, int, Candidate] | None = None
        for fam, rows in centres.items():
            cands = self.space.by_family[fam]
            log2 = self.space.log2[fam]
            dist = np.abs(log2[:, None, :] - log2[None, rows, :]).sum(axis=2).min(axis=1)
            dist = np.round(dist, 9)  # equal distances compare equal whatever the float summation order
            for i in np.lexsort((self._rank[fam], dist)):
                if cands[i].key not in exclude:
                    score = (float(dist[i]), int(self._rank[fam][i]), cands[i])
                    if best is None or score[:2] < best[:2]:
                        best = score
                    break
        return best[2] if best is not None else None
