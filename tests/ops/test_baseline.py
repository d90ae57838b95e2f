"""``convtune.ops.baseline``: PyTorch's own convolution timed as a baseline. On the CPU: what is not timed (no CUDA,
a causal 1-D problem) and that cuDNN's flags are put back; on the GPU (``gpu`` marker): a time, in the problem's
precision class, with the caller's flags unchanged."""

from __future__ import annotations

import pytest

torch = pytest.importorskip("torch")

from convtune.ops.baseline import cudnn_flags, pytorch_ms  # noqa: E402
from convtune.problem import ConvProblem  # noqa: E402


def _flags() -> tuple[bool, str]:
    cudnn = torch.backends.cudnn
    return cudnn.benchmark, cudnn.conv.fp32_precision


@pytest.mark.parametrize("tf32", [True, False])
@pytest.mark.parametrize("start", ["tf32", "ieee"])
def test_cudnn_flags_are_put_back(tf32: bool, start: str) -> None:
    cudnn = torch.backends.cudnn
    saved = _flags()
    try:
        cudnn.benchmark, cudnn.conv.fp32_precision = False, start
        with cudnn_flags(torch, tf32):
            assert cudnn.benchmark is True
            assert cudnn.conv.fp32_precision == ("tf32" if tf32 else "ieee")
        assert _flags() == (False, start)
        with pytest.raises(RuntimeError), cudnn_flags(torch, tf32):   # put back when the block raises, too
            raise RuntimeError("inside")
        assert _flags() == (False, start)
    finally:
        cudnn.benchmark, cudnn.conv.fp32_precision = saved


def test_nothing_is_timed_without_cuda_or_for_a_causal_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    dense = ConvProblem.parse("N=2 C=8 H=12 W=12 K=8 R=3 S=3 pad=1")
    causal = ConvProblem.parse("B=2 C=8 L=64 K=4")   # a causal 1-D depthwise problem
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    assert pytorch_ms(causal) is None
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    assert pytorch_ms(dense) is None


@pytest.mark.gpu
@pytest.mark.parametrize("spec", ["N=4 C=32 H=28 W=28 K=64 R=3 S=3 pad=1",
                                  "N=4 C=32 H=28 W=28 K=64 R=3 S=3 pad=1 math=tf32",
                                  "N=4 C=32 H=28 W=28 K=64 R=1 S=1 dtype=bfloat16",
                                  "N=4 C=64 H=28 W=28 K=64 R=3 S=3 stride=2 pad=1 groups=64"])
def test_a_time_on_the_gpu_and_the_flags_unchanged(spec: str) -> None:
    saved = _flags()
    ms = pytorch_ms(ConvProblem.parse(spec))
    assert ms is not None and 0 < ms < 100
    assert _flags() == saved
