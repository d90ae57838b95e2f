"""PyTorch operators on convtune's depthwise kernels: ``depthwise_conv1d`` (causal) and ``depthwise_conv2d``.

Both are ``torch.library`` operators with autograd and fake (meta) implementations, so they work under
``torch.compile`` and in CUDA graphs; in plain eager mode the public functions reach the implementations
without the dispatcher (:mod:`convtune.ops.torch._dispatch`):

* CUDA float32, float16 and bfloat16 tensors run convtune's kernels on the caller's current stream (no host
  synchronisation, no allocation outside torch's caching allocator: outputs and the fp32 weight-gradient
  workspace are torch tensors, handed to the kernels by pointer). Each call signature (path, shapes, dtype,
  device, geometry) gets a prepared launch once (:mod:`convtune.kernels.prepared`): the configuration is the
  resolver's (:mod:`convtune.ops.depthwise`: the tuning database's best GPU-measured forward config, else the
  time model's best); later calls only allocate and launch. The precision class is the tensors' dtype with strict
  arithmetic (``math="ieee"``) whatever PyTorch's TF32 flags say: no tensor-core family runs depthwise problems,
  and a strict config is what a tf32 lookup would serve anyway.
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
an operator of its own (``convtune::depthwise_conv{1,2}d_{dgrad,wgrad}``) with a fake implementation, so the
backward graph traces under ``torch.compile``; on the reference path they are PyTorch's formulas (2-D:
``torch.nn.grad.conv2d_input`` / ``conv2d_weight``, grouped).

Example:
    >>> import convtune.ops.torch as ct                                  # doctest: +SKIP
    >>> y = ct.depthwise_conv1d(x, w)   # == F.conv1d(F.pad(x, (K-1, 0)), w[:, None], groups=C)  # doctest: +SKIP
"""

from collections.abc import Callable
from functools import lru_cache
from typing import Any

import torch
import torch.nn.functional as F
import torch.nn.grad  # conv2d_input / conv2d_weight: a submodule torch.nn does not import for type checkers

from convtune.errors import InvalidConfig, InvalidInput
from convtune.ops import resolver
from convtune.ops.conv2d import as_pair
from convtune.ops.torch._dispatch import direct_call_ok, eager_apply, library_op, needs_grad, plain_eager
from convtune.ops.torch.dense import autocast_inputs
from convtune.problem import ConvProblem

__all__ = ["depthwise_conv1d", "depthwise_conv2d"]

#: Storage dtype names of the kernels (ConvProblem.dtype).
_DTYPES = {torch.float32: "float32", torch.float16: "float16", torch.bfloat16: "bfloat16"}
_HALF = (torch.float16, torch.bfloat16)
_ALIGN_MASK = 15          # the kernels copy rows with 16-byte accesses
RUNNER_ENTRIES = 4096


def _c(t: torch.Tensor) -> torch.Tensor:
    """``t`` in the contiguous layout the kernels index (compiled graphs may hand the ops other strides)."""
    return t if t.is_contiguous() else t.contiguous()


# ---- plumbing (first call of a signature only) ----------------------------------------------------------------
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
    return _DTYPES[t.dtype]


@lru_cache(maxsize=1024)
def _problem(**fields: Any) -> ConvProblem:
    """A validated ConvProblem, built once per shape."""
    if fields.pop("causal", False):
        return ConvProblem.depthwise1d(**fields)
    return ConvProblem(**fields)


_NO_PLAN: set[tuple[ConvProblem, int, str]] = set()


def _plan(problem: ConvProblem, device_index: int, path: str) -> Any | None:
    """The plan an op runs (:func:`convtune.ops.depthwise.choose_plan`, cached there); None for a gradient or a
    16-bit problem that no kernel takes (the op runs the reference formulas; remembered here, so the search
    runs once).

    Raises:
        InvalidConfig: a float32 forward problem with no valid plan.
    """
    from convtune.kernels.devices import device_machine
    from convtune.ops.depthwise import choose_plan

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
    """The plan's kernel(s) on the device: the 2-D gradients' own modules, the 1-D launcher protocol's for 1-D
    plans of every path, else the forward registry row's launcher."""
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise.conv1d import family as family1d
    from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan
    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
    from convtune.kernels.registry import get_spec

    with cupy_module().cuda.Device(device_index):
        if isinstance(pl, plan2d_dgrad.Dw2dDgradPlan):
            return plan2d_dgrad.compile_plan(pl)
        if isinstance(pl, plan2d_wgrad.Dw2dWgradPlan):
            return plan2d_wgrad.compile_plan(pl)
        if isinstance(pl, Depthwise1dPlan):
            return family1d.compile_plan(pl)
        return get_spec(pl.config.family).launcher.compile_plan(pl)


