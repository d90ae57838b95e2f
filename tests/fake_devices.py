"""Stand-in CuPy modules for the device probe: no GPU, or a V100 (sm_70), in this process or in the trial
worker's child process (``"fake_devices:no_gpu_benchmarker"`` as a SubprocessBenchmarker factory: the child is
spawned with this process's ``sys.path``, so it imports this module by name)."""

from __future__ import annotations

import sys
import types
from typing import Any

V100_PROPS: dict[str, Any] = {
    "name": b"Tesla V100-SXM2-16GB", "major": 7, "minor": 0, "multiProcessorCount": 80,
    "sharedMemPerBlockOptin": 98_304, "sharedMemPerMultiprocessor": 98_304, "regsPerMultiprocessor": 65_536,
    "l2CacheSize": 6_291_456, "maxThreadsPerBlock": 1024, "maxThreadsPerMultiProcessor": 2048,
    "maxBlocksPerMultiProcessor": 32, "memoryClockRate": 877_000, "memoryBusWidth": 4096, "clockRate": 1_530_000}


def fake_cupy(props: dict[str, Any] | None) -> types.ModuleType:
    """A module that answers ``cupy.cuda.runtime.getDeviceProperties`` with ``props`` (``None``: no device)."""

    def get_props(device_id: int) -> dict[str, Any]:
        if props is None:
            raise RuntimeError("cudaErrorNoDevice: no CUDA-capable device is detected")
        return dict(props)

    module = types.ModuleType("cupy")
    module.cuda = types.SimpleNamespace(runtime=types.SimpleNamespace(getDeviceProperties=get_props))  # type: ignore[attr-defined]
    return module


def _benchmarker(props: dict[str, Any] | None, **kwargs: Any) -> Any:
    sys.modules["cupy"] = fake_cupy(props)  # this child process only
    from convtune.tuner.gpu import CupyBenchmarker

    return CupyBenchmarker(**kwargs)


def no_gpu_benchmarker(**kwargs: Any) -> Any:
    """CupyBenchmarker where CuPy is installed but sees no device."""
    return _benchmarker(None, **kwargs)


def sm70_benchmarker(**kwargs: Any) -> Any:
    """CupyBenchmarker on a V100 (compute capability 7.0)."""
    return _benchmarker(V100_PROPS, **kwargs)
