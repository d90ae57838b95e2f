"""Roofline floor time: no kernel can beat max(flops / peak, bytes / bandwidth) on a machine.

compute_time_s = flops / ``machine.fp32_peak_flops_per_s``; memory_time_s = bytes /
``machine.copy_bandwidth_bytes_per_s`` (the copy bandwidth counts bytes read + written, like our
bounds, which count loads + stores). Pass the bytes of a *lower bound* to get a floor time; pass a
model's predicted bytes to get that model's roofline time. efficiency = floor / measured ∈ (0, 1]
for a correct floor.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from convtune.machine import MachineModel


@dataclass(frozen=True, slots=True)
class RooflineResult:
    """time_s = max(compute_time_s, memory_time_s); ``binding`` is ``"compute"`` or ``"memory"``."""

    time_s: float
    compute_time_s: float
    memory_time_s: float
    binding: str
    flops: float
    bytes: float
    machine: str

    @property
    def intensity_flops_per_byte(self) -> float:
        return self.flops / self.bytes if self.bytes else float("inf")

    def to_dict(self) -> dict[str, Any]:
        return {"time_s": self.time_s, "compute_time_s": self.compute_time_s, "memory_time_s": self.memory_time_s,
                "binding": self.binding, "flops": float(self.flops), "bytes": float(self.bytes),
                "intensity_flops_per_byte": self.intensity_flops_per_byte, "machine": self.machine}


def floor_time(flops: float, bytes_moved: float, machine: MachineModel) -> RooflineResult:
    """The roofline floor time of ``flops`` and ``bytes_moved`` on ``machine``.

    Example:
        >>> from convtune.machine import MachineModel
        >>> floor_time(50.9e12, 0, MachineModel.preset("h200")).time_s
        1.0
    """
    if flops < 0 or bytes_moved < 0:
        raise ValueError(f"flops={flops}, bytes={bytes_moved}: must be >= 0")
    compute = flops / machine.fp32_peak_flops_per_s
    memory = bytes_moved / machine.copy_bandwidth_bytes_per_s
    return RooflineResult(time_s=max(compute, memory), compute_time_s=compute, memory_time_s=memory,
                          binding="compute" if compute >= memory else "memory", flops=float(flops),
                          bytes=float(bytes_moved), machine=machine.name)


def efficiency(floor_s: float, measured_s: float) -> float:
    """floor_s / measured_s: 1.0 means the kernel runs at the floor."""
    if measured_s <= 0:
        raise ValueError(f"measured_s={measured_s} must be > 0")
    if floor_s < 0:
        raise ValueError(f"floor_s={floor_s} must be >= 0")
    return floor_s / measured_s
