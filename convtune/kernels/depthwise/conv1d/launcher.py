"""Compile and launch the depthwise kernels (CuPy arrays, current stream).

1-D (:class:`~convtune.kernels.depthwise.conv1d.plan.Depthwise1dPlan`), by path, with ``w`` in lag order
(``w[c, 0]`` multiplies the current sample; a PyTorch/ConvProblem weight is ``w.flip(-1)``):

=======  =======================  =====================  ==========================================
path     ``a``                    ``b``                  ``out``
=======  =======================  =====================  ==========================================
fwd      x (B, C, L)              w (C, K)               y (B, C, L)
dgrad    dy (B, C, L)             w (C, K)               dx (B, C, L)
wgrad    x (B, C, L)              dy (B, C, L)           dw (C, K)
=======  =======================  =====================  ==========================================

Every array is C-contiguous and holds the problem's storage dtype (float32; the fast variant also float16,
and bfloat16 as ``uint16`` bits: :mod:`~convtune.kernels.depthwise.dtypes`). :func:`launch` allocates nothing
except, for a weight gradient with a workspace (deterministic partials; 16-bit atomic sums) called without
``workspace``, the buffer of ``plan.workspace_words`` floats (pass one from :func:`allocate_workspace` to keep
the hot path allocation-free). Weight gradients run the sequence of :mod:`~convtune.kernels.depthwise.
wgrad_launch` (atomic ones zero their target first with ``memsetAsync`` on the same stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.kernels.compile import LoadedKernel, load_kernel
from convtune.kernels.depthwise import wgrad_launch
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.conv1d.plan import REDUCE_ENTRY, Depthwise1dPlan
from convtune.kernels.prepared import (
    FilterLayout,
    Launch,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)


@dataclass(frozen=True, slots=True)
class DepthwiseKernels:
    """The plan's kernel, and for deterministic (and 16-bit atomic) weight gradients the reduction kernel."""

    main: LoadedKernel
    reduce: LoadedKernel | None = None


def compile_plan(pl: Depthwise1dPlan) -> DepthwiseKernels:
    """Compile (or fetch from cache) the plan's kernels for the current device.

    Raises:
        CompileError: NVRTC rejected the source.
        DeviceUnavailable: no CuPy or no device.
    """
    main = load_kernel(pl.source(), pl.entry, dynamic_smem_bytes=pl.smem_bytes)
    reduce = load_kernel(pl.reduce_source(), REDUCE_ENTRY) if pl.needs_reduce else None
    return DepthwiseKernels(main, reduce)


def allocate_workspace(pl: Depthwise1dPlan) -> Any:
    """The fp32 workspace a weight gradient needs (None otherwise)."""
    return wgrad_launch.allocate_workspace(pl)


def prepare_plan(pl: Depthwise1dPlan, device: int = 0, kernels: DepthwiseKernels | None = None) -> PreparedLaunch:
    """The plan as a prepared launch. Operands: fwd (x, w, y), dgrad (dy, w, dx), wgrad (x, dy, dw) and then
    ``workspace`` (fp32, ``4·workspace_words`` bytes) when the plan needs one; w and dw in lag order (C, K)."""
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    ints = tuple(pl.int_args)
    lag = FilterLayout("lag-order taps (C, K)", ("depthwise1d_lag",))
    if pl.path == "wgrad":
        ws = 3 if pl.workspace_words else None
        steps = wgrad_launch.steps(pl, kernels, (0, 1), 2, ws, ints, (pl.slices, pl.slots, pl.C, pl.K, pl.ke),
                                   dw_bytes=4 * pl.C * pl.K)
        return PreparedLaunch(plan=pl, device=device, operands=("x", "dy", "dw") + (("workspace",) if ws else ()),
                              steps=steps, kernels=kernels, workspace_bytes=4 * pl.workspace_words, filters=lag,
                              output_shape=(pl.C, pl.K))
    step = Launch(kernels.main, grid3(pl.grid), (pl.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2), ints)
    operands = ("x", "w", "y") if pl.path == "fwd" else ("dy", "w", "dx")
    return PreparedLaunch(plan=pl, device=device, operands=operands, steps=[step], kernels=kernels, filters=lag,
                          output_shape=(pl.B, pl.C, pl.L))


def launch(pl: Depthwise1dPlan, kernels: DepthwiseKernels, a: Any, b: Any, out: Any, workspace: Any | None = None,
           stream: Any | None = None) -> None:
    """Run the plan on (a, b) into ``out`` (see the module docstring for the arrays of each path).

    Raises:
        InvalidInput: an array of the wrong type, dtype, shape or layout, or a short workspace.
        LaunchError: the launch failed.
    """
    tensor, weight = (pl.B, pl.C, pl.L), (pl.C, pl.K)
    names = {"fwd": ("x", "w", "y"), "dgrad": ("dy", "w", "dx"), "wgrad": ("x", "dy", "dw")}[pl.path]
    shapes = {"fwd": (tensor, weight, tensor), "dgrad": (tensor, weight, tensor),
              "wgrad": (tensor, tensor, weight)}[pl.path]
    for name, array, shape in zip(names, (a, b, out), shapes, strict=True):
        check_array(name, array, shape, pl.problem.dtype)
    ptrs = [data_pointer(a), data_pointer(b), data_pointer(out)]
    if pl.path == "wgrad" and pl.workspace_words:
        ptrs.append(data_pointer(wgrad_launch.checked_workspace(pl, workspace)))
    cached_prepared(pl, kernels, prepare_plan)(ptrs, stream_pointer(stream))
