"""Arithmetic every family's plan and traffic formula share."""

from __future__ import annotations


def round_regs(regs: int) -> int:
    """Registers are allocated per thread in units of 8."""
    return -(-regs // 8) * 8


def span_inside(start: int, length: int, extent: int) -> int:
    """How many of the positions [start, start + length) lie inside [0, extent): the words a zero-filling
    copy of a window actually reads."""
    return max(0, min(start + length, extent) - max(start, 0))
