"""The convolution epilogue on PyTorch tensors: ``bias_act(y, bias, residual, activation)`` =
``act(y + bias[k] (+ residual))`` in one pass (:mod:`convtune.kernels.epilogue`).

What :func:`convtune.ops.torch.fuse` runs after each convolution once BatchNorm is folded into the filters: one
read and one write of the map (plus the residual's read) where PyTorch's BatchNorm, add and ReLU each read and
write it, and one launch where they take two to four.

* CUDA float32 / bfloat16 / float16, y contiguous (N, K, H, W), a residual of y's shape and dtype: the kernel on the
  caller's current stream, sums in fp32, rounded once to y's dtype (capturable in a CUDA graph, no host sync);
  ``inplace=True`` writes y itself (eager, no gradient needed: the fused modules pass their own fresh output).
* Anything else (CPU, float64, other layouts): the same formula with PyTorch's ops (what gradcheck exercises).
* ``convtune::bias_act`` is a ``torch.library`` operator (fake implementation, autograd: the activation's mask,
  the bias's sum over (N, H, W)); eager calls without a mode or gradient skip the dispatcher
  (:mod:`convtune.ops.torch._dispatch`).
"""

from __future__ import annotations

from typing import Any

import torch
import torch.nn.functional as F

from convtune.errors import InvalidInput
from convtune.kernels.epilogue import launcher as _kernel
from convtune.ops.conv2d import CALL_CACHE_ENTRIES, on_clear, torch_stream_getter
from convtune.ops.torch._dispatch import library_op, needs_grad, plain_eager

__all__ = ["ACTIVATIONS", "apply_bias_act", "bias_act"]

#: activation names, in the kernel's code order: identity, max(v, 0), min(max(v, 0), 6), v·σ(v),
#: v·relu6(v + 3)/6, relu6(v + 3)/6, σ(v)
ACTIVATIONS: tuple[str, ...] = tuple(_kernel.ACTIVATIONS)
_DTYPES = {torch.float32: "float32", torch.bfloat16: "bfloat16", torch.float16: "float16"}


#: the activations as PyTorch computes them, by kernel code
_ACT_FUNCTIONS = (lambda z: z, torch.relu, lambda z: F.hardtanh(z, 0.0, 6.0), F.silu, F.hardswish, F.hardsigmoid,
                  torch.sigmoid)


def _torch_bias_act(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None, activation: int) -> Any:
    """The formula with PyTorch's ops, in the promoted dtype of y and bias, rounded once to y's dtype."""
    z = y + bias.view(1, -1, 1, 1)
    if residual is not None:
        z = z + residual
    return _ACT_FUNCTIONS[activation](z).to(y.dtype)


def _kernels_take(y: torch.Tensor, residual: torch.Tensor | None) -> bool:
    return (y.is_cuda and y.dtype in _DTYPES and y.dim() == 4 and y.is_contiguous() and 0 < y.numel()
            <= _kernel.MAX_ELEMENTS and (residual is None or (residual.dtype == y.dtype and residual.is_contiguous()
                                                                and residual.device == y.device)))


#: per (shape, dtype, device, activation, residual?, vector width): the prepared launch
_prepared: dict[tuple[Any, ...], Any] = {}
on_clear(_prepared.clear)


def _prepared_for(shape: tuple[int, ...], dtype: str, device: int, activation: int, residual: bool,
                  vector: int) -> Any:
    """The prepared launch of one (shape, storage dtype, device, activation code, residual?, vector width), made
    once and kept in :data:`_prepared`."""
    key = (shape, dtype, device, activation, residual, vector)
    prepared = _prepared.get(key)
    if prepared is None:
        if len(_prepared) >= CALL_CACHE_ENTRIES:
            _prepared.clear()
        N, K, H, W = shape
        plan = _kernel.make_plan(dtype, N, K, H * W, ACTIVATIONS[activation], residual, vector)
        prepared = _prepared[key] = _kernel.prepare(plan, device)
    return prepared


