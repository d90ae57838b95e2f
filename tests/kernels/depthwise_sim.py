"""Python replays of the depthwise 1-D kernels, written from the ``.cu`` sources (not from ``traffic.py``).

Each ``sim_<variant>(plan, ...)`` walks the kernel's grid, blocks, threads and loops as the CUDA code does
and counts the global loads and stores per stream. ``emulate_fast`` additionally carries the data: it
replays the fast kernel's staging (cp.async copies with the mirrored addresses and the lane swizzle of
dgrad), the window arithmetic of ``fast_window`` (element e ↔ time tl0 − HP + e, tap j = t + HP − e,
peeled at tl0 = 0), the write-back and the copy-out, and the partial slots, so the index algebra is
checked numerically without a GPU. Only the plan's launch arguments (grid, template and int arguments,
pitch) are taken from the plan.
"""

from __future__ import annotations

from collections import Counter

import numpy as np

from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan


def _reduce_counts(pl: Depthwise1dPlan, c: Counter) -> None:
    """dw_reduce: output o = (cc, j) reads slots p·C + cc < G for j < KE, stores every (cc, j); atomic mode
    instead zeroes dw (memsetAsync)."""
    if pl.atomic:
        c["dw_zero"] += pl.C * pl.K
        return
    for o in range(pl.C * pl.K):
        cc, j = divmod(o, pl.K)
        if j < pl.ke:
            c["reduce_read"] += sum(1 for p in range(pl.slices) if p * pl.C + cc < pl.slots)
        c["dw"] += 1


