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
the reduction's (slices, slots, C, K, KE). :func:`steps` gives the sequence as prepared-launch steps (what every
launcher runs).
"""

from __future__ import annotations

from typing import Any

from convtune.errors import InvalidInput
from convtune.kernels.compile import cupy_module
from convtune.kernels.depthwise.conv1d.plan import REDUCE_WARPS
from convtune.kernels.prepared import Launch, Memset, Step, grid3, pointers


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


def steps(pl: Any, kernels: Any, inputs: tuple[int, ...], dw: int, workspace: int | None, ints: tuple[int, ...],
          reduce_dims: tuple[int, int, int, int, int], dw_bytes: int) -> list[Step]:
    """The sequence of the module docstring as prepared-launch steps.

    Args:
        inputs: operand indices of the main kernel's leading pointers (before its output pointer).
        dw, workspace: operand indices of dw and of the fp32 workspace (None when the plan needs none).
        ints: the main kernel's int32 arguments; reduce_dims: the reduction's (slices, slots, C, K, KE).
        dw_bytes: bytes of dw (zeroed first by a float32 atomic plan, which adds into dw itself).
    """
    main_grid, main_block = grid3(pl.grid), (pl.threads, 1, 1)
    if pl.atomic_workspace or pl.deterministic:
        assert workspace is not None, "deterministic and 16-bit atomic plans need a workspace operand"
    out: list[Step] = []
    if not pl.deterministic:
        target = workspace if pl.atomic_workspace else dw
        assert target is not None  # the workspace of an atomic-workspace plan (asserted above)
        out.append(Memset(target, 4 * pl.workspace_words if pl.atomic_workspace else dw_bytes))
        out.append(Launch(kernels.main, main_grid, main_block, pl.smem_bytes, pointers(*inputs, target), ints))
        if not pl.atomic_workspace:
            return out
        _, _, C, K, _ = reduce_dims
        reduce_dims = (1, C, C, K, K)
    else:
        assert workspace is not None  # a deterministic plan's (asserted above)
        out.append(Launch(kernels.main, main_grid, main_block, pl.smem_bytes, pointers(*inputs, workspace), ints))
    assert workspace is not None  # both paths that reach the reduction have one
    out.append(Launch(kernels.reduce, grid3(pl.reduce_grid), (REDUCE_WARPS * 32, 1, 1), 0, pointers(workspace, dw),
                      tuple(reduce_dims)))
    return out
