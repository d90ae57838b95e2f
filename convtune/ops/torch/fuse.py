"""Inference fusion: fold BatchNorm into the convolutions and run bias, residual add and activation as one
epilogue pass after each convolution (:func:`fuse`, :class:`FusedConv2d`).

An inference network spends much of its time outside the convolutions: MobileNetV2 batch 32 (fp32, H100 and H200)
spent 1.5 of 2.7 ms per forward in BatchNorm, ReLU6 and adds, ResNet-50 batch 32 ≈3.4 of 9 ms — each a read and
a write of a whole activation map and a launch. :func:`fuse` traces the model with ``torch.fx`` and rewrites every
chain

    conv → BatchNorm2d (eval statistics) [→ + other] [→ activation]
    conv [→ + other] → activation                                           (no BatchNorm: the conv's own bias)

(activation: ReLU, ReLU6 or hardtanh(0, 6), SiLU, Hardswish, Hardsigmoid, Sigmoid — modules, functions or tensor
methods: YOLO's and EfficientNet's conv → BN → SiLU, MobileNetV3's Hardswish, squeeze-excitation gates; inference
identities — ``nn.Identity``, Dropout in eval, torchvision's ``stochastic_depth`` in eval on EfficientNet's residual
branch — may sit before the add and the activation) whose intermediate results have no other user into one
:class:`FusedConv2d` call: the convolution on convtune's
kernels with the folded filters ``w' = w · γ/√(σ² + ε)`` and bias ``b' = (b − μ) · γ/√(σ² + ε) + β``, then
:func:`convtune.ops.torch.epilogue.bias_act` (in place on the convolution's fresh output). Folding changes the
rounding of the products (≈ 1 ulp of the filters), nothing else.

The model is not changed: :func:`fuse` returns a new ``torch.fx.GraphModule`` over a deep copy. It is for
inference (BatchNorm's running statistics are frozen into the filters): a model in training mode is refused.
"""

from __future__ import annotations

import copy
import operator
from typing import Any

import torch
import torch.nn.functional as F
from torch import fx, nn

from convtune.errors import InvalidInput
from convtune.kernels.epilogue.launcher import ACTIVATIONS as ACTIVATION_CODES
from convtune.ops import conv2d as _conv2d_caches
from convtune.ops.torch import dense as _dense
from convtune.ops.torch import depthwise as _depthwise
from convtune.ops.torch import epilogue as _epilogue
from convtune.ops.torch._dispatch import needs_grad, plain_eager
from convtune.ops.torch.dense import conv2d, kernel_runner, math_of
from convtune.ops.torch.depthwise import depthwise_conv2d
from convtune.ops.torch.epilogue import _torch_bias_act, apply_bias_act
from convtune.ops.torch.modules import Conv2d, DepthwiseConv2d, _padding, support

__all__ = ["FusedConv2d", "fold_batch_norm", "fuse", "fused"]

_HALF = (torch.bfloat16, torch.float16)
_is_compiling = torch.compiler.is_compiling
_autocast_on = torch.is_autocast_enabled


def _autocast_dtype() -> torch.dtype | None:
    """The CUDA autocast dtype when autocast is on, else None."""
    return torch.get_autocast_dtype("cuda") if _autocast_on("cuda") else None


#: bumped whenever the ops forget their prepared calls (``convtune.ops.conv2d.clear_caches``, which the resolver's
#: clear runs too): fast-path entries of older generations hold stale runners and are rebuilt
_GENERATION = [0]
FAST_ENTRIES = 64


def _bump_generation() -> None:
    _GENERATION[0] += 1


_conv2d_caches.on_clear(_bump_generation)


