"""PyTorch operators on convtune's depthwise kernels: ``depthwise_conv1d`` (causal) and ``depthwise_conv2d``.

Import as ``convtune.torch`` (the rest of convtune never imports torch). Both are ``torch.library`` custom
ops with autograd and fake (meta) implementations, so they work under ``torch.compile`` and in CUDA
graphs:

* CUDA float32, float16 and bfloat16 tensors run convtune's kernels on the caller's current stream (no host
  synchronisation, no allocation outside torch's caching allocator: outputs and the fp32 weight-gradient
  workspace are torch tensors, handed to the kernels by pointer). The configuration is the tuning database's
  best for the forward problem when a database exists, else the time model's best
  (:mod:`convtune.depthwise_ops`), chosen once per shape, dtype and device.
* float16 / bfloat16: the kernels store x, w, y, dy, dx and dw in the tensors' dtype and accumulate in fp32
  (:mod:`convtune.kernels.depthwise.dtypes`); outputs and gradients come back in the input dtype. The
  16-bit shapes no 16-bit kernel takes (1-D: more than 64 taps meeting data) run PyTorch's own operators in
  that dtype.
* Gradients of shapes no gradient kernel takes (2-D input gradient: strides other than 1, 2, 4, 7, 8) run the
  reference formulas too; a float32 forward with no valid kernel raises
  :class:`~convtune.errors.InvalidConfig`.
* float64 tensors (any device) and CPU tensors run the same operators through PyTorch reference formulas:
  that is what ``torch.autograd.gradcheck`` exercises, and what keeps a model runnable on a CPU. Other CUDA
  dtypes raise :class:`~convtune.errors.InvalidInput`.

Backward runs the input- and weight-gradient kernels (1-D: ``plan1d`` dgrad/wgrad; 2-D: ``plan2d_dgrad``,
``plan2d_wgrad``), each only when its input needs a gradient (``ctx.needs_input_grad``), the weight gradient
in deterministic mode (per-block fp32 partials summed in a fixed order: bitwise repeatable). Each gradient is
a custom op of its own (``convtune::depthwise_conv{1,2}d_{dgrad,wgrad}``) with a fake implementation, so the
backward graph traces under ``torch.compile``; on the reference path they are PyTorch's formulas (2-D:
``torch.nn.grad.conv2d_input`` / ``conv2d_weight``, grouped).

Example:
    >>> import convtune.torch as ct                                  # doctest: +SKIP
    >>> y = ct.depthwise_conv1d(x, w)   # == F.conv1d(F.pad(x, (K-1, 0)), w[:, None], groups=C)  # doctest: +SKIP
"""

# No ``from __future__ import annotations`` here: torch.library.custom_op reads the operators' schemas from
# their evaluated type hints.
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F

from convtune.errors import InvalidConfig, InvalidInput
from convtune.problem import ConvProblem

__all__ = ["depthwise_conv1d", "depthwise_conv2d"]


# ---- plumbing ---------------------------------------------------------------------------------------------
#: Storage dtype names of the kernels (ConvProblem.dtype) and the CuPy dtype of a view (bfloat16: its bits).
_DTYPES = {torch.float32: ("float32", "float32"), torch.float16: ("float16", "float16"),
           torch.bfloat16: ("bfloat16", "uint16")}
_HALF = (torch.float16, torch.bfloat16)


def _use_kernels(t: torch.Tensor, half: bool = True) -> bool:
    """CUDA float32 (and float16/bfloat16 where the path has 16-bit kernels: ``half``) → kernels; float64, CPU
    tensors and the 16-bit tensors of a path without 16-bit kernels → the reference formulas; other CUDA
    dtypes → error."""
    if t.dtype == torch.float64 or not t.is_cuda:
        return False
    if t.dtype not in _DTYPES:
        raise InvalidInput("x", f"dtype {t.dtype}: the depthwise kernels take float32, float16 or bfloat16 "
                                "(float64 runs the reference)")
    return half or t.dtype not in _HALF


def _dtype(t: torch.Tensor) -> str:
    """The storage dtype name of a tensor the kernels take (ConvProblem.dtype)."""
    return _DTYPES[t.dtype][0]


@lru_cache(maxsize=1024)
def _problem(**fields: Any) -> ConvProblem:
    """A validated ConvProblem, built once per shape: the ops are called every step, and validation costs
    tens of microseconds of host time per call."""
    if fields.pop("causal", False):
        return ConvProblem.depthwise1d(**fields)
    return ConvProblem(**fields)