def _prepared(problem: ConvProblem, device_index: int, path: str) -> Any | None:
    """The prepared launch of the path's plan (None where the reference formulas run)."""
    from convtune.kernels.prepared import prepare_plan

    pl = _plan(problem, device_index, path)
    if pl is None:
        return None
    return prepare_plan(pl, device_index, _compiled(pl, device_index))


def _device_index(t: torch.Tensor) -> int:
    return int(t.device.index)


def _kernel_runner(prepared: Any, dtype: torch.dtype, device: torch.device | None = None,
                   like_a: bool = False) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """``run(a, b) -> out`` on the prepared launch: operands (a, b, out[, workspace]); inputs that do not start
    16-byte aligned (a view at an odd offset) run on a copy. Outputs on ``device`` (default the launch's GPU);
    ``like_a``: the output has a's shape, dtype and device (a 1-D forward, a stride-1 "same" 2-D one), so it is
    allocated as ``torch.empty_like(a)`` — half the host time of ``torch.empty(shape, dtype=, device=)``'s
    argument parsing on every call."""
    from convtune.ops.conv2d import torch_stream_getter, torch_workspace

    device = device if device is not None else torch.device("cuda", prepared.device)
    index, out_shape, ws_bytes = prepared.device, prepared.output_shape, prepared.workspace_bytes
    empty, empty_like = torch.empty, torch.empty_like
    stream_of = torch_stream_getter(torch)
    workspace = torch_workspace(torch, index, device, ws_bytes)   # kept per stream and thread (convtune.ops.conv2d)
    launch = prepared

    def run(a: torch.Tensor, b: torch.Tensor) -> torch.Tensor:
        stream = stream_of(index)
        pa, pb = a.data_ptr(), b.data_ptr()    # each read once: a call's host time is the product
        if pa & _ALIGN_MASK:
            a = a.clone()
            pa = a.data_ptr()
        if pb & _ALIGN_MASK:
            b = b.clone()
            pb = b.data_ptr()
        out = empty_like(a) if like_a else empty(*out_shape, dtype=dtype, device=device)
        if ws_bytes:
            ws = workspace(stream)   # referenced until the launch is enqueued (a capture's fresh one is not kept)
            launch((pa, pb, out.data_ptr(), ws.data_ptr()), stream)
        else:
            launch((pa, pb, out.data_ptr()), stream)
        return out

    return run


def _same_shape(prepared: Any, a: torch.Tensor) -> bool:
    """Whether the launch's output has the shape of its first operand ``a`` (contiguous, as the runners take it)."""
    return tuple(prepared.output_shape) == tuple(a.shape)


#: call signature (path, shapes, dtype, device, geometry) -> run(a, b): a kernel runner or a reference formula;
#: ("bwd2", ...) -> the 2-D backward's chained runner run(dy, x, w) -> (dx, dw), or None (gradients one by one)
_runners: dict[tuple[Any, ...], Any] = {}


def _remember(key: tuple[Any, ...], run: Any) -> Any:
    if len(_runners) >= RUNNER_ENTRIES:
        _runners.clear()
    _runners[key] = run
    return run


def clear_cache() -> None:
    """Forget every prepared call (the resolver calls this when it clears)."""
    _runners.clear()
    _checked_2d.clear()
    _NO_PLAN.clear()
    _lag_taps_cache.clear()


#: id(w) -> [weakref to w, version, data pointer, w.flip(-1)]: the lag-order taps of weights used without autograd
_lag_taps_cache: dict[int, list[Any]] = {}


