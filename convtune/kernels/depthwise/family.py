"""What every depthwise registry row shares: the forward tolerance, the depthwise I/O bound and floor, and the 2-D
kernels' filter operand.

Each row's launcher is the module of its own plan type — :mod:`~convtune.kernels.depthwise.conv1d.family` for the
1-D variants, :mod:`~convtune.kernels.depthwise.conv2d.tiled`, :mod:`~.conv2d.fast` and :mod:`~.conv2d.packed`
for the 2-D kernels — so nothing here dispatches on a plan type. This module imports no kernel module, so they
can all import it.
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from convtune.bounds.depthwise import depthwise_lower_bound
from convtune.problem import ConvProblem

TOLERANCE = 1e-5  # relative error of the forward against float64 (docs/design.md, "Measurement protocol")
FILTERS_KEY_2D = ("depthwise2d",)  # every 2-D forward kernel takes w (C, 1, R, S) as it is


@lru_cache(maxsize=4096)
def bound_words_for(problem: ConvProblem, s_words: int) -> float:
    """The depthwise I/O lower bound (:func:`~convtune.bounds.depthwise.depthwise_lower_bound`) in words."""
    return depthwise_lower_bound(problem, max(1, s_words)).words


def bound_words(pl: Any, s_words: int) -> float:
    """The plan's problem's depthwise bound for fast memory ``s_words``."""
    return bound_words_for(pl.problem, s_words)


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """One variant: the FLOPs of the taps that read real input (the causal triangle in 1-D) and the bound."""
    return [("depthwise", 2.0 * problem.macs_nonpad, bound_words_for(problem, s_words))]


def tolerance(pl: Any) -> float:
    """Every depthwise forward plan's tolerance."""
    return TOLERANCE


def prepare_filters_2d(w: Any) -> Any:
    """The 2-D kernels' filter operand: w (C, 1, R, S) as a contiguous float32 CuPy array."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()
    return cp.ascontiguousarray(w, dtype=cp.float32)
