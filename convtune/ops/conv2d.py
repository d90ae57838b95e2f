"""Operator API: ``conv2d(x, w, ..., algorithm="auto"|"direct"|"winograd"|"igemm")`` on CuPy arrays or torch CUDA
tensors.

The call path (docs/design.md): one runner per *call signature* — the types, shapes, strides, dtypes and devices
of x and w, stride, padding, dilation, config, algorithm, ``cache_filters`` and ``math`` (the precision class: a
strict and a tf32 call never share a runner) — kept in a per-process dictionary. The first call of a signature
validates (typed errors naming the argument), builds the :class:`~convtune.problem.ConvProblem`, resolves the
configuration (:mod:`convtune.ops.resolver`: the tuning database's best GPU-measured config, else the model's
choice among ``algorithm``'s families), and prepares the launch (:func:`convtune.kernels.prepared.prepare`).
Every later call does a dictionary lookup, reads data pointers (``data_ptr()`` / ``.data.ptr``, no DLPack), looks
up the current stream once, allocates the output (and a workspace, for the unfused Winograd path) through the
caller's framework — torch's caching allocator for torch tensors, CuPy's pool for CuPy arrays — and launches. No
validation, parsing, plan building or memset (except split-C's) happens on that path.

Workspaces (the unfused Winograd path's V and M, the depthwise reductions' partial sums) of torch calls are kept per
(device, stream, thread) and reused by the next call there, grown when a call needs more: the kernels of one
thread's calls on one stream run in the order they were enqueued, so a call cannot overwrite what an earlier one is
still reading, and a ``torch.empty`` (several µs of host time on an H200 host) leaves the hot path. Inside a CUDA
graph capture every call allocates its own (from the graph's pool). :func:`clear_caches` frees them; the memory held
is at most the largest workspace used per stream and thread.

Prepared filters (direct: packed; Winograd: U = G g Gᵀ) are made on the GPU by the layout's prepared launch:

* torch weights: cached per (tensor, layout) and made again when the tensor is modified in place (its version
  counter) or replaced; inside a CUDA graph capture a weight that requires grad has its filters made inside
  the graph on every replay (an optimizer may update it between replays), a frozen one (``requires_grad``
  False) replays the filters cached before the capture;
* CuPy arrays have no version counter: their filters are made on every call unless ``cache_filters=True``
  promises that the array is not modified in place (cached per data pointer, shape and layout).

Inputs that do not start 16-byte aligned (a view at an odd offset) run on a copy.
"""

from __future__ import annotations

import contextlib
import weakref
from collections.abc import Callable
from functools import cache
from threading import get_ident
from typing import Any

from convtune.errors import InvalidConfig, InvalidInput
from convtune.kernels import experimental
from convtune.kernels.compile import cupy_module
from convtune.kernels.config import KernelConfig, parse_config_key
from convtune.kernels.devices import device_machine
from convtune.kernels.prepared import OPERAND_ALIGN_BYTES, PreparedLaunch, prepare_plan
from convtune.kernels.registry import KernelSpec, get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.ops import choice_cache, resolver
from convtune.problem import MATH_MODES, ConvProblem

__all__ = ["ALGORITHMS", "check_math", "clear_caches", "clear_filter_cache", "conv2d", "device_machine",
           "filter_cache_size", "model_choice", "on_clear", "problem_for", "runner"]

ALGORITHMS = ("auto", "direct", "winograd", "igemm")
CALL_CACHE_ENTRIES = 4096
CUPY_FILTER_CACHE_ENTRIES = 64
_ALIGN_MASK = OPERAND_ALIGN_BYTES - 1

Runner = Callable[[Any, Any], Any]
_calls: dict[tuple[Any, ...], Runner] = {}
_array_kinds: dict[type, str] = {}            # array types seen valid: "torch" or "cupy"
_torch_filters: dict[tuple[int, tuple[Any, ...]], list[Any]] = {}
#: (device index, raw stream, thread) -> the uint8 workspace tensor its calls reuse (module docstring)
_torch_workspaces: dict[tuple[int, int, int], Any] = {}
WORKSPACE_CACHE_ENTRIES = 64
_cupy_filters: dict[tuple[Any, ...], Any] = {}
#: Test hooks counting the slow path's work (the cache-hit test asserts they stay at one per signature).
_miss_hooks: list[Callable[[str], None]] = []


