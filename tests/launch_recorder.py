"""A stand-in for CUDA in prepared-launch tests: records every launch and memset, decoding the parameter buffer.

``install()`` swaps :mod:`convtune.kernels.prepared`'s driver seam for a :class:`Recorder`; fake kernels carry
``function.kernel.ptr`` (a made-up ``CUfunction``) and the number of arguments their entry takes, so the
recorder reads exactly those slots out of the ``kernelParams`` array while the call is in progress (a prepared
launch reuses its buffer), as the driver would. TMA tensor maps: the recorder's ``encode_map`` stands in for the
driver's encoding (it records (spec, pointer) and returns 128 bytes unique to the call), and a kernel declared with
``n_maps`` has that many 128-byte parameters after its ints, read back into ``Recorded.maps``.
"""

from __future__ import annotations

import contextlib
import ctypes
import itertools
import struct
from dataclasses import dataclass, field
from types import SimpleNamespace
from typing import Any

from convtune.kernels import prepared
from convtune.kernels.tensor_map import MAP_BYTES

_ids = itertools.count(0x1000)


@dataclass
class FakeKernel:
    """What ``function_pointer`` and the recorder need of a LoadedKernel."""

    name: str
    n_pointers: int
    n_ints: int
    ptr: int = field(default_factory=lambda: next(_ids))
    n_maps: int = 0               # TMA tensor maps passed by value (128 bytes each) after the ints

    @property
    def function(self) -> Any:
        return SimpleNamespace(kernel=SimpleNamespace(ptr=self.ptr))


@dataclass
class Recorded:
    kind: str                     # "launch" or "memset"
    name: str = ""
    grid: tuple[int, int, int] = (0, 0, 0)
    block: tuple[int, int, int] = (0, 0, 0)
    smem_bytes: int = 0
    stream: int = 0
    pointers: tuple[int, ...] = ()
    ints: tuple[int, ...] = ()
    device: int = 0
    nbytes: int = 0
    maps: tuple[bytes, ...] = ()  # the tensor-map parameters' bytes as the launch passed them


class Recorder:
    def __init__(self, device: int = 0) -> None:
        self.kernels: dict[int, FakeKernel] = {}
        self.calls: list[Recorded] = []
        self.current_device = device
        self.fail_next: BaseException | None = None
        self.encoded: list[tuple[Any, int, bytes]] = []    # (spec, pointer, the bytes returned), in call order

    def kernel(self, name: str, n_pointers: int, n_ints: int, n_maps: int = 0) -> FakeKernel:
        k = FakeKernel(name, n_pointers, n_ints, n_maps=n_maps)
        self.kernels[k.ptr] = k
        return k

    def encode_map(self, spec: Any, pointer: int) -> bytes:
        """Bytes unique to this call (the pointer, the call's number), recorded with what they encode."""
        data = struct.pack("<QQ", pointer, len(self.encoded) + 1) * 8
        self.encoded.append((spec, pointer, data))
        return data

    def launch_kernel(self, f: int, gx: int, gy: int, gz: int, bx: int, by: int, bz: int, smem: int, stream: int,
                      params: int, extra: int) -> None:
        if self.fail_next is not None:
            exc, self.fail_next = self.fail_next, None
            raise exc
        k = self.kernels[f]
        n = k.n_pointers + k.n_ints
        slots = (ctypes.c_void_p * (n + k.n_maps)).from_address(params)
        ptrs = tuple(ctypes.c_uint64.from_address(slots[j]).value for j in range(k.n_pointers))
        ints = tuple(ctypes.c_int32.from_address(slots[j]).value for j in range(k.n_pointers, n))
        maps = tuple(ctypes.string_at(slots[j], MAP_BYTES) for j in range(n, n + k.n_maps))
        self.calls.append(Recorded("launch", k.name, (gx, gy, gz), (bx, by, bz), smem, stream, ptrs, ints,
                                   self.current_device, maps=maps))

    def memset(self, ptr: int, value: int, nbytes: int, stream: int) -> None:
        assert value == 0
        self.calls.append(Recorded("memset", stream=stream, pointers=(ptr,), nbytes=nbytes,
                                   device=self.current_device))

    def get_device(self) -> int:
        return self.current_device

    @contextlib.contextmanager
    def use_device(self, index: int) -> Any:
        old, self.current_device = self.current_device, index
        try:
            yield
        finally:
            self.current_device = old

    def launches(self) -> list[Recorded]:
        return [c for c in self.calls if c.kind == "launch"]


class FakeDriverError(RuntimeError):
    pass


def install(monkeypatch: Any, device: int = 0) -> Recorder:
    """Replace the driver seam for one test; returns the recorder."""
    rec = Recorder(device)
    drv = prepared.Driver(rec.launch_kernel, rec.memset, rec.get_device, rec.use_device, (FakeDriverError,),
                          rec.encode_map)
    monkeypatch.setattr(prepared, "_driver", drv)
    monkeypatch.delenv(prepared.LAUNCH_ENV, raising=False)
    return rec
