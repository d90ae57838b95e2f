"""The WIP TF32 Winograd GEMM's index maps in numpy, no GPU: every (block, warp, lane) of ``winograd_tc_gemm_body``
reads the shared-memory words its fragments name (the PTX m16n8k8 .tf32 layouts, written out in the .cu header)
from stages filled as the kernel's copies fill them, multiplies as the MMA does and stores where the epilogue
stores. The result must equal U[ξ]ᵀ · V[ξ] exactly in float64 for every ξ, and every element of M must be written
once — a wrong offset, warp tile or fragment row shows as a mismatch or a gap. Bank check: the 32 lanes' addresses
of each fragment load fall in 32 distinct banks. ``python wip_winograd_tc/emulate.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen import TcTile


def emulate(U: np.ndarray, V: np.ndarray, tile: TcTile) -> tuple[np.ndarray, np.ndarray]:
    """M (α², Kp, Tp) as the kernel computes it, and how many times each element was stored."""
    a2, cp_, kp = U.shape
    tp = V.shape[2]
    bk, bt, bc, wk_n, wt_n = tile.bk, tile.bt, tile.bc, tile.wk, tile.wt
    lda, ldb = bk + 8, bt + 8
    wtk, wtt = bk // wk_n, bt // wt_n
    mi_n, ni_n = wtk // 16, wtt // 8
    out = np.full((a2, kp, tp), np.nan)
    writes = np.zeros((a2, kp, tp), dtype=int)
    lanes = np.arange(32)
    g, t4 = lanes >> 2, lanes & 3
    for xi in range(a2):
        for by in range(kp // bk):
            for bx in range(tp // bt):
                k0, t0 = by * bk, bx * bt
                acc = np.zeros((wk_n * wt_n, mi_n, ni_n, 4, 32))
                for chunk in range(cp_ // bc):
                    c0 = chunk * bc
                    a_s = np.zeros(bc * lda)   # the stage as the copies fill it (padding words stay unread)
                    b_s = np.zeros(bc * ldb)
                    for cc in range(bc):
                        a_s[cc * lda: cc * lda + bk] = U[xi, c0 + cc, k0: k0 + bk]
                        b_s[cc * ldb: cc * ldb + bt] = V[xi, c0 + cc, t0: t0 + bt]
                    for warp in range(wk_n * wt_n):
                        wk, wt = warp // wt_n, warp % wt_n
                        for kk in range(0, bc, 8):
                            for i in range(mi_n):
                                ap = (kk + t4) * lda + wk * wtk + g + 16 * i
                                addrs = [ap, ap + 8, ap + 4 * lda, ap + 4 * lda + 8]
                                for ad in addrs:
                                    assert len(set((ad % 32).tolist())) == 32, "A fragment load: bank conflict"
                                a = [a_s[ad] for ad in addrs]
                                for j in range(ni_n):
                                    bp = (kk + t4) * ldb + wt * wtt + g + 8 * j
                                    for ad in (bp, bp + 4 * ldb):
                                        assert len(set((ad % 32).tolist())) == 32, "B fragment load: bank conflict"
                                    b = [b_s[bp], b_s[bp + 4 * ldb]]
                                    # the MMA: D[r][n] += Σ_q A[r][q] B[q][n] from the lanes' fragments
                                    A = np.zeros((16, 8))
                                    B = np.zeros((8, 8))
                                    A[g, t4], A[g + 8, t4], A[g, t4 + 4], A[g + 8, t4 + 4] = a
                                    B[t4, g], B[t4 + 4, g] = b
                                    D = A @ B
                                    acc[warp, i, j, 0] += D[g, 2 * t4]
                                    acc[warp, i, j, 1] += D[g, 2 * t4 + 1]
                                    acc[warp, i, j, 2] += D[g + 8, 2 * t4]
                                    acc[warp, i, j, 3] += D[g + 8, 2 * t4 + 1]
                for warp in range(wk_n * wt_n):
                    wk, wt = warp // wt_n, warp % wt_n
                    for i in range(mi_n):
                        k = k0 + wk * wtk + 16 * i + g
                        for j in range(ni_n):
                            t = t0 + wt * wtt + 8 * j + 2 * t4
                            for e, (dk, dt) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                                out[xi, k + dk, t + dt] = acc[warp, i, j, e]
                                np.add.at(writes[xi], (k + dk, t + dt), 1)
    return out, writes


def main() -> int:
    rng = np.random.default_rng(7)
    failures = 0
    for tile, (a2, cp_, kp, tp) in [(TcTile(64, 128, 16, 2, 4, 3), (2, 32, 128, 256)),
                                    (TcTile(128, 64, 16, 4, 2, 2), (1, 16, 128, 128)),
                                    (TcTile(32, 128, 16, 1, 4, 3), (2, 32, 64, 128)),
                                    (TcTile(64, 64, 32, 2, 2, 4), (1, 64, 64, 64))]:
        U = rng.standard_normal((a2, cp_, kp))
        V = rng.standard_normal((a2, cp_, tp))
        got, writes = emulate(U, V, tile)
        want = np.einsum("xck,xct->xkt", U, V)
        ok = np.allclose(got, want, rtol=1e-12, atol=1e-12) and (writes == 1).all()
        failures += not ok
        print(f"{tile.key()} on (α²={a2}, Cp={cp_}, Kp={kp}, Tp={tp}): "
              f"max |diff| {np.nanmax(np.abs(got - want)):.2e}, every element stored once: {(writes == 1).all()}"
              f" {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
