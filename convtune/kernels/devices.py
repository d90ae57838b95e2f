"""The device probe: the MachineModel of each CUDA device, queried once per process, checked for the kernels.

:func:`kernel_machine` is where the GPU backend starts (the benchmarker, the operators): a device the
kernels cannot run on — no CuPy, no device, or compute capability below sm_80 (``cp.async``) — raises a
typed one-line error (:class:`~convtune.errors.DeviceUnavailable`, :class:`~convtune.errors.UnsupportedDevice`)
instead of a compile or launch failure later.
"""

from __future__ import annotations

from functools import cache

from convtune.machine import MachineModel


def kernel_machine(device_id: int = 0) -> MachineModel:
    """The MachineModel of CUDA device ``device_id``, which the kernels can run on.

    Raises:
        DeviceUnavailable: CuPy is missing or there is no such device.
        UnsupportedDevice: the device is older than sm_80.
    """
    return MachineModel.from_device(device_id).require_kernels(f"CUDA device {device_id}")


@cache
def device_machine(device_id: int) -> MachineModel:
    """:func:`kernel_machine`, queried once per device and process (failures are not cached)."""
    return kernel_machine(device_id)