class FusedConv2d(nn.Conv2d):
    """A convolution with BatchNorm folded in and its epilogue fused: ``forward(x, residual=None)`` =
    ``act(conv(x, weight) + bias (+ residual))``.

    An ``nn.Conv2d`` (same attributes: :func:`convtune.ops.torch.tune` sees and tunes it) whose ``bias`` is always
    set (float32 for 16-bit weights too: the epilogue adds it in fp32) and ``activation`` is ``"none"`` or one of
    the epilogue's (:data:`convtune.ops.torch.epilogue.ACTIVATIONS`). Dense (groups = 1) and depthwise
    convolutions run convtune's kernels, others PyTorch's; the epilogue is one pass
    (:func:`~convtune.ops.torch.epilogue.bias_act`). ``use_convtune=False`` runs the convolution on PyTorch's
    ``F.conv2d`` (same epilogue): the control a benchmark compares with.
    """

    def __init__(self, conv: nn.Conv2d, weight: torch.Tensor, bias: torch.Tensor, activation: str = "none") -> None:
        nn.Module.__init__(self)
        for name in ("in_channels", "out_channels", "kernel_size", "stride", "padding", "dilation", "transposed",
                     "output_padding", "groups", "padding_mode"):
            setattr(self, name, getattr(conv, name))
        if hasattr(conv, "_reversed_padding_repeated_twice"):
            self._reversed_padding_repeated_twice = conv._reversed_padding_repeated_twice
        self.weight = nn.Parameter(weight.detach().clone(), requires_grad=conv.weight.requires_grad)
        self.bias = nn.Parameter(bias.detach().to(torch.float32 if bias.dtype in _HALF else bias.dtype).clone(),
                                 requires_grad=conv.weight.requires_grad)
        self.activation = activation
        self.use_convtune = True

    def extra_repr(self) -> str:
        return super().extra_repr() + f", activation={self.activation}"

    def __getstate__(self) -> dict[str, Any]:
        """Pickling and deep copies leave the hot path's entries (launch closures) behind: rebuilt on use."""
        state = self.__dict__.copy()
        state.pop("_fast_entries", None)
        return state

    def _conv(self, x: torch.Tensor) -> torch.Tensor:
        route = self._route()
        if route is not None:
            kind, padding = route
            if kind == "dense":
                return conv2d(x, self.weight, None, self.stride, padding, self.dilation)
            return depthwise_conv2d(x, self.weight, self.stride, padding)  # type: ignore[arg-type]
        if self.padding_mode != "zeros":
            return F.conv2d(F.pad(x, self._reversed_padding_repeated_twice, mode=self.padding_mode), self.weight,
                            None, self.stride, 0, self.dilation, self.groups)
        return F.conv2d(x, self.weight, None, self.stride, self.padding, self.dilation, self.groups)

    def _route(self) -> tuple[str, tuple[int, int]] | None:
        """(``"dense"`` | ``"depthwise"``, integer padding) when convtune runs this convolution, else None; kept
        per attribute state (an eager forward should not re-derive it: ≈2 µs of host time per call)."""
        state = (self.use_convtune, self.groups, self.padding, self.padding_mode, self.stride, self.dilation)
        cached = self.__dict__.get("_route_cache")
        if cached is None or cached[0] != state:
            kind = support(self) if self.use_convtune else None
            route = None if kind is None else (kind, _padding(self))
            cached = self.__dict__["_route_cache"] = (state, route)
        return cached[1]  # type: ignore[return-value]

    def forward(self, input: torch.Tensor, residual: torch.Tensor | None = None) -> torch.Tensor:
        y = self._fast(input, residual)
        if y is not None:
            return y
        y = self._conv(input)
        code = ACTIVATION_CODES[self.activation]
        if residual is not None and residual.shape != y.shape:   # a broadcasting add: PyTorch's ops
            return _torch_bias_act(y, self.bias, residual, code)  # type: ignore[arg-type]
        # the arguments are consistent by construction (y is the convolution's, the bias has its channels): the
        # epilogue without bias_act's argument checks, in place on the fresh y
        out = apply_bias_act(y, self.bias, residual, code, True)  # type: ignore[arg-type]
        self._remember_fast(input, residual, y)
        return out

    # ---- the eager inference hot path -------------------------------------------------------------------------
    # Per input signature, once a general call has run it on the kernels: the convolution's runner and the
    # epilogue's in-place launcher, so a later call is one runner call and one launch (no argument checks, no
    # per-call lookups in the ops' caches). Eager only, no gradient, contiguous tensors; under autocast, inputs
    # already in the autocast dtype (the weight's kept cast).
    def _fast_key(self, x: torch.Tensor, residual: torch.Tensor | None) -> tuple[Any, ...]:
        """Everything the kept runner and launcher were made for: the input's and residual's signature, the
        precision class, the parameters' dtypes and device (a module moved or cast after its first call), the
        activation, the ops' cache generation."""
        res = None if residual is None else (residual.shape, residual.dtype, residual.get_device())
        w, b = self.weight, self.bias
        return (x.shape, x.dtype, x.get_device(), math_of(x), res, w.dtype, w.get_device(),
                None if b is None else b.dtype, self.activation, _autocast_dtype(), _GENERATION[0])

    def _weight_for(self, x: torch.Tensor) -> torch.Tensor | None:
        """The weight the convolution runs with: inside ``torch.autocast("cuda")`` the cast the ops keep per weight
        version (x must already be in the autocast dtype: a float32 input is cast by the general path), else the
        weight itself; None when the hot path does not apply."""
        dtype = _autocast_dtype()
        if dtype is None:
            return self.weight
        if x.dtype != dtype:
            return None
        return self.weight if self.weight.dtype == dtype else _dense._autocast_weight(self.weight, dtype)

    def _fast(self, x: torch.Tensor, residual: torch.Tensor | None) -> torch.Tensor | None:
        entries = self.__dict__.get("_fast_entries")
        if not entries or _is_compiling() or not plain_eager(x, residual):
            return None
        if needs_grad(x, self.weight, self.bias, residual) or self._route() is None:
            return None
        w = self._weight_for(x)
        if w is None:
            return None
        entry = entries.get(self._fast_key(x, residual))
        if entry is None or entry[0] != self.__dict__["_route_cache"][0]:   # new signature or new attributes
            return None
        if not x.is_contiguous() or (residual is not None and not residual.is_contiguous()):
            return None
        _, run, launch = entry
        y = run(x, w)
        y_ptr = y.data_ptr()
        launch(y_ptr, self.bias.data_ptr(), y_ptr if residual is None else residual.data_ptr())  # type: ignore[union-attr]
        return y

    def _remember_fast(self, x: torch.Tensor, residual: torch.Tensor | None, y: torch.Tensor) -> None:
        """After a general call: keep its runner and launcher for the signature when the kernels ran it."""
        # the module attributes, not imported names: tests fake the device by patching these checks
        if (_is_compiling() or not plain_eager(x, residual) or needs_grad(x, self.weight, self.bias, residual)
                or not _epilogue._kernels_take(y, residual)):
            return
        w = self._weight_for(x)
        if w is None:
            return
        route = self._route()
        bias = self.bias
        if route is None or bias is None or bias.dtype != torch.float32 or not bias.is_contiguous():
            return
        kind, padding = route
        if w.dtype != x.dtype or not x.is_contiguous():
            return
        if kind == "dense":
            if not _dense._kernels_run(x):
                return
            run = kernel_runner(x, w, self.stride, padding, self.dilation, math_of(x))
        else:
            if not _depthwise._use_kernels(x):
                return
            run = _depthwise._fwd2_run(x, w, (*self.stride, *padding))  # type: ignore[arg-type]
        launch = _epilogue.in_place_launcher(tuple(y.shape), y.dtype, y.get_device(),
                                             ACTIVATION_CODES[self.activation], residual is not None)
        if launch is None:
            return
        entries = self.__dict__.setdefault("_fast_entries", {})
        if len(entries) >= FAST_ENTRIES:
            entries.clear()
        entries[self._fast_key(x, residual)] = (self.__dict__["_route_cache"][0], run, launch)


