"""The MachineModel of each CUDA device, queried once per process."""

from __future__ import annotations

from functools import cache

from convtune.machine import MachineModel


@cache
def device_machine(device_id: int) -> MachineModel:
    """The MachineModel of a CUDA device (queried once)."""
    return MachineModel.from_device(device_id)
