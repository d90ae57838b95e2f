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
