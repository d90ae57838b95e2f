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