def sim_simple(pl: Depthwise1dPlan) -> Counter:
    B, C, L, ke = pl.B, pl.C, pl.L, pl.ke
    c: Counter = Counter()
    if pl.path == "wgrad":
        for idx in range(B * C * ke):
            j = idx % ke if pl.variant == "coalesced" else (idx // B) % ke
            for _t in range(j, L):
                c["x"] += 1
                c["dy"] += 1
            c["atomics" if pl.atomic else "partials"] += 1
        _reduce_counts(pl, c)
        return c
    src, dst = ("x", "y") if pl.path == "fwd" else ("dy", "dx")
    for idx in range(B * C * L):
        t = idx % L if pl.variant == "coalesced" else (idx // B) % L
        jmax = min(ke - 1, t) if pl.path == "fwd" else min(ke - 1, L - 1 - t)
        c[src] += jmax + 1
        c["w"] += jmax + 1
        c[dst] += 1
    return c


def sim_shared(pl: Depthwise1dPlan) -> Counter:
    B, L, ke = pl.B, pl.L, pl.ke
    rb, T = pl.config.rows, pl.config.tile_l  # type: ignore[attr-defined]
    ntl, nbg = pl.int_args[7], pl.int_args[8]
    H, win = ke - 1, T + ke - 1
    c: Counter = Counter()
    for bid in range(pl.grid):
        tile, rest = bid % ntl, bid // ntl
        bg = rest % nbg
        l0, b0 = tile * T, bg * rb
        src = "dy" if pl.path == "dgrad" else "x"
        for i in range(rb * win):
            r, k = divmod(i, win)
            p = l0 + k if pl.path == "dgrad" else l0 - H + k
            if b0 + r < B and 0 <= p < L:
                c[src] += 1
        if pl.path == "wgrad":
            for i in range(rb * T):
                r, k = divmod(i, T)
                if b0 + r < B and l0 + k < L:
                    c["dy"] += 1
            c["atomics" if pl.atomic else "partials"] += ke
        else:
            c["w"] += ke
            for o in range(rb * T):
                r, t = divmod(o, T)
                if b0 + r < B and l0 + t < L:
                    c["y" if pl.path == "fwd" else "dx"] += 1
    if pl.path == "wgrad":
        _reduce_counts(pl, c)
    return c


def sim_warp(pl: Depthwise1dPlan) -> Counter:
    B, C, L, ke = pl.B, pl.C, pl.L, pl.ke
    warps, v = pl.config.warps, pl.config.outputs_per_lane  # type: ignore[attr-defined]
    ch, H = 32 * v, ke - 1
    nr = B * C
    c: Counter = Counter()
    if pl.path == "wgrad":
        rb, nbg = pl.int_args[5], pl.int_args[6]
        for bid in range(pl.grid):
            bg = bid % nbg
            for w in range(warps):
                for _b in range(bg * rb + w, min(B, (bg + 1) * rb), warps):
                    for l0 in range(0, L, ch):
                        c["x"] += sum(1 for k in range(ch + H) if 0 <= l0 - H + k < L)
                        c["dy"] += sum(1 for k in range(ch) if l0 + k < L)
            c["atomics" if pl.atomic else "partials"] += ke
        _reduce_counts(pl, c)
        return c
    src, dst = ("x", "y") if pl.path == "fwd" else ("dy", "dx")
    for bid in range(pl.grid):
        for w in range(warps):
            cached = -1
            for row in range(bid * warps + w, nr, pl.grid * warps):
                if row % C != cached:
                    c["w"] += ke
                    cached = row % C
                for l0 in range(0, L, ch):
                    for k in range(ch + H):
                        p = l0 - H + k if pl.path == "fwd" else l0 + k
                        c[src] += 0 <= p < L
                    c[dst] += sum(1 for vv in range(v) for lane in range(32) if l0 + vv * 32 + lane < L)
    return c


def emulate_fast(pl: Depthwise1dPlan, a: np.ndarray | None = None, b: np.ndarray | None = None,
                 ) -> tuple[Counter, np.ndarray | None]:
    """Replay ``fast_body``: counts per stream and, when ``a``/``b`` are given (float64 arrays: x or dy,
    and w or dy), the kernel's output — y/dx (B, C, L) or, for wgrad, dw (C, K) after the partials'
    reduction (deterministic) or the atomic adds."""
    (path_code, KE, TL, TPR, RB, VEC, halo, _stages, PITCH, _atomic) = pl.template_args
    NR, C, L, K, ngroups, nseg = pl.int_args
    halo = halo == "true"
    HP = -(-(KE - 1) // 4) * 4 if halo else 0
    SEG, SPAN = TL * TPR, HP + TL * TPR
    reverse = path_code == 1
    swz = 3 if reverse and VEC == 4 else 0
    wgrad = path_code == 2
    data = a is not None
    rows_a = a.reshape(NR, L) if data else None
    rows_b = b.reshape(NR, L) if data and wgrad else None
    out = np.full((NR, L), np.nan) if data and not wgrad else None
    part = np.zeros((pl.grid * RB, KE)) if data and wgrad else None
    cnt: Counter = Counter()
    src_name = "dy" if reverse else "x"

    def stage(src_rows: np.ndarray | None, lo: int, r0: int, a0: int, name: str) -> np.ndarray:
        buf = np.zeros((RB, PITCH))
        for rr in range(RB):
            for rel in range(lo, SPAN, VEC):
                tt, row = a0 + rel, r0 + rr
                if not (row < NR and 0 <= tt < L):
                    continue  # zero fill
                cnt[name] += VEC
                if src_rows is not None:
                    g = (L - VEC - tt) if reverse else tt  # the copy keeps memory order
                    buf[rr, rel:rel + VEC] = src_rows[row, g:g + VEC][::-1] if (reverse and VEC == 1) else \
                        src_rows[row, g:g + VEC]
        return buf

    for bid in range(pl.grid):
        acc_w = np.zeros((RB * TPR, KE))  # wgrad sums per thread
        for tid in range(RB * TPR):  # fwd/dgrad taps: once per thread with a real first row
            if not wgrad and bid * RB + tid // TPR < NR:
                cnt["w"] += KE
        n_items = -(-(ngroups - bid) // pl.grid) * nseg
        for k in range(n_items):
            g, sg = bid + (k // nseg) * pl.grid, k % nseg
            r0, seg0 = g * RB, sg * SEG
            xbuf = stage(rows_a, 0, r0, seg0 - HP, src_name)
            dbuf = stage(rows_b, HP, r0, seg0 - HP, "dy") if wgrad else None
            wbuf = xbuf.copy()
            for tid in range(RB * TPR):
                rb, tp = divmod(tid, TPR)
                row, tl0 = r0 + rb, seg0 + tp * TL
                acc = np.zeros(TL)
                if row < NR and tl0 < L and data:
                    peel = (not halo) or tl0 == 0
                    for e in range(HP if peel else 0, HP + TL):
                        chunk_base = tp * TL + 4 * (e // 4)
                        xv = xbuf[rb, chunk_base + ((e % 4) ^ swz)]
                        for t in range(TL):
                            j = t + HP - e
                            if 0 <= j < KE:
                                if wgrad:
                                    acc_w[tid, j] += dbuf[rb, HP + tp * TL + t] * xv
                                else:
                                    acc[t] += b[(bid * RB + rb) % C, j] * xv  # the first row's taps
                if not wgrad:  # write-back with the swizzle
                    for t in range(TL):
                        wbuf[rb, HP + tp * TL + 4 * (t // 4) + ((t % 4) ^ swz)] = acc[t]
            if not wgrad:
                dst = "dx" if reverse else "y"
                for rr in range(RB):
                    for q in range(0, SEG, VEC):
                        orow, tt = g * RB + rr, seg0 + q
                        if orow >= NR or tt >= L:
                            continue
                        cnt[dst] += VEC
                        if data:
                            off = (L - VEC - tt) if reverse else tt
                            vals = wbuf[rr, HP + q:HP + q + VEC]
                            out[orow, off:off + VEC] = vals[::-1] if (reverse and VEC == 1) else vals
        if wgrad:
            for rb in range(RB):
                slot = bid * RB + rb
                total = acc_w[rb * TPR:(rb + 1) * TPR].sum(axis=0)
                if pl.atomic:
                    if slot < NR:
                        cnt["atomics"] += KE
                else:
                    cnt["partials"] += KE
                if part is not None:
                    part[slot] = total
    result = None
    if wgrad:
        _reduce_counts(pl, cnt)
        if data:
            dw = np.zeros((C, K))
            for slot in range(min(NR, pl.grid * RB) if pl.atomic else pl.grid * RB):
                dw[slot % C, :KE] += part[slot]
            result = dw
    elif data:
        result = out.reshape(a.shape)
    return cnt, result


def emulate_warp_reg(pl: Depthwise1dPlan, a: np.ndarray | None = None, w: np.ndarray | None = None,
                     ) -> tuple[Counter, np.ndarray | None]:
    """Replay ``warp_reg_body`` (the warp variant's register design) lane by lane: the loads of V values per
    lane (mirrored addresses for dgrad), the item loop with its prefetch, the shuffles within row groups of
    G lanes with the sender's cur/prev choice, the compile-time taps j = d·V + v − u and the stores. Returns
    the counts per stream and, when ``a`` (x or dy) and ``w`` are given, y or dx."""
    path_code, KE, G, V, WARPS, _vec4, multi = pl.template_args
    NR, C, L, _K, nseg = pl.int_args
    multi = multi == "true"
    rev = path_code == 1
    RPW = 32 // G
    RPB = WARPS * RPW
    dfull = (KE + V - 2) // V
    dmax = dfull if multi else min(dfull, G - 1)
    data = a is not None
    rows_a = a.reshape(NR, L) if data else None
    out = np.full((NR, L), np.nan) if data else None
    cnt: Counter = Counter()
    src, dst = ("dy", "dx") if rev else ("x", "y")

    def mem(t: int) -> int:
        return L - 1 - t if rev else t

    def load(row: int, t0: int) -> np.ndarray:
        vals = np.zeros(V)
        if row >= NR:
            return vals
        for u in range(V):
            if t0 + u < L:
                cnt[src] += 1
                if data:
                    vals[u] = rows_a[row, mem(t0 + u)]
        return vals

    stride = pl.grid * RPB
    for bid in range(pl.grid):
        for warp in range(WARPS):
            base0 = bid * RPB + warp * RPW
            lanes = range(32)
            g = [ln % G for ln in lanes]
            row0 = [base0 + ln // G for ln in lanes]
            wr = np.zeros((32, KE))
            for ln in lanes:
                if row0[ln] < NR:
                    cnt["w"] += KE
                    if data:
                        wr[ln] = w[row0[ln] % C, :KE]
            nbase = (NR - 1 - base0) // stride + 1 if base0 < NR else 0
            items = nbase * nseg
            prev = np.zeros((32, V))
            cur = np.array([load(row0[ln], g[ln] * V) for ln in lanes]) if items else None
            for k in range(items):
                kr, sg = divmod(k, nseg)
                nxt = None
                if k + 1 < items:
                    k1r, sg1 = divmod(k + 1, nseg)
                    nxt = np.array([load(row0[ln] + k1r * stride, sg1 * G * V + g[ln] * V) for ln in lanes])
                acc = np.zeros((32, V))
                for d in range(dmax + 1):
                    rv = np.zeros((32, V))
                    for ln in lanes:
                        if d == 0:
                            rv[ln] = cur[ln]
                        elif multi and d == G:
                            rv[ln] = prev[ln]
                        else:
                            sl = (ln - ln % G) + ((g[ln] - d) & (G - 1))   # source lane in the row group
                            send = prev[sl] if (multi and g[sl] + d >= G) else cur[sl]
                            rv[ln] = send if (multi or g[ln] >= d) else 0.0
                    for u in range(V):
                        for v in range(V):
                            j = d * V + v - u
                            if 0 <= j < KE:
                                acc[:, v] += wr[:, j] * rv[:, u]
                for ln in lanes:
                    row, t0 = row0[ln] + kr * stride, sg * G * V + g[ln] * V
                    if row >= NR:
                        continue
                    for v in range(V):
                        if t0 + v < L:
                            cnt[dst] += 1
                            if data:
                                out[row, mem(t0 + v)] = acc[ln, v]
                if multi:
                    prev = cur.copy() if sg + 1 < nseg else np.zeros((32, V))
                cur = nxt
    return cnt, (out.reshape(a.shape) if data else None)


def emulate_warp_reg_wgrad(pl: Depthwise1dPlan, x: np.ndarray | None = None, dy: np.ndarray | None = None,
                           ) -> tuple[Counter, np.ndarray | None]:
    """Replay ``warp_reg_wgrad_body`` and the reduction: per lane V x and V dy values (prefetched item by item),
    the x shuffles of the register design, sums[j] += dy[v]·x_from(g − d)[u] for j = d·V + v − u, the row
    group's butterfly and lane 0's partial slot (or atomics). Counts per stream and, given data, dw (C, K)."""
    KE, G, V, WARPS, _vec4, multi, atomic = pl.template_args
    NR, C, L, K, nseg = pl.int_args
    multi, atomic = multi == "true", atomic == "true"
    RPW = 32 // G
    RPB = WARPS * RPW
    dfull = (KE + V - 2) // V
    dmax = dfull if multi else min(dfull, G - 1)
    data = x is not None
    xr = x.reshape(NR, L) if data else None
    dr = dy.reshape(NR, L) if data else None
    cnt: Counter = Counter()
    part = np.zeros((pl.grid * RPB, KE))

    def load(rows: np.ndarray | None, name: str, row: int, t0: int) -> np.ndarray:
        vals = np.zeros(V)
        if row < NR:
            for u in range(V):
                if t0 + u < L:
                    cnt[name] += 1
                    if rows is not None:
                        vals[u] = rows[row, t0 + u]
        return vals

    stride = pl.grid * RPB
    for bid in range(pl.grid):
        for warp in range(WARPS):
            base0 = bid * RPB + warp * RPW
            g = [ln % G for ln in range(32)]
            row0 = [base0 + ln // G for ln in range(32)]
            sums = np.zeros((32, KE))
            nbase = (NR - 1 - base0) // stride + 1 if base0 < NR else 0
            items = nbase * nseg
            prev = np.zeros((32, V))
            for k in range(items):
                kr, sg = divmod(k, nseg)
                cur = np.array([load(xr, "x", row0[ln] + kr * stride, sg * G * V + g[ln] * V) for ln in range(32)])
                dc = np.array([load(dr, "dy", row0[ln] + kr * stride, sg * G * V + g[ln] * V) for ln in range(32)])
                for d in range(dmax + 1):
                    rv = np.zeros((32, V))
                    for ln in range(32):
                        if d == 0:
                            rv[ln] = cur[ln]
                        elif multi and d == G:
                            rv[ln] = prev[ln]
                        else:
                            sl = (ln - ln % G) + ((g[ln] - d) & (G - 1))
                            send = prev[sl] if (multi and g[sl] + d >= G) else cur[sl]
                            rv[ln] = send if (multi or g[ln] >= d) else 0.0
                    for u in range(V):
                        for v in range(V):
                            j = d * V + v - u
                            if 0 <= j < KE:
                                sums[:, j] += dc[:, v] * rv[:, u]
                if multi:
                    prev = cur.copy() if sg + 1 < nseg else np.zeros((32, V))
            for ln in range(0, 32, G):  # lane g = 0 of each row group
                slot = row0[ln]
                total = sums[ln:ln + G].sum(axis=0)
                if atomic:
                    if slot < NR:
                        cnt["atomics"] += KE
                else:
                    cnt["partials"] += KE
                part[slot] = total
    _reduce_counts(pl, cnt)
    if not data:
        return cnt, None
    dw = np.zeros((C, K))
    for slot in range(min(NR, pl.grid * RPB) if atomic else pl.grid * RPB):
        dw[slot % C, :KE] += part[slot]
    return cnt, dw
