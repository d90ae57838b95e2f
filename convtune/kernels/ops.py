"""Operator API: ``conv2d(x, w, ..., algorithm="auto"|"direct"|"winograd")`` on CuPy arrays or torch CUDA tensors.

Validates inputs, builds the :class:`~convtune.problem.ConvProblem`, picks a configuration (given, or
the model's fastest for this device among the families of the requested algorithm), prepares the
filters (packed for direct, U = G g Gᵀ for Winograd), allocates the output and launches on the
caller's current stream. Torch tensors are shared with CuPy through DLPack (no copies) and the result
comes back as a torch tensor on the same device.

Prepared filters of torch weights are cached per (tensor storage, shape, in-place version counter,
plan's filter layout), so a Winograd filter transform runs once per weight tensor and again only after
the tensor is modified in place; CuPy arrays have no version counter, so their filters are prepared on
every call unless ``cache_filters=True`` promises that the array is not modified in place.
"""

from __future__ import annotations

from collections import OrderedDict
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig, InvalidInput
from convtune.kernels.compile import cupy_module
from convtune.kernels.config import KernelConfig, parse_config_key
from convtune.kernels.registry import KernelSpec, get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

ALGORITHMS = ("auto", "direct", "winograd")
FILTER_CACHE_ENTRIES = 64
_filter_cache: OrderedDict[tuple[Any, ...], Any] = OrderedDict()


def _pair(name: str, value: int | tuple[int, int] | list[int]) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, tuple | list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    raise InvalidInput(name, f"{value!r} must be an int or a pair of ints")


def _is_torch(t: Any) -> bool:
    return type(t).__module__.startswith("torch")


@cache
def device_machine(device_id: int) -> MachineModel:
    """The MachineModel of a CUDA device (queried once)."""
    return MachineModel.from_device(device_id)


def _as_cupy(name: str, t: Any) -> Any:
    """Validate one tensor (CUDA, float32, 4-D, C-contiguous) and return a CuPy view of it."""
    cp = cupy_module()
    if _is_torch(t):
        if not t.is_cuda:
            raise InvalidInput(name, f"must be a CUDA tensor, got device {t.device}")
        if str(t.dtype) != "torch.float32":
            raise InvalidInput(name, f"dtype must be float32, got {t.dtype}")
        if t.dim() != 4:
            raise InvalidInput(name, f"must be 4-D (NCHW / KCRS), got shape {tuple(t.shape)}")
        if not t.is_contiguous():
            raise InvalidInput(name, "must be contiguous NCHW (call .contiguous())")
        return cp.from_dlpack(t)
    if not isinstance(t, cp.ndarray):
        raise InvalidInput(name, f"must be a cupy.ndarray or a torch CUDA tensor, got {type(t).__name__}")
    if t.dtype != cp.float32:
        raise InvalidInput(name, f"dtype must be float32, got {t.dtype}")
    if t.ndim != 4:
        raise InvalidInput(name, f"must be 4-D (NCHW / KCRS), got shape {t.shape}")
    if not t.flags.c_contiguous:
        raise InvalidInput(name, "must be C-contiguous NCHW (use cupy.ascontiguousarray)")
    return t


def problem_for(x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: Any = 1, padding: Any = 0,
                dilation: Any = 1) -> ConvProblem:
    """The ConvProblem of ``conv2d`` on tensors of these shapes (groups = 1)."""
    if len(x_shape) != 4:
        raise InvalidInput("x", f"must be 4-D NCHW, got shape {tuple(x_shape)}")
    if len(w_shape) != 4:
        raise InvalidInput("w", f"must be 4-D (K, C, R, S), got shape {tuple(w_shape)}")
    n, c, h, w = (int(v) for v in x_shape)
    k, c_w, r, s = (int(v) for v in w_shape)
    if c_w != c:
        raise InvalidInput("w", f"w.shape[1]={c_w} must equal the input channels C={c} (groups=1)")
    sh, sw = _pair("stride", stride)
    ph, pw = _pair("padding", padding)
    dh, dw = _pair("dilation", dilation)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                       dil_h=dh, dil_w=dw)


def _specs(problem: ConvProblem, algorithm: str) -> list[KernelSpec]:
    if algorithm not in ALGORITHMS:
        raise InvalidInput("algorithm", f"{algorithm!r}: allowed {', '.join(ALGORITHMS)}")
    specs = [s for s in specs_for(problem) if algorithm == "auto" or s.algorithm == algorithm]
    if not specs:
        raise InvalidInput("algorithm", f"{algorithm} cannot run {problem.key()} (Winograd needs 3×3 filters, "
                                        "stride 1, dilation 1)")
    return specs


