"""float64 references of the depthwise paths (NumPy, or CuPy when given CuPy arrays).

1-D causal, lag-order taps (``w[c, 0]`` multiplies the current sample; PyTorch's ``F.conv1d`` weight of
the left-padded input is ``w.flip(-1)``), x, dy: (B, C, L), w: (C, K)::

    fwd   y[b,c,t]  = Σ_{j<K, t−j≥0}  w[c,j] · x[b,c,t−j]
    dgrad dx[b,c,s] = Σ_{j<K, s+j<L}  w[c,j] · dy[b,c,s+j]
    wgrad dw[c,j]   = Σ_b Σ_{t=j}^{L−1} dy[b,c,t] · x[b,c,t−j]      (0 for j ≥ L)

2-D depthwise, x: (N, C, H, W), w: (C, 1, R, S), stride (sh, sw), padding (ph, pw), y: (N, C, P, Q)::

    fwd   y[n,c,p,q]  = Σ_{r,s} w[c,0,r,s] · x[n, c, p·sh − ph + r, q·sw − pw + s]
    dgrad dx[n,c,h,w] = Σ_{p,q,r,s: p·sh − ph + r = h, q·sw − pw + s = w} w[c,0,r,s] · dy[n,c,p,q]
    wgrad dw[c,0,r,s] = Σ_{n,p,q} dy[n,c,p,q] · x[n, c, p·sh − ph + r, q·sw − pw + s]

Each loops over the taps only (one vectorised shifted product per tap), so they are quick enough for
the GPU tests' shapes.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from convtune.errors import InvalidProblem


def _xp(a: Any) -> Any:
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def _check_1d(a: Any, w_or_b: Any, *, weight: bool) -> None:
    if a.ndim != 3:
        raise InvalidProblem("x", f"shape {tuple(a.shape)} must be 3-D (B, C, L)")
    if weight and (w_or_b.ndim != 2 or w_or_b.shape[0] != a.shape[1]):
        raise InvalidProblem("w", f"shape {tuple(w_or_b.shape)} must be (C, K) with C={a.shape[1]}")
    if not weight and tuple(w_or_b.shape) != tuple(a.shape):
        raise InvalidProblem("dy", f"shape {tuple(w_or_b.shape)} must equal x's {tuple(a.shape)}")


def dw1d_fwd_reference(x: Any, w: Any) -> Any:
    """y (B, C, L) float64 of the causal depthwise convolution (module docstring)."""
    xp = _xp(x)
    x64, w64 = xp.asarray(x, dtype=xp.float64), xp.asarray(w, dtype=xp.float64)
    _check_1d(x64, w64, weight=True)
    L = x64.shape[2]
    y = xp.zeros_like(x64)
    for j in range(min(w64.shape[1], L)):
        y[:, :, j:] += w64[None, :, j, None] * x64[:, :, :L - j]
    return y


def dw1d_dgrad_reference(dy: Any, w: Any) -> Any:
    """dx (B, C, L) float64: dx[s] = Σ_j w[j]·dy[s+j] (module docstring)."""
    xp = _xp(dy)
    d64, w64 = xp.asarray(dy, dtype=xp.float64), xp.asarray(w, dtype=xp.float64)
    _check_1d(d64, w64, weight=True)
    L = d64.shape[2]
    dx = xp.zeros_like(d64)
    for j in range(min(w64.shape[1], L)):
        dx[:, :, :L - j] += w64[None, :, j, None] * d64[:, :, j:]
    return dx


def dw1d_wgrad_reference(x: Any, dy: Any, K: int) -> Any:
    """dw (C, K) float64: dw[c,j] = Σ_b Σ_t dy[b,c,t]·x[b,c,t−j] (module docstring)."""
    xp = _xp(x)
    x64, d64 = xp.asarray(x, dtype=xp.float64), xp.asarray(dy, dtype=xp.float64)
    _check_1d(x64, d64, weight=False)
    if isinstance(K, bool) or not isinstance(K, int) or K < 1:
        raise InvalidProblem("K", f"{K!r} must be an integer >= 1")
    L = x64.shape[2]
    dw = xp.zeros((x64.shape[1], K), dtype=xp.float64)
    for j in range(min(K, L)):
        dw[:, j] = (d64[:, :, j:] * x64[:, :, :L - j]).sum(axis=(0, 2))
    return dw


def dw2d_fwd_reference(x: Any, w: Any, stride: tuple[int, int] = (1, 1), padding: tuple[int, int] = (0, 0)) -> Any:
    """y (N, C, P, Q) float64 of the 2-D depthwise convolution (module docstring)."""
    xp = _xp(x)
    x64, w64 = xp.asarray(x, dtype=xp.float64), xp.asarray(w, dtype=xp.float64)
    if x64.ndim != 4:
        raise InvalidProblem("x", f"shape {tuple(x64.shape)} must be 4-D (N, C, H, W)")
    if w64.ndim != 4 or w64.shape[0] != x64.shape[1] or w64.shape[1] != 1:
        raise InvalidProblem("w", f"shape {tuple(w64.shape)} must be (C, 1, R, S) with C={x64.shape[1]}")
    (sh, sw), (ph, pw) = stride, padding
    N, C, H, W = x64.shape
    R, S = w64.shape[2:]
    P, Q = (H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1
    if P < 1 or Q < 1:
        raise InvalidProblem("x", f"output is empty: P={P}, Q={Q}")
    xpad = xp.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    y = xp.zeros((N, C, P, Q), dtype=xp.float64)
    for r in range(R):
        for s in range(S):
            y += w64[None, :, 0, r, s, None, None] * xpad[:, :, r:r + (P - 1) * sh + 1:sh, s:s + (Q - 1) * sw + 1:sw]
    return y


def dw2d_dgrad_reference(dy: Any, w: Any, input_hw: tuple[int, int], stride: tuple[int, int] = (1, 1),
                         padding: tuple[int, int] = (0, 0)) -> Any:
    """dx (N, C, H, W) float64, the adjoint of :func:`dw2d_fwd_reference` (module docstring): every dy[p, q]
    scattered through every tap into the zero-padded input, then the padding cropped."""
    xp = _xp(dy)
    d64, w64 = xp.asarray(dy, dtype=xp.float64), xp.asarray(w, dtype=xp.float64)
    if d64.ndim != 4 or w64.ndim != 4 or w64.shape[0] != d64.shape[1] or w64.shape[1] != 1:
        raise InvalidProblem("dy", f"dy {tuple(d64.shape)} must be (N, C, P, Q) and w {tuple(w64.shape)} (C, 1, R, S)")
    (sh, sw), (ph, pw), (H, W) = stride, padding, input_hw
    N, C, P, Q = d64.shape
    R, S = w64.shape[2:]
    if ((H + 2 * ph - R) // sh + 1, (W + 2 * pw - S) // sw + 1) != (P, Q):
        raise InvalidProblem("dy", f"dy's {P}×{Q} is not the output of a {H}×{W} input")
    dxp = xp.zeros((N, C, H + 2 * ph, W + 2 * pw), dtype=xp.float64)
    for r in range(R):
        for s in range(S):
            dxp[:, :, r:r + (P - 1) * sh + 1:sh, s:s + (Q - 1) * sw + 1:sw] += w64[None, :, 0, r, s, None, None] * d64
    return dxp[:, :, ph:ph + H, pw:pw + W]


def dw2d_wgrad_reference(x: Any, dy: Any, kernel_rs: tuple[int, int], stride: tuple[int, int] = (1, 1),
                         padding: tuple[int, int] = (0, 0)) -> Any:
    """dw (C, 1, R, S) float64 (module docstring)."""
    xp = _xp(x)
    x64, d64 = xp.asarray(x, dtype=xp.float64), xp.asarray(dy, dtype=xp.float64)
    if x64.ndim != 4 or d64.ndim != 4 or x64.shape[:2] != d64.shape[:2]:
        raise InvalidProblem("dy", f"x {tuple(x64.shape)} and dy {tuple(d64.shape)} must be (N, C, ·, ·) alike")
    (sh, sw), (ph, pw), (R, S) = stride, padding, kernel_rs
    C, P, Q = d64.shape[1:]
    xpad = xp.pad(x64, ((0, 0), (0, 0), (ph, ph), (pw, pw)))
    dw = xp.zeros((C, 1, R, S), dtype=xp.float64)
    for r in range(R):
        for s in range(S):
            win = xpad[:, :, r:r + (P - 1) * sh + 1:sh, s:s + (Q - 1) * sw + 1:sw]
            dw[:, 0, r, s] = (d64 * win).sum(axis=(0, 2, 3))
    return dw
