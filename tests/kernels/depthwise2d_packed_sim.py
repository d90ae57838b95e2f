"""Python replay of ``dw2d_packed_fwd_body``, written from the ``.cu`` source (not from the traffic formula).

Block by block: the copy of the block's contiguous input stretch into shared memory (16-byte chunks when the
stretch is whole and 16-byte aligned, else 4-byte), every thread's items (plane-major, the runtime test on
input rows, the compile-time test on columns), the shared output stretch and its write-back. Counts the global
words per stream and, given data, returns y. Only the plan's template and launch arguments are used.
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def emulate_dw2d_packed(pl, x: np.ndarray | None = None, w: np.ndarray | None = None,
                        x_aligned: bool = True) -> tuple[Counter, np.ndarray | None]:
    (R, S, SH, SW, PH, PW, H, W, P, Q, VH, PB, THREADS) = pl.template_args()
    NC, C = pl.problem.N * pl.problem.C, pl.problem.C
    PLANE_IN, PLANE_OUT = H * W, P * Q
    IN, OUT = PB * PLANE_IN, PB * PLANE_OUT
    NH = -(-P // VH)
    ITEMS = PB * NH
    ROWS_IN = (VH - 1) * SH + R
    data = x is not None
    xf = x.reshape(-1) if data else None
    ws = w.reshape(C, R * S) if data else None
    y = np.full(NC * PLANE_OUT, np.nan) if data else None
    cnt: Counter = Counter()
    for blk in range(pl.grid):
        first = blk * PB
        np_ = min(PB, NC - first)
        xs = np.full(IN, np.nan)
        base = first * PLANE_IN
        if IN % 4 == 0 and np_ == PB and x_aligned:
            for i in range(IN // 4):
                cnt["x"] += 4
                xs[4 * i:4 * i + 4] = xf[base + 4 * i:base + 4 * i + 4] if data else 0.0
        else:
            for i in range(np_ * PLANE_IN):
                cnt["x"] += 1
                xs[i] = xf[base + i] if data else 0.0
        ys = np.full(OUT, np.nan)
        for t in range(THREADS):
            for it in range(t, ITEMS, THREADS):
                pl_, rg = divmod(it, NH)
                if pl_ >= np_:
                    break
                c = (first + pl_) % C
                cnt["w"] += R * S
                if not data:
                    continue
                acc = np.zeros((VH, Q))
                p = rg * VH
                for ir in range(ROWS_IN):
                    h = p * SH - PH + ir
                    if h < 0 or h >= H:
                        continue
                    row = xs[pl_ * PLANE_IN + h * W:pl_ * PLANE_IN + (h + 1) * W]
                    for v in range(VH):
                        r = ir - v * SH
                        if r < 0 or r >= R:
                            continue
                        for q in range(Q):
                            for s in range(S):
                                col = q * SW - PW + s
                                if 0 <= col < W:
                                    acc[v, q] += ws[c, r * S + s] * row[col]
                for v in range(VH):
                    if p + v >= P:
                        break
                    ys[pl_ * PLANE_OUT + (p + v) * Q:pl_ * PLANE_OUT + (p + v + 1) * Q] = acc[v]
        n_out = np_ * PLANE_OUT
        cnt["y"] += n_out
        if data:
            y[first * PLANE_OUT:first * PLANE_OUT + n_out] = ys[:n_out]
    return cnt, (y.reshape(pl.problem.N, C, P, Q) if data else None)
