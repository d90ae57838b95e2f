"""PyTorch dense convolution on convtune's kernels: ``conv2d(x, w, bias, stride, padding, dilation)``.

``convtune::conv2d`` is a ``torch.library`` operator with a fake implementation (so it traces under
``torch.compile(fullgraph=True)``) and autograd; in plain eager mode :func:`conv2d` reaches the
implementation without the dispatcher (:mod:`convtune.ops.torch._dispatch`).

* CUDA float32 tensors run convtune's kernels through :func:`convtune.ops.conv2d.conv2d`'s prepared launches: on
  the caller's current stream, outputs and workspaces from torch's caching allocator, no host synchronisation,
  capturable in a CUDA graph. The config is the resolver's (:mod:`convtune.ops.resolver`: the tuning database's
  best GPU-measured config of the problem on this device, else the models' choice), fixed per call signature and
  precision class. The bias is added to the output in place (one more launch).
* The precision class follows PyTorch's own rule for convolutions, read at every call (:func:`math_of`, ≈0.1 µs):
  float32 tensors while cuDNN convolutions may use TF32 (``torch.backends.cudnn.allow_tf32``, PyTorch's default
  True; on torch ≥ 2.9 the ``torch.backends.cudnn.conv.fp32_precision`` it sets) are the ``tf32`` class (the
  fastest config measured for the tf32 problem or its strict twin; tensor-core families searched), otherwise
  ``ieee`` (strict fp32: never a tf32 config). Inside a compiled graph the flag is read when the op runs, as
  cuDNN does. 16-bit tensors are their own class (their dtype).
* bfloat16 / float16 CUDA tensors with C a multiple of 8 (any C on compute capability 9.0, where the wgmma families
  pad the channels) run the 16-bit tensor-core families (``igemm_half``, ``igemm_wgmma_half``; y in
  their dtype); inside ``torch.autocast("cuda")`` float32 inputs are cast to the autocast dtype first, as PyTorch
  casts ``F.conv2d``'s (a frozen weight's cast is kept per weight and version, so its prepared filters are too).
* CPU tensors, float64 and 16-bit tensors the family does not take run ``F.conv2d``: that is what
  ``torch.autograd.gradcheck`` exercises on the CPU.
* Backward: PyTorch's convolution gradients (``aten.convolution_backward``, cuDNN on CUDA — TF32 there when
  ``torch.backends.cudnn.allow_tf32`` is on, PyTorch's default), each gradient only when needed, until
  convtune has dense backward kernels.

Filters prepared for the kernels (packed for direct, U = G g Gᵀ for Winograd) are cached per weight tensor and
version (:mod:`convtune.ops.conv2d`); inside a CUDA graph capture, weights that require grad have them made
in the graph on every replay, frozen weights (``requires_grad=False``) replay the ones cached before the
capture: freeze a model's weights before capturing it for inference (``model.requires_grad_(False)``).

Example:
    >>> import convtune.ops.torch as ct                                     # doctest: +SKIP
    >>> y = ct.conv2d(x, w, bias, stride=1, padding=1)   # == F.conv2d(x, w, bias, 1, 1)  # doctest: +SKIP
"""

import functools
import weakref
from typing import Any

import torch
import torch.nn.functional as F

from convtune.errors import InvalidInput
from convtune.kernels.igemm_wgmma.launcher import COMPUTE_CAPABILITY as WGMMA_COMPUTE_CAPABILITY
from convtune.ops.conv2d import CALL_CACHE_ENTRIES, on_clear
from convtune.ops.conv2d import runner as kernel_runner
from convtune.ops.torch._dispatch import eager_apply, library_op, needs_grad, plain_eager

__all__ = ["conv2d", "conv2d_geometry", "cudnn_conv_tf32", "math_of"]


_HALF = (torch.bfloat16, torch.float16)


@functools.cache
def _hopper(device: int) -> bool:
    """Compute capability 9.0: the wgmma families (16-bit ones: any channel count) run there."""
    return torch.cuda.get_device_capability(device) == WGMMA_COMPUTE_CAPABILITY


def _kernels_run(x: torch.Tensor) -> bool:
    """CUDA float32; 16-bit with C a multiple of 8 (the mma.sync family's 16-byte copies), or any C on compute
    capability 9.0 (the wgmma family pads the channels)."""
    if not x.is_cuda:
        return False
    if x.dtype == torch.float32:
        return True
    return x.dtype in _HALF and (x.shape[1] % 8 == 0 or _hopper(x.device.index or 0))


#: autocast casts of weights that need no gradient, per weight tensor: (version, dtype) -> the cast, so the cast
#: tensor (and the filters prepared from it, cached per tensor and version) survive from call to call
_autocast_weights: dict[int, tuple[int, torch.dtype, torch.Tensor]] = {}


