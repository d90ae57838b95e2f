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


def emulate_dw2d_dgrad(pl, dy: np.ndarray | None = None, w: np.ndarray | None = None
                       ) -> tuple[Counter, np.ndarray | None]:
    """Replay ``dw2d_dgrad_body``: staging of IHD dy rows per plane, items with the compile-time stride phases
    (dy row h0/SH + e, column w0/SW + f), window reads, stores. Counts per stream and, given data, dx."""
    (R, S, SH, SW, PH, PW, H, W, P, Q, TH, VH, VW, PB, _THREADS, PITCH, OFF, VEC, E0, NE, F0, NF) = pl.template_args()
    NC, C, nbands = pl.problem.N * pl.problem.C, pl.problem.C, pl.nbands
    IHD = (TH - VH) // SH + NE
    NQ, NH = -(-W // VW), TH // VH
    QSTEP = VW // SW
    START = F0 + OFF
    F4 = QSTEP % 4 == 0 and PITCH % 4 == 0
    D4 = START % 4 if F4 else 0
    NCH = (D4 + NF + 3) // 4
    data = dy is not None
    ds = dy.reshape(NC, P, Q) if data else None
    ws = w.reshape(C, R * S) if data else None
    dx = np.full((NC, H, W), np.nan) if data else None
    cnt: Counter = Counter()
    CPR = PITCH // VEC
    for blk in range(pl.grid):
        bd, pg = blk % nbands, blk // nbands
        hb = bd * TH
        p0 = hb // SH + E0
        smem = np.full(PB * IHD * PITCH, np.nan)
        for i in range(PB * IHD * CPR):
            prow, k = divmod(i, CPR)
            pl_, ir = divmod(prow, IHD)
            plane, prow_dy, col = pg * PB + pl_, p0 + ir, k * VEC - OFF
            dst = prow * PITCH + k * VEC
            if plane < NC and 0 <= prow_dy < P and 0 <= col < Q:
                cnt["dy"] += VEC
                smem[dst:dst + VEC] = ds[plane, prow_dy, col:col + VEC] if data else 0.0
            else:
                smem[dst:dst + VEC] = 0.0
        for it in range(PB * NH * NQ):
            pl_, rem = divmod(it, NH * NQ)
            rg, qg = divmod(rem, NQ)
            plane, h0, w0 = pg * PB + pl_, hb + rg * VH, qg * VW
            if plane >= NC or h0 >= H:
                continue
            cnt["w"] += R * S
            acc = np.zeros((VH, VW))
            base = (pl_ * IHD + rg * (VH // SH)) * PITCH + qg * QSTEP + START - D4
            for er in range(NE):
                n = 4 * NCH if F4 else NF
                lo = base + er * PITCH
                assert lo >= 0 and lo + n <= smem.size, "window read outside the shared buffer"
                assert not F4 or lo % 4 == 0, "misaligned float4 read"
                win = smem[lo:lo + n]
                for v in range(VH):
                    for r in range(R):
                        e = PH + v - r
                        if e % SH or e // SH - E0 != er:
                            continue
                        for s in range(S):
                            for u in range(VW):
                                f = PW + u - s
                                if f % SW:
                                    continue
                                if data:
                                    acc[v, u] += ws[plane % C, r * S + s] * win[D4 + f // SW - F0]
            for v in range(VH):
                if h0 + v >= H:
                    break
                for u in range(VW):
                    if w0 + u < W:
                        cnt["dx"] += 1
                        if data:
                            dx[plane, h0 + v, w0 + u] = acc[v, u]
    return cnt, (dx.reshape(pl.problem.N, C, H, W) if data else None)


def emulate_dw2d_wgrad(pl, x: np.ndarray | None = None, dy: np.ndarray | None = None
                       ) -> tuple[Counter, np.ndarray | None]:
    """Replay ``dw2d_wgrad_body`` and the reduction: staging of x (as the forward) and of the dy band, the
    items' sums per thread (thread t takes items t, t + THREADS, …), the warp and block reduction in the
    kernel's order, the partial slots or atomics. Counts per stream and, given data, dw (C, 1, R, S)."""
    (R, S, SH, SW, PH, PW, H, W, P, Q, TH, VH, VW, PB, THREADS, PITCH, OFF, VEC, DPITCH, DVEC,
     atomic) = pl.template_args()
    N, C, nbands, nng = pl.problem.N, pl.problem.C, pl.nbands, pl.n_groups
    IH = (TH - 1) * SH + R
    NQ, NH = -(-Q // VW), TH // VH
    WIN = (VW - 1) * SW + S
    DELTA = OFF - PW
    F4 = (VW * SW) % 4 == 0 and PITCH % 4 == 0
    D4 = DELTA % 4 if F4 else 0
    NCH = (D4 + WIN + 3) // 4
    RS = R * S
    data = x is not None
    part = np.zeros((pl.grid, RS))
    cnt: Counter = Counter()
    for blk in range(pl.grid):
        bd, rest = blk % nbands, blk // nbands
        ng, c = rest % nng, rest // nng
        pb0 = bd * TH
        h0 = pb0 * SH - PH
        xs = np.full(PB * IH * PITCH, np.nan)
        for i in range(PB * IH * (PITCH // VEC)):
            prow, k = divmod(i, PITCH // VEC)
            pl_, ir = divmod(prow, IH)
            n, h, col = ng * PB + pl_, h0 + ir, k * VEC - OFF
            dst = prow * PITCH + k * VEC
            if n < N and 0 <= h < H and 0 <= col < W:
                cnt["x"] += VEC
                xs[dst:dst + VEC] = x[n, c, h, col:col + VEC] if data else 0.0
            else:
                xs[dst:dst + VEC] = 0.0
        xfloats = -(-PB * IH * PITCH // 4) * 4  # the kernel's dy band offset in shared memory
        ds = np.full(PB * TH * DPITCH, np.nan)
        for i in range(PB * TH * (DPITCH // DVEC)):
            prow, k = divmod(i, DPITCH // DVEC)
            pl_, ir = divmod(prow, TH)
            n, p, col = ng * PB + pl_, pb0 + ir, k * DVEC
            dst = prow * DPITCH + k * DVEC
            if n < N and p < P and col < Q:
                cnt["dy"] += DVEC
                ds[dst:dst + DVEC] = dy[n, c, p, col:col + DVEC] if data else 0.0
            else:
                ds[dst:dst + DVEC] = 0.0
        sums = np.zeros((THREADS, RS))
        for it in range(PB * NH * NQ):
            tid = it % THREADS
            pl_, rem = divmod(it, NH * NQ)
            rg, qg = divmod(rem, NQ)
            if ng * PB + pl_ >= N or pb0 + rg * VH >= P:
                continue
            if VW % 4 == 0 and DPITCH % 4 == 0:  # float4 reads of the dy band
                assert (xfloats + (pl_ * TH + rg * VH) * DPITCH + qg * VW) % 4 == 0, "misaligned float4 dy read"
            if DVEC == 4:
                assert xfloats % 4 == 0 and DPITCH % 4 == 0, "misaligned 16-byte dy copy"
            d = np.array([[ds[(pl_ * TH + rg * VH + v) * DPITCH + qg * VW + u] for u in range(VW)]
                          for v in range(VH)])
            base = (pl_ * IH + rg * VH * SH) * PITCH + qg * VW * SW + DELTA - D4
            for ir in range((VH - 1) * SH + R):
                n_read = 4 * NCH if F4 else WIN
                lo = base + ir * PITCH
                assert lo >= 0 and lo + n_read <= xs.size and (not F4 or lo % 4 == 0)
                win = xs[lo:lo + n_read]
                for v in range(VH):
                    r = ir - v * SH
                    if not 0 <= r < R:
                        continue
                    for s in range(S):
                        for u in range(VW):
                            sums[tid, r * S + s] += d[v, u] * win[D4 + u * SW + s]
        assert not np.isnan(sums).any(), "a sum read an unwritten shared position"
        part[blk] = sums.sum(axis=0)
        cnt["atomics" if atomic == "true" else "partials"] += RS
    dw = np.zeros((C, RS))
    if atomic == "true":
        cnt["dw_zero"] += C * RS
        for blk in range(pl.grid):
            dw[(blk // nbands) // nng] += part[blk]
    else:
        slot_of = {((blk // nbands) % nng * nbands + blk % nbands) * C + (blk // nbands) // nng: blk
                   for blk in range(pl.grid)}
        for o in range(C * RS):
            cc, j = divmod(o, RS)
            for p in range(pl.slices):
                if p * C + cc < pl.slots:
                    cnt["reduce_read"] += 1
                    dw[cc, j] += part[slot_of[p * C + cc], j]
            cnt["dw"] += 1
    return cnt, (dw.reshape(C, 1, R, S) if data else None)
