"""The launch sequence every depthwise weight gradient shares (1-D, fused 1-D backward, 2-D), on one stream:

=====================================  ==========================================================================
mode                                   launches
=====================================  ==========================================================================
deterministic                          main → fp32 partials [slices, C, KE] in the workspace; ``dw_reduce`` sums
                                       them in slice order into dw (rounded to the storage type once)
atomic, float32                        ``memset`` dw; main adds atomically into dw
atomic, 16-bit storage                 ``memset`` the fp32 workspace [C, K]; main adds atomically into it;
                                       ``dw_reduce`` with one slice converts it into dw (16-bit atomics would
                                       round every addition)
=====================================  ==========================================================================

A plan provides ``grid``, ``threads``, ``smem_bytes``, ``deterministic``, ``atomic_workspace``,
``workspace_words`` and ``reduce_grid``; the caller passes the main kernel's inputs and integer arguments and
the reduction's (slices, slots, C, K, KE).
"""

from __future__ import annotations

from typing import Any

from convtune.errors import InvalidInput
from convtune.kernels.compile import cupy_module
from convtune.kernels.depthwise.plan1d import REDUCE_WARPS


def allocate_workspace(pl: Any) -> Any:
    """The plan's fp32 workspace (None when it needs none)."""
    if not pl.workspace_words:
        return None
    cp = cupy_module()
    return cp.empty(pl.workspace_words, dtype=cp.float32)


def checked_workspace(pl: Any, workspace: Any | None) -> Any:
    """``workspace``, or a new one when None.

    Raises:
        InvalidInput: a workspace that is not float32 or shorter than ``pl.workspace_words``.
    """
    if workspace is None:
        return allocate_workspace(pl)
    cp = cupy_module()
    if workspace.size < pl.workspace_words or workspace.dtype != cp.float32:
        raise InvalidInput("workspace", f"needs {pl.workspace_words} float32 words, got {workspace.size} "
                                        f"{workspace.dtype}")
    return workspace


def run(pl: Any, kernels: Any, inputs: tuple[Any, ...], dw: Any, workspace: Any | None, ints: tuple[Any, ...],
        reduce_dims: tuple[int, int, int, int, int], stream: Any) -> None:
    """Launch the plan's weight gradient into ``dw`` on ``stream`` (module docstring); ``kernels`` has ``main``
    and, for deterministic plans and 16-bit atomic ones, ``reduce``.

    Raises:
        InvalidInput: a short or non-float32 workspace.
        CUDADriverError: from CuPy, for the caller to wrap in a LaunchError.
    """
    cp = cupy_module()
    i32 = cp.int32
    with stream:
        if pl.atomic_workspace or pl.deterministic:
            workspace = checked_workspace(pl, workspace)
        if not pl.deterministic:
            target = workspace if pl.atomic_workspace else dw
            nbytes = 4 * pl.workspace_words if pl.atomic_workspace else dw.nbytes
            cp.cuda.runtime.memsetAsync(target.data.ptr, 0, nbytes, stream.ptr)
            kernels.main.function((pl.grid,), (pl.threads,), (*inputs, target, *ints), shared_mem=pl.smem_bytes)
            if not pl.atomic_workspace:
                return
            _, _, C, K, _ = reduce_dims
            reduce_dims = (1, C, C, K, K)
        else:
            kernels.main.function((pl.grid,), (pl.threads,), (*inputs, workspace, *ints), shared_mem=pl.smem_bytes)
        assert kernels.reduce is not None, "deterministic and 16-bit atomic plans compile a reduction kernel"
        kernels.reduce.function((pl.reduce_grid,), (REDUCE_WARPS * 32,),
                                (workspace, dw, *(i32(v) for v in reduce_dims)))