# ---- validation and resolution (first call of a signature only) ------------------------------------------------
def as_pair(name: str, value: Any) -> tuple[int, int]:
    """``3`` -> ``(3, 3)``, ``(1, 2)`` -> ``(1, 2)``; anything else is :class:`InvalidInput` naming ``name``."""
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, tuple | list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        return int(value[0]), int(value[1])
    raise InvalidInput(name, f"{value!r} must be an int or a pair of ints")


def _is_torch(t: Any) -> bool:
    return type(t).__module__.startswith("torch")


#: torch dtypes the dense kernels take (16-bit ones: the tensor-core families ``igemm_half`` and, on compute capability
#: 9.0, ``igemm_wgmma_half``)
TORCH_DTYPES = {"torch.float32": "float32", "torch.bfloat16": "bfloat16", "torch.float16": "float16"}


def _check_torch(name: str, t: Any) -> int:
    """Validate one torch tensor (CUDA, float32 / bfloat16 / float16, 4-D, contiguous); returns its device index."""
    if not t.is_cuda:
        raise InvalidInput(name, f"must be a CUDA tensor, got device {t.device}")
    if str(t.dtype) not in TORCH_DTYPES:
        raise InvalidInput(name, f"dtype must be float32, bfloat16 or float16, got {t.dtype}")
    if t.dim() != 4:
        raise InvalidInput(name, f"must be 4-D (NCHW / KCRS), got shape {tuple(t.shape)}")
    if not t.is_contiguous():
        raise InvalidInput(name, "must be contiguous NCHW (call .contiguous())")
    return int(t.device.index)


def _check_cupy(name: str, t: Any) -> int:
    """Validate one CuPy array (float32, 4-D, C-contiguous); returns its device id."""
    cp = cupy_module()
    if not isinstance(t, cp.ndarray):
        raise InvalidInput(name, f"must be a cupy.ndarray or a torch CUDA tensor, got {type(t).__name__}")
    if t.dtype != cp.float32:
        raise InvalidInput(name, f"dtype must be float32, got {t.dtype}")
    if t.ndim != 4:
        raise InvalidInput(name, f"must be 4-D (NCHW / KCRS), got shape {t.shape}")
    if not t.flags.c_contiguous:
        raise InvalidInput(name, "must be C-contiguous NCHW (use cupy.ascontiguousarray)")
    return int(t.device.id)


def _validate(x: Any, w: Any) -> tuple[str, int]:
    """("torch" | "cupy", device index) of a valid (x, w) pair.

    Raises:
        InvalidInput: naming ``x`` or ``w``.
    """
    torch_in = _is_torch(x)
    if torch_in != _is_torch(w):
        raise InvalidInput("w", "x and w must both be torch tensors or both be CuPy arrays")
    check = _check_torch if torch_in else _check_cupy
    dx, dw = check("x", x), check("w", w)
    if dx != dw:
        raise InvalidInput("w", f"is on device {dw} but x is on device {dx}")
    if x.dtype != w.dtype:
        raise InvalidInput("w", f"dtype {w.dtype} must match x's {x.dtype}")
    return ("torch" if torch_in else "cupy"), dx


def check_math(math: Any) -> str:
    """``math`` of a dense call checked: None → ``"ieee"`` (strict fp32), else one of :data:`MATH_MODES`.

    Raises:
        InvalidInput: naming ``math`` and the allowed values.
    """
    if math is None:
        return "ieee"
    if not isinstance(math, str) or math not in MATH_MODES:
        raise InvalidInput("math", f"{math!r}: allowed {', '.join(repr(m) for m in MATH_MODES)} or None (= 'ieee')")
    return math