def _lag_taps(w: torch.Tensor) -> torch.Tensor:
    """``w.flip(-1)`` (the kernels' lag order), made once per weight tensor and version when no gradient flows
    through it. Inside a CUDA graph capture a weight that requires grad is flipped in the graph (it may change
    between replays); a frozen one replays the taps cached before the capture."""
    import weakref

    hit = _lag_taps_cache.get(id(w))
    try:
        version = w._version
    except RuntimeError:  # an inference tensor has no version counter
        version = -1
    if hit is not None and hit[0]() is w and hit[1] == version and hit[2] == w.data_ptr():
        if not (w.requires_grad and w.is_cuda and torch.cuda.is_current_stream_capturing()):
            return hit[3]
        return w.flip(-1)
    if w.is_cuda and torch.cuda.is_current_stream_capturing():
        return w.flip(-1)
    lag = w.flip(-1)
    key = id(w)

    def drop(ref: Any) -> None:
        entry = _lag_taps_cache.get(key)
        if entry is not None and entry[0] is ref:
            del _lag_taps_cache[key]

    _lag_taps_cache[key] = [weakref.ref(w, drop), version, w.data_ptr(), lag]
    return lag


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


# ---- 1-D: implementations (what the operators register) --------------------------------------------------------
def _runner_1d(path: str, a: torch.Tensor, K: int) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The first call of a 1-D signature: the kernels' runner, or the reference formula (looked up at call
    time, so tests may replace it)."""
    reference = {"fwd": lambda x, w: _ref_fwd(x, w), "dgrad": lambda dy, w: _ref_dgrad(dy, w),
                 "wgrad": lambda x, dy: _ref_wgrad(x, dy, K)}[path]
    if not _use_kernels(a):
        return reference
    B, C, L = a.shape
    prepared = _prepared(_problem(causal=True, B=B, C=C, L=L, K=K, dtype=_dtype(a)), _device_index(a), path)
    return reference if prepared is None else _kernel_runner(prepared, a.dtype, like_a=_same_shape(prepared, a))


def _dw1d_fwd_impl(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """y (B, C, L) of x (B, C, L) and lag-order taps w (C, K); both contiguous."""
    key = ("fwd", x.shape, w.shape, x.dtype, x.get_device())
    run = _runners.get(key)
    if run is None:
        run = _remember(key, _runner_1d("fwd", x, w.shape[1]))
    return run(_c(x), _c(w))


def _dw1d_dgrad_impl(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    """dx (B, C, L) = Σ_j w[c, j]·dy[b, c, s + j]."""
    key = ("dgrad", dy.shape, w.shape, dy.dtype, dy.get_device())
    run = _runners.get(key)
    if run is None:
        run = _remember(key, _runner_1d("dgrad", dy, w.shape[1]))
    return run(_c(dy), _c(w))


def _dw1d_wgrad_impl(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    """dw (C, K) in lag order = Σ_b Σ_t dy[b, c, t]·x[b, c, t − j]."""
    key = ("wgrad", x.shape, K, x.dtype, x.get_device())
    run = _runners.get(key)
    if run is None:
        run = _remember(key, _runner_1d("wgrad", x, K))
    return run(_c(x), _c(dy))


def _dw1d_fwd_fake(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(x)


def _dw1d_dgrad_fake(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return torch.empty_like(dy)


def _dw1d_wgrad_fake(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    return x.new_empty((x.shape[1], K))


_dw1d_dgrad_op = library_op("depthwise_conv1d_dgrad", "(Tensor dy, Tensor w) -> Tensor", _dw1d_dgrad_impl,
                            _dw1d_dgrad_fake)
_dw1d_wgrad_op = library_op("depthwise_conv1d_wgrad", "(Tensor x, Tensor dy, SymInt K) -> Tensor", _dw1d_wgrad_impl,
                            _dw1d_wgrad_fake)


# the gradients as the backward calls them: the implementation directly in eager mode, else the op
def _dw1d_dgrad(dy: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
    return _dw1d_dgrad_impl(dy, w) if direct_call_ok(dy, w) else _dw1d_dgrad_op(dy, w)


def _dw1d_wgrad(x: torch.Tensor, dy: torch.Tensor, K: int) -> torch.Tensor:
    return _dw1d_wgrad_impl(x, dy, K) if direct_call_ok(x, dy) else _dw1d_wgrad_op(x, dy, K)


def _dw1d_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w = inputs
    ctx.save_for_backward(x, w)


def _dw1d_backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
    x, w = ctx.saved_tensors
    dy = dy.contiguous()
    dx = _dw1d_dgrad(dy, w) if ctx.needs_input_grad[0] else None
    dw = _dw1d_wgrad(x, dy, w.shape[1]) if ctx.needs_input_grad[1] else None
    return dx, dw


_dw1d_fwd_op = library_op("depthwise_conv1d_fwd", "(Tensor x, Tensor w) -> Tensor", _dw1d_fwd_impl, _dw1d_fwd_fake,
                          _dw1d_backward, _dw1d_setup)


class _Dw1dFunction(torch.autograd.Function):
    """Eager mode with gradients: the same forward and backward as the op, without the dispatcher."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return _dw1d_fwd_impl(x, w)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor | None, torch.Tensor | None]:
        return _dw1d_backward(ctx, dy)