def _autocast_weight(w: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    if w.requires_grad and torch.is_grad_enabled():
        return w.to(dtype)          # differentiable: the gradient reaches the fp32 weight
    hit = _autocast_weights.get(id(w))
    if hit is not None and hit[0] == w._version and hit[1] == dtype:
        return hit[2]
    cast = w.to(dtype)
    if hit is None:
        weakref.finalize(w, _autocast_weights.pop, id(w), None)
    _autocast_weights[id(w)] = (w._version, dtype, cast)
    return cast


_AUTOCAST_FROM = (torch.float32, torch.bfloat16, torch.float16)


def autocast_inputs(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> tuple[Any, Any, Any]:
    """Inside ``torch.autocast("cuda")`` a convolution runs in the autocast dtype (PyTorch casts every floating
    input of F.conv2d to it: a 16-bit x from the layer before meets a float32 weight): CUDA inputs are cast the same
    way here, so the 16-bit kernels run; else unchanged."""
    if not (x.is_cuda and torch.is_autocast_enabled("cuda")):
        return x, w, bias
    dtype = torch.get_autocast_dtype("cuda")

    def cast(t: torch.Tensor) -> torch.Tensor:
        return t.to(dtype) if t.dtype in _AUTOCAST_FROM and t.dtype != dtype else t

    return cast(x), _autocast_weight(w, dtype) if w.dtype != dtype else w, None if bias is None else cast(bias)


_fp32_precision = getattr(torch._C, "_get_fp32_precision_getter", None)   # torch >= 2.9


def cudnn_conv_tf32() -> bool:
    """Whether PyTorch's cuDNN convolutions may use TF32 now: ``torch.backends.cudnn.conv.fp32_precision ==
    "tf32"`` where torch has it (``torch.backends.cudnn.allow_tf32`` sets it; a mix of the legacy and the new
    flags, which makes ``allow_tf32`` raise, reads the convolutions' own), else ``torch.backends.cudnn.allow_tf32``."""
    if _fp32_precision is not None:
        return bool(_fp32_precision("cuda", "conv") == "tf32")
    return bool(torch._C._get_cudnn_allow_tf32())


def math_of(x: torch.Tensor) -> str:
    """The ``math`` of a call on ``x``: ``"tf32"`` for float32 while :func:`cudnn_conv_tf32`, else ``"ieee"``
    (strict float32; 16-bit tensors are the class of their dtype, with ``math="ieee"``)."""
    return "tf32" if x.dtype == torch.float32 and cudnn_conv_tf32() else "ieee"


#: the op implementation's runners, per (shapes, dtypes, devices, geometry, precision class): the kernels' runner of
#: contiguous tensors (:func:`convtune.ops.conv2d.runner` checks the arguments once, when it is made), None where
#: F.conv2d runs (CPU, float64, 16-bit tensors the families do not take)
_impl_runners: dict[tuple[Any, ...], Any] = {}
_UNSEEN = object()
on_clear(_impl_runners.clear)


def _conv2d_impl(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride_h: int, stride_w: int,
                 pad_h: int, pad_w: int, dil_h: int, dil_w: int) -> torch.Tensor:
    """y (N, K, P, Q) of x (N, C, H, W) and w (K, C, R, S), contiguous, groups = 1 (the op's implementation)."""
    # the precision class when the op runs (not when it is traced), as cuDNN reads it
    math = math_of(x)
    # the key holds everything _kernels_run reads (device, dtype, C), so its answer is cached with the runner
    key = (x.shape, w.shape, x.dtype, w.dtype, x.get_device(), w.get_device(), stride_h, stride_w, pad_h, pad_w,
           dil_h, dil_w, math)
    run = _impl_runners.get(key, _UNSEEN)
    if run is _UNSEEN:
        if len(_impl_runners) >= CALL_CACHE_ENTRIES:
            _impl_runners.clear()
        run = _impl_runners[key] = None if not _kernels_run(x) else kernel_runner(
            x.contiguous(), w.contiguous(), (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w), math)
    if run is None:
        return F.conv2d(x, w, bias, (stride_h, stride_w), (pad_h, pad_w), (dil_h, dil_w))
    # compiled graphs may hand the op other strides than the contiguous ones the kernels index
    x = x if x.is_contiguous() else x.contiguous()
    w = w if w.is_contiguous() else w.contiguous()
    return _run_with_bias(run, x, w, bias)


def _out_size(n: int, k: int, stride: int, pad: int, dil: int) -> int:
    return (n + 2 * pad - dil * (k - 1) - 1) // stride + 1


def _conv2d_fake(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride_h: int, stride_w: int, pad_h: int,
      pad_w: int, dil_h: int, dil_w: int) -> torch.Tensor:
    N, _, H, W = x.shape
    K, _, R, S = w.shape
    return x.new_empty((N, K, _out_size(H, R, stride_h, pad_h, dil_h), _out_size(W, S, stride_w, pad_w, dil_w)))


def _setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w, bias, sh, sw, ph, pw, dh, dw = inputs
    ctx.save_for_backward(x, w)
    ctx.geometry = ([sh, sw], [ph, pw], [dh, dw])
    ctx.bias_sizes = [w.shape[0]] if bias is not None else None


def _backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    """PyTorch's convolution gradients, only those needed."""
    x, w = ctx.saved_tensors
    need_x, need_w, need_b = ctx.needs_input_grad[:3]
    stride, padding, dilation = ctx.geometry
    mask = [bool(need_x), bool(need_w), bool(need_b and ctx.bias_sizes is not None)]
    if not any(mask):
        return (None,) * 9
    dx, dw, db = torch.ops.aten.convolution_backward(dy, x, w, ctx.bias_sizes, stride, padding, dilation, False,
                                                     [0, 0], 1, mask)
    return (dx if mask[0] else None, dw if mask[1] else None, db if mask[2] else None) + (None,) * 6


_conv2d_op = library_op("conv2d", "(Tensor x, Tensor w, Tensor? bias, SymInt stride_h, SymInt stride_w, SymInt pad_h, "
                                   "SymInt pad_w, SymInt dil_h, SymInt dil_w) -> Tensor",
                        _conv2d_impl, _conv2d_fake, _backward, _setup)


class _Conv2dFunction(torch.autograd.Function):
    """Eager mode with gradients: the op's forward and backward without the dispatcher (the geometry as one
    tuple: ``Function.apply`` inspects every argument)."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None,
                geometry: tuple[int, ...], run: Any) -> torch.Tensor:
        _setup(ctx, (x, w, bias, *geometry), None)  # type: ignore[arg-type]
        if run is None:
            return _conv2d_impl(x, w, bias, *geometry)
        return _run_with_bias(run, x, w, bias)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return (*_backward(ctx, dy)[:3], None, None)


_conv2d_function = eager_apply(_Conv2dFunction)


def _run_with_bias(run: Any, x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None) -> torch.Tensor:
    """What :func:`_conv2d_impl` does on CUDA float32 with the signature's runner: no checks, no lookup."""
    y = run(x, w)
    if bias is not None:
        y.add_(bias.view(1, -1, 1, 1))
    return y


# ---- arguments ---------------------------------------------------------------------------------------------
def _pair(name: str, value: Any, minimum: int) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        pair = (value, value)
    elif isinstance(value, tuple | list) and len(value) == 2 and all(
            isinstance(v, int) and not isinstance(v, bool) for v in value):
        pair = (int(value[0]), int(value[1]))
    else:
        raise InvalidInput(name, f"{value!r} must be an int or a pair of ints")
    if min(pair) < minimum:
        raise InvalidInput(name, f"{value!r} must be >= {minimum}")
    return pair


def string_padding(padding: str, kernel_size: tuple[int, ...], stride: tuple[int, ...],
                   dilation: tuple[int, ...]) -> tuple[int, int] | None:
    """``'valid'`` → (0, 0); ``'same'`` → the symmetric padding that keeps the size (stride 1 and an odd
    dilated kernel extent; None when ``'same'`` would need asymmetric padding). Raises InvalidInput otherwise."""
    if padding == "valid":
        return (0, 0)
    if padding == "same":
        if stride != (1, 1):
            raise InvalidInput("padding", "'same' needs stride 1 (as in torch.nn.functional.conv2d)")
        total = [d * (k - 1) for k, d in zip(kernel_size, dilation, strict=True)]
        if any(t % 2 for t in total):
            return None
        return (total[0] // 2, total[1] // 2)
    raise InvalidInput("padding", f"{padding!r}: an int, a pair of ints, 'valid' or 'same'")


def conv2d_geometry(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride: Any, padding: Any,
                    dilation: Any) -> tuple[int, ...]:
    """(sh, sw, ph, pw, dh, dw) of valid ``conv2d`` arguments.

    Raises:
        InvalidInput: naming the argument (ranks, channels, bias shape, devices, dtypes, strides, padding,
            dilation, an empty output, a ``'same'`` padding that would be asymmetric).
    """
    if x.dim() != 4:
        raise InvalidInput("x", f"must be 4-D (N, C, H, W), got shape {tuple(x.shape)}")
    if w.dim() != 4 or w.shape[1] != x.shape[1]:
        raise InvalidInput("w", f"must be (K, C, R, S) with C={x.shape[1]} (groups=1), got shape {tuple(w.shape)}")
    if w.device != x.device or w.dtype != x.dtype:
        raise InvalidInput("w", f"must match x's device and dtype ({x.device}, {x.dtype}), got {w.device}, {w.dtype}")
    if bias is not None and (bias.shape != (w.shape[0],) or bias.device != x.device or bias.dtype != x.dtype):
        raise InvalidInput("bias", f"must be ({w.shape[0]},) on {x.device} in {x.dtype}, got {tuple(bias.shape)} on "
                                   f"{bias.device} in {bias.dtype}")
    sh, sw = _pair("stride", stride, 1)
    dh, dw = _pair("dilation", dilation, 1)
    if isinstance(padding, str):
        pad = string_padding(padding, (w.shape[2], w.shape[3]), (sh, sw), (dh, dw))
        if pad is None:
            raise InvalidInput("padding", "'same' with an even dilated kernel extent needs asymmetric padding")
        ph, pw = pad
    else:
        ph, pw = _pair("padding", padding, 0)
    if _out_size(x.shape[2], w.shape[2], sh, ph, dh) < 1 or _out_size(x.shape[3], w.shape[3], sw, pw, dw) < 1:
        raise InvalidInput("x", f"output is empty: input {tuple(x.shape[2:])}, filter {tuple(w.shape[2:])}, "
                                f"padding {(ph, pw)}, dilation {(dh, dw)}")
    return sh, sw, ph, pw, dh, dw


#: per call signature and precision class: the checked geometry and, for CUDA float32, the kernels' runner of the
#: contiguous tensors
_entries: dict[tuple[Any, ...], tuple[tuple[int, ...], Any]] = {}
on_clear(_entries.clear)  # a runner holds a resolved config and prepared launch: forget both together


def _entry(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None, stride: Any, padding: Any,
           dilation: Any, math: str) -> tuple[tuple[int, ...], Any]:
    """(geometry, runner or None) of a new signature: the argument checks, then the kernels' runner."""
    geometry = conv2d_geometry(x, w, bias, stride, padding, dilation)
    run = None
    if _kernels_run(x):
        sh, sw, ph, pw, dh, dw = geometry
        run = kernel_runner(x.contiguous(), w.contiguous(), (sh, sw), (ph, pw), (dh, dw), math)
    return geometry, run


def conv2d(x: torch.Tensor, w: torch.Tensor, bias: torch.Tensor | None = None, stride: Any = 1, padding: Any = 0,
           dilation: Any = 1) -> torch.Tensor:
    """2-D convolution, groups = 1, PyTorch's convention (``F.conv2d(x, w, bias, stride, padding, dilation)``).

    Args:
        x: (N, C, H, W); a non-contiguous tensor (e.g. channels-last) is made contiguous first.
        w: (K, C, R, S), same device and dtype as x.
        bias: (K,) or None.
        stride, dilation: int or (h, w) pair, ≥ 1; padding: int or pair ≥ 0, ``'valid'`` or ``'same'``.

    Returns:
        y (N, K, P, Q) in x's dtype, with autograd (PyTorch's gradients). The precision class is PyTorch's for
        convolutions at this call (:func:`math_of`): float32 with TF32 allowed (the default) is ``tf32``.

    Raises:
        InvalidInput: naming the bad argument.
        InvalidConfig: a stored or model configuration that the problem's kernels refuse (a bug to report).
    """
    x, w, bias = autocast_inputs(x, w, bias)
    if torch.compiler.is_compiling():
        return _conv2d_op(x.contiguous(), w.contiguous(), bias, *conv2d_geometry(x, w, bias, stride, padding,
                                                                                   dilation))
    math = math_of(x)
    try:
        # everything the checks and the runner depend on (the runner is for contiguous x and w of these shapes)
        key = (x.shape, w.shape, None if bias is None else (bias.shape, bias.dtype, bias.get_device()), x.dtype,
               w.dtype, x.get_device(), w.get_device(), stride, padding, dilation, math)
        entry = _entries.get(key)
        if entry is None:  # the argument checks and the preparation once per signature
            entry = _entries[key] = _entry(x, w, bias, stride, padding, dilation, math)
    except TypeError:  # an unhashable argument (a list)
        entry = _entry(x, w, bias, stride, padding, dilation, math)
    geometry, run = entry
    x = x if x.is_contiguous() else x.contiguous()
    w = w if w.is_contiguous() else w.contiguous()
    if not plain_eager(x, w, bias):   # not compiling: checked above
        return _conv2d_op(x, w, bias, *geometry)
    if needs_grad(x, w, bias):
        return _conv2d_function(x, w, bias, geometry, run)
    if run is None:
        return _conv2d_impl(x, w, bias, *geometry)
    return _run_with_bias(run, x, w, bias)