def problem_for(x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: Any = 1, padding: Any = 0,
                dilation: Any = 1, math: str = "ieee", dtype: str = "float32") -> ConvProblem:
    """The ConvProblem of ``conv2d`` on tensors of these shapes (groups = 1) and storage ``dtype`` in the precision
    class of ``math`` (float32 tensors: ``"ieee"`` strict, ``"tf32"`` TF32 tensor cores; 16-bit: ``"ieee"``)."""
    if len(x_shape) != 4:
        raise InvalidInput("x", f"must be 4-D NCHW, got shape {tuple(x_shape)}")
    if len(w_shape) != 4:
        raise InvalidInput("w", f"must be 4-D (K, C, R, S), got shape {tuple(w_shape)}")
    n, c, h, w = (int(v) for v in x_shape)
    k, c_w, r, s = (int(v) for v in w_shape)
    if c_w != c:
        raise InvalidInput("w", f"w.shape[1]={c_w} must equal the input channels C={c} (groups=1)")
    sh, sw = as_pair("stride", stride)
    ph, pw = as_pair("padding", padding)
    dh, dw = as_pair("dilation", dilation)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                       dil_h=dh, dil_w=dw, dtype=dtype, math=check_math(math) if dtype == "float32" else "ieee")


def _specs(problem: ConvProblem, algorithm: str) -> list[KernelSpec]:
    if algorithm not in ALGORITHMS:
        raise InvalidInput("algorithm", f"{algorithm!r}: allowed {', '.join(ALGORITHMS)}")
    specs = [s for s in specs_for(problem) if algorithm == "auto" or s.algorithm == algorithm]
    if not specs:
        raise InvalidInput("algorithm", f"{algorithm} cannot run {problem.key()} (Winograd needs 3×3, 5×5 or 7×7 "
                                        "filters, stride 1, dilation 1; igemm needs math='tf32', or 16-bit tensors "
                                        "(C a multiple of 8, or any C on compute capability 9.0))")
    return specs


def model_choice(problem: ConvProblem, machine: MachineModel, algorithm: str = "auto") -> KernelConfig:
    """The configuration the analytic models predict fastest among ``algorithm``'s families (cached in the process
    per set of enabled experimental families, and across processes by :mod:`convtune.ops.choice_cache`: the search
    costs up to seconds on some shapes)."""
    return _model_choice(problem, machine, algorithm, experimental.names())


def forget_model_choices() -> None:
    """Drop the in-process cache of :func:`model_choice` (a new process starts without it)."""
    _model_choice.cache_clear()


@cache
def _model_choice(problem: ConvProblem, machine: MachineModel, algorithm: str,
                  experimental_names: frozenset[str]) -> KernelConfig:
    specs = _specs(problem, algorithm)
    stored = choice_cache.lookup(problem, machine, specs)
    if stored is not None:
        with contextlib.suppress(InvalidConfig):
            return parse_config_key(stored)
    best = model_fastest(problem, machine, specs)
    if best is None:
        raise InvalidConfig("problem", f"no valid {algorithm} configuration for {problem.key()}")
    choice_cache.store(problem, machine, specs, best[1].key())
    return best[1]


def resolve_config(problem: ConvProblem, machine: MachineModel, config: Any = None,
                   algorithm: str = "auto") -> KernelConfig:
    """The config ``conv2d`` runs: ``config`` (a config or its key) when given, else :mod:`convtune.ops.resolver`'s
    (the database's best GPU-measured config of ``algorithm``'s families, else the model's choice).

    Raises:
        InvalidInput: an unknown or inapplicable ``algorithm``.
        InvalidConfig: ``config`` is not a kernel configuration.
    """
    specs = _specs(problem, algorithm)  # validates ``algorithm`` even when a config is given
    if config is None:
        found = resolver.resolve(problem, machine, [s.family for s in specs],
                                 lambda: model_choice(problem, machine, algorithm))
        return found.config
    if isinstance(config, str):
        config = parse_config_key(config)
    if not isinstance(config, KernelConfig):
        raise InvalidConfig("config", f"{config!r} is not a kernel configuration")
    return config


