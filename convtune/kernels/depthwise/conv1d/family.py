"""The 1-D depthwise forward rows' launcher: the launcher protocol on NCHW tensors, adapted to (B, C, L).

The benchmarker's tensors are the problem's NCHW ones: x (B, C, 1, L), w (C, 1, 1, K) in PyTorch's order (whose
``w[c, K−1]`` multiplies the current sample), y (B, C, 1, L). :func:`prepare_filters` gives the kernels their
lag-order taps (C, K) = ``w.flip(-1)`` (``w[c, 0]`` multiplies the current sample, see
:mod:`~convtune.kernels.depthwise.conv1d.plan`); :func:`launch` views x and y as (B, C, L) (no copies) and
allocates nothing.

Only forward plans go through this protocol; dgrad and wgrad are launched by
:func:`convtune.kernels.depthwise.conv1d.launcher.launch` directly (``convtune.ops.torch``, ``convtune analyze``),
but :func:`compile_plan` compiles a plan of any path.
"""

from __future__ import annotations

from typing import Any

from convtune.errors import InvalidConfig, InvalidInput
from convtune.kernels.depthwise.conv1d import launcher as _launcher
from convtune.kernels.depthwise.conv1d import plan as _plan
from convtune.kernels.depthwise.conv1d import traffic as _traffic
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan
from convtune.kernels.depthwise.dtypes import FP32_ONLY
from convtune.kernels.depthwise.family import tolerance as tolerance
from convtune.kernels.prepared import PreparedLaunch
from convtune.problem import ConvProblem

FILTERS_KEY = ("depthwise1d_lag",)


def supports(problem: ConvProblem, *, variant: str) -> bool:
    """Causal 1-D depthwise, dilation 1, a storage dtype the variant takes (:data:`~.plan.VARIANT_DTYPES`: the
    fast variant also float16 and bfloat16; what :func:`~.plan.plan` accepts)."""
    return (problem.causal and problem.dil_w == 1
            and problem.dtype in _plan.VARIANT_DTYPES.get(variant, FP32_ONLY))


def total_traffic_words(pl: Depthwise1dPlan) -> int:
    """Modelled global-memory words of one launch (loads + stores)."""
    return _traffic.total_traffic_words(pl)


def onchip_words(pl: Depthwise1dPlan) -> int:
    """Fast memory one block holds: its shared memory plus the fast variant's TL outputs and KE taps per thread
    (the simple variants' one accumulator)."""
    if pl.variant == "fast":
        return pl.smem_bytes // 4 + pl.threads * (pl.config.tile_l + pl.ke)  # type: ignore[attr-defined]
    return pl.smem_bytes // 4 + pl.threads


class FamilyKernels(_launcher.DepthwiseKernels):
    """A 1-D plan's kernels with the main kernel's ``resources`` and ``compile_s``, which the GPU
    benchmarker reads from every family's compiled kernel."""

    __slots__ = ()

    @property
    def resources(self) -> Any:
        return self.main.resources

    @property
    def compile_s(self) -> float:
        return self.main.compile_s


def compile_plan(pl: Depthwise1dPlan) -> FamilyKernels:
    """The plan's compiled kernel(s) for the current device (cached)."""
    kernels = _launcher.compile_plan(pl)
    return FamilyKernels(kernels.main, kernels.reduce)


def prepare_filters(pl: Depthwise1dPlan, w: Any) -> Any:
    """Lag-order taps (C, K) = w.flip(-1), contiguous, in the problem's storage dtype (float32 converted; 16-bit
    taps, bfloat16 as uint16 bits, flipped as they are: the kernels read them in the storage type)."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()
    p = pl.problem
    taps = w.reshape(p.C, p.S)[:, ::-1]
    return cp.ascontiguousarray(taps, dtype=cp.float32) if p.dtype == "float32" else cp.ascontiguousarray(taps)


def filters_key(pl: Depthwise1dPlan) -> tuple[str, ...]:
    """Every 1-D plan takes the same lag-order taps."""
    return FILTERS_KEY


def launch(pl: Depthwise1dPlan, kernel: Any, x: Any, filters: Any, y: Any, stream: Any | None = None) -> None:
    """Run a forward plan on x (B, C, 1, L) into y (B, C, 1, L), viewed as (B, C, L); allocates nothing.

    Raises:
        InvalidConfig: a dgrad/wgrad plan (use :func:`convtune.kernels.depthwise.conv1d.launcher.launch`).
        InvalidInput: an array of the wrong type, dtype, shape or layout.
        LaunchError: the launch failed.
    """
    if not isinstance(pl, Depthwise1dPlan) or pl.path != "fwd":
        raise InvalidConfig("config", f"{pl.config.key()}: only forward plans run through the family protocol")
    for name, array in (("x", x), ("y", y)):
        if not getattr(getattr(array, "flags", None), "c_contiguous", False):
            raise InvalidInput(name, "must be a C-contiguous CuPy array (a reshaped copy would lose the output)")
    shape = (pl.B, pl.C, pl.L)
    _launcher.launch(pl, kernel, x.reshape(shape), filters, y.reshape(shape), stream=stream)


def prepare_plan(pl: Depthwise1dPlan, device: int = 0, kernels: Any = None) -> PreparedLaunch:
    """The plan's prepared launch (:func:`convtune.kernels.depthwise.conv1d.launcher.prepare_plan`)."""
    return _launcher.prepare_plan(pl, device, kernels)
