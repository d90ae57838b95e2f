"""Winograd F(m, r) transform matrices (Cook–Toom, exact fractions), their CUDA code, a float64 model.

1-D correlation of α = m + r − 1 inputs d with r taps g gives m outputs y_i = Σ_k g_k·d_{i+k}; Winograd
computes it as ``y = Aᵀ · [(G·g) ⊙ (Bᵀ·d)]`` with α multiplications instead of m·r. 2-D (nested):
``Y = Aᵀ · [(G g Gᵀ) ⊙ (Bᵀ d B)] · A`` per m×m output tile.

Construction (transposition of Toom–Cook polynomial multiplication): evaluate at α − 1 finite points
a_j and at infinity; with E_n[j, k] = a_j^k (infinity row: 1 at k = n − 1), Lagrange interpolation C
(columns: the coefficients of L_j(x) = Π_{l≠j}(x − a_l)/f_j, f_j = Π_{l≠j}(a_j − a_l); the infinity
column: those of Π_l(x − a_l)), linear convolution is ``w = C·[(E_r g) ⊙ (E_m v)]`` and its transpose is
correlation: ``Aᵀ = E_mᵀ``, ``G = diag(1/f)·E_r``, ``Bᵀ = diag(f)·Cᵀ`` (the 1/f_j moved into G, so Bᵀ is
integer; Lavin & Gray's convention). Points: F(2,3) uses (0, 1, −1) (Lavin & Gray), F(4,3) uses
(0, −1, 1, ½, −2), which Barabasz et al. (arXiv 1803.10986) found about twice as accurate in fp32 as
Lavin's (0, 1, −1, 2, −2). For 5×5 filters F(2,5) takes F(4,3)'s points (α = 6 for both) and F(4,5) (α = 8)
(0, −1, 1, ½, −½, 2, −2): an fp32 emulation of the unfused dataflow (C = K = 64, normal inputs) gave relative errors
of 8.4e-7 and 2.2e-6 against float64 (F(4,3): 7.7e-7), against 1.7e-5 with ±¼ in place of ±2 or ±½. For 7×7 only
F(2,7) (α = 8, F(4,5)'s points): 2.9e-6; F(3,7) and F(4,7) emulate at 2.4e-5 and ≥ 4.5e-5, too far from fp32.
"""

from __future__ import annotations

import re
from fractions import Fraction
from functools import cache

import numpy as np

_HALF = Fraction(1, 2)
#: the evaluation points per filter size r and output tile size m
POINTS_BY_R: dict[int, dict[int, tuple[Fraction, ...]]] = {
    3: {
        2: (Fraction(0), Fraction(1), Fraction(-1)),
        4: (Fraction(0), Fraction(-1), Fraction(1), _HALF, Fraction(-2)),
    },
    5: {
        2: (Fraction(0), Fraction(-1), Fraction(1), _HALF, Fraction(-2)),
        4: (Fraction(0), Fraction(-1), Fraction(1), _HALF, -_HALF, Fraction(2), Fraction(-2)),
    },
    7: {
        2: (Fraction(0), Fraction(-1), Fraction(1), _HALF, -_HALF, Fraction(2), Fraction(-2)),
    },
}
#: the 3×3 families' points per output tile size m
POINTS: dict[int, tuple[Fraction, ...]] = POINTS_BY_R[3]
#: 1-D F(m, r) along one axis (the 1×r / r×1 family): one transform instead of two nested ones, so larger tiles stay
#: accurate. An fp32 emulation of the unfused 1-D dataflow (C = K = 64, normal inputs, 2000 tiles) against float64:
#: F(2,3) 1.3e-7, F(4,3) 2.8e-7, F(6,3) 4.9e-7, F(2,5) 2.9e-7, F(4,5) 4.7e-7, F(2,7) 5.3e-7, F(4,7) 2.0e-6 (with
#: ±¼ as its last two points 4.4e-6, with ±3/2 2.2e-6).
POINTS_1D: dict[int, dict[int, tuple[Fraction, ...]]] = {
    3: {**POINTS_BY_R[3], 6: POINTS_BY_R[7][2]},
    5: POINTS_BY_R[5],
    7: {2: POINTS_BY_R[7][2], 4: (*POINTS_BY_R[7][2], Fraction(3, 2), Fraction(-2, 3))},
}

