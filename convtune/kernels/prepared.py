"""Prepared launches: everything a call needs except its data pointers and its stream, built once.

A :class:`PreparedLaunch` is what :func:`prepare` (problem, config, device) returns for every family: it finds the
config kind's plan function (the family's ``space.plan``) and launcher in the registry. It holds the compiled
function(s), each launch's grid, block, dynamic shared memory and constant (int32) arguments, the zeroing a split
or atomic reduction needs, the workspace bytes and the filter layout. Calling it takes only the operands' device
pointers, in the order of :attr:`PreparedLaunch.operands`, and a raw ``cudaStream_t``::

    prepared = prepare(problem, config, device=0)
    prepared((x_ptr, filters_ptr, y_ptr), stream)             # operands ("x", "filters", "y")

Why not ``cupy.RawKernel.__call__``: it inspects every argument and builds the parameter list on each call
(~12 µs for 6 arguments on the H200 host, more than half of ``F.conv2d``'s whole dispatch). A prepared launch
keeps, per kernel, one parameter buffer (8-byte slots; int32 constants written once into their slots, the
kernel reads the first 4 bytes, little-endian) and the array of slot addresses ``cuLaunchKernel`` reads; a call
writes the pointers with one ``struct.pack_into`` and calls ``cuLaunchKernel`` through CuPy's driver binding
(``cupy.cuda.driver.launchKernel``), which copies the parameters at the call, so a CUDA graph being captured
keeps the pointers of the capture. A lock serialises the write-and-launch of one prepared launch between
threads (the driver call releases the GIL).

``CONVTUNE_LAUNCH=cupy`` launches through ``RawKernel.__call__`` instead (pointers as ``uint64``, constants as
``int32``: the same bytes), a fallback if the driver binding misbehaves; it is slower and otherwise identical.
"""

from __future__ import annotations

import ctypes
import os
import struct
import threading
import warnings
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

import numpy as np

from convtune.errors import InvalidConfig, LaunchError
from convtune.kernels import tensor_map

LAUNCH_ENV = "CONVTUNE_LAUNCH"
#: a tensor map as CuPy passes it by value: a one-element array of a 128-byte structured type
_MAP_DTYPE = np.dtype([("bytes", np.uint8, (tensor_map.MAP_BYTES,))])
#: Byte alignment the kernels need of every operand (16-byte ``cp.async`` copies and float4 accesses).
OPERAND_ALIGN_BYTES = 16
SLOT_BYTES = 8


@dataclass(frozen=True, slots=True)
class Launch:
    """One kernel launch of a prepared sequence.

    ``pointers`` are the kernel's leading pointer arguments, each ``(operand index, byte offset)`` into the
    pointers a call passes; ``ints`` are its trailing int32 arguments (every entry of our kernels takes its
    pointers first, then ints).
    """

    kernel: Any                        # LoadedKernel (``function`` is a cupy.RawKernel)
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    smem_bytes: int
    pointers: tuple[tuple[int, int], ...]
    ints: tuple[int, ...] = ()
    #: TMA tensor maps passed by value after the ints: (operand index, map description), encoded per pointer
    maps: tuple[tuple[int, Any], ...] = ()


@dataclass(frozen=True, slots=True)
class Memset:
    """Zero ``nbytes`` of one operand (from ``offset_bytes``) on the call's stream: the target of atomic adds."""

    operand: int
    nbytes: int
    offset_bytes: int = 0


Step = Launch | Memset