_dw1d_function = eager_apply(_Dw1dFunction)


def _check_1d(x: torch.Tensor, w: torch.Tensor) -> None:
    if x.dim() != 3:
        raise InvalidInput("x", f"must be 3-D (B, C, L), got shape {tuple(x.shape)}")
    if w.dim() != 2 or w.shape[0] != x.shape[1]:
        raise InvalidInput("w", f"must be (C, K) or (C, 1, K) with C={x.shape[1]}, got shape {tuple(w.shape)}")
    if w.device != x.device or w.dtype != x.dtype:
        raise InvalidInput("w", f"must match x's device and dtype ({x.device}, {x.dtype}), got {w.device}, {w.dtype}")


_checked_1d: set[tuple[Any, ...]] = set()


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
    x, w, _ = autocast_inputs(x, w, None)   # inside torch.autocast("cuda"): the autocast dtype, as F.conv1d
    if torch.compiler.is_compiling():
        _check_1d(x, w)
        return _dw1d_fwd_op(x.contiguous(), w.flip(-1).contiguous())
    key = (x.shape, w.shape, x.dtype, w.dtype, x.get_device(), w.get_device())
    if key not in _checked_1d:  # the argument checks once per signature
        _check_1d(x, w)
        _checked_1d.add(key)
    x = x if x.is_contiguous() else x.contiguous()
    if not plain_eager(x, w):   # not compiling: checked above
        return _dw1d_fwd_op(x, w.flip(-1))
    if needs_grad(x, w):
        return _dw1d_function(x, w.flip(-1))     # flip recorded by autograd: dw maps back to PyTorch's order
    return _dw1d_fwd_impl(x, _lag_taps(w))


# ---- 2-D ----------------------------------------------------------------------------------------------------
def _out_size(n: int, k: int, stride: int, pad: int) -> int:
    return (n + 2 * pad - k) // stride + 1


def _problem_2d(t: torch.Tensor, N: int, C: int, H: int, W: int, R: int, S: int, stride_h: int, stride_w: int,
                pad_h: int, pad_w: int) -> ConvProblem:
    return _problem(N=N, C=C, H=H, W=W, K=C, R=R, S=S, stride_h=stride_h, stride_w=stride_w, pad_h=pad_h,
                    pad_w=pad_w, groups=C, dtype=_dtype(t))


