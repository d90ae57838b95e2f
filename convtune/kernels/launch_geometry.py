"""Arithmetic every family's plan and traffic formula share."""

from __future__ import annotations

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


def resident_blocks(threads: int, smem_bytes: int, regs_per_thread: int, machine: MachineModel) -> int:
    """Blocks of one kernel resident per SM, limited by registers, shared memory, threads and the block limit."""
    by_regs = machine.regs_per_sm // (threads * round_regs(regs_per_thread))
    by_smem = machine.smem_per_sm_bytes // (smem_bytes + machine.smem_reserved_per_block_bytes)
    by_threads = machine.max_threads_per_sm // threads
    return max(0, min(by_regs, by_smem, by_threads, machine.max_blocks_per_sm))