def _prepare_call(x: Any, w: Any, stride: Any, padding: Any, dilation: Any, config: Any, algorithm: str,
                  cache_filters: bool, math: Any = "ieee") -> Runner:
    """The slow path: validate, resolve, prepare; returns the signature's runner."""
    for hook in _miss_hooks:
        hook("prepare_call")
    math = check_math(math)
    kind, device = _validate(x, w)
    dtype = TORCH_DTYPES[str(x.dtype)] if kind == "torch" else "float32"
    problem = problem_for(tuple(x.shape), tuple(w.shape), stride, padding, dilation, math, dtype)
    machine = device_machine(device)
    cfg = resolve_config(problem, machine, config, algorithm)
    spec = get_spec(cfg.family, cfg.direction)
    if spec.direction != "fwd" or not spec.supports(problem) or spec.algorithm not in ALGORITHMS[1:]:
        raise InvalidConfig("config", f"{cfg.key()} is not a dense forward configuration for {problem.key()}")
    prepared = prepare_plan(spec.plan(problem, cfg, machine), device)
    _array_kinds[type(x)] = _array_kinds[type(w)] = kind
    if kind == "torch":
        import torch

        return torch_runner(prepared, torch)
    return _cupy_runner(prepared, cache_filters)


def _signature(x: Any, w: Any, *rest: Any) -> tuple[Any, ...]:
    """The raw call signature (KeyError for an array type not seen valid yet, AttributeError for non-arrays)."""
    if _array_kinds[type(x)] == "torch":
        return (type(x), x.shape, x.stride(), x.dtype, x.get_device(), type(w), w.shape, w.stride(), w.dtype,
                w.get_device(), *rest)
    return (type(x), x.shape, x.strides, x.dtype, x.device.id, type(w), w.shape, w.strides, w.dtype, w.device.id,
            *rest)


def runner(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, math: str = "ieee") -> Runner:
    """The cached ``run(x, w) -> y`` of this call signature and precision class (``math``) with the resolver's
    config (prepared on the first call): what :func:`conv2d` calls, for callers that keep it per signature
    (``convtune.ops.torch.conv2d``).
    ``run`` takes tensors of exactly this signature; :func:`clear_caches` (and the resolver's clear) invalidate
    it, so keepers register with :func:`on_clear`.

    Raises:
        InvalidInput, InvalidProblem, InvalidConfig: as :func:`conv2d`.
    """
    try:
        key = _signature(x, w, stride, padding, dilation, None, "auto", False, math)
        return _calls[key]
    except KeyError:
        run = _prepare_call(x, w, stride, padding, dilation, None, "auto", False, math)
        if len(_calls) >= CALL_CACHE_ENTRIES:
            _calls.clear()
        _calls[_signature(x, w, stride, padding, dilation, None, "auto", False, math)] = run
        return run


def conv2d(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           config: KernelConfig | str | None = None, algorithm: str = "auto", cache_filters: bool = False,
           math: str | None = None) -> Any:
    """2-D convolution forward, fp32 NCHW, groups = 1, on the GPU, on the caller's current stream.

    Args:
        x: input (N, C, H, W), float32, C-contiguous; ``cupy.ndarray`` or torch CUDA tensor.
        w: filters (K, C, R, S), float32, same kind and device as ``x``.
        stride, padding, dilation: int or (h, w) pair.
        config: a configuration of any registered dense family (or its key string); None for the resolver's
            (the tuning database's best GPU-measured config, else the models' fastest).
        algorithm: "auto" (every family that can run the problem), "direct", "winograd" (fused kernel
            and unfused path for 3×3, unfused for 5×5 and 7×7; stride 1, dilation 1) or "igemm" (tensor cores;
            ``math="tf32"`` only). Ignored when ``config`` is given.
        cache_filters: also cache prepared filters of a CuPy ``w`` (the caller promises not to modify it in
            place; torch weights are always cached, keyed by their version counter).
        math: the precision class: None or ``"ieee"`` (strict fp32, the default of this function) or ``"tf32"``
            (TF32 tensor cores allowed: the resolver serves the fastest config measured for the tf32 problem or
            its strict twin, and the families that run tf32 are searched; a strict config is valid for tf32).
            ``convtune.ops.torch.conv2d`` picks it from PyTorch's flags instead.

    Returns:
        y (N, K, P, Q), the same type as ``x`` (torch: from the caching allocator; CuPy: from CuPy's pool).

    Raises:
        InvalidInput: wrong type, dtype, device, rank, layout, channel count, algorithm or math (names the
            argument).
        InvalidProblem: the shapes/stride/padding make an invalid convolution (names the field).
        InvalidConfig: ``config`` is not valid for this problem or device.

    Example:
        >>> y = convtune.conv2d(x, w, stride=1, padding=1, algorithm="winograd")   # doctest: +SKIP
    """
    if math is None:
        math = "ieee"
    try:
        key = _signature(x, w, stride, padding, dilation, config, algorithm, cache_filters, math)
        run = _calls[key]
    except KeyError:
        run = _prepare_call(x, w, stride, padding, dilation, config, algorithm, cache_filters, math)
        try:
            key = _signature(x, w, stride, padding, dilation, config, algorithm, cache_filters, math)
            if len(_calls) >= CALL_CACHE_ENTRIES:
                _calls.clear()
            _calls[key] = run
        except TypeError:  # an unhashable argument (a list): valid, but not cached
            pass
    except (TypeError, AttributeError):  # unhashable arguments or not arrays at all: the slow path decides
        run = _prepare_call(x, w, stride, padding, dilation, config, algorithm, cache_filters, math)
    return run(x, w)


