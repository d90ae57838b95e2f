"""The depthwise families as the tuner sees them: the launcher protocol and the registry's callables.

The registry (:mod:`convtune.kernels.registry`) has one forward row per 1-D variant
(``depthwise1d_naive`` … ``depthwise1d_fast``) and one per 2-D kernel (``depthwise2d_tiled``,
``depthwise2d_fast``, ``depthwise2d_packed``).
Every row's ``launcher`` is this module, which dispatches on the plan type, so that the GPU benchmarker
and ``convtune tune`` run depthwise plans exactly like direct or Winograd ones:

* the benchmarker's tensors are the problem's NCHW ones: x (N, C, H, W) — (B, C, 1, L) for 1-D —,
  w (K, 1, R, S) in PyTorch's order — (C, 1, 1, K) for 1-D, whose ``w[c, K−1]`` multiplies the current
  sample —, y (N, K, P, Q);
* :func:`prepare_filters` gives the 1-D kernels their lag-order taps (C, K) = ``w.flip(-1)`` (``w[c, 0]``
  multiplies the current sample, see :mod:`~convtune.kernels.depthwise.conv1d.plan`) and the 2-D kernel w as is;
* :func:`launch` views x and y as (B, C, L) for 1-D plans (no copies) and allocates nothing.

Only forward plans go through this protocol; dgrad and wgrad are launched by
:func:`convtune.kernels.depthwise.conv1d.launcher.launch` directly (``convtune.ops.torch``, ``convtune analyze``).
"""

from __future__ import annotations

from functools import lru_cache
from typing import Any

from convtune.bounds.depthwise import depthwise_lower_bound
from convtune.errors import InvalidConfig, InvalidInput
from convtune.kernels.depthwise import space as _space
from convtune.kernels.depthwise.conv1d import launcher as _launcher1d
from convtune.kernels.depthwise.conv1d import traffic as _traffic
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan
from convtune.kernels.depthwise.conv2d import fast as _plan2d_fast
from convtune.kernels.depthwise.conv2d import packed as _plan2d_packed
from convtune.kernels.depthwise.conv2d import tiled as _plan2d
from convtune.kernels.depthwise.conv2d.fast import Dw2dFastPlan
from convtune.kernels.depthwise.conv2d.packed import Dw2dPackedPlan
from convtune.kernels.depthwise.conv2d.tiled import Dw2dPlan
from convtune.problem import ConvProblem

TOLERANCE = 1e-5  # relative error of the forward against float64 (docs/design.md, "Measurement protocol")


# ---- what the registry's rows call --------------------------------------------------------------------
def supports_1d(problem: ConvProblem) -> bool:
    """Causal 1-D depthwise, float32, dilation 1 (what :func:`~.plan1d.check_problem` accepts)."""
    return problem.causal and problem.dtype == "float32" and problem.dil_w == 1


def supports_2d(problem: ConvProblem) -> bool:
    return _plan2d.applies(problem) is None


def supports_2d_packed(problem: ConvProblem) -> bool:
    return _plan2d_packed.applies(problem) is None


def grid_size_2d(problem: ConvProblem) -> int:
    """Size of the 2-D tiled kernel's raw parameter grid (tiles × outputs per thread × planes)."""
    return len(_space.TILE_2D) * len(_space.VW_2D) * len(_space.PLANES_2D)


def grid_size_2d_fast(problem: ConvProblem) -> int:
    """Size of the 2-D fast kernel's raw parameter grid (bands × VH × VW × planes × threads)."""
    bands = {b for b in _space.FAST2D_BAND if b <= problem.P} | {problem.P}
    return (len(bands) * len(_space.FAST2D_VH) * len(_space.FAST2D_VW) * len(_space.FAST2D_PLANES)
            * len(_space.FAST2D_THREADS))


def grid_size_2d_packed(problem: ConvProblem) -> int:
    """Size of the packed 2-D kernel's raw parameter grid (planes × VH × threads)."""
    return len(_space.PACKED2D_PLANES) * len(_space.PACKED2D_VH) * len(_space.PACKED2D_THREADS)


def traffic_words(pl: Any) -> int:
    """Modelled global-memory words of one launch (loads + stores)."""
    if isinstance(pl, Dw2dPackedPlan):
        return sum(_plan2d_packed.traffic_words(pl).values())
    if isinstance(pl, Dw2dFastPlan):
        return sum(_plan2d_fast.traffic_words(pl).values())
    if isinstance(pl, Dw2dPlan):
        return sum(_plan2d.traffic_words(pl).values())
    return _traffic.total_traffic_words(pl)