def _runner_2d(path: str, t: torch.Tensor, geometry: tuple[int, ...],
               reference: Callable[..., torch.Tensor]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The first call of a 2-D signature; ``geometry`` = (N, C, H, W, R, S, sh, sw, ph, pw)."""
    if not _use_kernels(t):
        return reference
    prepared = _prepared(_problem_2d(t, *geometry), _device_index(t), path)
    return reference if prepared is None else _kernel_runner(prepared, t.dtype, like_a=_same_shape(prepared, t))


def _fwd2_key(x: torch.Tensor, w: torch.Tensor, geometry: tuple[int, int, int, int]) -> tuple[Any, ...]:
    """The 2-D forward runner's key in ``_runners``: shapes, dtype, device and (sh, sw, ph, pw)."""
    return ("fwd2", x.shape, w.shape, x.dtype, x.get_device(), *geometry)


def _fwd2_run(x: torch.Tensor, w: torch.Tensor,
              geometry: tuple[int, int, int, int]) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """The 2-D forward's ``run(x, w)`` of this signature (made on its first call)."""
    key = _fwd2_key(x, w, geometry)
    run = _runners.get(key)
    if run is None:
        N, C, H, W = x.shape
        stride, padding = geometry[:2], geometry[2:]
        run = _remember(key, _runner_2d(
            "fwd", x, (N, C, H, W, *w.shape[2:], *geometry),
            lambda a, b: F.conv2d(a, b, stride=stride, padding=padding, groups=C)))
    return run


def _dw2d_fwd_impl(x: torch.Tensor, w: torch.Tensor, stride_h: int, stride_w: int, pad_h: int,
                   pad_w: int) -> torch.Tensor:
    """y (N, C, P, Q) of x (N, C, H, W) and w (C, 1, R, S), groups = C; both contiguous (float32, float16 or
    bfloat16 on the kernels)."""
    return _fwd2_run(x, w, (stride_h, stride_w, pad_h, pad_w))(_c(x), _c(w))


def _dw2d_dgrad_impl(dy: torch.Tensor, w: torch.Tensor, H: int, W: int, stride_h: int, stride_w: int, pad_h: int,
                     pad_w: int) -> torch.Tensor:
    """dx (N, C, H, W) = Σ_{r,s} w[c,0,r,s]·dy[n, c, (h + pad_h − r)/stride_h, (w + pad_w − s)/stride_w] over the
    taps whose quotients are whole and inside P×Q (the forward's adjoint); dy (N, C, P, Q), w (C, 1, R, S)."""
    key = ("dgrad2", dy.shape, w.shape, dy.dtype, dy.get_device(), H, W, stride_h, stride_w, pad_h, pad_w)
    run = _runners.get(key)
    if run is None:
        N, C = dy.shape[:2]
        stride, padding = (stride_h, stride_w), (pad_h, pad_w)
        run = _remember(key, _runner_2d(
            "dgrad", dy, (N, C, H, W, *w.shape[2:], stride_h, stride_w, pad_h, pad_w),
            lambda a, b: torch.nn.grad.conv2d_input((N, C, H, W), b, a, stride=stride, padding=padding, groups=C)))
    return run(_c(dy), _c(w))


def _dw2d_wgrad_impl(x: torch.Tensor, dy: torch.Tensor, R: int, S: int, stride_h: int, stride_w: int, pad_h: int,
                     pad_w: int) -> torch.Tensor:
    """dw (C, 1, R, S) = Σ_{n,p,q} dy[n,c,p,q]·x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s];
    x (N, C, H, W), dy (N, C, P, Q)."""
    key = ("wgrad2", x.shape, x.dtype, x.get_device(), R, S, stride_h, stride_w, pad_h, pad_w)
    run = _runners.get(key)
    if run is None:
        N, C, H, W = x.shape
        stride, padding = (stride_h, stride_w), (pad_h, pad_w)
        run = _remember(key, _runner_2d(
            "wgrad", x, (N, C, H, W, R, S, stride_h, stride_w, pad_h, pad_w),
            lambda a, b: torch.nn.grad.conv2d_weight(a, (C, 1, R, S), b, stride=stride, padding=padding, groups=C)))
    return run(_c(x), _c(dy))


def _dw2d_fwd_fake(x: torch.Tensor, w: torch.Tensor, stride_h: int, stride_w: int, pad_h: int,
                   pad_w: int) -> torch.Tensor:
    N, C, H, W = x.shape
    return x.new_empty((N, C, _out_size(H, w.shape[2], stride_h, pad_h), _out_size(W, w.shape[3], stride_w, pad_w)))


def _dw2d_dgrad_fake(dy: torch.Tensor, w: torch.Tensor, H: int, W: int, stride_h: int, stride_w: int, pad_h: int,
                     pad_w: int) -> torch.Tensor:
    return dy.new_empty((dy.shape[0], dy.shape[1], H, W))


def _dw2d_wgrad_fake(x: torch.Tensor, dy: torch.Tensor, R: int, S: int, stride_h: int, stride_w: int, pad_h: int,
                     pad_w: int) -> torch.Tensor:
    return x.new_empty((x.shape[1], 1, R, S))


_dw2d_dgrad_op = library_op("depthwise_conv2d_dgrad", "(Tensor dy, Tensor w, SymInt H, SymInt W, SymInt stride_h, "
                                                      "SymInt stride_w, SymInt pad_h, SymInt pad_w) -> Tensor",
                            _dw2d_dgrad_impl, _dw2d_dgrad_fake)
_dw2d_wgrad_op = library_op("depthwise_conv2d_wgrad", "(Tensor x, Tensor dy, SymInt R, SymInt S, SymInt stride_h, "
                                                      "SymInt stride_w, SymInt pad_h, SymInt pad_w) -> Tensor",
                            _dw2d_wgrad_impl, _dw2d_wgrad_fake)


def _dw2d_dgrad(dy: torch.Tensor, w: torch.Tensor, *geometry: int) -> torch.Tensor:
    return _dw2d_dgrad_impl(dy, w, *geometry) if direct_call_ok(dy, w) else _dw2d_dgrad_op(dy, w, *geometry)


def _dw2d_wgrad(x: torch.Tensor, dy: torch.Tensor, *geometry: int) -> torch.Tensor:
    return _dw2d_wgrad_impl(x, dy, *geometry) if direct_call_ok(x, dy) else _dw2d_wgrad_op(x, dy, *geometry)


def _dw2d_setup(ctx: Any, inputs: tuple[Any, ...], output: torch.Tensor) -> None:
    x, w, sh, sw, ph, pw = inputs
    ctx.save_for_backward(x, w)
    ctx.geometry = (sh, sw, ph, pw)


def _backward_runner(prepared: Any, device: torch.device | None = None) -> Callable[..., Any]:
    """``run(dy, x, w) -> (dx, dw)`` on a chained input- and weight-gradient launch (operands dy, w, dx, x, dw
    [, workspace]: :func:`_chain_2d`); inputs not 16-byte aligned run on copies."""
    from convtune.ops.conv2d import torch_stream_getter, torch_workspace

    device = device if device is not None else torch.device("cuda", prepared.device)
    index, ws_bytes = prepared.device, prepared.workspace_bytes
    empty_like = torch.empty_like   # dx has x's shape, dtype and device, dw w's: the cheapest allocation call
    stream_of = torch_stream_getter(torch)
    workspace = torch_workspace(torch, index, device, ws_bytes)
    launch = prepared

    def run(dy: torch.Tensor, x: torch.Tensor, w: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        stream = stream_of(index)
        pdy, px, pw = dy.data_ptr(), x.data_ptr(), w.data_ptr()   # each read once, as in _kernel_runner
        if pdy & _ALIGN_MASK:
            dy = dy.clone()   # the copies stay referenced until the launch is enqueued
            pdy = dy.data_ptr()
        if px & _ALIGN_MASK:
            x = x.clone()
            px = x.data_ptr()
        if pw & _ALIGN_MASK:
            w = w.clone()
            pw = w.data_ptr()
        dx, dw = empty_like(x), empty_like(w)
        if ws_bytes:
            ws = workspace(stream)   # referenced until the launch is enqueued (a capture's fresh one is not kept)
            launch((pdy, pw, dx.data_ptr(), px, dw.data_ptr(), ws.data_ptr()), stream)
        else:
            launch((pdy, pw, dx.data_ptr(), px, dw.data_ptr()), stream)
        return dx, dw

    return run


def _chain_2d(x: torch.Tensor, w: torch.Tensor, geometry: tuple[int, int, int, int]) -> Callable[..., Any] | None:
    """The first backward of a 2-D signature needing both gradients: the input- and the weight-gradient kernels
    as one chained launch (:func:`convtune.kernels.prepared.chain`); None when either runs the reference
    formulas (the gradients then run one by one)."""
    from convtune.kernels.prepared import chain

    if not _use_kernels(x):
        return None
    N, C, H, W = x.shape
    sh, sw, ph, pw = geometry
    problem = _problem_2d(x, N, C, H, W, w.shape[2], w.shape[3], sh, sw, ph, pw)
    dgrad = _prepared(problem, _device_index(x), "dgrad")
    wgrad = _prepared(problem, _device_index(x), "wgrad")
    if dgrad is None or wgrad is None:
        return None
    names = ("x", "dy", "dw") + (("workspace",) if wgrad.workspace_bytes else ())
    both = chain([(dgrad, ("dy", "w", "dx")), (wgrad, names)], "depthwise2d.dgrad+wgrad")
    return _backward_runner(both)


def _dw2d_backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
    x, w = ctx.saved_tensors
    dy = dy.contiguous()
    need_x, need_w = ctx.needs_input_grad[:2]
    if need_x and need_w and direct_call_ok(dy, x, w):
        key = ("bwd2", x.shape, w.shape, x.dtype, x.get_device(), *ctx.geometry)
        try:
            both = _runners[key]
        except KeyError:
            both = _remember(key, _chain_2d(x, w, ctx.geometry))
        if both is not None and dy.dtype == x.dtype:
            dx, dw = both(dy, x, w)
            return dx, dw, None, None, None, None
    dx = _dw2d_dgrad(dy, w, x.shape[2], x.shape[3], *ctx.geometry) if need_x else None
    dw = _dw2d_wgrad(x, dy, w.shape[2], w.shape[3], *ctx.geometry) if need_w else None
    return dx, dw, None, None, None, None


_dw2d_fwd_op = library_op("depthwise_conv2d_fwd", "(Tensor x, Tensor w, SymInt stride_h, SymInt stride_w, "
                                                  "SymInt pad_h, SymInt pad_w) -> Tensor",
                          _dw2d_fwd_impl, _dw2d_fwd_fake, _dw2d_backward, _dw2d_setup)


class _Dw2dFunction(torch.autograd.Function):
    """Eager mode with gradients: the same forward and backward as the op, without the dispatcher."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor, geometry: tuple[int, int, int, int],
                run: Callable[[torch.Tensor, torch.Tensor], torch.Tensor]) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        ctx.geometry = geometry
        return run(x, w)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[Any, ...]:
        return (*_dw2d_backward(ctx, dy)[:2], None, None)


_dw2d_function = eager_apply(_Dw2dFunction)


def _check_2d(x: torch.Tensor, w: torch.Tensor, stride: Any, padding: Any) -> tuple[int, int, int, int]:
    """(sh, sw, ph, pw) of valid arguments.

    Raises:
        InvalidInput: naming the argument.
    """
    (sh, sw), (ph, pw) = as_pair("stride", stride), as_pair("padding", padding)
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
    return sh, sw, ph, pw


#: per call signature: [checked geometry (sh, sw, ph, pw), the forward's runner once an eager call made it (None
#: before)] — a hit then goes straight to the launch (cleared with the runners: :func:`clear_cache`)
_checked_2d: dict[tuple[Any, ...], list[Any]] = {}


def depthwise_conv2d(x: torch.Tensor, w: torch.Tensor, stride: int | tuple[int, int] = 1,
                     padding: int | tuple[int, int] = 0) -> torch.Tensor:
    """Depthwise 2-D convolution (groups = C, one filter per channel), PyTorch's convention.

    Args:
        x: (N, C, H, W).
        w: (C, 1, R, S).
        stride, padding: int or (h, w) pair (dilation 1).

    Returns:
        y (N, C, P, Q) equal to ``F.conv2d(x, w, stride=stride, padding=padding, groups=C)``.
        Inside ``torch.autocast("cuda")`` CUDA inputs are cast to the autocast dtype first, as PyTorch casts
        ``F.conv2d``'s (y in that dtype).

    Raises:
        InvalidInput: wrong ranks or shapes, stride < 1, padding < 0, devices or dtypes that differ, a CUDA dtype
            other than float32, float16, bfloat16 and float64.
    """
    x, w, _ = autocast_inputs(x, w, None)   # inside torch.autocast("cuda"): the autocast dtype, as F.conv2d
    if torch.compiler.is_compiling():
        return _dw2d_fwd_op(x.contiguous(), w.contiguous(), *_check_2d(x, w, stride, padding))
    try:
        key = (x.shape, w.shape, x.dtype, w.dtype, x.get_device(), w.get_device(), stride, padding)
        entry = _checked_2d.get(key)
        if entry is None:  # the argument checks once per signature
            if len(_checked_2d) >= RUNNER_ENTRIES:
                _checked_2d.clear()
            entry = _checked_2d[key] = [_check_2d(x, w, stride, padding), None]
    except TypeError:  # an unhashable argument (a list)
        entry = [_check_2d(x, w, stride, padding), None]
    geometry, run = entry
    x = x if x.is_contiguous() else x.contiguous()
    w = w if w.is_contiguous() else w.contiguous()
    if not plain_eager(x, w):   # not compiling: checked above
        return _dw2d_fwd_op(x, w, *geometry)
    if run is None:
        run = entry[1] = _fwd2_run(x, w, geometry)
    if needs_grad(x, w):
        return _dw2d_function(x, w, geometry, run)
    return run(x, w)


resolver.on_clear(clear_cache)
