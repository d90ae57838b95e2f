"""How a ``convtune.ops.torch`` call reaches its implementation: directly, through ``autograd.Function``, or as a
``torch.library`` op.

Every op is a ``torch.library`` custom op with a fake implementation and registered autograd: that is what
``torch.compile`` traces and what a mode (FakeTensorMode, a TorchDispatchMode, functorch transforms) sees. In
plain eager mode the dispatcher costs more host time than the whole launch (≈15–40 µs per custom-op call with
autograd against ≈12 µs for the implementation), so the public functions route:

* eager, plain tensors, no mode active, no gradient needed → the implementation itself;
* the same but a gradient is needed → an ``autograd.Function`` whose forward is the implementation and whose
  backward is the op's registered backward (the same code), applied through :func:`eager_apply`;
* anything else (tracing, compiling, subclasses, modes, functorch) → the custom op.

The three give the same results; only the host cost differs.
"""

from collections.abc import Callable
from typing import Any

import torch

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
