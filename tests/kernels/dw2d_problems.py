"""The 2-D depthwise problem builder the CPU kernel tests share (test_depthwise2d_fast, _bwd, _packed)."""

from __future__ import annotations

from convtune.problem import ConvProblem


def dw(n: int, c: int, h: int, w: int, r: int, s: int, stride: int = 1, ph: int = 0, pw: int | None = None):
    """N=n C=K=groups=c, H×W image, R×S taps, one stride for both axes, padding ph (and pw, default ph)."""
    return ConvProblem(N=n, C=c, H=h, W=w, K=c, R=r, S=s, stride_h=stride, stride_w=stride, pad_h=ph,
                       pad_w=ph if pw is None else pw, groups=c)
