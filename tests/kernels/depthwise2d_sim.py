"""Python replays of the 2-D depthwise kernels, written from the ``.cu`` sources (not from the traffic formulas).

``emulate_dw2d_fast`` walks ``dw2d_fast_fwd_body`` block by block: the cp.async staging into the shared
layout [PB][IH][PITCH] (zero fill included), then every thread's items with the kernel's window arithmetic
(float4 reads from DELTA − DELTA % 4, window index D4 + u·SW + s) and its stores; it counts the global
words per stream and, given data, returns y. Only the plan's template and launch arguments are used.
"""

from __future__ import annotations

from collections import Counter

import numpy as np


def emulate_dw2d_fast(pl, x: np.ndarray | None = None, w: np.ndarray | None = None
                      ) -> tuple[Counter, np.ndarray | None]:
    (R, S, SH, SW, PH, PW, H, W, P, Q, TH, VH, VW, PB, _THREADS, PITCH, OFF, VEC) = pl.template_args()
    NC, C, nbands = pl.problem.N * pl.problem.C, pl.problem.C, pl.nbands
    IH = (TH - 1) * SH + R
    NQ, NH = -(-Q // VW), -(-TH // VH)
    WIN = (VW - 1) * SW + S
    DELTA = OFF - PW
    F4 = (VW * SW) % 4 == 0 and PITCH % 4 == 0
    D4 = DELTA % 4 if F4 else 0
    NCH = (D4 + WIN + 3) // 4
    data = x is not None
    xs = x.reshape(NC, H, W) if data else None
    ws = w.reshape(C, R * S) if data else None
    y = np.full((NC, P, Q), np.nan) if data else None
    cnt: Counter = Counter()
    CPR = PITCH // VEC
    for blk in range(pl.grid):
        bd, pg = blk % nbands, blk // nbands
        p0 = bd * TH
        h0 = p0 * SH - PH
        smem = np.full(PB * IH * PITCH, np.nan)  # never-written positions stay NaN
        for i in range(PB * IH * CPR):
            prow, k = divmod(i, CPR)
            pl_, ir = divmod(prow, IH)
            plane, h, col = pg * PB + pl_, h0 + ir, k * VEC - OFF
            ok = plane < NC and 0 <= h < H and 0 <= col < W
            dst = prow * PITCH + k * VEC
            if ok:
                cnt["x"] += VEC
                smem[dst:dst + VEC] = xs[plane, h, col:col + VEC] if data else 0.0
            else:
                smem[dst:dst + VEC] = 0.0
        for it in range(PB * NH * NQ):
            pl_, rem = divmod(it, NH * NQ)
            rg, qg = divmod(rem, NQ)
            plane, p, q = pg * PB + pl_, p0 + rg * VH, qg * VW
            if plane >= NC or p >= P:
                continue
            cnt["w"] += R * S
            acc = np.zeros((VH, VW))
            base = (pl_ * IH + rg * VH * SH) * PITCH + q * SW + DELTA - D4
            for ir in range((VH - 1) * SH + R):
                n = 4 * NCH if F4 else WIN
                lo = base + ir * PITCH
                assert lo >= 0 and lo + n <= smem.size, "window read outside the shared buffer"
                if F4:
                    assert lo % 4 == 0, "misaligned float4 read"
                win = smem[lo:lo + n]
                for v in range(VH):
                    r = ir - v * SH
                    if not 0 <= r < R:
                        continue
                    for s in range(S):
                        for u in range(VW):
                            if data:
                                acc[v, u] += ws[plane % C, r * S + s] * win[D4 + u * SW + s]
            for v in range(VH):
                if p + v >= P:
                    break
                for u in range(VW):
                    if q + u < Q:
                        cnt["y"] += 1
                        if data:
                            y[plane, p + v, q + u] = acc[v, u]
    return cnt, (y.reshape(pl.problem.N, C, P, Q) if data else None)
