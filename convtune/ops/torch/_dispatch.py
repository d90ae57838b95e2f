"""How a ``convtune.ops.torch`` call reaches its implementation: directly, through ``autograd.Function``, or as a
``torch.library`` op.

Every op is a ``torch.library`` operator with a fake implementation and, where it has a backward, an autograd
kernel (:func:`library_op`): that is what ``torch.compile`` traces and what a mode (FakeTensorMode, a
TorchDispatchMode, functorch transforms) sees. In plain eager mode the dispatcher still costs host time (a Python
kernel behind the C++ dispatcher, and one more for autograd), so the public functions route:

* eager, plain tensors, no mode active, no gradient needed → the implementation itself;
* the same but a gradient is needed → an ``autograd.Function`` whose forward is the implementation and whose
  backward is the op's registered backward (the same code), applied through :func:`eager_apply`;
* anything else (tracing, compiling, subclasses, modes, functorch) → the operator.

The three give the same results; only the host cost differs.
"""

from collections.abc import Callable
from typing import Any

import torch

#: the ``convtune`` operator namespace every op is defined in (one Library object: ops live as long as it does)
LIBRARY = torch.library.Library("convtune", "DEF")

_PLAIN = (torch.Tensor, torch.nn.Parameter)
_dispatch_stack_len = getattr(torch._C, "_len_torch_dispatch_stack", None)
_function_mode_enabled = getattr(torch._C, "_is_torch_function_mode_enabled", None)
_functorch_active = getattr(torch._C, "_are_functorch_transforms_active", None)
_PROBES_AVAILABLE = None not in (_dispatch_stack_len, _function_mode_enabled, _functorch_active)
_is_compiling = torch.compiler.is_compiling
_grad_enabled = torch.is_grad_enabled


def direct_call_ok(*tensors: Any) -> bool:
    """Whether the implementation may run without the dispatcher: eager (not compiling), only plain
    ``torch.Tensor`` / ``Parameter`` arguments (``None`` allowed), no dispatch or function mode, no functorch
    transform. False whenever a probe this torch build lacks would be needed."""
    return not _is_compiling() and plain_eager(*tensors)


def plain_eager(*tensors: Any) -> bool:
    """:func:`direct_call_ok` for a caller that has already checked it is not compiling (each probe costs host
    time on every eager call)."""
    if not _PROBES_AVAILABLE:
        return False
    for t in tensors:
        if t is not None and type(t) not in _PLAIN:
            return False
    return not _dispatch_stack_len() and not _function_mode_enabled() and not _functorch_active()  # type: ignore[misc]


def eager_apply(function: type[torch.autograd.Function]) -> Callable[..., Any]:
    """``function.apply`` for the plain-eager route, without ``torch.autograd.Function.apply``'s Python wrapper:
    the C++ ``_FunctionBase.apply`` bound to ``function``. The wrapper binds default arguments (only for a
    ``setup_context`` function, which these are not) and unwraps dead functorch wrappers (none reach the route:
    :func:`plain_eager` holds) — ≈2 µs per call on the CPU. Falls back to ``function.apply`` where torch has no
    such base."""
    base = getattr(torch._C, "_FunctionBase", None)
    if base is None or not issubclass(function, base) or "setup_context" in vars(function):
        return function.apply
    bound: Callable[..., Any] = super(torch.autograd.Function, function).apply  # type: ignore[misc]
    return bound


def needs_grad(*tensors: Any) -> bool:
    """Whether autograd must record this call (grad mode on and some input requires grad)."""
    if not _grad_enabled():
        return False
    for t in tensors:  # noqa: SIM110 - a loop, not any(generator): this runs on every eager call
        if t is not None and t.requires_grad:
            return True
    return False


def _plain_below_autograd() -> frozenset[int]:
    """Raw reprs of the keysets below autograd that hold only a backend (CPU, CUDA) and ADInplaceOrView: where a
    redispatch reaches the CompositeExplicitAutograd implementation directly."""
    keys = torch._C.DispatchKey
    plain = set()
    for backend in (keys.CPU, keys.CUDA):
        only = torch._C.DispatchKeySet(backend)
        plain |= {only.raw_repr(), only.add(keys.ADInplaceOrView).raw_repr()}
    return frozenset(plain)


_PLAIN_BELOW_AUTOGRAD = _plain_below_autograd()


def library_op(name: str, schema: str, impl: Callable[..., Any], fake: Callable[..., Any],
               backward: Callable[..., Any] | None = None,
               setup_context: Callable[..., Any] | None = None, library: Any = LIBRARY) -> Any:
    """``<namespace>::<name><schema>`` through ``torch.library.Library`` (``library``, default :data:`LIBRARY`:
    the ``convtune`` namespace; benchmarks define their own): ``impl`` for every backend
    (CompositeExplicitAutograd), ``fake`` for FakeTensor tracing, and with ``backward`` an Autograd kernel —
    ``setup_context(ctx, inputs, output)`` and ``backward(ctx, *grads)`` as ``register_autograd`` takes them — that
    records a node only when grad mode is on and an input requires grad; otherwise it redispatches below autograd,
    or, when nothing but the backend (CPU, CUDA) sits there — no mode, fake tensor or functionalization — calls
    ``impl`` itself (the redispatch would reach it one boxed Python call later: ≈3–5 µs per call on a 2-core CPU).
    Returns the ``OpOverload``.

    Why not ``torch.library.custom_op``: its Python wrappers (schema and aliasing checks, the redispatching
    autograd kernel every call runs through) cost 20–30 µs a call against 5–6 µs for a Python kernel registered
    on the Library directly, on a CPU where PyTorch's own relu took 4–6 µs (2026-12-06); opcheck, fake tensors,
    ``torch.compile`` and gradcheck see the same operator."""
    library.define(name + schema)
    library.impl(name, impl, "CompositeExplicitAutograd")
    torch.library.register_fake(f"{library.ns}::{name}", fake, lib=library)
    op = getattr(getattr(torch.ops, library.ns), name).default
    if backward is None:
        return op
    if setup_context is None:
        raise TypeError(f"{name}: a backward needs its setup_context")
    setup, grads_of = setup_context, backward
    below_autograd = torch._C._AutoDispatchBelowAutograd

    class _Function(torch.autograd.Function):
        @staticmethod
        def forward(ctx: Any, *args: Any) -> Any:
            with below_autograd():
                out = op(*args)
            setup(ctx, args, out)
            return out

        @staticmethod
        def backward(ctx: Any, *grads: Any) -> Any:
            return grads_of(ctx, *grads)

    apply = _Function.apply
    tensors = tuple(i for i, arg in enumerate(op._schema.arguments) if str(arg.type) in ("Tensor", "Optional[Tensor]"))
    after_autograd = torch._C._after_autograd_keyset

    def autograd_kernel(keyset: Any, *args: Any) -> Any:
        # the tensor arguments by position (from the schema) and a redispatch with the keyset the dispatcher hands
        # over: ≈2 µs less per call than an isinstance scan and a below-autograd guard around a fresh dispatch
        if _grad_enabled():
            for i in tensors:
                t = args[i]
                if t is not None and t.requires_grad:
                    return apply(*args)
        below = keyset & after_autograd
        if below.raw_repr() in _PLAIN_BELOW_AUTOGRAD:
            # nothing between autograd and the backend (no mode, fake tensor, functionalization): the redispatch
            # would only reach this same implementation, one boxed Python call later
            return impl(*args)
        return op.redispatch(below, *args)

    library.impl(name, autograd_kernel, "Autograd", with_keyset=True)
    return op
