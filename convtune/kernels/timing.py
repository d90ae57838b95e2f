"""Timing primitives shared by the benchmarks and the tuner: CUDA events, warm-up, median, rotation.

Protocol (docs/design.md): warm up; then per repetition enqueue a short spin kernel (so the host
can queue the start event, the launch and the stop event while the GPU is busy — otherwise a kernel
shorter than the ~6 µs host launch cost measures the host), record the start event, launch on
buffer set ``i mod n_sets``, record the stop event. Report the median over ≥ 20 repetitions and the
p10/p90 spread.

L2-honest: a set is every operand of a launch — inputs, filters (packed or transformed: the caller's
operand) and outputs. Problems whose sets fit in L2 rotate among enough sets to exceed twice the L2, so
each launch reads its operands from DRAM as in a real network (:func:`rotation`); where even
:data:`MAX_ROTATION_SETS` sets fit twice in L2, an :class:`L2Flusher` writes twice the L2 before each
timed launch, ahead of the spin kernel and outside the events. The floors charge every byte at DRAM
bandwidth; this is what makes the measured times comparable with them.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.kernels.compile import cupy_module

SPIN_SOURCE = r"""
extern "C" __global__ void convtune_spin(long long cycles) {
  const long long start = clock64();
  while (clock64() - start < cycles) { }
}
"""
SPIN_CYCLES = 60_000          # ~30 µs at 1.98 GHz: longer than queuing event + launch + event
MAX_ROTATION_SETS = 16


@dataclass(frozen=True, slots=True)
class Timing:
    """Per-launch times in milliseconds."""

    median_ms: float
    p10_ms: float
    p90_ms: float
    min_ms: float
    reps: int
    sets: int
    flushed: bool = False  # an L2 flush ran before every timed launch

    @property
    def spread(self) -> float:
        """(p90 − p10) / median."""
        return (self.p90_ms - self.p10_ms) / self.median_ms if self.median_ms > 0 else math.inf

    def to_dict(self) -> dict[str, float | int]:
        return {"median_ms": self.median_ms, "p10_ms": self.p10_ms, "p90_ms": self.p90_ms,
                "min_ms": self.min_ms, "reps": self.reps, "sets": self.sets, "flushed": self.flushed}


@cache
def _spin_kernel() -> Any:
    cp = cupy_module()
    return cp.RawKernel(SPIN_SOURCE, "convtune_spin")


def rotation_sets(bytes_per_set: int, l2_bytes: int, max_sets: int = MAX_ROTATION_SETS) -> int:
    """Buffer sets to rotate so that consecutive launches never find their inputs in L2."""
    if bytes_per_set <= 0:
        return 1
    return int(min(max_sets, max(1, math.ceil(2 * l2_bytes / bytes_per_set))))


@dataclass(frozen=True, slots=True)
class Rotation:
    """How timed launches avoid finding their operands in L2: ``sets`` buffer sets, and ``flush`` when even
    that many sets fit twice in L2 (then an L2 flush runs before each timed launch)."""

    sets: int
    flush: bool


def rotation(bytes_per_set: int, l2_bytes: int, max_sets: int = MAX_ROTATION_SETS) -> Rotation:
    """:func:`rotation_sets` sets of ``bytes_per_set`` (every operand of one launch: inputs, filters, outputs),
    plus a flush where ``sets · bytes_per_set < 2 · l2_bytes``.

    Example:
        >>> rotation(1 << 20, 60 << 20)          # 1 MiB sets: 16 sets are 16 MiB < 120 MiB
        Rotation(sets=16, flush=True)
        >>> rotation(40 << 20, 60 << 20)
        Rotation(sets=3, flush=False)
    """
    sets = rotation_sets(bytes_per_set, l2_bytes, max_sets)
    return Rotation(sets=sets, flush=bytes_per_set > 0 and sets * bytes_per_set < 2 * l2_bytes)


class L2Flusher:
    """Writes a scratch buffer of twice the L2 capacity on the current stream (a memset: write-allocate evicts
    every line the kernel under test could have left in L2). The buffer is allocated on first use."""

    def __init__(self, l2_bytes: int) -> None:
        self.nbytes = 2 * int(l2_bytes)
        self._scratch: Any = None

    def __call__(self) -> None:
        if self._scratch is None:
            self._scratch = cupy_module().empty(self.nbytes, dtype="uint8")
        self._scratch.fill(0)

    def release(self) -> None:
        """Free the scratch buffer (the next call allocates it again)."""
        self._scratch = None


def time_launches(launch: Callable[[int], object], sets: int = 1, warmup: int = 5, reps: int = 30,
                  flush: Callable[[], object] | None = None) -> Timing:
    """Time ``launch(i)`` (which enqueues work on the current stream for buffer set ``i % sets``); with ``flush``,
    call it before each timed launch, ahead of the spin kernel (so it is never inside the events)."""
    cp = cupy_module()
    spin = _spin_kernel()
    for i in range(warmup):
        launch(i % sets)
    starts = [cp.cuda.Event() for _ in range(reps)]
    stops = [cp.cuda.Event() for _ in range(reps)]
    for i in range(reps):
        if flush is not None:
            flush()
        spin((1,), (1,), (cp.int64(SPIN_CYCLES),))
        starts[i].record()
        launch(i % sets)
        stops[i].record()
    stops[-1].synchronize()
    times = sorted(cp.cuda.get_elapsed_time(a, b) for a, b in zip(starts, stops, strict=True))
    deciles = statistics.quantiles(times, n=10) if len(times) >= 2 else [times[0]] * 9
    return Timing(statistics.median(times), deciles[0], deciles[-1], times[0], reps, sets, flush is not None)