# ---- the graph rewrite -------------------------------------------------------------------------------------------
class _Tracer(fx.Tracer):
    """torch.fx's tracer with every ``nn.Conv2d`` subclass (convtune's drop-ins too) kept as one call."""

    def is_leaf_module(self, m: nn.Module, qualname: str) -> bool:
        return isinstance(m, nn.Conv2d) or super().is_leaf_module(m, qualname)


#: the forwards of the convolutions fuse() rewrites (a subclass with its own forward is left alone)
_FORWARDS = (nn.Conv2d.forward, Conv2d.forward, DepthwiseConv2d.forward)
_RELU_FUNCTIONS = (F.relu, torch.relu, torch.relu_)
_ADD_FUNCTIONS = (operator.add, operator.iadd, torch.add)


def _sole_user(node: fx.Node) -> fx.Node | None:
    users = list(node.users)
    return users[0] if len(users) == 1 else None


#: activation modules (exact types) and functions / tensor methods of one argument (plus ``inplace``) -> the name
_ACT_MODULES: dict[type, str] = {nn.ReLU: "relu", nn.ReLU6: "relu6", nn.SiLU: "silu", nn.Hardswish: "hardswish",
                                 nn.Hardsigmoid: "hardsigmoid", nn.Sigmoid: "sigmoid"}