def _launch(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None, activation: int,
            out: torch.Tensor) -> torch.Tensor:
    """The kernel, ``out`` = act(y + bias (+ residual)) (out may be y); the caller checked :func:`_kernels_take`."""
    if bias.dtype != torch.float32 or not bias.is_contiguous():
        bias = bias.float().contiguous()
    dtype = _DTYPES[y.dtype]
    y_ptr, out_ptr = y.data_ptr(), out.data_ptr()
    res_ptr = y_ptr if residual is None else residual.data_ptr()
    vector = _kernel.vector_width(y.shape[2] * y.shape[3], y_ptr, out_ptr, res_ptr, dtype=dtype)
    device = y.get_device()
    prepared = _prepared_for(y.shape, dtype, device, activation, residual is not None, vector)
    prepared((y_ptr, bias.data_ptr(), res_ptr, out_ptr), torch_stream_getter(torch)(device))
    return out


def in_place_launcher(y_shape: tuple[int, ...], dtype: torch.dtype, device: int, code: int,
                      residual: bool) -> Any:
    """``launch(y_ptr, bias_ptr, residual_ptr)``: the kernel in place on a contiguous CUDA ``y`` of this shape and
    dtype (a float32 contiguous bias, a residual of y's shape, dtype and device or y's own pointer), on torch's
    current stream; 4-wide when every pointer allows it, else 1-wide (:func:`_prepared_for`'s launches, looked up
    once per width). For callers that have checked the arguments once per signature
    (:class:`convtune.ops.torch.fuse.FusedConv2d`); None where the kernel does not take such a y."""
    shape = torch.Size(y_shape)
    if dtype not in _DTYPES or len(shape) != 4 or not 0 < shape.numel() <= _kernel.MAX_ELEMENTS:
        return None
    name = _DTYPES[dtype]
    align = _kernel.VECTOR * _kernel.DTYPE_BYTES[name] - 1
    wide = shape[2] * shape[3] % _kernel.VECTOR == 0
    stream_of = torch_stream_getter(torch)
    made: dict[int, Any] = {}   # per vector width: no key tuple built per call

    def launch(y_ptr: int, bias_ptr: int, res_ptr: int) -> None:
        vector = _kernel.VECTOR if wide and not (y_ptr | res_ptr) & align else 1
        prepared = made.get(vector)
        if prepared is None:
            prepared = made[vector] = _prepared_for(shape, name, device, code, residual, vector)
        prepared((y_ptr, bias_ptr, res_ptr, y_ptr), stream_of(device))

    return launch


def _bias_act_impl(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None, activation: int) -> Any:
    if _kernels_take(y, residual):
        return _launch(y, bias, residual, activation, torch.empty_like(y))
    return _torch_bias_act(y, bias, residual, activation)


def _bias_act_fake(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None, activation: int) -> Any:
    return torch.empty_like(y)


#: activations whose gradient follows from the output alone (identity, relu, relu6); the others save the inputs
_FROM_OUTPUT = 3


def _setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    y, bias, residual, activation = inputs
    if activation < _FROM_OUTPUT:
        ctx.save_for_backward(output)
    else:
        ctx.save_for_backward(y, bias, residual)
    ctx.activation, ctx.bias_dtype, ctx.residual = activation, bias.dtype, residual is not None


def _activation_grad(ctx: Any, dz: torch.Tensor) -> torch.Tensor:
    """dz · act'(u), u = y + bias (+ residual): from the saved output z for relu (z > 0) and relu6 (0 < z < 6),
    else from u recomputed in fp32 (float64 for float64 maps), with PyTorch's derivative formulas: silu
    σ(u)(1 + u(1 − σ(u))), hardswish 0 below −3, 1 above 3, u/3 + 1/2 between, hardsigmoid 1/6 on (−3, 3),
    sigmoid σ(u)(1 − σ(u))."""
    act = ctx.activation
    if act < _FROM_OUTPUT:
        (z,) = ctx.saved_tensors
        if act == 1:
            return dz * (z > 0)
        if act == 2:
            return dz * ((z > 0) & (z < 6))
        return dz
    y, bias, residual = ctx.saved_tensors
    dtype = torch.promote_types(y.dtype, torch.float32)   # fp32 for 16-bit maps, float64 stays float64
    u = y.to(dtype) + bias.to(dtype).view(1, -1, 1, 1)
    if residual is not None:
        u = u + residual.to(dtype)
    if act == 3:
        s = torch.sigmoid(u)
        d = s * (1 + u * (1 - s))
    elif act == 4:
        d = torch.where(u < -3, 0.0, torch.where(u <= 3, u / 3 + 0.5, 1.0))
    elif act == 5:
        d = ((u > -3) & (u < 3)).to(dtype) / 6
    else:
        s = torch.sigmoid(u)
        d = s * (1 - s)
    return (dz.to(dtype) * d).to(dz.dtype)


