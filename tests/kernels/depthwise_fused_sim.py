"""Python replay of ``fused_bwd_body`` (``dw1d_fused.cu``), written from the CUDA source: the staging of x and
dy rows (zero fill past L and past the last row), per thread the dy registers, the dx sums written into the
dy slot and copied out, the dw sums streamed over x, and the partial slots (or atomics) with the shared
reduction. Counts global words per stream and, given data, returns (dx, dw)."""

from __future__ import annotations

from collections import Counter

import numpy as np


def emulate_fused(pl, x: np.ndarray | None = None, dy: np.ndarray | None = None, w: np.ndarray | None = None):
    _path, KE, TL, _tpr, RB, VEC, _halo, _stages, _pitch, _atomic = pl.template_args()
    NR, C, L, K, ngroups = pl.rows, pl.C, pl.L, pl.K, pl.ngroups
    data = x is not None
    xr = x.reshape(NR, L) if data else None
    dr = dy.reshape(NR, L) if data else None
    dx = np.full((NR, L), np.nan) if data else None
    part = np.zeros((pl.grid * RB, KE))
    cnt: Counter = Counter()

    def stage(rows: np.ndarray | None, r0: int, name: str) -> np.ndarray:
        buf = np.zeros((RB, TL))
        for rr in range(RB):
            for q in range(0, TL, VEC):
                if r0 + rr < NR and q < L:
                    cnt[name] += VEC if q + VEC <= L else L - q  # VEC = 4 only when L % 4 == 0
                    if rows is not None:
                        buf[rr, q:q + VEC] = rows[r0 + rr, q:q + VEC]
        return buf

    for bid in range(pl.grid):
        wt = np.zeros((RB, KE))
        for rb in range(RB):
            if bid * RB + rb < NR:
                cnt["w"] += KE
                if data:
                    wt[rb] = w[(bid * RB + rb) % C, :KE]
        n_items = -(-(ngroups - bid) // pl.grid)
        for k in range(n_items):
            g = bid + k * pl.grid
            xb, db = stage(xr, g * RB, "x"), stage(dr, g * RB, "dy")
            for rb in range(RB):
                if g * RB + rb >= NR:
                    continue
                d = db[rb].copy()
                for sx in range(TL):
                    db[rb, sx] = sum(wt[rb, j] * d[sx + j] for j in range(KE) if sx + j < TL)
                for tau in range(TL):
                    for t in range(tau, min(TL, tau + KE)):
                        part[bid * RB + rb, t - tau] += d[t] * xb[rb, tau]
            for rr in range(RB):
                orow = g * RB + rr
                for q in range(0, TL, VEC):
                    if orow >= NR or q >= L:
                        continue
                    n = min(VEC, L - q)
                    cnt["dx"] += n
                    if data:
                        dx[orow, q:q + n] = db[rr, q:q + n]
    dw = np.zeros((C, K))
    if pl.atomic:
        real = min(NR, pl.grid * RB)
        cnt["atomics"] += real * KE
        cnt["dw_zero"] += C * K
        for slot in range(real):
            dw[slot % C, :KE] += part[slot]
    else:
        cnt["partials"] += pl.grid * RB * KE
        for o in range(C * K):
            cc, j = divmod(o, K)
            if j < KE:
                for p in range(pl.slices):
                    if p * C + cc < pl.slots:
                        cnt["reduce_read"] += 1
                        dw[cc, j] += part[p * C + cc, j]
            cnt["dw"] += 1
    return cnt, ((dx.reshape(x.shape), dw) if data else None)
