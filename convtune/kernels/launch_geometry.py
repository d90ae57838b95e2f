"""Arithmetic every family's plan and traffic formula share."""

from __future__ import annotations

from collections.abc import Callable
from functools import lru_cache
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from convtune.machine import MachineModel


def round_regs(regs: int) -> int:
    """Registers are allocated per thread in units of 8."""
    return -(-regs // 8) * 8


def span_inside(start: int, length: int, extent: int) -> int:
    """How many of the positions [start, start + length) lie inside [0, extent): the words a zero-filling
    copy of a window actually reads."""
    return max(0, min(start + length, extent) - max(start, 0))


@lru_cache(maxsize=65536)
def spans_inside(count: int, step: int, offset: int, length: int, extent: int) -> int:
    """Σ_{t < count} span_inside(t·step + offset, length, extent): the words ``count`` windows of ``length``
    at a stride of ``step`` (the first at ``offset``) read from [0, extent).

    Windows wholly inside — ``0 <= t·step + offset`` and ``t·step + offset + length <= extent`` — each read
    ``length``; they are counted in closed form and only the windows at the two edges one by one, so the cost
    is O(edge windows), not O(count): a 46,000-row map costs what a 46-row one does. Memoised: a search scores
    10⁴–10⁵ plans of one problem over a few dozen distinct tile windows.
    """
    if length <= 0:
        return 0
    return tiles_sum(count, step, offset, length, extent, lambda t: span_inside(t * step + offset, length, extent))


def tiles_sum(count: int, step: int, offset: int, length: int, extent: int, words_of: Callable[[int], int]) -> int:
    """Σ_{t < count} words_of(t), where ``words_of`` takes the same value for every tile t whose window
    [t·step + offset, t·step + offset + length) lies inside [0, extent): that value is read from one such
    tile and multiplied out; ``words_of`` is called only for the tiles at the edges (and once inside)."""
    if count <= 0:
        return 0
    if step <= 0:
        return count * words_of(0)
    lo = max(0, -(offset // step))                           # first t with t·step + offset >= 0
    hi = min(count - 1, (extent - length - offset) // step)  # last t with the window's end inside
    if lo > hi:
        return sum(words_of(t) for t in range(count))
    edges = sum(words_of(t) for t in range(lo)) + sum(words_of(t) for t in range(hi + 1, count))
    return (hi - lo + 1) * words_of(lo) + edges


def resident_blocks(threads: int, smem_bytes: int, regs_per_thread: int, machine: MachineModel) -> int:
    """Blocks of one kernel resident per SM, limited by registers, shared memory, threads and the block limit."""
    by_regs = machine.regs_per_sm // (threads * round_regs(regs_per_thread))
    by_smem = machine.smem_per_sm_bytes // (smem_bytes + machine.smem_reserved_per_block_bytes)
    by_threads = machine.max_threads_per_sm // threads
    return max(0, min(by_regs, by_smem, by_threads, machine.max_blocks_per_sm))


def checked_min_blocks(threads: int, smem_bytes: int, regs: int, machine: MachineModel, smem_field: str,
                       regs_field: str) -> int:
    """``__launch_bounds__``' min_blocks of a block on ``machine`` — the blocks per SM the register estimate lets
    reside, 1..4 — after refusing one that breaks the per-block limits.

    Raises:
        InvalidConfig: naming ``smem_field`` (shared memory over the per-block limit) or ``regs_field`` (registers
            over the per-thread limit).
    """
    from convtune.errors import InvalidConfig

    if smem_bytes > machine.smem_per_block_bytes:
        raise InvalidConfig(smem_field, f"{smem_bytes} B of shared memory exceed the "
                                        f"{machine.smem_per_block_bytes} B per block of {machine.name}")
    if regs > machine.max_regs_per_thread:
        raise InvalidConfig(regs_field, f"~{regs} registers per thread exceed {machine.max_regs_per_thread}")
    return max(1, min(resident_blocks(threads, smem_bytes, regs, machine), 4))


def cuda_core_fma_s(macs: float, blocks: int, threads: int, bps: int, fma_efficiency: float, active_warps: int,
                    machine: MachineModel) -> tuple[float, int, float]:
    """(seconds, waves, resident warps per busy SM) of ``macs`` fp32 FMAs on the CUDA cores by a grid of ``blocks``
    blocks of ``threads`` threads, ``bps`` (> 0) resident per SM: ``fma_efficiency`` of the fp32 peak over the SMs
    the grid fills (its last wave's share), scaled down below ``active_warps`` resident warps per SM (a thread's
    FMA chains between loads hide their latency only with that many). The CUDA-core families' models
    (``direct_half``, ``pointwise_sliced``) share it."""
    busy = min(1.0, blocks / machine.sm_count)                       # SMs with work
    waves = -(-blocks // (bps * machine.sm_count))
    fill = blocks / (waves * bps * machine.sm_count)                 # the last wave's share
    warps = min(bps, -(-blocks // machine.sm_count)) * threads / 32
    occupancy = min(1.0, warps / active_warps)
    seconds = 2 * macs / (fma_efficiency * machine.fp32_peak_flops_per_s * busy * max(fill, 1 / waves) * occupancy)
    return seconds, waves, warps
