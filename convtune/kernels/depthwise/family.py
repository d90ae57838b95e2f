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

#: relative error of a forward against float64 per storage dtype: fp32 1e-5 (docs/design.md, "Measurement protocol");
#: 16-bit storage rounds each output once (fp32 taps and sums), about twice its unit roundoff: fp16 2^-11, bf16 2^-8
#: (the 16-bit kernels' GPU tests use the same figures)
TOLERANCES = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}
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
    """A depthwise forward plan's tolerance: :data:`TOLERANCES` of its problem's storage dtype."""
    return TOLERANCES[pl.problem.dtype]


def prepare_filters_2d(w: Any, dtype: str = "float32") -> Any:
    """The 2-D kernels' filter operand: w (C, 1, R, S) as a contiguous CuPy array of the problem's storage ``dtype``
    (float32 converted; a 16-bit w, bfloat16 as its uint16 bits, kept as it is: the kernels read w in the storage
    type)."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()
    if dtype == "float32":
        return cp.ascontiguousarray(w, dtype=cp.float32)
    from convtune.kernels.depthwise.arrays import check_array

    w = cp.ascontiguousarray(w)
    check_array("w", w, tuple(w.shape), dtype)
    return w
