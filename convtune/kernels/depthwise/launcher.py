"""Compile and launch the depthwise kernels (CuPy arrays, current stream).

1-D (:class:`~convtune.kernels.depthwise.plan1d.Depthwise1dPlan`), by path, with ``w`` in lag order
(``w[c, 0]`` multiplies the current sample; a PyTorch/ConvProblem weight is ``w.flip(-1)``):

=======  =======================  =====================  ==========================================
path     ``a``                    ``b``                  ``out``
=======  =======================  =====================  ==========================================
fwd      x (B, C, L)              w (C, K)               y (B, C, L)
dgrad    dy (B, C, L)             w (C, K)               dx (B, C, L)
wgrad    x (B, C, L)              dy (B, C, L)           dw (C, K)
=======  =======================  =====================  ==========================================

Every array is float32 and C-contiguous. :func:`launch` allocates nothing except, for a deterministic
weight gradient called without ``workspace``, the partials buffer of ``plan.workspace_words`` floats
(pass one from :func:`allocate_workspace` to keep the hot path allocation-free). Atomic weight
gradients zero ``dw`` first (``memsetAsync`` on the same stream).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.errors import InvalidInput, LaunchError
from convtune.kernels.compile import LoadedKernel, cupy_module, load_kernel
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.plan1d import REDUCE_ENTRY, REDUCE_WARPS, Depthwise1dPlan


@dataclass(frozen=True, slots=True)
class DepthwiseKernels:
    """The plan's kernel, and for deterministic weight gradients the reduction kernel."""

    main: LoadedKernel
    reduce: LoadedKernel | None = None


def compile_plan(pl: Depthwise1dPlan) -> DepthwiseKernels:
    """Compile (or fetch from cache) the plan's kernels for the current device.

    Raises:
        CompileError: NVRTC rejected the source.
        DeviceUnavailable: no CuPy or no device.
    """
    main = load_kernel(pl.source(), pl.entry, dynamic_smem_bytes=pl.smem_bytes)
    reduce = load_kernel(pl.reduce_source(), REDUCE_ENTRY) if pl.deterministic else None
    return DepthwiseKernels(main, reduce)


def allocate_workspace(pl: Depthwise1dPlan) -> Any:
    """The partials buffer a deterministic weight gradient needs (None otherwise)."""
    if not pl.workspace_words:
        return None
    cp = cupy_module()
    return cp.empty(pl.workspace_words, dtype=cp.float32)


def launch(pl: Depthwise1dPlan, kernels: DepthwiseKernels, a: Any, b: Any, out: Any, workspace: Any | None = None,
           stream: Any | None = None) -> None:
    """Run the plan on (a, b) into ``out`` (see the module docstring for the arrays of each path).

    Raises:
        InvalidInput: an array of the wrong type, dtype, shape or layout.
        LaunchError: the launch failed.
    """
    cp = cupy_module()
    tensor, weight = (pl.B, pl.C, pl.L), (pl.C, pl.K)
    names = {"fwd": ("x", "w", "y"), "dgrad": ("dy", "w", "dx"), "wgrad": ("x", "dy", "dw")}[pl.path]
    shapes = {"fwd": (tensor, weight, tensor), "dgrad": (tensor, weight, tensor),
              "wgrad": (tensor, tensor, weight)}[pl.path]
    for name, array, shape in zip(names, (a, b, out), shapes, strict=True):
        check_array(name, array, shape)
    stream = stream if stream is not None else cp.cuda.get_current_stream()
    ints = tuple(cp.int32(v) for v in pl.int_args)
    try:
        with stream:
            if pl.deterministic:
                if workspace is None:
                    workspace = allocate_workspace(pl)
                elif workspace.size < pl.workspace_words or workspace.dtype != cp.float32:
                    raise InvalidInput("workspace", f"needs {pl.workspace_words} float32 words, got "
                                                    f"{workspace.size} {workspace.dtype}")
                kernels.main.function((pl.grid,), (pl.threads,), (a, b, workspace, *ints), shared_mem=pl.smem_bytes)
                assert kernels.reduce is not None, "compile_plan gives deterministic plans a reduce kernel"
                kernels.reduce.function((pl.reduce_grid,), (REDUCE_WARPS * 32,),
                                        (workspace, out, cp.int32(pl.slices), cp.int32(pl.slots), cp.int32(pl.C),
                                         cp.int32(pl.K), cp.int32(pl.ke)))
            else:
                if pl.atomic:
                    cp.cuda.runtime.memsetAsync(out.data.ptr, 0, out.nbytes, stream.ptr)
                kernels.main.function((pl.grid,), (pl.threads,), (a, b, out, *ints), shared_mem=pl.smem_bytes)
    except cp.cuda.driver.CUDADriverError as exc:
        raise LaunchError(f"{pl.entry} launch failed ({pl.config.key()}): {exc}") from exc
