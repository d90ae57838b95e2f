"""Lower bounds on the total traffic of P processors with S words each (the on-chip level: P SMs, docs/bounds.md §11.2).

The GPU's SMs share no fast memory: each has its own S words (shared memory + registers) and they exchange data
only through L2 (their slow memory). Two arguments bound the words all SMs together move between L2 and the SMs,
both for schedules without recomputation [R]:

- **partition** (sum of per-SM X-partition bounds, :func:`convtune.bounds.pebble.reuse_term_words` with
  ``processors=P``): Q_total ≥ max_X (X − S)·(G/V_max(X) − P), the sequential bound less (P − 1)(X − S);
- **simulation**: one processor with P·S words runs the P SMs' schedule move for move (each SM's S words a region
  of its fast memory), so Q_total ≥ Q_seq(P·S): any sequential lower bound at S' = P·S;
- **compulsory**: every used input and weight is loaded by some SM, every output stored.

For the direct (and depthwise) CDAG all three apply; for other CDAGs (Winograd) the caller uses the simulation
form with its own bound. The result is a lower bound, clamped at 0 like every term.
"""

from __future__ import annotations

from convtune.bounds.depthwise import depthwise_lower_bound
from convtune.bounds.direct import compulsory_words, direct_lower_bound, used_reduction_length, window_reuse
from convtune.bounds.pebble import reuse_term_words
from convtune.bounds.result import BoundResult, check_fast_memory, combine
from convtune.problem import ConvProblem


def direct_partition_term_words(problem: ConvProblem, fast_memory_words: int, processors: int) -> float:
    """max over X of (X − S)·(G/V_max(X) − P) words, G, R_w, L from real MACs and used taps; ≥ 0."""
    s = check_fast_memory(fast_memory_words)
    length = max(1, used_reduction_length(problem))
    words, _ = reuse_term_words(problem.macs_nonpad, window_reuse(problem), length, s, processors)
    return words


def direct_parallel_bound(problem: ConvProblem, fast_memory_words: int, processors: int) -> BoundResult:
    """A lower bound on the words P processors with S words each move together, for any direct schedule.

    max(compulsory, partition term, the sequential lower bound at S' = P·S — ``depthwise_lower_bound`` for a
    depthwise layer, else ``direct_lower_bound``); ``binding_term`` names which. With ``processors=1`` it is the
    sequential bound at S.

    Example:
        >>> p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
        >>> direct_parallel_bound(p, 123_904, 132).binding_term
        'compulsory'
    """
    s = check_fast_memory(fast_memory_words)
    if processors < 1:
        raise ValueError(f"processors={processors} must be >= 1")
    sequential = depthwise_lower_bound if problem.is_depthwise else direct_lower_bound
    simulation = sequential(problem, s * processors).words
    return combine("direct.parallel", {"compulsory": (compulsory_words(problem), True),
                                       "partition": (direct_partition_term_words(problem, s, processors), True),
                                       "simulation": (simulation, True)},
                   word_bytes=problem.itemsize_bytes, fast_memory_words=s)