class FilterLayout:
    """How the filter operand is made from the weight tensor ``w``.

    ``prep`` is a prepared launch with operands ``("w", "filters")`` writing ``words`` float32 words (direct:
    packed (C, R, S, Kp); Winograd: U (α², Cp, Kp)), built on first use from ``make_prep`` (the CuPy
    ``launch(...)`` path never needs it); ``None`` when the kernels take the weights as they are (depthwise:
    (C, 1, R, S) in 2-D, lag-order taps (C, K) in 1-D). Plans with equal ``key`` share one prepared filter
    tensor.
    """

    __slots__ = ("_make_prep", "_prep", "key", "name", "words")

    def __init__(self, name: str, key: tuple[Any, ...], words: int = 0,
                 make_prep: Callable[[], PreparedLaunch] | None = None) -> None:
        self.name = name
        self.key = key
        self.words = int(words)
        self._make_prep = make_prep
        self._prep: PreparedLaunch | None = None

    @property
    def prep(self) -> PreparedLaunch | None:
        if self._prep is None and self._make_prep is not None:
            self._prep = self._make_prep()
        return self._prep

    def __repr__(self) -> str:
        return f"FilterLayout({self.name!r}, key={self.key}, words={self.words})"


# ---- the driver seam (tests replace it to record launches without a GPU) ---------------------------------
@dataclass(frozen=True, slots=True)
class Driver:
    """The calls a prepared launch makes: ``launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream,
    params, extra)`` (cuLaunchKernel), ``memset(ptr, value, nbytes, stream)`` (cudaMemsetAsync),
    ``get_device()`` (cudaGetDevice), ``use_device(index)`` (a context manager making it current) and
    ``encode_map(spec, pointer)`` (a TMA tensor map's 128 bytes: :func:`convtune.kernels.tensor_map.encode`)."""

    launch_kernel: Callable[..., Any]
    memset: Callable[..., Any]
    get_device: Callable[[], int]
    use_device: Callable[[int], Any]
    errors: tuple[type[BaseException], ...]
    encode_map: Callable[[Any, int], bytes] = tensor_map.encode


_driver: Driver | None = None


def driver() -> Driver:
    """CuPy's driver and runtime bindings (imported on first use)."""
    global _driver
    if _driver is None:
        from convtune.kernels.compile import cupy_module

        cp = cupy_module()
        _driver = Driver(cp.cuda.driver.launchKernel, cp.cuda.runtime.memsetAsync, cp.cuda.runtime.getDevice,
                         cp.cuda.Device, (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError))
    return _driver


def set_driver(new: Driver | None) -> Driver | None:
    """Replace the driver seam (None: CuPy's again); returns the previous one. For tests."""
    global _driver
    old, _driver = _driver, new
    return old


def function_pointer(kernel: Any) -> int:
    """The ``CUfunction`` of a loaded kernel on the current device (``RawKernel.kernel`` is the per-device
    ``cupy.cuda.function.Function``, its ``ptr`` the handle)."""
    return int(kernel.function.kernel.ptr)