Matrix = tuple[tuple[Fraction, ...], ...]


def _poly_from_roots(roots: list[Fraction]) -> list[Fraction]:
    """Coefficients (ascending powers) of Π (x − root)."""
    coeffs = [Fraction(1)]
    for root in roots:
        shifted = [Fraction(0), *coeffs]              # x · p(x)
        coeffs = [s - root * c for s, c in zip(shifted, [*coeffs, Fraction(0)], strict=True)]
    return coeffs


@cache
def cook_toom(m: int, r: int = 3) -> tuple[Matrix, Matrix, Matrix]:
    """(Aᵀ (m×α), G (α×r), Bᵀ (α×α)) as exact fractions for F(m, r); see the module docstring."""
    return _cook_toom(m, r, POINTS_BY_R)


@cache
def cook_toom_1d(m: int, r: int) -> tuple[Matrix, Matrix, Matrix]:
    """:func:`cook_toom` with the 1-D family's points (:data:`POINTS_1D`)."""
    return _cook_toom(m, r, POINTS_1D)


def _cook_toom(m: int, r: int, table: dict[int, dict[int, tuple[Fraction, ...]]]) -> tuple[Matrix, Matrix, Matrix]:
    if m not in table.get(r, {}):
        provided = ", ".join(f"F({mm},{rr})" for rr, by_m in table.items() for mm in by_m)
        raise ValueError(f"F({m},{r}) is not provided: {provided}")
    points = list(table[r][m])
    alpha = m + r - 1
    if len(points) != alpha - 1:
        raise ValueError(f"F({m},{r}) needs {alpha - 1} finite points, got {len(points)}")

    def evaluation(n: int) -> list[list[Fraction]]:
        rows = [[a ** k for k in range(n)] for a in points]
        rows.append([Fraction(1 if k == n - 1 else 0) for k in range(n)])   # the point at infinity
        return rows

    f = [Fraction(1)] * alpha
    bt: list[list[Fraction]] = []
    for j, a in enumerate(points):
        others = [b for i, b in enumerate(points) if i != j]
        for b in others:
            f[j] *= a - b
        bt.append([*_poly_from_roots(others), Fraction(0)])      # f_j·L_j(x): degree α − 2
    bt.append(_poly_from_roots(points))                          # Π (x − a_l): degree α − 1
    em, er = evaluation(m), evaluation(r)
    at = tuple(tuple(em[j][i] for j in range(alpha)) for i in range(m))
    g = tuple(tuple(er[j][k] / f[j] for k in range(r)) for j in range(alpha))
    return at, g, tuple(tuple(row) for row in bt)


@cache
def matrices(m: int, r: int = 3) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Aᵀ, G, Bᵀ) as float64 arrays."""
    return _as_float64(cook_toom(m, r))


@cache
def matrices_1d(m: int, r: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(Aᵀ, G, Bᵀ) of the 1-D family's F(m, r) as float64 arrays."""
    return _as_float64(cook_toom_1d(m, r))


def _as_float64(mats: tuple[Matrix, Matrix, Matrix]) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    return tuple(np.array([[float(v) for v in row] for row in mat]) for mat in mats)  # type: ignore


# ---- CUDA code ------------------------------------------------------------------------------------------
def float_literal(v: Fraction) -> str:
    """A CUDA float literal of ``v`` (a quotient of two exact floats where ``v`` is not an integer)."""
    if v.denominator == 1:
        return f"{v.numerator}.0f"
    return f"({v.numerator}.0f / {v.denominator}.0f)"   # folded by the compiler to the nearest float


def _combination(row: tuple[Fraction, ...], term: str) -> str:
    """C text of Σ row[k]·term(k), skipping zeros and writing ±1 as adds and subtracts."""
    parts: list[str] = []
    for k, v in enumerate(row):
        if v == 0:
            continue
        x = term.format(k=k)
        sign = "-" if v < 0 else "+"
        mag = abs(v)
        text = x if mag == 1 else f"{float_literal(mag)} * {x}"
        parts.append(f"{sign} {text}" if parts or sign == "-" else text)
    return " ".join(parts) if parts else "0.0f"


