"""What the two persistent 1×1 families (``igemm_wgmma_half_1x1_resident``, ``igemm_wgmma_1x1_resident``) share: the
32-bit pixel index limit, the persistent grid's width, the plan's walk geometry and its model.

A persistent plan launches ``persistent_blocks`` blocks per tile of the resident operand (the filter rows: the grid's
y axis); block b walks the pixel tiles b, b + persistent_blocks, … (the grid's x axis), so the busiest block runs
``tiles_per_block`` = ⌈pixel tiles / persistent_blocks⌉ tiles of Cp/chunk chunks each.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.igemm_wgmma import model as _model
from convtune.kernels.launch_geometry import resident_blocks
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

#: SMs assumed where no machine is given (the H100 / H200 SXM count); the grid only sets how the tiles are dealt
DEFAULT_SMS = 132
#: the largest pixel tile: the kernels index pixels in 32 bits, a tile past the last pixel included
MAX_PIXEL_TILE = 256


def pixel_indices_fit(problem: ConvProblem) -> bool:
    """N·H·W + the largest pixel tile < 2³¹: the kernels' 32-bit pixel arithmetic holds."""
    return problem.N * problem.H * problem.W + MAX_PIXEL_TILE < 2**31


def check_resident(family: str, config: Any, smem_bytes: int, filter_bytes: int, formula: str, field: str,
                   remedy: str, machine: MachineModel | None) -> None:
    """The limits every resident family shares: the whole reduction in one block (``splits`` 1), and the block's
    shared memory (``filter_bytes`` of it the resident filter rows, ``formula``) within ``machine``'s block limit.

    Raises:
        InvalidConfig: ``splits``; or ``field`` (the config field that sets the resident rows) with ``remedy``.
    """
    if config.splits != 1:
        raise InvalidConfig("splits", f"{family} reduces all of C in one block: splits must be 1, got "
                                      f"{config.splits}")
    if machine is not None and smem_bytes > machine.smem_per_block_bytes:
        raise InvalidConfig(field, f"{smem_bytes} B of shared memory ({filter_bytes} B of them the resident filter "
                                   f"rows, {formula}) exceed the {machine.smem_per_block_bytes} B per block of "
                                   f"{machine.name}: {remedy}")


def persistent_blocks(pixel_tiles: int, resident_tiles: int, threads: int, smem_bytes: int, regs: int,
                      machine: MachineModel | None) -> int:
    """Blocks per resident tile: min(pixel tiles, resident blocks per SM · SMs / resident tiles), at least 1
    (``machine``'s SMs and residency, else one block on each of :data:`DEFAULT_SMS`)."""
    per_sm = resident_blocks(threads, smem_bytes, regs, machine) if machine is not None else 1
    sms = machine.sm_count if machine is not None else DEFAULT_SMS
    return max(1, min(pixel_tiles, max(1, per_sm) * sms // resident_tiles))


class PersistentWalk:
    """Mixin of a persistent plan (first in its bases, a frozen dataclass with a ``persistent_blocks`` field): the
    grid and walk from ``pixel_tiles`` and ``resident_tiles``, which the family's plan names from its GEMM's axes."""

    __slots__ = ()
    persistent_blocks: int

    @property
    def pixel_tiles(self) -> int:
        raise NotImplementedError

    @property
    def resident_tiles(self) -> int:
        raise NotImplementedError

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.persistent_blocks, self.resident_tiles, 1)

    @property
    def blocks(self) -> int:
        return self.persistent_blocks * self.resident_tiles

    @property
    def tiles_per_block(self) -> int:
        """Pixel tiles of the busiest block: ⌈pixel tiles / persistent_blocks⌉."""
        return -(-self.pixel_tiles // self.persistent_blocks)


def predict_walk_s(pl: Any, machine: MachineModel, traffic: Any, concurrent_tiles: int = 1) -> float:
    """The wgmma model (:mod:`~convtune.kernels.igemm_wgmma.model`) of the walk: one wave of ``persistent_blocks``
    blocks per resident tile, each running its tiles' chunks through ``concurrent_tiles`` pipelines (the busiest
    pipeline ⌈``tiles_per_block`` / ``concurrent_tiles``⌉ · ``chunks`` of them); ``traffic`` the family's request
    count."""
    walk = replace(pl, chunks_per_split=-(-pl.tiles_per_block // concurrent_tiles) * pl.chunks)
    return _model.predict(walk, machine, traffic).time_s