# ---- the prepared launch ---------------------------------------------------------------------------------
class PreparedLaunch:
    """A ready launch sequence: ``prepared(ptrs, stream)`` (see the module docstring).

    Attributes:
        kind: the config's ``family.direction``, e.g. ``"winograd_unfused.fwd"`` (a filter preparation:
            its own name, e.g. ``"winograd_filter.m4"``).
        config, problem, plan: what it was prepared from.
        device: the CUDA device index it was compiled for.
        operands: names of the pointers a call passes, in order; ``"workspace"`` (last) when
            ``workspace_bytes`` > 0.
        steps: the launches and memsets, in stream order.
        workspace_bytes: scratch bytes the caller allocates per call (any contents; 16-byte aligned).
        filters: the filter layout (:class:`FilterLayout`), None for paths without a weight operand.
        output_shape: shape of the output operand (``()`` for a chain: its parts' are theirs).
        parts: the prepared launches a :func:`chain` runs, in order (empty otherwise).
        kernels: the compiled kernel object(s) the steps launch (kept alive with the launch).
    """

    __slots__ = ("_call", "config", "device", "filters", "kernels", "kind", "operands", "output_shape", "parts",
                 "plan", "problem", "steps", "workspace_bytes")

    def __init__(self, *, plan: Any, device: int, operands: Sequence[str], steps: Sequence[Step], kernels: Any,
                 workspace_bytes: int = 0, filters: FilterLayout | None = None,
                 output_shape: tuple[int, ...] = (), kind: str | None = None,
                 parts: Sequence[PreparedLaunch] = ()) -> None:
        self.plan = plan
        self.config = plan.config
        self.problem = plan.problem
        self.kind = kind or plan.config.kind
        self.device = int(device)
        self.operands = tuple(operands)
        self.steps = tuple(steps)
        self.kernels = kernels
        self.workspace_bytes = int(workspace_bytes)
        self.filters = filters
        self.output_shape = tuple(output_shape)
        self.parts = tuple(parts)
        if (self.workspace_bytes > 0) != ("workspace" in self.operands):
            raise InvalidConfig("workspace", f"{self.kind}: a workspace operand exactly when workspace_bytes > 0")
        for step in self.steps:
            used = [step.operand] if isinstance(step, Memset) else [i for i, _ in (*step.pointers, *step.maps)]
            if any(not 0 <= i < len(self.operands) for i in used):
                raise InvalidConfig("operands", f"{self.kind}: a step uses an operand outside {self.operands}")
        self._call = _build_call(self.steps, self.device, len(self.operands), self.kind)

    def __call__(self, ptrs: Sequence[int], stream: int) -> None:
        """Launch on ``stream`` (a raw ``cudaStream_t``; 0 is the legacy default stream) with the operands'
        device pointers ``ptrs`` (in :attr:`operands` order); allocates nothing, synchronises nothing.

        Raises:
            LaunchError: the driver refused a launch (bad grid, too much shared memory, a capture error).
        """
        self._call(ptrs, stream)

    def __repr__(self) -> str:
        return (f"PreparedLaunch({self.kind}, device={self.device}, operands={self.operands}, "
                f"launches={sum(isinstance(s, Launch) for s in self.steps)}, workspace_bytes={self.workspace_bytes})")

    @property
    def launches(self) -> int:
        """Kernel launches per call (memsets not counted)."""
        return sum(isinstance(s, Launch) for s in self.steps)


def _build_call(steps: tuple[Step, ...], device: int, n_operands: int, kind: str) -> Callable[..., None]:
    if os.environ.get(LAUNCH_ENV, "").lower() == "cupy":
        return _build_cupy_call(steps, device, kind)
    drv = driver()
    launch_kernel, memset, get_device, use_device, errors = (drv.launch_kernel, drv.memset, drv.get_device,
                                                              drv.use_device, drv.errors)
    lock = threading.Lock()
    compiled: list[tuple[Any, ...]] = []
    with use_device(device):
        for step in steps:
            if isinstance(step, Memset):
                compiled.append((False, step.operand, step.offset_bytes, step.nbytes))
                continue
            n_ptr, n = len(step.pointers), len(step.pointers) + len(step.ints)
            buf = (ctypes.c_uint64 * max(1, n))()
            for j, value in enumerate(step.ints):
                struct.pack_into("<i", buf, SLOT_BYTES * (n_ptr + j), int(value))
            base = ctypes.addressof(buf)
            # a tensor map's parameter: its own 128 bytes (the driver copies each parameter by its size)
            map_bufs = [(ctypes.c_uint8 * tensor_map.MAP_BYTES)() for _ in step.maps]
            params = (ctypes.c_void_p * max(1, n + len(map_bufs)))(
                *(base + SLOT_BYTES * j for j in range(n)), *(ctypes.addressof(b) for b in map_bufs))
            pack = struct.Struct("<" + "Q" * n_ptr).pack_into
            (gx, gy, gz), (bx, by, bz) = step.grid, step.block
            maps = [_MapSlot(operand, spec, b) for (operand, spec), b in zip(step.maps, map_bufs, strict=True)]
            compiled.append((True, pack, buf, step.pointers, function_pointer(step.kernel), gx, gy, gz, bx, by, bz,
                             step.smem_bytes, ctypes.addressof(params), (params, maps)))

    def fail(exc: BaseException) -> LaunchError:
        return LaunchError(f"{kind} launch failed: {exc}")

    identity = tuple((i, 0) for i in range(n_operands))
    if len(compiled) == 1 and compiled[0][0] and compiled[0][3] == identity and not compiled[0][13][1]:
        # the common single-launch path: the operands are the kernel's pointers, in order
        _, pack, buf, _, f, gx, gy, gz, bx, by, bz, smem, params, _ = compiled[0]
        keep_alive = compiled  # the ctypes arrays behind ``params``: freed buffers would be read by the driver

        def call_one(ptrs: Sequence[int], stream: int) -> None:
            assert keep_alive
            try:
                with lock:
                    pack(buf, 0, *ptrs)
                    if get_device() == device:
                        launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, 0)
                    else:
                        with use_device(device):
                            launch_kernel(f, gx, gy, gz, bx, by, bz, smem, stream, params, 0)
            except errors as exc:
                raise fail(exc) from exc
            except struct.error:
                raise InvalidConfig("operands", f"{kind} takes {n_operands} pointers, got {len(ptrs)}") from None

        return call_one

    run = _straight_line(compiled, n_operands, launch_kernel, memset, drv.encode_map)

    def call_many(ptrs: Sequence[int], stream: int) -> None:
        if len(ptrs) != n_operands:
            raise InvalidConfig("operands", f"{kind} takes {n_operands} pointers, got {len(ptrs)}")
        try:
            with lock:
                if get_device() == device:
                    run(ptrs, stream)
                else:
                    with use_device(device):
                        run(ptrs, stream)
        except errors as exc:
            raise fail(exc) from exc

    return call_many


