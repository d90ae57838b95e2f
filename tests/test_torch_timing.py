"""benchmarks/torch_timing.busy_us: the device time a call's kernels take is the union of their intervals, so that
overlapping kernels (programmatic dependent launches, several streams) count once."""

from __future__ import annotations

import sys

import pytest
from benchmark_scripts import ROOT

pytest.importorskip("torch")
sys.path.insert(0, str(ROOT / "benchmarks"))
from torch_timing import busy_us


@pytest.mark.parametrize(("intervals", "expected"), [
    ([], 0.0),
    ([(0.0, 5.0), (5.0, 7.0), (10.0, 11.0)], 8.0),            # back to back and a gap: the summed durations
    ([(0.0, 10.0), (2.0, 4.0)], 10.0),                          # one inside another
    ([(3.0, 9.0), (0.0, 5.0), (8.0, 12.0)], 12.0),              # overlapping, out of order
    ([(0.0, 4.0), (0.0, 4.0), (1.0, 2.0)], 4.0),                # the same span twice
])
def test_busy_time_is_the_length_of_the_union(intervals: list[tuple[float, float]], expected: float) -> None:
    assert busy_us(intervals) == pytest.approx(expected)


def test_overlapping_kernels_count_less_than_their_sum() -> None:
    """A dependent launch that starts while its predecessor runs (PDL): busy time below the summed durations."""
    spans = [(0.0, 100.0), (20.0, 130.0), (110.0, 200.0)]
    assert busy_us(spans) == 200.0 < sum(end - start for start, end in spans)
