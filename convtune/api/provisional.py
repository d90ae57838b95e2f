"""The provisional answer for a problem nothing was measured for: the analytic model's fastest config.

Ranking a family's whole space takes up to a few seconds of CPU for a new shape (the direct space holds
~10⁵ configurations), so a request gets a bounded share of it: :func:`predict` ranks for at most
``budget_s`` (cheap families first) and says whether it saw every configuration. A cut ranking is finished
in one background thread (at most one at a time, the others are simply not started) and cached, so the
next request for the shape gets the complete answer; complete answers are cached per (problem, machine),
bounded.
"""

from __future__ import annotations

import logging
import math
import threading
import time
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass
from functools import lru_cache

from convtune.kernels.config import KernelConfig
from convtune.kernels.registry import KernelSpec, choice_groups, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.efficiency import floor_time_s

log = logging.getLogger(__name__)

CACHE_SIZE = 4096
#: Configurations ranked between two looks at the clock.
CLOCK_EVERY = 64
#: The longest a background completion may rank before it gives up (a pathological space).
BACKGROUND_BUDGET_S = 120.0


@dataclass(frozen=True, slots=True)
class Prediction:
    """The model's best configuration of a problem on a machine, with its predicted time and the floor.

    ``complete`` is false when the ranking was cut by its time budget after ``ranked`` configurations: the
    config is the best of those, and the tuning job's pruning ranks them all.
    """

    machine: str
    config: KernelConfig
    time_ms: float
    floor_ms: float
    complete: bool = True
    ranked: int = 0

    @property
    def efficiency(self) -> float:
        return self.floor_ms / self.time_ms if self.time_ms > 0 else 0.0


class _Cut(Exception):
    """The ranking's budget ran out."""


def rank(problem: ConvProblem, machine: MachineModel, specs: list[KernelSpec],
         deadline: float | None = None, clock: Callable[[], float] | None = None
         ) -> tuple[tuple[float, str, KernelConfig] | None, int, bool]:
    """(best (seconds, key, config) or None, configurations ranked, complete) over ``specs``, smallest space
    first, stopping at ``deadline`` (a ``clock()`` value). Families are compared by :meth:`KernelSpec.choice_s`
    (their predictions calibrated against each other); the seconds answered are the chosen family's own model time,
    a time the floor bounds. Ties go to the smaller config key, as in the tuner."""
    clock = clock or time.monotonic
    best: tuple[float, str, KernelConfig] | None = None
    best_choice_s = math.inf
    ranked = 0
    try:
        for group in choice_groups(problem, specs):   # the left-out families only where the others have no plan
            for spec in sorted(group, key=lambda s: s.grid_size(problem)):
                for pl in spec.enumerate_plans(problem, machine):
                    if deadline is not None and ranked % CLOCK_EVERY == 0 and clock() >= deadline:
                        raise _Cut
                    ranked += 1
                    choice_s, key = spec.choice_s(pl, machine), pl.config.key()
                    if best is None or (choice_s, key) < (best_choice_s, best[1]):
                        best, best_choice_s = (spec.predict_s(pl, machine), key, pl.config), choice_s
            if best is not None:
                break
    except _Cut:
        return best, ranked, False
    return best, ranked, True


def predict(problem: ConvProblem, machine: MachineModel, budget_s: float | None = None,
            clock: Callable[[], float] | None = None) -> Prediction | None:
    """The fastest predicted configuration over every family that can run ``problem``, or ``None`` when no
    family has a valid one. With ``budget_s`` the ranking stops after that many seconds (a partial answer,
    ``complete=False``, whose completion is started in the background); without, it ranks everything."""
    cached = _complete.get((problem, machine))
    if cached is not None:
        _complete.move_to_end((problem, machine))
        return cached
    specs = specs_for(problem)
    if not specs:
        return None
    clock = clock or time.monotonic
    deadline = clock() + budget_s if budget_s is not None else None
    best, ranked, complete = rank(problem, machine, specs, deadline, clock)
    floor = floor_ms(problem, machine)
    answer = (Prediction(machine.name, best[2], best[0] * 1e3, floor if floor is not None else 0.0, complete, ranked)
              if best is not None else None)
    if complete:
        _remember(problem, machine, answer)
    else:
        _complete_in_background(problem, machine)
    return answer


_complete: OrderedDict[tuple[ConvProblem, MachineModel], Prediction | None] = OrderedDict()
_complete_lock = threading.Lock()
_background: threading.Thread | None = None


def _remember(problem: ConvProblem, machine: MachineModel, answer: Prediction | None) -> None:
    with _complete_lock:
        _complete[(problem, machine)] = answer
        while len(_complete) > CACHE_SIZE:
            _complete.popitem(last=False)


def _complete_in_background(problem: ConvProblem, machine: MachineModel) -> None:
    """Rank the whole space in a daemon thread and cache it; nothing when a completion is already running
    (the work per request stays bounded however many new shapes arrive)."""
    global _background
    with _complete_lock:
        if _background is not None and _background.is_alive():
            return

        def work() -> None:
            try:
                _finish(problem, machine)
            except Exception:  # a prediction must never take a thread's error to the log as unhandled
                log.exception("completing the prediction of %s failed", problem.key())

        _background = threading.Thread(target=work, name="convtune-predict", daemon=True)
        _background.start()


def _finish(problem: ConvProblem, machine: MachineModel) -> None:
    best, ranked, complete = rank(problem, machine, specs_for(problem), time.monotonic() + BACKGROUND_BUDGET_S)
    if not complete:
        log.warning("the model's ranking of %s was cut after %d configurations (%g s)", problem.key(), ranked,
                    BACKGROUND_BUDGET_S)
        return
    floor = floor_ms(problem, machine)
    _remember(problem, machine, Prediction(machine.name, best[2], best[0] * 1e3, floor or 0.0, True, ranked)
              if best is not None else None)


def clear_cache() -> None:
    """Forget every cached prediction (tests)."""
    with _complete_lock:
        _complete.clear()


def wait_for_background(timeout_s: float = 60.0) -> None:
    """Wait for a running background completion (tests)."""
    thread = _background
    if thread is not None:
        thread.join(timeout_s)


@lru_cache(maxsize=CACHE_SIZE)
def floor_ms(problem: ConvProblem, machine: MachineModel) -> float | None:
    """The lowest floor time over the families that can run ``problem``, or ``None`` when none can."""
    specs = specs_for(problem)
    return min(floor_time_s(problem, machine, spec) for spec in specs) * 1e3 if specs else None