def _straight_line(compiled: list[tuple[Any, ...]], n_operands: int, launch_kernel: Callable[..., Any],
                   memset: Callable[..., Any], encode_map: Callable[[Any, int], bytes]) -> Callable[..., None]:
    """``run(ptrs, stream)`` of a multi-step launch as straight-line code, generated once per prepared launch: the
    operands unpacked into locals, then per step one ``pack_into`` of its pointer expressions (``p3 + 4096``), its
    tensor maps' updates and the driver call with its grid, block and shared memory as literals. A loop over the
    steps unpacked a 14-field tuple and built a pointer list per launch on every call (≈1.5 µs of the 3-launch
    Winograd path's Python on the CPU)."""
    names: dict[str, Any] = {"launch_kernel": launch_kernel, "memset": memset, "encode_map": encode_map,
                             "_keep": compiled}   # the ctypes arrays the parameter addresses point into
    operands = ", ".join(f"p{i}" for i in range(n_operands))
    lines = ["def run(ptrs, stream):", f"    {operands}, = ptrs"]
    for k, st in enumerate(compiled):
        if not st[0]:
            _, operand, offset, nbytes = st
            lines.append(f"    memset(p{operand} + {int(offset)}, 0, {int(nbytes)}, stream)")
            continue
        _, pack, buf, spec, f, gx, gy, gz, bx, by, bz, smem, params, (_keep, maps) = st
        names.update({f"pack{k}": pack, f"buf{k}": buf, f"f{k}": f, f"params{k}": params})
        pointers = "".join(f", p{i}" + (f" + {int(off)}" if off else "") for i, off in spec)
        lines.append(f"    pack{k}(buf{k}, 0{pointers})")
        for j, slot in enumerate(maps):
            names[f"map{k}_{j}"] = slot
            lines.append(f"    map{k}_{j}.update(p{slot.operand}, encode_map)")
        dims = ", ".join(str(int(v)) for v in (gx, gy, gz, bx, by, bz, smem))
        lines.append(f"    launch_kernel(f{k}, {dims}, stream, params{k}, 0)")
    exec("\n".join(lines), names)  # the text holds only ints and the fixed names above
    run: Callable[..., None] = names["run"]
    return run