_clear_listeners: list[Callable[[], None]] = []


def on_clear(listener: Callable[[], None]) -> None:
    """Call ``listener()`` whenever :func:`clear_caches` runs (callers keeping :func:`runner` results)."""
    _clear_listeners.append(listener)


def clear_caches() -> None:
    """Forget every prepared call, prepared filter tensor and kept workspace (the resolver calls this when it
    clears)."""
    _calls.clear()
    clear_filter_cache()
    _torch_workspaces.clear()
    for listener in _clear_listeners:
        listener()


def clear_filter_cache() -> None:
    """Drop every cached prepared filter tensor."""
    _torch_filters.clear()
    _cupy_filters.clear()


def filter_cache_size() -> int:
    """Prepared filter tensors held (torch and CuPy)."""
    return len(_torch_filters) + len(_cupy_filters)


resolver.on_clear(clear_caches)


# ---- runners: the hot path ---------------------------------------------------------------------------------------
@cache
def torch_stream_getter(torch: Any) -> Callable[[int], int]:
    """device index -> the raw handle of torch's current stream there (what inductor's generated code uses)."""
    raw = getattr(torch._C, "_cuda_getCurrentRawStream", None)
    if raw is not None:
        return raw
    return lambda index: torch.cuda.current_stream(index).cuda_stream


def torch_filters(torch: Any, layout: Any, device: Any, stream_capturing: Callable[[], bool]) -> Callable[..., Any]:
    """``filters(w, stream) -> tensor`` of a filter layout with a prep launch (module docstring's cache rules);
    the tensor returned must stay referenced until the launch that reads it is enqueued."""
    lkey, words, f32, empty = layout.key, layout.words, torch.float32, torch.empty

    def make(w: Any, stream: int) -> Any:
        out = empty(words, dtype=f32, device=device)
        src = w if w.is_contiguous() else w.contiguous()
        layout.prep((src.data_ptr(), out.data_ptr()), stream)
        return out

    def filters(w: Any, stream: int) -> Any:
        key = (id(w), lkey)
        hit = _torch_filters.get(key)
        try:
            version = w._version
        except RuntimeError:  # an inference tensor has no version counter (and cannot change outside one)
            version = -1
        if hit is not None and hit[0]() is w and hit[1] == version and hit[2] == w.data_ptr():
            if not w.requires_grad or not stream_capturing():
                return hit[3]
            return make(w, stream)  # trainable weights inside a capture: made in the graph, every replay
        if stream_capturing():  # made by the graph at replay time: nothing to cache now
            return make(w, stream)
        out = make(w, stream)

        def drop(ref: Any, key: tuple[int, tuple[Any, ...]] = key) -> None:
            entry = _torch_filters.get(key)
            if entry is not None and entry[0] is ref:
                del _torch_filters[key]

        _torch_filters[key] = [weakref.ref(w, drop), version, w.data_ptr(), out]
        return out

    return filters