def transform_code(name: str, left: Matrix, n_in: int) -> str:
    """A device function ``name(in[n_in][n_in], out[rows][rows])``: out = left · in · leftᵀ, unrolled.

    The two 1-D passes are written out (no multiplications by 0 or ±1 remain), so the cost is the
    transform's own adds; the compiler cannot drop ``x·0`` itself under IEEE rules.
    """
    rows = len(left)
    lines = [f"__device__ __forceinline__ void {name}(const float (&in)[{n_in}][{n_in}], "
             f"float (&out)[{rows}][{rows}]) {{", f"  float t[{rows}][{n_in}];"]
    for i in range(rows):
        for j in range(n_in):
            lines.append(f"  t[{i}][{j}] = {_combination(left[i], 'in[{k}][' + str(j) + ']')};")
    for i in range(rows):
        for j in range(rows):
            lines.append(f"  out[{i}][{j}] = {_combination(left[j], 't[' + str(i) + '][{k}]')};")
    lines.append("}")
    return "\n".join(lines) + "\n"


def transform_code_1d(name: str, left: Matrix, n_in: int) -> str:
    """A device function ``name(in[n_in], out[rows])``: out = left · in, unrolled without multiplications by 0 or ±1."""
    rows = len(left)
    lines = [f"__device__ __forceinline__ void {name}(const float (&in)[{n_in}], float (&out)[{rows}]) {{"]
    lines += [f"  out[{i}] = {_combination(left[i], 'in[{k}]')};" for i in range(rows)]
    lines.append("}")
    return "\n".join(lines) + "\n"


@cache
def device_code_1d(m: int, r: int) -> str:
    """The 1-D family's ``wino1_input_transform`` (v = Bᵀ d, α values) and ``wino1_output_transform`` (y = Aᵀ M, m
    values) of F(m, r) as CUDA device functions."""
    at, _, bt = cook_toom_1d(m, r)
    alpha = m + r - 1
    points = ", ".join(str(p) for p in POINTS_1D[r][m])
    return (f"// 1-D F({m},{r}), points {points} (generated by transforms.py)\n"
            + transform_code_1d("wino1_input_transform", bt, alpha)
            + transform_code_1d("wino1_output_transform", at, alpha))


@cache
def device_code(m: int, r: int = 3) -> str:
    """The input transform ``wino_input_transform`` (V = Bᵀ d B) and the output transform
    ``wino_output_transform`` (Y = Aᵀ M A) of F(m, r) as CUDA device functions."""
    at, _, bt = cook_toom(m, r)
    alpha = m + r - 1
    points = ", ".join(str(p) for p in POINTS_BY_R[r][m])
    return (f"// F({m}x{m},{r}x{r}), points {points} (generated by transforms.py)\n"
            + transform_code("wino_input_transform", bt, alpha)
            + transform_code("wino_output_transform", at, alpha))


# ---- float64 model of the dataflow ---------------------------------------------------------------------
def filter_transform(w: np.ndarray, m: int) -> np.ndarray:
    """w (K, C, r, r) -> U (α², C, K), float64, α = m + r − 1: U[ξ·α+ν, c, k] = (G g_kc Gᵀ)[ξ, ν]."""
    r = w.shape[-1]
    _, g, _ = matrices(m, r)
    u = np.einsum("ar,kcrs,bs->abck", g, np.asarray(w, dtype=np.float64), g)
    alpha = m + r - 1
    return u.reshape(alpha * alpha, w.shape[1], w.shape[0])