def _cupy_view(t: torch.Tensor) -> Any:
    """A CuPy array over the tensor's memory (no copy, no stream semantics: the tensor stays the owner);
    bfloat16 as ``uint16`` bits (CuPy has no bfloat16)."""
    from convtune.kernels.compile import cupy_module

    cp = cupy_module()
    memory = cp.cuda.UnownedMemory(t.data_ptr(), t.numel() * t.element_size(), t, t.device.index)
    return cp.ndarray(tuple(t.shape), dtype=_DTYPES[t.dtype][1], memptr=cp.cuda.MemoryPointer(memory, 0))


def _input_view(t: torch.Tensor) -> Any:
    """:func:`_cupy_view` of a contiguous kernel input, copied first when it does not start 16-byte aligned:
    the kernels copy rows with 16-byte (4-element) accesses, so a view at an odd offset into its storage
    (``x[1:]``) runs on a copy instead of faulting. Called inside the ops' real implementations only (under
    ``torch.compile`` tracing a tensor has no data pointer)."""
    return _cupy_view(t if t.data_ptr() % 16 == 0 else t.clone())


def _stream(t: torch.Tensor) -> Any:
    from convtune.kernels.ops import _stream_for

    return _stream_for(t)


_NO_PLAN: set[tuple[ConvProblem, int, str]] = set()


def _plan(problem: ConvProblem, device_index: int, path: str) -> Any | None:
    """The plan an op runs (:func:`convtune.depthwise_ops.choose_plan`, cached there); None for a gradient or a
    16-bit problem that no kernel takes (the op runs the reference formulas; remembered here, so the search
    runs once).

    Raises:
        InvalidConfig: a float32 forward problem with no valid plan.
    """
    from convtune.depthwise_ops import choose_plan
    from convtune.kernels.ops import device_machine

    key = (problem, device_index, path)
    if key in _NO_PLAN:
        return None
    try:
        return choose_plan(problem, device_machine(device_index), path)
    except InvalidConfig:
        if problem.dtype == "float32" and path == "fwd":
            raise
        _NO_PLAN.add(key)
        return None


@lru_cache(maxsize=512)
def _compiled(pl: Any, device_index: int) -> Any:
    """The plan's kernel(s) on the device: the 2-D gradients' own modules, else the family protocol's
    (forward plans, 1-D plans of every path)."""
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise import family, plan2d_dgrad, plan2d_wgrad

    with cupy_module().cuda.Device(device_index):
        if isinstance(pl, plan2d_dgrad.Dw2dDgradPlan):
            return plan2d_dgrad.compile_plan(pl)
        if isinstance(pl, plan2d_wgrad.Dw2dWgradPlan):
            return plan2d_wgrad.compile_plan(pl)
        return family.compile_plan(pl)


def _workspace(pl: Any, like: torch.Tensor) -> torch.Tensor | None:
    """The fp32 workspace of a weight gradient (deterministic partials; 16-bit atomic sums), from torch's
    caching allocator (None when the plan needs none)."""
    words = getattr(pl, "workspace_words", 0)
    return torch.empty(words, dtype=torch.float32, device=like.device) if words else None


