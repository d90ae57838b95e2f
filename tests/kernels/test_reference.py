"""The float64 references against independent naive loops, PyTorch (where installed) and each other."""

from __future__ import annotations

import importlib.util
from typing import Any

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.errors import InvalidProblem
from convtune.kernels.reference import (
    conv2d_reference,
    conv2d_reference_for,
    conv2d_reference_gpu,
    depthwise_conv1d_causal_reference,
    relative_error,
)
from convtune.problem import ConvProblem

HAVE_TORCH = importlib.util.find_spec("torch") is not None
needs_torch = pytest.mark.skipif(not HAVE_TORCH, reason="torch is not installed: the float64 cross-check "
                                 "against torch.nn.functional needs `pip install torch`")


# ---- independent naive implementations ---------------------------------------------------------------------
def naive_conv2d(x: np.ndarray, w: np.ndarray, stride: tuple[int, int], padding: tuple[int, int],
                 dilation: tuple[int, int], groups: int) -> np.ndarray:
    """Seven nested loops straight from the definition; no padding array, bounds checked per read."""
    N, _, H, W = x.shape
    K, Cg, R, S = w.shape
    (sh, sw), (ph, pw), (dh, dw) = stride, padding, dilation
    P = (H + 2 * ph - dh * (R - 1) - 1) // sh + 1
    Q = (W + 2 * pw - dw * (S - 1) - 1) // sw + 1
    y = np.zeros((N, K, P, Q))
    k_per_group = K // groups
    for n in range(N):
        for k in range(K):
            c0 = (k // k_per_group) * Cg
            for p in range(P):
                for q in range(Q):
                    acc = 0.0
                    for c in range(Cg):
                        for r in range(R):
                            for s in range(S):
                                i, j = p * sh - ph + r * dh, q * sw - pw + s * dw
                                if 0 <= i < H and 0 <= j < W:
                                    acc += float(x[n, c0 + c, i, j]) * float(w[k, c, r, s])
                    y[n, k, p, q] = acc
    return y


def naive_causal_1d(x: np.ndarray, w: np.ndarray, dilation: int) -> np.ndarray:
    B, C, L = x.shape
    K = w.shape[1]
    y = np.zeros((B, C, L))
    for b in range(B):
        for c in range(C):
            for t in range(L):
                for j in range(K):
                    i = t - (K - 1 - j) * dilation
                    if i >= 0:
                        y[b, c, t] += float(x[b, c, i]) * float(w[c, j])
    return y


def random_case(rng: np.random.Generator, N: int, C: int, H: int, W: int, K: int, R: int, S: int,
                groups: int, dtype: Any = np.float64) -> tuple[np.ndarray, np.ndarray]:
    x = rng.standard_normal((N, C, H, W)).astype(dtype)
    w = rng.standard_normal((K, C // groups, R, S)).astype(dtype)
    return x, w


CASES = [
    pytest.param(dict(N=1, C=1, H=5, W=5, K=1, R=3, S=3), {}, id="3x3-valid"),
    pytest.param(dict(N=2, C=3, H=7, W=6, K=5, R=3, S=3), dict(padding=1), id="3x3-pad1-odd-KC-nonsquare"),
    pytest.param(dict(N=1, C=4, H=6, W=6, K=4, R=1, S=1), {}, id="1x1"),
    pytest.param(dict(N=2, C=3, H=9, W=8, K=2, R=1, S=1), dict(stride=2), id="1x1-stride2"),
    pytest.param(dict(N=1, C=2, H=11, W=9, K=3, R=3, S=3), dict(stride=2, padding=1), id="stride2"),
    pytest.param(dict(N=1, C=3, H=10, W=11, K=3, R=2, S=2), dict(stride=3), id="stride3-gt-kernel"),
    pytest.param(dict(N=1, C=2, H=9, W=10, K=3, R=3, S=3), dict(dilation=2, padding=2), id="dilation2"),
    pytest.param(dict(N=1, C=2, H=8, W=9, K=2, R=3, S=2), dict(stride=(2, 1), padding=(1, 0), dilation=(1, 2)),
                 id="per-axis-pairs"),
    pytest.param(dict(N=2, C=6, H=5, W=5, K=9, R=3, S=3), dict(groups=3, padding=1), id="groups3"),
    pytest.param(dict(N=2, C=5, H=6, W=7, K=5, R=3, S=3), dict(groups=5, padding=1), id="depthwise"),
    pytest.param(dict(N=1, C=3, H=5, W=5, K=6, R=3, S=3), dict(groups=3, padding=1), id="depthwise-multiplier2"),
    pytest.param(dict(N=1, C=2, H=2, W=3, K=3, R=5, S=3), dict(padding=(2, 3)), id="pad-beyond-input"),
    pytest.param(dict(N=1, C=1, H=7, W=1, K=2, R=7, S=1), {}, id="window-equals-input"),
]


def _pair(v: Any) -> tuple[int, int]:
    return (v, v) if isinstance(v, int) else tuple(v)


@pytest.mark.parametrize(("shape", "kw"), CASES)
def test_conv2d_reference_matches_naive_loops(shape: dict[str, int], kw: dict[str, Any]) -> None:
    rng = np.random.default_rng(7)
    groups = kw.get("groups", 1)
    x, w = random_case(rng, groups=groups, **shape)
    y = conv2d_reference(x, w, **kw)
    expected = naive_conv2d(x, w, _pair(kw.get("stride", 1)), _pair(kw.get("padding", 0)),
                            _pair(kw.get("dilation", 1)), groups)
    assert y.dtype == np.float64 and y.shape == expected.shape
    np.testing.assert_allclose(y, expected, rtol=1e-12, atol=1e-12)


@st.composite
def tiny_convs(draw: st.DrawFn) -> tuple[np.ndarray, np.ndarray, dict[str, Any]]:
    groups = draw(st.integers(1, 3))
    R, S = draw(st.integers(1, 3)), draw(st.integers(1, 3))
    stride = (draw(st.integers(1, 3)), draw(st.integers(1, 3)))
    padding = (draw(st.integers(0, 3)), draw(st.integers(0, 3)))
    dilation = (draw(st.integers(1, 2)), draw(st.integers(1, 2)))
    H = max(1, dilation[0] * (R - 1) + 1 - 2 * padding[0]) + draw(st.integers(0, 5))
    W = max(1, dilation[1] * (S - 1) + 1 - 2 * padding[1]) + draw(st.integers(0, 5))
    seed = draw(st.integers(0, 2**32 - 1))
    x, w = random_case(np.random.default_rng(seed), N=draw(st.integers(1, 2)), C=groups * draw(st.integers(1, 2)),
                       H=H, W=W, K=groups * draw(st.integers(1, 2)), R=R, S=S, groups=groups)
    return x, w, dict(stride=stride, padding=padding, dilation=dilation, groups=groups)


@settings(max_examples=60)
@given(tiny_convs())
def test_conv2d_reference_matches_naive_loops_random(case: tuple[np.ndarray, np.ndarray, dict[str, Any]]) -> None:
    x, w, kw = case
    np.testing.assert_allclose(conv2d_reference(x, w, **kw), naive_conv2d(x, w, **kw), rtol=1e-12, atol=1e-12)


def test_conv2d_reference_is_float64_for_float32_input() -> None:
    rng = np.random.default_rng(1)
    x, w = random_case(rng, 1, 4, 6, 6, 3, 3, 3, 1, dtype=np.float32)
    y = conv2d_reference(x, w, padding=1)
    assert y.dtype == np.float64
    np.testing.assert_allclose(y, naive_conv2d(x, w, (1, 1), (1, 1), (1, 1), 1), rtol=1e-12, atol=1e-12)


def test_conv2d_reference_at_resnet_size_spot_checked() -> None:
    """N=2, C=64, 56×56, 3×3 pad 1: full reference, spot-checked at corners, edges and random points."""
    rng = np.random.default_rng(3)
    x, w = random_case(rng, 2, 64, 56, 56, 64, 3, 3, 1, dtype=np.float32)
    y = conv2d_reference(x, w, padding=1)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    points = [(0, 0, 0, 0), (1, 63, 55, 55), (0, 5, 0, 30), (1, 7, 55, 0)]
    points += [tuple(int(v) for v in rng.integers((2, 64, 56, 56))) for _ in range(20)]
    for n, k, p, q in points:
        expected = float(np.sum(xp[n, :, p:p + 3, q:q + 3] * w[k].astype(np.float64)))
        assert y[n, k, p, q] == pytest.approx(expected, rel=1e-12, abs=1e-10)


@needs_torch
@pytest.mark.parametrize(("shape", "kw"), CASES)
def test_conv2d_reference_matches_torch(shape: dict[str, int], kw: dict[str, Any]) -> None:
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(11)
    x, w = random_case(rng, groups=kw.get("groups", 1), **shape)
    expected = F.conv2d(torch.from_numpy(x), torch.from_numpy(w), **kw).numpy()
    np.testing.assert_allclose(conv2d_reference(x, w, **kw), expected, rtol=1e-12, atol=1e-12)


@needs_torch
def test_causal_1d_matches_torch() -> None:
    import torch
    import torch.nn.functional as F

    rng = np.random.default_rng(12)
    x, w = rng.standard_normal((3, 5, 17)), rng.standard_normal((5, 4))
    expected = F.conv1d(F.pad(torch.from_numpy(x), (2 * 3, 0)), torch.from_numpy(w)[:, None, :], dilation=2,
                        groups=5).numpy()
    np.testing.assert_allclose(depthwise_conv1d_causal_reference(x, w, dilation=2), expected, rtol=1e-12,
                               atol=1e-12)


# ---- 1-D causal ---------------------------------------------------------------------------------------------
@pytest.mark.parametrize(
    ("B", "C", "L", "K", "dil"),
    [(1, 1, 8, 1, 1), (2, 3, 16, 4, 1), (2, 3, 16, 4, 3), (1, 2, 5, 9, 1), (1, 2, 5, 3, 4), (2, 4, 1, 3, 1)],
    ids=["K1", "K4", "K4-dil3", "K-gt-L", "reach-beyond-L", "L1"],
)
def test_causal_1d_reference_matches_naive_and_conv2d(B: int, C: int, L: int, K: int, dil: int) -> None:
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((B, C, L)).astype(np.float32), rng.standard_normal((C, K)).astype(np.float32)
    y = depthwise_conv1d_causal_reference(x, w, dilation=dil)
    assert y.shape == (B, C, L) and y.dtype == np.float64
    np.testing.assert_allclose(y, naive_causal_1d(x, w, dil), rtol=1e-12, atol=1e-12)
    # the same problem seen as the 2-D causal special case of ConvProblem
    problem = ConvProblem.depthwise1d(B, C, L, K, dilation=dil)
    y2 = conv2d_reference_for(problem, x.reshape(B, C, 1, L), w.reshape(C, 1, 1, K))
    np.testing.assert_allclose(y2.reshape(B, C, L), y, rtol=1e-12, atol=1e-12)


def test_causal_1d_is_causal() -> None:
    """Changing x at time t changes y only at times >= t."""
    rng = np.random.default_rng(6)
    x, w = rng.standard_normal((1, 2, 12)), rng.standard_normal((2, 3))
    x2 = x.copy()
    x2[:, :, 7] += 1.0
    d = depthwise_conv1d_causal_reference(x2, w, dilation=2) - depthwise_conv1d_causal_reference(x, w, dilation=2)
    assert np.all(d[:, :, :7] == 0) and np.any(d[:, :, 7:] != 0)
    # the newest tap weights the current sample
    np.testing.assert_allclose(d[:, :, 7], w[:, 2][None, :])


# ---- conv2d_reference_for --------------------------------------------------------------------------------
def test_reference_for_problem_matches_plain_call() -> None:
    p = ConvProblem.parse("N=2 C=6 H=9 W=7 K=4 R=3 S=2 stride_h=2 stride_w=1 pad=1 dilation=1 groups=2")
    rng = np.random.default_rng(8)
    x, w = random_case(rng, p.N, p.C, p.H, p.W, p.K, p.R, p.S, p.groups)
    y = conv2d_reference_for(p, x, w)
    assert y.shape == (p.N, p.K, p.P, p.Q)
    np.testing.assert_array_equal(y, conv2d_reference(x, w, stride=(2, 1), padding=1, groups=2))


def test_reference_for_rejects_wrong_shapes() -> None:
    p = ConvProblem.parse("N=1 C=4 H=5 W=5 K=2 R=3 S=3")
    with pytest.raises(InvalidProblem, match=r"must be \(N, C, H, W\) = \(1, 4, 5, 5\)") as info:
        conv2d_reference_for(p, np.zeros((1, 4, 5, 6)), np.zeros((2, 4, 3, 3)))
    assert info.value.field == "x"
    with pytest.raises(InvalidProblem, match=r"must be \(K, C/groups, R, S\)") as info:
        conv2d_reference_for(p, np.zeros((1, 4, 5, 5)), np.zeros((2, 2, 3, 3)))
    assert info.value.field == "w"


@pytest.mark.parametrize(
    ("x_shape", "w_shape", "kw", "field"),
    [
        ((1, 4, 5), (2, 4, 3, 3), {}, "x"),
        ((1, 4, 5, 5), (2, 4, 3), {}, "w"),
        ((1, 4, 5, 5), (2, 3, 3, 3), {}, "w"),
        ((1, 4, 5, 5), (3, 2, 3, 3), {"groups": 2}, "w"),
        ((1, 4, 5, 5), (2, 4, 3, 3), {"groups": 0}, "groups"),
        ((1, 4, 5, 5), (2, 4, 3, 3), {"stride": 0}, "stride"),
        ((1, 4, 5, 5), (2, 4, 3, 3), {"padding": (1, -1)}, "padding"),
        ((1, 4, 5, 5), (2, 4, 3, 3), {"dilation": (1, 2, 3)}, "dilation"),
        ((1, 4, 5, 5), (2, 4, 3, 3), {"stride": 1.5}, "stride"),
        ((1, 4, 2, 5), (2, 4, 3, 3), {}, "x"),
    ],
    ids=["x-3d", "w-3d", "w-channels", "K-not-divisible", "groups0", "stride0", "negative-pad", "triple",
         "float-stride", "empty-output"],
)
def test_conv2d_reference_rejects_invalid_input(x_shape: tuple[int, ...], w_shape: tuple[int, ...],
                                                kw: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidProblem) as info:
        conv2d_reference(np.zeros(x_shape), np.zeros(w_shape), **kw)
    assert info.value.field == field


def test_causal_1d_rejects_invalid_input() -> None:
    with pytest.raises(InvalidProblem):
        depthwise_conv1d_causal_reference(np.zeros((2, 3)), np.zeros((3, 2)))
    with pytest.raises(InvalidProblem):
        depthwise_conv1d_causal_reference(np.zeros((1, 3, 4)), np.zeros((2, 2)))
    with pytest.raises(InvalidProblem):
        depthwise_conv1d_causal_reference(np.zeros((1, 3, 4)), np.zeros((3, 2)), dilation=0)


# ---- relative_error -------------------------------------------------------------------------------------------
def test_relative_error_values() -> None:
    ref = np.array([3.0, 4.0])
    assert relative_error(ref.astype(np.float32), ref) == 0.0
    assert relative_error(np.array([3.0, 4.5]), ref) == pytest.approx(0.1)
    assert relative_error(np.zeros(3), np.zeros(3)) == 0.0
    assert relative_error(np.ones(3), np.zeros(3)) == float("inf")


@pytest.mark.parametrize("bad", [np.nan, np.inf, -np.inf])
def test_relative_error_catches_non_finite(bad: float) -> None:
    out = np.ones((2, 3), dtype=np.float32)
    out[1, 2] = bad
    assert relative_error(out, np.ones((2, 3))) == float("inf")


def test_relative_error_rejects_mismatched_or_broken_reference() -> None:
    with pytest.raises(ValueError, match="shapes differ"):
        relative_error(np.ones(3), np.ones(4))
    with pytest.raises(ValueError, match="ref holds NaN"):
        relative_error(np.ones(2), np.array([1.0, np.nan]))


# ---- GPU ---------------------------------------------------------------------------------------------------
@pytest.mark.gpu
@pytest.mark.parametrize(("shape", "kw"), CASES)
def test_conv2d_reference_gpu_matches_numpy(shape: dict[str, int], kw: dict[str, Any]) -> None:
    import cupy as cp

    rng = np.random.default_rng(9)
    x, w = random_case(rng, groups=kw.get("groups", 1), **shape, dtype=np.float32)
    y = conv2d_reference_gpu(cp.asarray(x), cp.asarray(w), **kw)
    assert isinstance(y, cp.ndarray) and y.dtype == cp.float64
    np.testing.assert_allclose(cp.asnumpy(y), conv2d_reference(x, w, **kw), rtol=1e-12, atol=1e-12)


@pytest.mark.gpu
def test_conv2d_reference_gpu_chunks_over_the_batch() -> None:
    import cupy as cp

    rng = np.random.default_rng(10)
    x, w = random_case(rng, 7, 8, 14, 13, 6, 3, 3, 2)
    expected = conv2d_reference(x, w, stride=2, padding=1, groups=2)
    one_image = 8 * 3 * 3 * 7 * 7 * 8
    for chunk_bytes in (1, one_image, 3 * one_image, 1 << 30):
        y = conv2d_reference_gpu(x, w, stride=2, padding=1, groups=2, chunk_bytes=chunk_bytes)
        assert relative_error(y, expected) < 1e-14
        assert relative_error(y, cp.asarray(expected)) < 1e-14


@pytest.mark.gpu
def test_conv2d_reference_gpu_resnet_size() -> None:
    import cupy as cp

    rng = np.random.default_rng(4)
    x, w = random_case(rng, 2, 64, 56, 56, 64, 3, 3, 1, dtype=np.float32)
    y = conv2d_reference_gpu(cp.asarray(x), cp.asarray(w), padding=1)
    assert relative_error(y, conv2d_reference(x, w, padding=1)) < 1e-13


@pytest.mark.gpu
def test_relative_error_on_cupy_catches_nan() -> None:
    import cupy as cp

    out = cp.ones((4, 4), dtype=cp.float32)
    assert relative_error(out, cp.ones((4, 4))) == 0.0
    out[2, 2] = cp.nan
    assert relative_error(out, cp.ones((4, 4))) == float("inf")
    assert relative_error(out, np.ones((4, 4))) == float("inf")
