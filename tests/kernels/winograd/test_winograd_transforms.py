"""Winograd transforms (Cook–Toom, exact fractions) and the float64 model of the fused dataflow."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.kernels.reference import conv2d_reference
from convtune.kernels.winograd.transforms import (
    POINTS,
    cook_toom,
    device_code,
    matrices,
    transform_code,
    winograd_conv2d_numpy,
)


@pytest.mark.parametrize("m", sorted(POINTS))
def test_one_dimensional_identity_is_exact(m: int) -> None:
    """y = Aᵀ[(G g) ⊙ (Bᵀ d)] equals the correlation y_i = Σ_k g_k d_{i+k} in exact arithmetic."""
    at, g, bt = cook_toom(m)
    alpha = m + 2
    rng = np.random.default_rng(m)
    for _ in range(20):
        d = [Fraction(int(v)) for v in rng.integers(-9, 10, alpha)]
        taps = [Fraction(int(v), 7) for v in rng.integers(-9, 10, 3)]
        gg = [sum(g[j][k] * taps[k] for k in range(3)) for j in range(alpha)]
        bd = [sum(bt[j][k] * d[k] for k in range(alpha)) for j in range(alpha)]
        y = [sum(at[i][j] * gg[j] * bd[j] for j in range(alpha)) for i in range(m)]
        assert y == [sum(taps[k] * d[i + k] for k in range(3)) for i in range(m)]


def test_f2_matrices_are_lavin_and_grays_up_to_row_signs() -> None:
    _at, g, bt = matrices(2)
    lavin_bt = np.array([[1, 0, -1, 0], [0, 1, 1, 0], [0, -1, 1, 0], [0, 1, 0, -1]])
    assert np.array_equal(np.abs(bt), np.abs(lavin_bt))
    assert np.allclose(np.abs(g), np.abs([[1, 0, 0], [.5, .5, .5], [.5, -.5, .5], [0, 0, 1]]))


def test_unknown_tile_size_is_refused() -> None:
    with pytest.raises(ValueError, match=r"F\(3,3\) is not provided: F\(2,3\), F\(4,3\)"):
        cook_toom(3)


@pytest.mark.parametrize("m", sorted(POINTS))
def test_generated_code_has_no_trivial_multiplications(m: int) -> None:
    code = device_code(m)
    assert "wino_input_transform" in code and "wino_output_transform" in code
    for bad in ("* 0", "1.0f *", "0.0f *"):
        assert bad not in code


def test_transform_code_evaluates_like_the_matrix() -> None:
    """Run the generated C text as Python (same operator syntax) and compare with left·in·leftᵀ."""
    _, _, bt = cook_toom(4)
    text = transform_code("f", bt, 6)
    # C and Python share this arithmetic syntax; only the parameter name `in` is a Python keyword
    body = [ln.strip().rstrip(";").replace(".0f", ".0").replace("in[", "inp[") for ln in text.splitlines()[2:-1]]
    rng = np.random.default_rng(1)
    inp = rng.standard_normal((6, 6))
    t = np.zeros((6, 6))
    out = np.zeros((6, 6))
    for stmt in body:
        exec(stmt, {}, {"inp": inp, "t": t, "out": out})
    b = matrices(4)[2]
    assert np.allclose(out, b @ inp @ b.T, rtol=1e-12, atol=1e-12)


@settings(max_examples=60, deadline=None)
@given(m=st.sampled_from(sorted(POINTS)), n=st.integers(1, 2), c=st.integers(1, 5), k=st.integers(1, 4),
       h=st.integers(1, 11), w=st.integers(1, 11), pad=st.integers(0, 3))
def test_dataflow_model_matches_float64_direct(m: int, n: int, c: int, k: int, h: int, w: int, pad: int) -> None:
    """Tiles, halos, zero padding and cropping as the kernel does them, odd sizes included."""
    if h + 2 * pad < 3 or w + 2 * pad < 3:
        return
    rng = np.random.default_rng([m, n, c, k, h, w, pad])
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c, 3, 3))
    y = winograd_conv2d_numpy(x, wt, m, pad, pad)
    ref = np.asarray(conv2d_reference(x, wt, padding=(pad, pad)))
    assert y.shape == ref.shape
    assert np.max(np.abs(y - ref)) <= 1e-10 * max(1.0, np.max(np.abs(ref)))