@cache
def model_choice(problem: ConvProblem, machine: MachineModel, algorithm: str = "auto") -> KernelConfig:
    """The configuration the analytic models predict fastest among ``algorithm``'s families (cached)."""
    best = model_fastest(problem, machine, _specs(problem, algorithm))
    if best is None:
        raise InvalidConfig("problem", f"no valid {algorithm} configuration for {problem.key()}")
    return best[1]


def _filters(spec: KernelSpec, plan: Any, w: Any, torch_w: Any | None, cache_filters: bool) -> Any:
    launcher = spec.launcher
    if torch_w is None and not cache_filters:
        return launcher.prepare_filters(plan, w)
    version = torch_w._version if torch_w is not None else None
    key = (launcher.filters_key(plan), w.device.id, w.data.ptr, w.shape, version)
    hit = _filter_cache.get(key)
    if hit is None:
        hit = launcher.prepare_filters(plan, w)
        _filter_cache[key] = hit
        while len(_filter_cache) > FILTER_CACHE_ENTRIES:
            _filter_cache.popitem(last=False)
    else:
        _filter_cache.move_to_end(key)
    return hit


def clear_filter_cache() -> None:
    """Drop every cached prepared filter tensor."""
    _filter_cache.clear()


def conv2d(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1,
           config: KernelConfig | str | None = None, algorithm: str = "auto", cache_filters: bool = False) -> Any:
    """2-D convolution forward, fp32 NCHW, groups = 1, on the GPU.

    Args:
        x: input (N, C, H, W), float32, C-contiguous; ``cupy.ndarray`` or torch CUDA tensor.
        w: filters (K, C, R, S), float32, same kind and device as ``x``.
        stride, padding, dilation: int or (h, w) pair.
        config: a configuration of any registered family (or its key string); None for the models' fastest.
        algorithm: "auto" (every family that can run the problem), "direct", or "winograd" (fused kernel
            and unfused path; 3×3, stride 1, dilation 1). Ignored when ``config`` is given.
        cache_filters: also cache prepared filters of a CuPy ``w`` (the caller promises not to modify it in
            place; torch weights are always cached, keyed by their version counter).

    Returns:
        y (N, K, P, Q), the same type as ``x``.

    Raises:
        InvalidInput: wrong type, dtype, device, rank, layout, channel count or algorithm (names the argument).
        InvalidProblem: the shapes/stride/padding make an invalid convolution (names the field).
        InvalidConfig: ``config`` is not valid for this problem or device.

    Example:
        >>> y = convtune.conv2d(x, w, stride=1, padding=1, algorithm="winograd")   # doctest: +SKIP
    """
    cp = cupy_module()
    torch_in = _is_torch(x)
    if torch_in != _is_torch(w):
        raise InvalidInput("w", "x and w must both be torch tensors or both be CuPy arrays")
    xc, wc = _as_cupy("x", x), _as_cupy("w", w)
    if xc.device.id != wc.device.id:
        raise InvalidInput("w", f"is on device {wc.device.id} but x is on device {xc.device.id}")
    problem = problem_for(xc.shape, wc.shape, stride, padding, dilation)
    _specs(problem, algorithm)  # validates ``algorithm`` even when a config is given
    with cp.cuda.Device(xc.device.id):
        machine = device_machine(xc.device.id)
        if config is None:
            config = model_choice(problem, machine, algorithm)
        elif isinstance(config, str):
            config = parse_config_key(config)
        if not isinstance(config, KernelConfig):
            raise InvalidConfig("config", f"{config!r} is not a kernel configuration")
        spec = get_spec(config.family, config.direction)
        plan = spec.plan(problem, config, machine)
        stream = _stream_for(x) if torch_in else cp.cuda.get_current_stream()
        with stream:
            kernel = spec.launcher.compile_plan(plan)
            filters = _filters(spec, plan, wc, w if torch_in else None, cache_filters)
            y = cp.empty((problem.N, problem.K, problem.P, problem.Q), dtype=cp.float32)
            spec.launcher.launch(plan, kernel, xc, filters, y, stream)
    if torch_in:
        import torch

        return torch.from_dlpack(y)
    return y


def _stream_for(t: Any) -> Any:
    """The CuPy view of torch's current stream on ``t``'s device."""
    import torch

    cp = cupy_module()
    current = torch.cuda.current_stream(t.device)
    if hasattr(cp.cuda.Stream, "from_external"):  # CuPy >= 14: the CUDA stream protocol
        return cp.cuda.Stream.from_external(current)
    return cp.cuda.ExternalStream(current.cuda_stream, t.device.index)