def torch_workspace(torch: Any, index: int, device: Any, nbytes: int) -> Callable[[int], Any]:
    """``workspace(stream) -> uint8 tensor`` of at least ``nbytes`` for a call on ``stream`` of device ``index``: the
    one kept for (device, stream, thread), grown when too small; a fresh one inside a CUDA graph capture (module
    docstring)."""
    empty, u8, capturing, ident = torch.empty, torch.uint8, torch.cuda.is_current_stream_capturing, get_ident

    def workspace(stream: int) -> Any:
        if capturing():
            return empty(nbytes, dtype=u8, device=device)
        key = (index, stream, ident())
        ws = _torch_workspaces.get(key)
        if ws is None or ws.numel() < nbytes:
            if ws is None and len(_torch_workspaces) >= WORKSPACE_CACHE_ENTRIES:
                _torch_workspaces.clear()      # threads come and go: forget them all (torch keeps the blocks)
            ws = _torch_workspaces[key] = empty(nbytes, dtype=u8, device=device)
        return ws

    return workspace


def torch_runner(prepared: PreparedLaunch, torch: Any, device: Any = None) -> Runner:
    """``run(x, w) -> y`` for contiguous CUDA tensors of the prepared signature (y in their dtype, on ``device``,
    default the prepared launch's GPU; tests allocate on the CPU)."""
    device = device if device is not None else torch.device("cuda", prepared.device)
    index = prepared.device
    out_shape, ws_bytes = prepared.output_shape, prepared.workspace_bytes
    f32, empty, empty_like = getattr(torch, prepared.plan.problem.dtype), torch.empty, torch.empty_like  # y: x's dtype
    p = prepared.plan.problem
    # y of x's shape (K = C, "same" padding, stride 1: most 3×3 layers): empty_like(x), the cheapest allocation call
    like_x = tuple(out_shape) == (p.N, p.C, p.H, p.W)
    stream_of = torch_stream_getter(torch)
    capturing = torch.cuda.is_current_stream_capturing
    layout = prepared.filters
    filters = torch_filters(torch, layout, device, capturing) if layout is not None and layout.prep else None
    workspace = torch_workspace(torch, index, device, ws_bytes)
    launch = prepared

    def run(x: Any, w: Any) -> Any:
        stream = stream_of(index)
        px = x.data_ptr()    # read once: a call's host time is the product
        if px & _ALIGN_MASK:
            x = x.clone()    # referenced until the launch is enqueued
            px = x.data_ptr()
        f = filters(w, stream) if filters is not None else (w if not w.data_ptr() & _ALIGN_MASK else w.clone())
        # else unpacked sizes: cheaper argument parsing than a tuple
        y = empty_like(x) if like_x else empty(*out_shape, dtype=f32, device=device)
        if ws_bytes:
            ws = workspace(stream)
            launch((px, f.data_ptr(), y.data_ptr(), ws.data_ptr()), stream)
        else:
            launch((px, f.data_ptr(), y.data_ptr()), stream)
        return y

    return run


def _cupy_runner(prepared: PreparedLaunch, cache_filters: bool) -> Runner:
    """``run(x, w) -> y`` for C-contiguous float32 CuPy arrays of the prepared signature."""
    cp = cupy_module()
    out_shape, ws_bytes, device = prepared.output_shape, prepared.workspace_bytes, prepared.device
    layout = prepared.filters
    launch = prepared

    def filters(w: Any, stream: int) -> Any:
        if layout is None or layout.prep is None:
            return w if not w.data.ptr & _ALIGN_MASK else w.copy()
        key = (layout.key, w.data.ptr, w.shape, device) if cache_filters else None
        hit = _cupy_filters.get(key) if key is not None else None
        if hit is not None:
            return hit
        out = cp.empty(layout.words, dtype=cp.float32)
        layout.prep((w.data.ptr, out.data.ptr), stream)
        if key is not None:
            while len(_cupy_filters) >= CUPY_FILTER_CACHE_ENTRIES:
                _cupy_filters.pop(next(iter(_cupy_filters)))
            _cupy_filters[key] = out
        return out

    def run(x: Any, w: Any) -> Any:
        with cp.cuda.Device(device):
            stream = cp.cuda.get_current_stream().ptr
            if x.data.ptr & _ALIGN_MASK:
                x = x.copy()
            f = filters(w, stream)
            y = cp.empty(out_shape, dtype=cp.float32)
            if ws_bytes:
                ws = cp.empty(ws_bytes, dtype=cp.uint8)
                launch((x.data.ptr, f.data.ptr, y.data.ptr, ws.data.ptr), stream)
            else:
                launch((x.data.ptr, f.data.ptr, y.data.ptr), stream)
            return y

    return run