class _MapSlot:
    """A tensor-map parameter of one launch: the buffer the driver reads, re-encoded when the operand moves."""

    __slots__ = ("buffer", "operand", "pointer", "spec")

    def __init__(self, operand: int, spec: Any, buffer: Any) -> None:
        self.operand, self.spec, self.buffer = operand, spec, buffer
        self.pointer: int | None = None

    def update(self, pointer: int, encode: Callable[[Any, int], bytes]) -> None:
        if pointer != self.pointer:
            ctypes.memmove(self.buffer, encode(self.spec, pointer), tensor_map.MAP_BYTES)
            self.pointer = pointer


def _build_cupy_call(steps: tuple[Step, ...], device: int, kind: str) -> Callable[..., None]:
    """The ``CONVTUNE_LAUNCH=cupy`` fallback: ``RawKernel.__call__`` on ExternalStream objects (tensor maps encoded
    at every call: the fallback trades speed for having no parameter buffers of its own)."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()

    def external(stream: int) -> Any:
        # CuPy 14 deprecates ExternalStream for objects with the CUDA stream protocol; a raw handle has none
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", DeprecationWarning)
            return cp.cuda.ExternalStream(stream, device)

    def call(ptrs: Sequence[int], stream: int) -> None:
        try:
            with cp.cuda.Device(device), external(stream):
                for step in steps:
                    if isinstance(step, Memset):
                        cp.cuda.runtime.memsetAsync(ptrs[step.operand] + step.offset_bytes, 0, step.nbytes, stream)
                        continue
                    maps = (np.frombuffer(tensor_map.encode(spec, ptrs[i]), dtype=_MAP_DTYPE) for i, spec in step.maps)
                    args = (*(cp.uint64(ptrs[i] + off) for i, off in step.pointers),
                            *(cp.int32(v) for v in step.ints), *maps)
                    step.kernel.function(step.grid, step.block, args, shared_mem=step.smem_bytes)
        except (cp.cuda.driver.CUDADriverError, cp.cuda.runtime.CUDARuntimeError) as exc:
            raise LaunchError(f"{kind} launch failed: {exc}") from exc

    return call


# ---- building blocks the families use ----------------------------------------------------------------------
def grid3(grid: int | tuple[int, ...]) -> tuple[int, int, int]:
    """A 1-D grid (int) or a 2-/3-tuple as (x, y, z)."""
    if isinstance(grid, int):
        return (grid, 1, 1)
    g = (*(int(v) for v in grid), 1, 1)
    return (g[0], g[1], g[2])


def pointers(*indices: int | tuple[int, int]) -> tuple[tuple[int, int], ...]:
    """Pointer arguments: operand indices, or (index, byte offset) pairs."""
    return tuple((i, 0) if isinstance(i, int) else (int(i[0]), int(i[1])) for i in indices)


def chain(parts: Sequence[tuple[PreparedLaunch, Sequence[str]]], kind: str) -> PreparedLaunch:
    """One prepared launch that runs several in stream order (one call, one lock, one device check: what a
    backward running the input and the weight gradient back to back pays once instead of twice).

    ``parts`` are (prepared launch, names of its operands in the chain); a name given to several parts is one
    operand (the same pointer). The chain's operands are the names in first-seen order, ``"workspace"`` last:
    every part with a workspace reads the same one, ``max`` of their ``workspace_bytes`` (they run one after
    the other on one stream, so none sees another's scratch while it runs).

    Raises:
        InvalidConfig: a part's names do not match its operands, parts on different devices, or a workspace
            operand not named ``"workspace"``.
    """
    if not parts:
        raise InvalidConfig("parts", f"{kind}: a chain needs at least one prepared launch")
    device = parts[0][0].device
    names: list[str] = []
    for prep, part_names in parts:
        if len(part_names) != len(prep.operands):
            raise InvalidConfig("operands", f"{kind}: {prep.kind} takes {prep.operands}, named {tuple(part_names)}")
        if prep.device != device:
            raise InvalidConfig("device", f"{kind}: parts on devices {device} and {prep.device}")
        for own, name in zip(prep.operands, part_names, strict=True):
            if (own == "workspace") != (name == "workspace"):
                raise InvalidConfig("operands", f"{kind}: a workspace operand is named 'workspace' in the chain")
            if name not in names and name != "workspace":
                names.append(name)
    workspace_bytes = max(prep.workspace_bytes for prep, _ in parts)
    if workspace_bytes:
        names.append("workspace")
    index = {name: i for i, name in enumerate(names)}
    steps: list[Step] = []
    for prep, part_names in parts:
        to_chain = [index[name] for name in part_names]
        for step in prep.steps:
            if isinstance(step, Memset):
                steps.append(replace(step, operand=to_chain[step.operand]))
            else:
                steps.append(replace(step, pointers=tuple((to_chain[i], off) for i, off in step.pointers),
                                     maps=tuple((to_chain[i], spec) for i, spec in step.maps)))
    return PreparedLaunch(plan=parts[0][0].plan, device=device, operands=names, steps=steps,
                          kernels=tuple(prep.kernels for prep, _ in parts), workspace_bytes=workspace_bytes,
                          kind=kind, parts=[prep for prep, _ in parts])


# ---- look-up by the config's kind ------------------------------------------------------------------------------
def prepare(problem: Any, config: Any, device: int = 0) -> PreparedLaunch:
    """The prepared launch of ``config`` for ``problem`` on CUDA device ``device`` (validated, compiled).

    Raises:
        InvalidConfig: ``config`` is not valid for ``problem`` (names the field) or of an unknown kind.
        CompileError, DeviceUnavailable: from compiling.
    """
    from convtune.kernels.devices import device_machine

    plan_fn, prepare_fn = _families(config.kind)
    return prepare_fn(plan_fn(problem, config, device_machine(device)), device)


def prepare_plan(plan: Any, device: int = 0, kernels: Any = None) -> PreparedLaunch:
    """The prepared launch of an already validated plan (``kernels``: its compiled kernels, else compiled)."""
    _, prepare_fn = _families(plan.config.kind)
    return prepare_fn(plan, device, kernels)


def _families(kind: str) -> tuple[Callable[..., Any], Callable[..., PreparedLaunch]]:
    """(plan function, prepare_plan function) of a config kind, looked up in the registry
    (:func:`convtune.kernels.registry.preparer`; imported lazily: the families import this module)."""
    from convtune.kernels.registry import preparer

    return preparer(kind)


# ---- the classic launch(...) functions on CuPy arrays, on top of prepared launches ---------------------------
_LAUNCH_CACHE: dict[tuple[Any, int], PreparedLaunch] = {}
_LAUNCH_CACHE_ENTRIES = 4096


def cached_prepared(plan: Any, kernels: Any, build: Callable[[Any, int, Any], PreparedLaunch]) -> PreparedLaunch:
    """The prepared launch of (plan, current device) for CuPy-array ``launch(...)`` functions, rebuilt when
    called with other kernel objects than it holds (a recompiled kernel)."""
    device = driver().get_device()
    key = (plan, device)
    hit = _LAUNCH_CACHE.get(key)
    # equal, not only identical: some compile_plan functions wrap their cached kernels in a new object per call
    if hit is None or not (hit.kernels is kernels or hit.kernels == kernels):
        if len(_LAUNCH_CACHE) >= _LAUNCH_CACHE_ENTRIES:
            _LAUNCH_CACHE.clear()
        hit = _LAUNCH_CACHE[key] = build(plan, device, kernels)
    return hit


def stream_pointer(stream: Any | None) -> int:
    """The raw handle of a CuPy stream (None: CuPy's current stream)."""
    if stream is None:
        from convtune.kernels.compile import cupy_module

        stream = cupy_module().cuda.get_current_stream()
    return int(stream.ptr)


def data_pointer(array: Any) -> int:
    """The device pointer of a CuPy array."""
    return int(array.data.ptr)