def winograd_conv2d_numpy(x: np.ndarray, w: np.ndarray, m: int, pad_h: int, pad_w: int) -> np.ndarray:
    """Stride-1 r×r convolution by F(m×m, r×r) tiles in float64, the kernels' dataflow:
    x (N, C, H, W), w (K, C, r, r) -> y (N, K, P, Q), P = H + 2·pad_h − (r − 1), Q = W + 2·pad_w − (r − 1).

    Each m×m output tile reads the α×α input window (α = m + r − 1) at (tp·m − pad_h, tq·m − pad_w), zero outside
    the image; tiles overhanging P or Q are computed and cropped.
    """
    r = w.shape[-1]
    at, _, bt = matrices(m, r)
    alpha = m + r - 1
    n, c, h, wd = x.shape
    k = w.shape[0]
    p, q = h + 2 * pad_h - (r - 1), wd + 2 * pad_w - (r - 1)
    tp, tq = -(-p // m), -(-q // m)
    padded = np.zeros((n, c, tp * m + r - 1, tq * m + r - 1))
    src = np.asarray(x, dtype=np.float64)
    hh, ww = min(h, tp * m + r - 1 - pad_h), min(wd, tq * m + r - 1 - pad_w)
    padded[:, :, pad_h:pad_h + hh, pad_w:pad_w + ww] = src[:, :, :hh, :ww]
    # windows[n, c, i, j, a, b] = padded[n, c, i·m + a, j·m + b]
    idx_h = (np.arange(tp) * m)[:, None] + np.arange(alpha)[None, :]
    idx_w = (np.arange(tq) * m)[:, None] + np.arange(alpha)[None, :]
    windows = padded[:, :, idx_h[:, None, :, None], idx_w[None, :, None, :]]
    v = np.einsum("xa,ncijab,yb->xyncij", bt, windows, bt).reshape(alpha * alpha, n, c, tp, tq)
    u = filter_transform(w, m)
    mm = np.einsum("fck,fncij->fnkij", u, v).reshape(alpha, alpha, n, k, tp, tq)
    y = np.einsum("ia,abnkst,jb->nksitj", at, mm, at).reshape(n, k, tp * m, tq * m)
    return y[:, :, :p, :q]


def winograd_axis_conv2d_numpy(x: np.ndarray, w: np.ndarray, m: int, pad_h: int, pad_w: int) -> np.ndarray:
    """Stride-1 1×r or r×1 convolution by 1-D F(m, r) tiles along the filter's axis in float64, the 1-D family's
    dataflow: x (N, C, H, W), w (K, C, 1, r) or (K, C, r, 1) -> y (N, K, P, Q).

    Each tile of m outputs along the axis reads the α = m + r − 1 inputs at tq·m − pad (zero outside the image);
    tiles overhanging the output are computed and cropped. An r×1 filter is the 1×r case on the transposed maps.
    """
    if w.shape[2] != 1:   # r×1: transpose H and W, convolve along W, transpose back
        y = winograd_axis_conv2d_numpy(x.transpose(0, 1, 3, 2), w.transpose(0, 1, 3, 2), m, pad_w, pad_h)
        return y.transpose(0, 1, 3, 2)
    r = w.shape[3]
    at, g, bt = matrices_1d(m, r)
    alpha = m + r - 1
    n, c, h, wd = x.shape
    p, q = h + 2 * pad_h, wd + 2 * pad_w - (r - 1)
    tq = -(-q // m)
    padded = np.zeros((n, c, p, tq * m + r - 1))
    ww = min(wd, tq * m + r - 1 - pad_w)
    padded[:, :, pad_h:pad_h + h, pad_w:pad_w + ww] = np.asarray(x, dtype=np.float64)[:, :, :, :ww]
    idx = (np.arange(tq) * m)[:, None] + np.arange(alpha)[None, :]
    windows = padded[:, :, :, idx]                                       # (n, c, p, tq, α)
    v = np.einsum("ab,ncptb->ancpt", bt, windows)
    u = np.einsum("ar,kcr->akc", g, np.asarray(w, dtype=np.float64)[:, :, 0, :])
    mm = np.einsum("akc,ancpt->ankpt", u, v)
    y = np.einsum("ia,ankpt->nkpti", at, mm).reshape(n, w.shape[0], p, tq * m)
    return y[:, :, :, :q]


@cache
def transform_op_counts(m: int, r: int = 3) -> tuple[int, int]:
    """(input, output) transform arithmetic instructions per tile: each generated statement with n terms is
    n − 1 adds (a constant factor folds into an FMA, a leading minus into the add)."""
    code = device_code(m, r)
    counts = []
    for name in ("wino_input_transform", "wino_output_transform"):
        body = code.split(name, 1)[1].split("\n}", 1)[0]
        counts.append(sum(max(0, len(re.findall(r"\b(?:in|t)\[", line.split("=", 1)[1])) - 1)
                          for line in body.splitlines() if " = " in line and "float" not in line))
    return counts[0], counts[1]