_ACT_FUNCTIONS: dict[Any, str] = {**dict.fromkeys(_RELU_FUNCTIONS, "relu"), F.relu6: "relu6", F.silu: "silu",
                                  F.hardswish: "hardswish", F.hardsigmoid: "hardsigmoid", torch.sigmoid: "sigmoid",
                                  F.sigmoid: "sigmoid"}
_ACT_METHODS = {"relu": "relu", "relu_": "relu", "sigmoid": "sigmoid", "sigmoid_": "sigmoid"}


def _activation(node: fx.Node, modules: dict[str, nn.Module], source: fx.Node) -> str | None:
    """The epilogue's name of the activation ``node`` applies to ``source`` alone (relu, relu6 — ``ReLU6`` or
    ``hardtanh(0, 6)`` — silu, hardswish, hardsigmoid, sigmoid), else None."""
    if not node.args or node.args[0] is not source:
        return None
    if node.op == "call_module":
        m = modules[str(node.target)]
        if type(m) is nn.Hardtanh and (m.min_val, m.max_val) == (0.0, 6.0):
            return "relu6"
        return _ACT_MODULES.get(type(m))
    extra = {k: v for k, v in node.kwargs.items() if k != "inplace"}
    if node.op == "call_function" and node.target is F.hardtanh:
        bounds = (*node.args[1:3], *(extra.get(k) for k in ("min_val", "max_val") if k in extra))
        return "relu6" if tuple(float(b) for b in bounds) == (0.0, 6.0) else None  # type: ignore[arg-type]
    if len(node.args) != 1 or extra:
        return None
    if node.op == "call_function":
        return _ACT_FUNCTIONS.get(node.target)
    if node.op == "call_method" and not node.kwargs:
        return _ACT_METHODS.get(str(node.target))
    return None


#: modules that are the identity in eval mode (Dropout: when not training)
_DROPOUTS = (nn.Dropout, nn.Dropout1d, nn.Dropout2d, nn.Dropout3d, nn.AlphaDropout, nn.FeatureAlphaDropout)
_DROPOUT_FUNCTIONS = (F.dropout, F.dropout1d, F.dropout2d, F.dropout3d, F.alpha_dropout, F.feature_alpha_dropout)


def _passthrough(node: fx.Node, modules: dict[str, nn.Module], source: fx.Node) -> bool:
    """Whether ``node`` returns ``source`` unchanged at inference: ``nn.Identity``, a Dropout module not training,
    ``F.dropout(..., training=False)``, torchvision's ``stochastic_depth(..., training=False)`` (EfficientNet's
    residual branch; torchvision wraps it for torch.fx, so it stays a call)."""
    if not node.args or node.args[0] is not source:
        return False
    if node.op == "call_module":
        m = modules[str(node.target)]
        return len(node.args) == 1 and not node.kwargs and (
            type(m) is nn.Identity or (type(m) in _DROPOUTS and not m.training))
    if node.op != "call_function":
        return False
    if node.target in _DROPOUT_FUNCTIONS:
        training = node.kwargs.get("training", node.args[2] if len(node.args) > 2 else True)
        return training is False
    target = node.target
    if getattr(target, "__name__", "") == "stochastic_depth" and str(getattr(target, "__module__", "")).startswith(
            "torchvision"):
        training = node.kwargs.get("training", node.args[3] if len(node.args) > 3 else True)
        return training is False
    return False