def _backward(ctx: Any, dz: torch.Tensor) -> tuple[Any, ...]:
    """dy = dres = dz·act'(u) (:func:`_activation_grad`), dbias = its sum over (N, H, W)."""
    dz = _activation_grad(ctx, dz)
    need_y, need_b, need_r = ctx.needs_input_grad[:3]
    dbias = dz.sum((0, 2, 3)).to(ctx.bias_dtype) if need_b else None
    return (dz if need_y else None, dbias, dz if need_r and ctx.residual else None, None)


_bias_act_op = library_op("bias_act", "(Tensor y, Tensor bias, Tensor? residual, int activation) -> Tensor",
                          _bias_act_impl, _bias_act_fake, _backward, _setup)


def _check(y: Any, bias: Any, residual: Any, activation: str) -> int:
    if activation not in _kernel.ACTIVATIONS:
        raise InvalidInput("activation", f"{activation!r}: one of {', '.join(ACTIVATIONS)}")
    if not isinstance(y, torch.Tensor) or y.dim() != 4:
        raise InvalidInput("y", f"must be a 4-D tensor (N, K, H, W), got {getattr(y, 'shape', type(y).__name__)}")
    if not isinstance(bias, torch.Tensor) or bias.shape != (y.shape[1],) or bias.device != y.device:
        raise InvalidInput("bias", f"must be a ({y.shape[1]},) tensor on {y.device}, got "
                                   f"{getattr(bias, 'shape', type(bias).__name__)}")
    if residual is not None and (not isinstance(residual, torch.Tensor) or residual.shape != y.shape
                                 or residual.device != y.device):
        raise InvalidInput("residual", f"must be a tensor of y's shape {tuple(y.shape)} on {y.device}, got "
                                       f"{getattr(residual, 'shape', type(residual).__name__)}")
    return _kernel.ACTIVATIONS[activation]


def bias_act(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None = None, activation: str = "none",
             inplace: bool = False) -> torch.Tensor:
    """``act(y + bias.view(1, -1, 1, 1) + residual)`` in one pass.

    Args:
        y: (N, K, H, W), a convolution's output.
        bias: (K,) (float32 on the kernel path; other dtypes are converted per call).
        residual: None or a tensor of y's shape (the kernel path wants y's dtype; others run PyTorch's ops).
        activation: one of :data:`ACTIVATIONS`: ``"none"``, ``"relu"``, ``"relu6"``, ``"silu"``, ``"hardswish"``,
            ``"hardsigmoid"``, ``"sigmoid"`` (PyTorch's definitions).
        inplace: write the result into y when the kernel runs in plain eager mode without a gradient (y must not
            be needed afterwards); otherwise a new tensor is returned as usual.

    Returns:
        A tensor of y's shape and dtype, sums in fp32 (or y's promoted dtype on the PyTorch path).

    Raises:
        InvalidInput: naming ``y``, ``bias``, ``residual`` or ``activation``.
    """
    return apply_bias_act(y, bias, residual, _check(y, bias, residual, activation), inplace)


def apply_bias_act(y: torch.Tensor, bias: torch.Tensor, residual: torch.Tensor | None, code: int,
                   inplace: bool) -> torch.Tensor:
    """:func:`bias_act` of checked arguments (``code``: the index of the activation in :data:`ACTIVATIONS`), for
    callers whose arguments are consistent by construction (:class:`convtune.ops.torch.fuse.FusedConv2d`)."""
    if torch.compiler.is_compiling() or not plain_eager(y, bias, residual) or needs_grad(y, bias, residual):
        return _bias_act_op(y, bias, residual, code)
    if _kernels_take(y, residual):
        return _launch(y, bias, residual, code, y if inplace else torch.empty_like(y))
    return _torch_bias_act(y, bias, residual, code)
