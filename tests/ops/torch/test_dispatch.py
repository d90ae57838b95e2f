"""The eager routing probes of ``convtune.ops.torch``: which calls may skip the dispatcher, which need autograd."""

from __future__ import annotations

import pytest
import torch
from torch.utils._python_dispatch import TorchDispatchMode

from convtune.ops.torch import _dispatch


class _Passthrough(TorchDispatchMode):
    def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
        return func(*args, **(kwargs or {}))


class _Sub(torch.Tensor):
    pass


def test_plain_tensors_and_none_go_direct() -> None:
    x, w = torch.randn(2, 3), torch.nn.Parameter(torch.randn(3))
    assert _dispatch.plain_eager(x, w, None)
    assert _dispatch.direct_call_ok(x, w, None)


def test_a_subclass_or_a_mode_takes_the_custom_op() -> None:
    x = torch.randn(2, 3)
    assert not _dispatch.plain_eager(x.as_subclass(_Sub))
    with _Passthrough():
        assert not _dispatch.plain_eager(x)
    assert _dispatch.plain_eager(x)


def test_compiling_takes_the_custom_op(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(_dispatch, "_is_compiling", lambda: True)
    assert not _dispatch.direct_call_ok(torch.randn(2))


def test_needs_grad_follows_grad_mode_and_every_input() -> None:
    x, w = torch.randn(2), torch.randn(2, requires_grad=True)
    assert _dispatch.needs_grad(x, w, None)
    assert _dispatch.needs_grad(None, x, w)
    assert not _dispatch.needs_grad(x, None)
    with torch.no_grad():
        assert not _dispatch.needs_grad(x, w)


class _Twice(torch.autograd.Function):
    @staticmethod
    def forward(ctx, x):  # type: ignore[no-untyped-def]
        return x * 2

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def]
        return dy * 2


class _WithSetupContext(torch.autograd.Function):
    @staticmethod
    def forward(x):  # type: ignore[no-untyped-def]
        return x * 2

    @staticmethod
    def setup_context(ctx, inputs, output):  # type: ignore[no-untyped-def]
        pass

    @staticmethod
    def backward(ctx, dy):  # type: ignore[no-untyped-def]
        return dy * 2


def test_eager_apply_records_the_same_graph_as_apply() -> None:
    apply = _dispatch.eager_apply(_Twice)
    assert apply is not _Twice.apply
    x = torch.randn(4, requires_grad=True)
    y = apply(x)
    assert type(y.grad_fn).__name__ == "_TwiceBackward"
    y.sum().backward()
    assert torch.equal(x.grad, torch.full((4,), 2.0))


def test_eager_apply_keeps_the_wrapper_where_it_does_work() -> None:
    assert _dispatch.eager_apply(_WithSetupContext) == _WithSetupContext.apply


def _counting_op(name: str) -> tuple[object, list[str]]:
    """A library_op whose implementation records each call, with a backward (so it has the Autograd kernel)."""
    lib = torch.library.Library(f"convtune_test_{name}", "DEF")
    calls: list[str] = []

    def impl(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        calls.append("impl")
        return x * w

    op = _dispatch.library_op("mul", "(Tensor x, Tensor w) -> Tensor", impl, lambda x, w: torch.empty_like(x),
                              lambda ctx, dy: (dy * ctx.w, dy * ctx.x),
                              lambda ctx, inputs, out: setattr(ctx, "x", inputs[0]) or setattr(ctx, "w", inputs[1]),
                              library=lib)
    op._test_library = lib  # type: ignore[attr-defined]   # keep the Library (and its registrations) alive
    return op, calls


def test_the_autograd_kernel_skips_the_redispatch_only_for_plain_backends() -> None:
    """No gradient needed and nothing below autograd but the backend: the implementation runs from the Autograd
    kernel itself. A mode (or fake tensors, functionalization) still sees the operator through the redispatch."""
    op, calls = _counting_op("shortcut")
    x, w = torch.randn(3), torch.randn(3)
    with torch.no_grad():
        torch.testing.assert_close(op(x, w), x * w)
    assert calls == ["impl"]
    seen: list[str] = []

    class _Log(TorchDispatchMode):
        def __torch_dispatch__(self, func, types, args=(), kwargs=None):  # type: ignore[no-untyped-def]
            seen.append(str(func))
            return func(*args, **(kwargs or {}))

    with _Log(), torch.no_grad():
        op(x, w)
    assert any("convtune_test_shortcut.mul" in f for f in seen)
    xg = x.clone().requires_grad_()
    (dx,) = torch.autograd.grad(op(xg, w).sum(), xg)
    torch.testing.assert_close(dx, w)