def _added(node: fx.Node, source: fx.Node) -> fx.Node | None:
    """The other operand when ``node`` is ``source + other`` (either order; ``source.add_(other)``), else None.
    ``other.add_(source)`` is not taken: it writes ``other``, which later code may read."""
    if len(node.args) != 2 or node.kwargs:
        return None
    a, b = node.args
    if node.op == "call_function" and node.target in _ADD_FUNCTIONS:
        other = b if a is source else a if b is source else None
    elif node.op == "call_method" and node.target in ("add", "add_") and a is source:
        other = b
    else:
        return None
    return other if isinstance(other, fx.Node) and other is not source else None


def _batch_norm(node: fx.Node, modules: dict[str, nn.Module], source: fx.Node,
                channels: int) -> nn.BatchNorm2d | None:
    if node.op != "call_module" or node.args != (source,) or node.kwargs:
        return None
    m = modules[str(node.target)]
    if type(m) is not nn.BatchNorm2d:
        return None
    ok = (m.num_features == channels and m.running_mean is not None
          and m.running_var is not None and not m.training)
    return m if ok else None


def fold_batch_norm(conv: nn.Conv2d, bn: nn.BatchNorm2d | None) -> tuple[torch.Tensor, torch.Tensor]:
    """(w', b') of ``bn(conv(x)) == conv'(x)``: w' = w · s, b' = (b − μ) · s + β with s = γ / √(σ² + ε) per output
    channel (computed in float64; w' in the weight's dtype, b' in the bias's, float32 for 16-bit ones); without
    ``bn`` the conv's own (w, b or 0)."""
    w = conv.weight.detach()
    b = conv.bias.detach() if conv.bias is not None else torch.zeros(w.shape[0], dtype=w.dtype, device=w.device)
    if bn is None:
        return w, b
    if bn.running_var is None or bn.running_mean is None:
        raise InvalidInput("bn", "has no running statistics to fold (track_running_stats=False)")
    var, mean = bn.running_var.double(), bn.running_mean.double()
    gamma = bn.weight.detach().double() if bn.weight is not None else torch.ones_like(var)
    beta = bn.bias.detach().double() if bn.bias is not None else torch.zeros_like(var)
    scale = gamma / torch.sqrt(var + bn.eps)
    folded_w = (w.double() * scale.view(-1, 1, 1, 1)).to(w.dtype)
    # the epilogue adds the bias in fp32: a 16-bit model's folded bias is kept in float32, not rounded to 16 bits
    folded_b = ((b.double() - mean) * scale + beta).to(torch.float32 if b.dtype in _HALF else b.dtype)
    return folded_w, folded_b


def fuse(model: nn.Module) -> fx.GraphModule:
    """A copy of ``model`` (in eval mode) with BatchNorm folded into its convolutions and each convolution's bias,
    residual add and activation run as one :class:`FusedConv2d` (module docstring).

    Args:
        model: an ``nn.Module`` in eval mode whose forward ``torch.fx`` can trace (torchvision's ResNets, VGGs,
            MobileNets trace). Plain ``nn.Conv2d`` and convtune's drop-ins are fused; convolutions shared by two
            call sites or whose parameters the forward also reads, and BatchNorm without running statistics, are left as
            they are.

    Returns:
        A ``torch.fx.GraphModule``: same outputs up to rounding, same parameter names for the fused convolutions
        (their values folded), the folded BatchNorm modules gone. :func:`fused` lists what was fused.

    Raises:
        InvalidInput: ``model`` is in training mode (BatchNorm would use batch statistics), or torch.fx cannot
            trace it (the message has torch.fx's reason).

    Example:
        >>> model = ct.fuse(torchvision.models.mobilenet_v2().cuda().eval())          # doctest: +SKIP
    """
    if not isinstance(model, nn.Module):
        raise InvalidInput("model", f"must be a torch.nn.Module, got {type(model).__name__}")
    if model.training:
        raise InvalidInput("model", "is in training mode: fuse() folds BatchNorm's running statistics into the "
                                    "filters, for inference; call model.eval() first")
    copied = copy.deepcopy(model)
    try:
        graph = _Tracer().trace(copied)
    except Exception as exc:  # torch.fx raises many types; the user needs its message
        raise InvalidInput("model", f"torch.fx cannot trace its forward ({type(exc).__name__}: {exc}); fuse() "
                                    "needs a symbolically traceable model") from None
    gm = fx.GraphModule(copied, graph, copied.__class__.__name__)
    modules = dict(gm.named_modules())
    calls: dict[str, int] = {}
    read: set[str] = set()     # modules whose parameters or buffers the forward also reads (get_attr)
    for node in gm.graph.nodes:
        if node.op == "call_module":
            calls[node.target] = calls.get(node.target, 0) + 1
        elif node.op == "get_attr":
            parts = str(node.target).split(".")
            read.update(".".join(parts[:i]) for i in range(1, len(parts)))
    for node in list(gm.graph.nodes):
        if (node.op != "call_module" or calls[node.target] != 1 or node.target in read or len(node.args) != 1
                or node.kwargs):
            continue
        conv = modules[node.target]
        if not isinstance(conv, nn.Conv2d) or isinstance(conv, FusedConv2d) or type(conv).forward not in _FORWARDS:
            continue
        _fuse_chain(gm, modules, node, conv, read)
    gm.graph.eliminate_dead_code()
    gm.delete_all_unused_submodules()
    gm.graph.lint()
    gm.recompile()
    return gm


