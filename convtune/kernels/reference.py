"""float64 references that every kernel is verified against: slow enough to be obviously right, fast enough to use.

Shapes and formula (PyTorch's cross-correlation convention, as :mod:`convtune.problem`):

    x: (N, C, H, W)          w: (K, C/groups, R, S)          y: (N, K, P, Q)
    P = (H + 2·pad_h − dil_h·(R−1) − 1) // stride_h + 1, Q likewise
    y[n,k,p,q] = Σ_{c<C/groups, r<R, s<S} x[n, g·C/groups + c, p·stride_h − pad_h + r·dil_h,
                                               q·stride_w − pad_w + s·dil_w] · w[k, c, r, s]
    with g = k // (K/groups) and x read as zero outside [0,H)×[0,W).

Causal 1-D depthwise: x: (B, C, L), w: (C, K), y: (B, C, L),
    y[b,c,t] = Σ_{j<K} x[b, c, t − (K−1−j)·dil] · w[c, j]     (x[…, t<0] = 0)
i.e. ``F.conv1d(F.pad(x, ((K−1)·dil, 0)), w[:, None, :], dilation=dil, groups=C)``: w[c, K−1] multiplies
the current sample.

Everything is computed in float64 whatever the input dtype. The NumPy references loop over the
R·S taps only: each tap is one batched matrix product over the channels of each group.
``conv2d_reference_gpu`` does the same in CuPy as im2col + GEMM, chunked over the batch.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from convtune.errors import InvalidProblem

if TYPE_CHECKING:
    from convtune.problem import ConvProblem

__all__ = [
    "conv2d_reference",
    "conv2d_reference_for",
    "conv2d_reference_gpu",
    "depthwise_conv1d_causal_reference",
    "relative_error",
]

IntPair = int | tuple[int, int]

#: Budget for one chunk of im2col columns on the GPU (bytes of float64).
GPU_CHUNK_BYTES = 1 << 30


def _pair(name: str, value: IntPair, minimum: int) -> tuple[int, int]:
    pair = (value, value) if isinstance(value, int | np.integer) else value
    if not isinstance(pair, tuple | list) or len(pair) != 2 or any(
            isinstance(v, bool) or not isinstance(v, int | np.integer) or v < minimum for v in pair):
        raise InvalidProblem(name, f"{value!r} must be an integer >= {minimum} or a pair of them")
    return int(pair[0]), int(pair[1])


def _geometry(x_shape: tuple[int, ...], w_shape: tuple[int, ...], stride: IntPair, padding: IntPair,
              dilation: IntPair, groups: int, pad_right: tuple[int, int] | None = None) -> dict[str, Any]:
    """Validate shapes and return the loop geometry; ``pad_right`` overrides the trailing padding."""
    if len(x_shape) != 4:
        raise InvalidProblem("x", f"shape {tuple(x_shape)} must be 4-D (N, C, H, W)")
    if len(w_shape) != 4:
        raise InvalidProblem("w", f"shape {tuple(w_shape)} must be 4-D (K, C/groups, R, S)")
    if isinstance(groups, bool) or not isinstance(groups, int | np.integer) or groups < 1:
        raise InvalidProblem("groups", f"{groups!r} must be an integer >= 1")
    N, C, H, W = x_shape
    K, Cg, R, S = w_shape
    if C % groups or K % groups or Cg * groups != C:
        raise InvalidProblem("w", f"shape {tuple(w_shape)} does not fit x with C={C} and groups={groups}: "
                                  f"need C % groups == K % groups == 0 and w.shape[1] == C/groups")
    sh, sw = _pair("stride", stride, 1)
    ph, pw = _pair("padding", padding, 0)
    dh, dw = _pair("dilation", dilation, 1)
    qh, qw = (ph, pw) if pad_right is None else pad_right
    P = (H + ph + qh - dh * (R - 1) - 1) // sh + 1
    Q = (W + pw + qw - dw * (S - 1) - 1) // sw + 1
    if P < 1 or Q < 1:
        raise InvalidProblem("x", f"output is empty: P={P}, Q={Q} must be >= 1 (input too small for the window)")
    return dict(N=N, C=C, H=H, W=W, K=K, R=R, S=S, G=int(groups), sh=sh, sw=sw, ph=ph, pw=pw, qh=qh, qw=qw,
                dh=dh, dw=dw, P=P, Q=Q)


def _conv2d_numpy(x: Any, w: Any, g: dict[str, Any]) -> np.ndarray:
    N, C, K, G, P, Q = g["N"], g["C"], g["K"], g["G"], g["P"], g["Q"]
    xp = np.pad(np.asarray(x, dtype=np.float64), ((0, 0), (0, 0), (g["ph"], g["qh"]), (g["pw"], g["qw"])))
    w64 = np.asarray(w, dtype=np.float64)
    out = np.zeros((N, G, K // G, P * Q))
    for r in range(g["R"]):
        for s in range(g["S"]):
            h0, w0 = r * g["dh"], s * g["dw"]
            taps = xp[:, :, h0:h0 + (P - 1) * g["sh"] + 1:g["sh"], w0:w0 + (Q - 1) * g["sw"] + 1:g["sw"]]
            w_tap, x_tap = w64[:, :, r, s].reshape(G, K // G, C // G), taps.reshape(N, G, C // G, P * Q)
            if C == G:  # depthwise: a broadcast product beats N·G tiny matrix products
                out += w_tap * x_tap
            else:  # (G, K/G, C/G) @ (N, G, C/G, P·Q) -> (N, G, K/G, P·Q)
                out += w_tap @ x_tap
    return out.reshape(N, K, P, Q)


def conv2d_reference(x: Any, w: Any, stride: IntPair = (1, 1), padding: IntPair = (0, 0),
                     dilation: IntPair = (1, 1), groups: int = 1) -> np.ndarray:
    """2-D convolution (cross-correlation) in float64, NumPy; see the module docstring for the formula.

    Args:
        x: input, shape (N, C, H, W), any real dtype (array-like).
        w: filters, shape (K, C/groups, R, S).
        stride, padding, dilation: an int (both axes) or a pair (h, w); padding is symmetric.
        groups: number of channel groups; must divide C and K.

    Returns:
        y: float64 array of shape (N, K, P, Q).

    Raises:
        InvalidProblem: shapes that do not fit together, invalid stride/padding/dilation/groups, or an
        empty output.

    Example:
        >>> conv2d_reference(np.ones((1, 1, 3, 3)), np.ones((1, 1, 3, 3)), padding=1)[0, 0, 1, 1]
        9.0
    """
    x, w = np.asarray(x), np.asarray(w)
    return _conv2d_numpy(x, w, _geometry(x.shape, w.shape, stride, padding, dilation, groups))


def conv2d_reference_for(problem: ConvProblem, x: Any, w: Any) -> np.ndarray:
    """:func:`conv2d_reference` with the geometry of ``problem`` (causal problems pad on the left only).

    ``x`` must have shape (N, C, H, W) and ``w`` (K, C/groups, R, S) of the problem.
    """
    x, w = np.asarray(x), np.asarray(w)
    expect_x = (problem.N, problem.C, problem.H, problem.W)
    expect_w = (problem.K, problem.channels_per_group, problem.R, problem.S)
    if x.shape != expect_x:
        raise InvalidProblem("x", f"shape {x.shape} must be (N, C, H, W) = {expect_x} for {problem.key()}")
    if w.shape != expect_w:
        raise InvalidProblem("w", f"shape {w.shape} must be (K, C/groups, R, S) = {expect_w} for {problem.key()}")
    pad_right = (problem.pad_h, 0 if problem.causal else problem.pad_w)
    g = _geometry(x.shape, w.shape, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w),
                  (problem.dil_h, problem.dil_w), problem.groups, pad_right=pad_right)
    assert (g["P"], g["Q"]) == (problem.P, problem.Q), "reference geometry disagrees with ConvProblem"
    return _conv2d_numpy(x, w, g)


def depthwise_conv1d_causal_reference(x: Any, w: Any, dilation: int = 1) -> np.ndarray:
    """Causal depthwise 1-D convolution in float64: x (B, C, L), w (C, K) -> y (B, C, L).

    y[b,c,t] = Σ_j x[b, c, t − (K−1−j)·dilation] · w[c, j], with x zero before t = 0.
    """
    x64, w64 = np.asarray(x, dtype=np.float64), np.asarray(w, dtype=np.float64)
    if x64.ndim != 3:
        raise InvalidProblem("x", f"shape {x64.shape} must be 3-D (B, C, L)")
    if w64.ndim != 2 or w64.shape[0] != x64.shape[1]:
        raise InvalidProblem("w", f"shape {w64.shape} must be (C, K) with C={x64.shape[1]}")
    if isinstance(dilation, bool) or not isinstance(dilation, int | np.integer) or dilation < 1:
        raise InvalidProblem("dilation", f"{dilation!r} must be an integer >= 1")
    L, K = x64.shape[2], w64.shape[1]
    y = np.zeros_like(x64)
    for j in range(K):
        shift = (K - 1 - j) * int(dilation)
        if shift < L:
            y[:, :, shift:] += x64[:, :, :L - shift] * w64[None, :, j, None]
    return y


def conv2d_reference_gpu(x: Any, w: Any, stride: IntPair = (1, 1), padding: IntPair = (0, 0),
                         dilation: IntPair = (1, 1), groups: int = 1, chunk_bytes: int = GPU_CHUNK_BYTES) -> Any:
    """:func:`conv2d_reference` on the GPU: CuPy float64 im2col + GEMM; returns a CuPy array (N, K, P, Q).

    The batch is processed in chunks whose im2col columns take at most ``chunk_bytes`` (at least one
    image per chunk), so device memory stays bounded for large N. ``x`` and ``w`` may be NumPy or CuPy.

    Raises:
        DeviceUnavailable: CuPy is not installed.
        InvalidProblem: as :func:`conv2d_reference`.
    """
    try:
        import cupy as cp
    except ImportError as exc:  # pragma: no cover - depends on the machine
        from convtune.errors import DeviceUnavailable

        raise DeviceUnavailable("CuPy is not installed: pip install 'convtune[cuda]'") from exc
    g = _geometry(tuple(x.shape), tuple(w.shape), stride, padding, dilation, groups)
    N, C, K, G, R, S, P, Q = (g[k] for k in ("N", "C", "K", "G", "R", "S", "P", "Q"))
    w_mat = cp.asarray(w, dtype=cp.float64).reshape(G, K // G, (C // G) * R * S)
    per_image = C * R * S * P * Q * 8
    chunk = max(1, min(N, chunk_bytes // max(per_image, 1)))
    out = cp.empty((N, G, K // G, P * Q), dtype=cp.float64)
    for n0 in range(0, N, chunk):
        xs = cp.asarray(x[n0:n0 + chunk], dtype=cp.float64)
        n = xs.shape[0]
        xp = cp.pad(xs, ((0, 0), (0, 0), (g["ph"], g["qh"]), (g["pw"], g["qw"])))
        cols = cp.empty((n, C, R, S, P, Q), dtype=cp.float64)
        for r in range(R):
            for s in range(S):
                h0, w0 = r * g["dh"], s * g["dw"]
                cols[:, :, r, s] = xp[:, :, h0:h0 + (P - 1) * g["sh"] + 1:g["sh"],
                                      w0:w0 + (Q - 1) * g["sw"] + 1:g["sw"]]
        # (G, K/G, C/G·R·S) @ (n, G, C/G·R·S, P·Q) -> (n, G, K/G, P·Q)
        out[n0:n0 + n] = cp.matmul(w_mat, cols.reshape(n, G, (C // G) * R * S, P * Q))
        del xp, cols
    return out.reshape(N, K, P, Q)


def _array_module(a: Any) -> Any:
    if type(a).__module__.split(".")[0] == "cupy":
        import cupy

        return cupy
    return np


def relative_error(out: Any, ref: Any) -> float:
    """‖out − ref‖₂ / ‖ref‖₂ in float64; ``inf`` when ``out`` holds any NaN or ±inf.

    Works on NumPy and CuPy arrays (mixed too: the pair is compared where ``out`` lives). A zero
    ``ref`` gives 0.0 when ``out`` is zero too, else ``inf``.

    Raises:
        ValueError: the shapes differ, or ``ref`` itself is not finite.
    """
    xp = _array_module(out)
    if xp is np:
        out64 = np.asarray(out, dtype=np.float64)
        ref64 = ref.get().astype(np.float64) if _array_module(ref) is not np else np.asarray(ref, dtype=np.float64)
    else:
        out64, ref64 = out.astype(xp.float64), xp.asarray(ref, dtype=xp.float64)
    if out64.shape != ref64.shape:
        raise ValueError(f"shapes differ: out {out64.shape} vs ref {ref64.shape}")
    if not bool(xp.isfinite(ref64).all()):
        raise ValueError("ref holds NaN or inf: the reference itself is broken")
    if not bool(xp.isfinite(out64).all()):
        return float("inf")
    ref_norm = float(xp.linalg.norm(ref64.ravel()))
    diff_norm = float(xp.linalg.norm((out64 - ref64).ravel()))
    if ref_norm == 0.0:
        return 0.0 if diff_norm == 0.0 else float("inf")
    return diff_norm / ref_norm
