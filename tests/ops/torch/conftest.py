"""Fixtures of the PyTorch op tests."""

from __future__ import annotations

from collections.abc import Iterator

import pytest


@pytest.fixture
def strict_fp32() -> Iterator[None]:
    """cuDNN's references and PyTorch's gradients in true fp32 (PyTorch's default is TF32 for convolutions);
    restored afterwards."""
    torch = pytest.importorskip("torch")
    saved = torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32
    torch.backends.cudnn.allow_tf32 = torch.backends.cuda.matmul.allow_tf32 = False
    yield
    torch.backends.cudnn.allow_tf32, torch.backends.cuda.matmul.allow_tf32 = saved