def _fuse_chain(gm: fx.GraphModule, modules: dict[str, nn.Module], node: fx.Node, conv: nn.Conv2d,
                read: set[str]) -> None:
    """Rewrite conv → [BatchNorm] → [+ other] → [activation] starting at ``node`` (single-user links only; a
    BatchNorm whose statistics the forward also reads, or that is called elsewhere, is not folded)."""
    end, removed = node, []
    bn = other = activation = None

    def through(nxt: fx.Node | None, end: fx.Node) -> tuple[fx.Node, fx.Node | None, list[fx.Node]]:
        """Past the inference identities after ``end`` (single users only): the last of them, its user, them."""
        skipped = []
        while nxt is not None and _passthrough(nxt, modules, end):
            skipped.append(nxt)
            end, nxt = nxt, _sole_user(nxt)
        return end, nxt, skipped

    nxt = _sole_user(end)
    if (nxt is not None and str(nxt.target) not in read and (bn := _batch_norm(nxt, modules, end, conv.out_channels))
            is not None):
        end, nxt = nxt, _sole_user(nxt)
        removed.append(end)
    last, after, skipped = through(nxt, end)
    if after is not None and (other := _added(after, last)) is not None:
        removed += [*skipped, after]
        end, nxt = after, _sole_user(after)
    last, after, skipped = through(nxt, end)
    if after is not None and (activation := _activation(after, modules, last)) is not None:
        removed += [*skipped, after]
        end = after
    if not removed:
        return
    weight, bias = fold_batch_norm(conv, bn)
    fused_conv = FusedConv2d(conv, weight, bias, activation or "none")
    _set(gm, str(node.target), fused_conv)
    modules[str(node.target)] = fused_conv
    with gm.graph.inserting_before(end):
        call = gm.graph.call_module(str(node.target), (node.args[0],) if other is None else (node.args[0], other))
    end.replace_all_uses_with(call)
    for dead in reversed([node, *removed]):
        gm.graph.erase_node(dead)


def _set(root: nn.Module, qualname: str, module: nn.Module) -> None:
    parent, _, name = qualname.rpartition(".")
    setattr(root.get_submodule(parent) if parent else root, name, module)


def fused(model: nn.Module) -> list[tuple[str, str, bool]]:
    """(qualified name, activation, residual?) of every :class:`FusedConv2d` of ``model`` (residual: read from the
    traced graph when ``model`` is a GraphModule, else False)."""
    residual: dict[str, bool] = {}
    if isinstance(model, fx.GraphModule):
        for node in model.graph.nodes:
            if node.op == "call_module":
                residual[str(node.target)] = len(node.args) > 1
    return [(name, m.activation, residual.get(name, False)) for name, m in model.named_modules()
            if isinstance(m, FusedConv2d)]