def onchip_words(pl: Any) -> int:
    """Fast memory one block holds: its shared memory plus the data registers of its threads (the fast
    variant's TL outputs and KE taps per thread, the 2-D kernel's window, taps and outputs; the simple
    variants' one accumulator)."""
    c: Any  # each plan type's own config
    if isinstance(pl, Dw2dPackedPlan):
        p, c = pl.problem, pl.config
        return pl.smem_bytes // 4 + pl.threads * (p.R * p.S + c.rows_per_thread * p.Q + p.W)
    if isinstance(pl, Dw2dFastPlan):
        p, c = pl.problem, pl.config
        window = ((c.rows_per_thread - 1) * p.stride_h + p.R) * ((c.outputs_per_thread - 1) * p.stride_w + p.S)
        return pl.smem_bytes // 4 + pl.threads * (p.R * p.S + c.rows_per_thread * c.outputs_per_thread) + window
    if isinstance(pl, Dw2dPlan):
        p, c = pl.problem, pl.config
        per_thread = p.R * p.S + (c.outputs_per_thread - 1) * p.stride_w + p.S + c.outputs_per_thread
        return pl.smem_bytes // 4 + pl.threads * per_thread
    if pl.variant == "fast":
        return pl.smem_bytes // 4 + pl.threads * (pl.config.tile_l + pl.ke)
    return pl.smem_bytes // 4 + pl.threads


@lru_cache(maxsize=4096)
def bound_words_for(problem: ConvProblem, s_words: int) -> float:
    """The depthwise I/O lower bound (:func:`~convtune.bounds.depthwise.depthwise_lower_bound`) in words."""
    return depthwise_lower_bound(problem, max(1, s_words)).words


def bound_words(pl: Any, s_words: int) -> float:
    return bound_words_for(pl.problem, s_words)


def floor_work(problem: ConvProblem, s_words: int) -> list[tuple[str, float, float]]:
    """One variant: the FLOPs of the taps that read real input (the causal triangle in 1-D) and the bound."""
    return [("depthwise", 2.0 * problem.macs_nonpad, bound_words_for(problem, s_words))]


# ---- the launcher protocol (registry.KernelSpec.launcher) ----------------------------------------------
class FamilyKernels(_launcher1d.DepthwiseKernels):
    """A 1-D plan's kernels with the main kernel's ``resources`` and ``compile_s``, which the GPU
    benchmarker reads from every family's compiled kernel."""

    __slots__ = ()

    @property
    def resources(self) -> Any:
        return self.main.resources

    @property
    def compile_s(self) -> float:
        return self.main.compile_s


def compile_plan(pl: Any) -> Any:
    """The plan's compiled kernel(s) for the current device (cached)."""
    if isinstance(pl, Dw2dPackedPlan):
        return _plan2d_packed.compile_plan(pl)
    if isinstance(pl, Dw2dFastPlan):
        return _plan2d_fast.compile_plan(pl)
    if isinstance(pl, Dw2dPlan):
        return _plan2d.compile_plan(pl)
    kernels = _launcher1d.compile_plan(pl)
    return FamilyKernels(kernels.main, kernels.reduce)


def prepare_filters(pl: Any, w: Any) -> Any:
    """The filter operand ``launch`` takes: 1-D lag-order taps (C, K) = w.flip(-1); 2-D w (C, 1, R, S)."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()
    if isinstance(pl, Dw2dPlan | Dw2dFastPlan | Dw2dPackedPlan):
        return cp.ascontiguousarray(w, dtype=cp.float32)
    p = pl.problem
    return cp.ascontiguousarray(w.reshape(p.C, p.S)[:, ::-1], dtype=cp.float32)


def filters_key(pl: Any) -> tuple[str, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result."""
    return ("depthwise2d",) if isinstance(pl, Dw2dPlan | Dw2dFastPlan | Dw2dPackedPlan) else ("depthwise1d_lag",)


def launch(pl: Any, kernel: Any, x: Any, filters: Any, y: Any, stream: Any | None = None) -> None:
    """Run a forward plan on NCHW x into NCHW y (1-D: (B, C, 1, L) viewed as (B, C, L)); allocates nothing.

    Raises:
        InvalidConfig: a dgrad/wgrad plan (use :func:`convtune.kernels.depthwise.conv1d.launcher.launch`).
        InvalidInput: an array of the wrong type, dtype, shape or layout.
        LaunchError: the launch failed.
    """
    if isinstance(pl, Dw2dPackedPlan):
        _plan2d_packed.launch(pl, kernel, x, filters, y, stream)
        return
    if isinstance(pl, Dw2dFastPlan):
        _plan2d_fast.launch(pl, kernel, x, filters, y, stream)
        return
    if isinstance(pl, Dw2dPlan):
        _plan2d.launch(pl, kernel, x, filters, y, stream)
        return
    if not isinstance(pl, Depthwise1dPlan) or pl.path != "fwd":
        raise InvalidConfig("config", f"{pl.config.key()}: only forward plans run through the family protocol")
    for name, array in (("x", x), ("y", y)):
        if not getattr(getattr(array, "flags", None), "c_contiguous", False):
            raise InvalidInput(name, "must be a C-contiguous CuPy array (a reshaped copy would lose the output)")
    shape = (pl.B, pl.C, pl.L)
    _launcher1d.launch(pl, kernel, x.reshape(shape), filters, y.reshape(shape), stream=stream)


def tolerance(pl: Any) -> float:
    return TOLERANCE