# ---- 1-D: reference formulas (lag-order taps: w[c, 0] multiplies the current sample) ------------------------
def _ref_fwd(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    K = w.shape[1]
    return F.conv1d(F.pad(x, (K - 1, 0)), w.flip(-1)[:, None, :], groups=x.shape[1])


def _ref_dgrad(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    K = w.shape[1]
    return F.conv1d(F.pad(dy, (0, K - 1)), w[:, None, :], groups=dy.shape[1])


def _ref_wgrad(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    L = x.shape[2]
    windows = F.pad(x, (K - 1, 0)).unfold(-1, L, 1)      # (B, C, K, L): window i is x[t − (K−1−i)]
    return torch.einsum("bct,bckt->ck", dy, windows).flip(-1)


# ---- 1-D: kernels -------------------------------------------------------------------------------------------
def _run_1d(path: str, a: torch.Tensor, b: torch.Tensor, out: torch.Tensor,
            problem: ConvProblem) -> torch.Tensor | None:
    """``out`` computed by the plan's kernels, or None when a 16-bit problem has no plan."""
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise import launcher

    dev = a.device.index
    pl = _plan(problem, dev, path)
    if pl is None:
        return None
    kernels = _compiled(pl, dev)
    workspace = _workspace(pl, a)
    with cupy_module().cuda.Device(dev):
        launcher.launch(pl, kernels, _input_view(a), _input_view(b), _cupy_view(out),
                        _cupy_view(workspace) if workspace is not None else None, stream=_stream(a))
    return out


@torch.library.custom_op("convtune::depthwise_conv1d_fwd", mutates_args=())
def _dw1d_fwd(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y (B, C, L) of x (B, C, L) and lag-order taps w (C, K); both contiguous."""
    if not _use_kernels(x):
        return _ref_fwd(x, w)
    B, C, L = x.shape
    y = _run_1d("fwd", x, w, torch.empty_like(x), _problem(causal=True, B=B, C=C, L=L, K=w.shape[1], dtype=_dtype(x)))
    return y if y is not None else _ref_fwd(x, w)


@torch.library.custom_op("convtune::depthwise_conv1d_dgrad", mutates_args=())
def _dw1d_dgrad(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dx (B, C, L) = Σ_j w[c, j]·dy[b, c, s + j]."""
    if not _use_kernels(dy):
        return _ref_dgrad(dy, w)
    B, C, L = dy.shape
    problem = _problem(causal=True, B=B, C=C, L=L, K=w.shape[1], dtype=_dtype(dy))
    dx = _run_1d("dgrad", dy, w, torch.empty_like(dy), problem)
    return dx if dx is not None else _ref_dgrad(dy, w)


@torch.library.custom_op("convtune::depthwise_conv1d_wgrad", mutates_args=())
def _dw1d_wgrad(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    """dw (C, K) in lag order = Σ_b Σ_t dy[b, c, t]·x[b, c, t − j]."""
    if not _use_kernels(x):
        return _ref_wgrad(x, dy, K)
    B, C, L = x.shape
    out = torch.empty((C, K), dtype=x.dtype, device=x.device)
    dw = _run_1d("wgrad", x, dy, out, _problem(causal=True, B=B, C=C, L=L, K=K, dtype=_dtype(x)))
    return dw if dw is not None else _ref_wgrad(x, dy, K)


@_dw1d_fwd.register_fake
def _(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


@_dw1d_dgrad.register_fake
def _(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(dy)


@_dw1d_wgrad.register_fake
def _(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    return x.new_empty((x.shape[1], K))


def _dw1d_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w = inputs
    ctx.save_for_backward(x, w)


def _dw1d_backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    x, w = ctx.saved_tensors
    dy = dy.contiguous()
    dx = _dw1d_dgrad(dy, w) if ctx.needs_input_grad[0] else None
    dw = _dw1d_wgrad(x, dy, w.shape[1]) if ctx.needs_input_grad[1] else None
    return dx, dw


_dw1d_fwd.register_autograd(_dw1d_backward, setup_context=_dw1d_setup)


def depthwise_conv1d(x: torch.Tensor, w: torch.Tensor, causal: bool = True) -> torch.Tensor:
    """Causal depthwise 1-D convolution, PyTorch's convention.

    Args:
        x: (B, C, L).
        w: (C, K) or (C, 1, K), PyTorch's order: ``w[c, K−1]`` multiplies the current sample.
        causal: must be True (the kernels are causal: left padding K − 1, output length L).

    Returns:
        y (B, C, L) equal to ``F.conv1d(F.pad(x, (K−1, 0)), w[:, None, :], groups=C)``.

    Raises:
        InvalidInput: non-causal, wrong ranks or channel counts, devices or dtypes that differ, a CUDA dtype
            other than float32, float16, bfloat16 and float64.
    """
    if causal is not True:
        raise InvalidInput("causal", "only causal=True is implemented (left padding K−1, output length L)")
    if w.dim() == 3 and w.shape[1] == 1:
        w = w[:, 0, :]
    if x.dim() != 3:
        raise InvalidInput("x", f"must be 3-D (B, C, L), got shape {tuple(x.shape)}")
    if w.dim() != 2 or w.shape[0] != x.shape[1]:
        raise InvalidInput("w", f"must be (C, K) or (C, 1, K) with C={x.shape[1]}, got shape {tuple(w.shape)}")
    if w.device != x.device or w.dtype != x.dtype:
        raise InvalidInput("w", f"must match x's device and dtype ({x.device}, {x.dtype}), got {w.device}, {w.dtype}")
    return _dw1d_fwd(x.contiguous(), w.flip(-1).contiguous())


# ---- 2-D ----------------------------------------------------------------------------------------------------
def _out_size(n: int, k: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - k) // stride + 1


def _problem_2d(t: torch.Tensor, N: int, C: int, H: int, W: int, R: int, S: int, stride_h: int, stride_w: int,
                pad_h: int, pad_w: int) -> ConvProblem:
    return _problem(N=N, C=C, H=H, W=W, K=C, R=R, S=S, stride_h=stride_h, stride_w=stride_w, pad_h=pad_h,
                    pad_w=pad_w, groups=C, dtype=_dtype(t))


@torch.library.custom_op("convtune::depthwise_conv2d_fwd", mutates_args=())
def _dw2d_fwd(x: torch.Tensor, w: torch.Tensor, stride_h: int, stride_w: int, pad_h: int,
              pad_w: int) -> torch.Tensor:
    """y (N, C, P, Q) of x (N, C, H, W) and w (C, 1, R, S), groups = C; both contiguous (float32, float16 or
    bfloat16 on the kernels)."""
    if not _use_kernels(x):
        return F.conv2d(x, w, stride=(stride_h, stride_w), padding=(pad_h, pad_w), groups=x.shape[1])
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise import family

    N, C, H, W = x.shape
    problem = _problem_2d(x, N, C, H, W, *w.shape[2:], stride_h, stride_w, pad_h, pad_w)
    dev = x.device.index
    pl = _plan(problem, dev, "fwd")
    if pl is None:  # a 16-bit shape no 16-bit kernel takes
        return F.conv2d(x, w, stride=(stride_h, stride_w), padding=(pad_h, pad_w), groups=C)
    y = x.new_empty((N, C, problem.P, problem.Q))
    with cupy_module().cuda.Device(dev):
        family.launch(pl, _compiled(pl, dev), _input_view(x), _input_view(w), _cupy_view(y), _stream(x))
    return y


@_dw2d_fwd.register_fake
def _(x: torch.Tensor, w: torch.Tensor, stride_h: int, stride_w: int, pad_h: int, pad_w: int) -> torch.Tensor:
    N, C, H, W = x.shape
    return x.new_empty((N, C, _out_size(H, w.shape[2], stride_h, pad_h), _out_size(W, w.shape[3], stride_w, pad_w)))


@torch.library.custom_op("convtune::depthwise_conv2d_dgrad", mutates_args=())
def _dw2d_dgrad(dy: torch.Tensor, w: torch.Tensor, H: int, W: int, stride_h: int, stride_w: int, pad_h: int,
                pad_w: int) -> torch.Tensor:
    """dx (N, C, H, W) = Σ_{r,s} w[c,0,r,s]·dy[n, c, (h + pad_h − r)/stride_h, (w + pad_w − s)/stride_w] over the
    taps whose quotients are whole and inside P×Q (the forward's adjoint); dy (N, C, P, Q), w (C, 1, R, S)."""
    N, C = dy.shape[:2]
    stride, padding = (stride_h, stride_w), (pad_h, pad_w)
    problem = _problem_2d(dy, N, C, H, W, *w.shape[2:], stride_h, stride_w, pad_h, pad_w) \
        if _use_kernels(dy) else None
    pl = _plan(problem, dy.device.index, "dgrad") if problem is not None else None
    if pl is None:
        return torch.nn.grad.conv2d_input((N, C, H, W), w, dy, stride=stride, padding=padding, groups=C)
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise import plan2d_dgrad

    dx = dy.new_empty((N, C, H, W))
    dev = dy.device.index
    with cupy_module().cuda.Device(dev):
        plan2d_dgrad.launch(pl, _compiled(pl, dev), _input_view(dy), _input_view(w), _cupy_view(dx), _stream(dy))
    return dx


@torch.library.custom_op("convtune::depthwise_conv2d_wgrad", mutates_args=())
def _dw2d_wgrad(x: torch.Tensor, dy: torch.Tensor, R: int, S: int, stride_h: int, stride_w: int, pad_h: int,
                pad_w: int) -> torch.Tensor:
    """dw (C, 1, R, S) = Σ_{n,p,q} dy[n,c,p,q]·x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s];
    x (N, C, H, W), dy (N, C, P, Q)."""
    N, C, H, W = x.shape
    stride, padding = (stride_h, stride_w), (pad_h, pad_w)
    problem = _problem_2d(x, N, C, H, W, R, S, stride_h, stride_w, pad_h, pad_w) if _use_kernels(x) else None
    pl = _plan(problem, x.device.index, "wgrad") if problem is not None else None
    if pl is None:
        return torch.nn.grad.conv2d_weight(x, (C, 1, R, S), dy, stride=stride, padding=padding, groups=C)
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise import plan2d_wgrad

    dw = x.new_empty((C, 1, R, S))
    dev = x.device.index
    workspace = _workspace(pl, x)
    with cupy_module().cuda.Device(dev):
        plan2d_wgrad.launch(pl, _compiled(pl, dev), _input_view(x), _input_view(dy), _cupy_view(dw),
                            _cupy_view(workspace) if workspace is not None else None, stream=_stream(x))
    return dw


@_dw2d_dgrad.register_fake
def _(dy: torch.Tensor, w: torch.Tensor, H: int, W: int, stride_h: int, stride_w: int, pad_h: int,
      pad_w: int) -> torch.Tensor:
    return dy.new_empty((dy.shape[0], dy.shape[1], H, W))


@_dw2d_wgrad.register_fake
def _(x: torch.Tensor, dy: torch.Tensor, R: int, S: int, stride_h: int, stride_w: int, pad_h: int,
      pad_w: int) -> torch.Tensor:
    return x.new_empty((x.shape[1], 1, R, S))


def _dw2d_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w, sh, sw, ph, pw = inputs
    ctx.save_for_backward(x, w)
    ctx.geometry = (sh, sw, ph, pw)


def _dw2d_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dy = dy.contiguous()
    dx = _dw2d_dgrad(dy, w, x.shape[2], x.shape[3], *ctx.geometry) if ctx.needs_input_grad[0] else None
    dw = _dw2d_wgrad(x, dy, w.shape[2], w.shape[3], *ctx.geometry) if ctx.needs_input_grad[1] else None
    return dx, dw, None, None, None, None


_dw2d_fwd.register_autograd(_dw2d_backward, setup_context=_dw2d_setup)


def _pair(name: str, value: int | tuple[int, int]) -> tuple[int, int]:
    if isinstance(value, int) and not isinstance(value, bool):
        return value, value
    if isinstance(value, tuple | list) and len(value) == 2 and all(isinstance(v, int) for v in value):
        return int(value[0]), int(value[1])
    raise InvalidInput(name, f"{value!r} must be an int or a pair of ints")


def depthwise_conv2d(x: torch.Tensor, w: torch.Tensor, stride: int | tuple[int, int] = 1,
                     padding: int | tuple[int, int] = 0) -> torch.Tensor:
    """Depthwise 2-D convolution (groups = C, one filter per channel), PyTorch's convention.

    Args:
        x: (N, C, H, W).
        w: (C, 1, R, S).
        stride, padding: int or (h, w) pair (dilation 1).

    Returns:
        y (N, C, P, Q) equal to ``F.conv2d(x, w, stride=stride, padding=padding, groups=C)``.

    Raises:
        InvalidInput: wrong ranks or shapes, stride < 1, padding < 0, devices or dtypes that differ, a CUDA dtype
            other than float32, float16, bfloat16 and float64.
    """
    (sh, sw), (ph, pw) = _pair("stride", stride), _pair("padding", padding)
    if x.dim() != 4:
        raise InvalidInput("x", f"must be 4-D (N, C, H, W), got shape {tuple(x.shape)}")
    if w.dim() != 4 or w.shape[0] != x.shape[1] or w.shape[1] != 1:
        raise InvalidInput("w", f"must be (C, 1, R, S) with C={x.shape[1]}, got shape {tuple(w.shape)}")
    if min(sh, sw) < 1:
        raise InvalidInput("stride", f"{stride!r} must be >= 1")
    if min(ph, pw) < 0:
        raise InvalidInput("padding", f"{padding!r} must be >= 0")
    if w.device != x.device or w.dtype != x.dtype:
        raise InvalidInput("w", f"must match x's device and dtype ({x.device}, {x.dtype}), got {w.device}, {w.dtype}")
    if _out_size(x.shape[2], w.shape[2], sh, ph) < 1 or _out_size(x.shape[3], w.shape[3], sw, pw) < 1:
        raise InvalidInput("x", f"output is empty: input {tuple(x.shape[2:])} is smaller than the filter "
                                f"{tuple(w.shape[2:])} with padding {(ph, pw)}")
    return _dw2d_fwd(x.contiguous(), w.contiguous(), sh, sw, ph, pw)
