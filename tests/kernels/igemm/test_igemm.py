"""The implicit-GEMM tensor-core family without a GPU: which problems it takes, config rules naming the field, the
traffic formula against a simulation of the kernel's copy loops, a numpy emulation of the kernel's gather (its
exact index math, shared-memory tiles, fragment and epilogue maps) against a float64 convolution, the magic-number
division, the space, the registry row, the argument slots of the prepared launch, and the kernel compiled by nvcc
(no spills, registers within ``__launch_bounds__``) at representative configs."""

from __future__ import annotations

import dataclasses
import re
import struct
import zlib
from functools import cache
from typing import Any

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.igemm import launcher
from convtune.kernels.igemm import space as igemm_space
from convtune.kernels.igemm.launcher import (
    SMEM_PAD,
    IgemmFwdConfig,
    IgemmFwdPlan,
    division_magic,
    supports,
    traffic_words,
)
from convtune.kernels.igemm.space import enumerate_plans, plan
from convtune.kernels.reference import conv2d_reference_for, relative_error
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import MAX_ELEMENTS, ConvProblem

H200 = MachineModel.preset("h200")
RESNET_3X3 = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"
U32 = 0xFFFFFFFF


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


# ---- which problems ------------------------------------------------------------------------------------
@pytest.mark.parametrize(("problem", "ok"), [
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 math=tf32"), True),
    (P("N=2 C=3 H=9 W=11 K=5 R=1 S=7 stride=2 pad=3 dilation=2 math=tf32"), True),
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1"), False),                        # strict fp32 (math=ieee)
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 math=ieee"), False),
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=2 math=tf32"), False),
    (P("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 groups=8 math=tf32"), False),       # depthwise
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 dtype=float16"), False),
    (P("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 dtype=bfloat16"), False),
])
def test_supports_only_dense_tf32(problem: ConvProblem, ok: bool) -> None:
    assert supports(problem) is ok
    assert (get_spec("igemm") in specs_for(problem)) is ok


def test_supports_stops_where_the_magic_division_would_stop_being_exact() -> None:
    rs = 11 * 11
    c_max = (2**32 - 1) // (rs * rs)          # C·R·S · R·S < 2³²
    at = ConvProblem(N=1, C=c_max, H=1, W=1, K=1, R=11, S=11, pad_h=5, pad_w=5, math="tf32")
    assert supports(at) and not supports(at.replace(C=c_max + 1))


@pytest.mark.parametrize("text", [
    "N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1",
    "N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=2 math=tf32",
    "N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 dtype=float16",
])
def test_plan_refuses_unsupported_problems_naming_problem(text: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(text), IgemmFwdConfig(), H200)
    assert err.value.field == "problem"
    assert list(enumerate_plans(P(text), H200)) == []


def test_plan_refuses_machines_without_tf32_mma() -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(RESNET_3X3), IgemmFwdConfig(), MachineModel.preset("v100"))
    assert err.value.field == "problem"


# ---- config rules ----------------------------------------------------------------------------------------
@pytest.mark.parametrize(("config", "field"), [
    (IgemmFwdConfig(tile_m=32, warps_m=4), "warps_m"),                  # 32 pixels over 4 warps: 8 < 16
    (IgemmFwdConfig(tile_n=32, warps_n=8, warps_m=1), "warps_n"),       # 32 channels over 8 warps: 4 < 8
    (IgemmFwdConfig(tile_m=256, tile_n=256, warps_m=2, warps_n=2), "warps_n"),  # a warp tile 128 channels wide
    (IgemmFwdConfig(tile_m=256, tile_n=128, warps_m=2, warps_n=2), "tile_m"),  # 256 accumulators per thread
    (IgemmFwdConfig(warps_m=1, warps_n=1), "warps_m"),                  # 32 threads
    (IgemmFwdConfig(warps_m=4, warps_n=4, tile_m=256, tile_n=256), "warps_m"),  # 512 threads
    (IgemmFwdConfig(tile_m=48), "tile_m"),
    (IgemmFwdConfig(tile_n=512), "tile_n"),
    (IgemmFwdConfig(tile_k=12), "tile_k"),
    (IgemmFwdConfig(stages=6), "stages"),
    (IgemmFwdConfig(stages=1), "stages"),
    (IgemmFwdConfig(tile_m=256, tile_n=128, tile_k=32, warps_m=4, warps_n=2, stages=5), "stages"),  # 250 KiB smem
    (IgemmFwdConfig(tile_m=256, tile_n=32, tile_k=32, warps_m=2, warps_n=1), "tile_k"),  # 128 A copies per thread
])
def test_bad_configs_name_the_field(config: IgemmFwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(RESNET_3X3), config, H200)
    assert err.value.field == field, str(err.value)


def test_a_split_without_work_is_refused() -> None:
    small = P("N=1 C=8 H=6 W=6 K=32 R=3 S=3 pad=1 math=tf32")   # C·R·S = 72: 5 chunks of 16
    with pytest.raises(InvalidConfig) as err:                  # 4 splits of 2 chunks: the last one is empty
        plan(small, IgemmFwdConfig(tile_m=32, tile_n=32, tile_k=16, splits=4), H200)
    assert err.value.field == "splits" and "splits=3" in str(err.value)
    with pytest.raises(InvalidConfig) as err:                  # more splits than chunks
        plan(small, IgemmFwdConfig(tile_m=32, tile_n=32, tile_k=16, splits=8), H200)
    assert err.value.field == "splits"
    pl = plan(small, IgemmFwdConfig(tile_m=32, tile_n=32, tile_k=16, splits=3), H200)  # 2 + 2 + 1 chunks
    assert pl.chunks_per_split == 2 and pl.grid == (2, 1, 3)   # 36 pixels: 2 tiles of 32


# ---- traffic: the formula against the kernel's copy loops --------------------------------------------------
def _simulated_traffic(pl: IgemmFwdPlan) -> dict[str, int]:
    """Words the kernel's copies read, walking every block, chunk, thread and copy of ``load_stage``
    (igemm_fwd.cu): an A copy reads 1 word when m < M, kr < C·R·S and its tap lies inside x; a B copy 4 words
    when kr < C·R·S and its column < Kp; zero-filled copies read nothing. Output: the epilogue's stores (every
    split stores its tile; atomics) plus the zeroing of y before a split launch."""
    p, c = pl.problem, pl.config
    threads, bm, bn, bk = c.threads, c.tile_m, c.tile_n, c.tile_k
    m_total, kr_total, pq, rs = p.N * p.P * p.Q, p.C * p.R * p.S, p.P * p.Q, p.R * p.S
    chunks = -(-kr_total // bk)
    mpt = bm // threads if bm > threads else 1
    a_copies, b_segs = bk * bm // threads, bk * bn // 4
    words = {"input": 0, "weight": 0, "output": 0}
    for bz in range(c.splits):
        chunk0 = bz * pl.chunks_per_split
        nchunks = min(chunks - chunk0, pl.chunks_per_split)
        for bx in range(pl.m_tiles):
            for by in range(pl.n_tiles):
                for chunk in range(max(0, nchunks)):
                    kr0 = (chunk0 + chunk) * bk
                    for tid in range(threads):
                        for i in range(a_copies):
                            if threads >= bm:
                                mm, row = tid % bm, tid // bm + i * (threads // bm)
                            else:
                                mm, row = tid + (i % mpt) * threads, i // mpt
                            m, kr = bx * bm + mm, kr0 + row
                            if m >= m_total or kr >= kr_total:
                                continue
                            op, oq = divmod(m % pq, p.Q)
                            tap = kr % rs
                            r, s = divmod(tap, p.S)
                            h = op * p.stride_h - p.pad_h + r * p.dil_h
                            w = oq * p.stride_w - p.pad_w + s * p.dil_w
                            if 0 <= h < p.H and 0 <= w < p.W:
                                words["input"] += 1
                        for i in range(pl.b_copies):
                            e = tid + i * threads
                            if e >= b_segs:
                                continue
                            row, col = divmod(e, bn // 4)
                            if kr0 + row < kr_total and by * bn + 4 * col < pl.kp:
                                words["weight"] += 4
    out = p.N * p.K * p.P * p.Q
    words["output"] = out * c.splits + (out if c.splits > 1 else 0)
    return words


TRAFFIC_CASES = [
    ("1x1_map_3x3_pad1", "N=1 C=8 H=1 W=1 K=16 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1)),
    ("dilation2", "N=2 C=5 H=9 W=7 K=20 R=3 S=3 pad=2 dilation=2 math=tf32", IgemmFwdConfig(64, 32, 16, 2, 2, 3, 1)),
    ("stride2_c13", "N=1 C=13 H=11 W=10 K=40 R=3 S=3 stride=2 pad=1 math=tf32",
     IgemmFwdConfig(32, 64, 8, 1, 2, 2, 1)),
    ("c3_5x5_tile_m_gt_threads", "N=3 C=3 H=8 W=8 K=33 R=5 S=5 pad=2 math=tf32",
     IgemmFwdConfig(128, 32, 8, 2, 1, 2, 1)),
    ("split4_c35", "N=1 C=35 H=5 W=5 K=64 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(32, 32, 8, 2, 1, 3, 4)),
    ("pad_dominated_split3", "N=1 C=20 H=2 W=3 K=70 R=3 S=5 stride=2 pad=3 math=tf32",
     IgemmFwdConfig(64, 64, 16, 2, 2, 2, 3)),
    ("1x1_stride3_256", "N=2 C=9 H=7 W=7 K=8 R=1 S=1 stride=3 math=tf32", IgemmFwdConfig(256, 32, 8, 2, 1, 2, 1)),
    ("nonsquare_dil_stride", "N=2 C=6 H=10 W=9 K=37 R=2 S=4 stride_h=3 stride_w=1 pad_h=2 pad_w=3 dil_h=3 "
     "dil_w=2 math=tf32", IgemmFwdConfig(32, 32, 16, 1, 2, 4, 2)),
]


@pytest.mark.parametrize(("text", "config"), [pytest.param(t, c, id=n) for n, t, c in TRAFFIC_CASES])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_words(pl) == _simulated_traffic(pl)
    assert launcher.total_traffic_words(pl) == sum(_simulated_traffic(pl).values())


# ---- a numpy emulation of the kernel's data path -----------------------------------------------------------
def _wrap32(v: Any) -> Any:
    """C ``int`` arithmetic: the two's-complement value of the low 32 bits (numpy int64 in, int64 out)."""
    return ((np.asarray(v, dtype=np.int64) + (1 << 31)) & U32) - (1 << 31)


def _umulhi(a: Any, m: int) -> Any:
    """``__umulhi(unsigned a, unsigned m)``: the high 32 bits of the 64-bit product (int64 out)."""
    au = (np.asarray(a, dtype=np.int64) & U32).astype(np.uint64)
    return ((au * np.uint64(m & U32)) >> np.uint64(32)).astype(np.int64)


class _Geometry:
    """The config-only maps of one block (igemm_fwd.cu, read index by index):

    * ``mm[j, tid]``: the pixel column (within the block) of thread ``tid``'s j-th column origin;
    * ``a_j[i, tid]``, ``a_row[i, tid]``, ``a_dst[i, tid]``: which column origin, which As row, which shared-memory
      float (within the A stage) copy i of load_stage writes;
    * ``b_row[e]``, ``b_col[e]``, ``b_dst[e]``: the B copies (16 bytes each) of every thread;
    * ``a_addr[ml, kl]``, ``b_addr[kl, nl]``: the A-stage / B-stage float the mma fragments take as logical
      element A(ml, kl) / B(kl, nl) of the block tile (PTX m16n8k8 .tf32 fragment layouts);
    * ``out_dm[ml, nl]``, ``out_dk[ml, nl]``: the (pixel, channel) offset from (m0, n0) the epilogue stores the
      accumulator holding logical C(ml, nl) to.
    Each map is checked to be a bijection where the kernel needs one."""

    def __init__(self, c: IgemmFwdConfig) -> None:
        threads, bm, bn, bk = c.threads, c.tile_m, c.tile_n, c.tile_k
        self.lda, self.ldb = bm + SMEM_PAD, bn + SMEM_PAD
        self.a_stage, self.b_stage = bk * self.lda, bk * self.ldb
        mpt = bm // threads if bm > threads else 1
        col_step = 0 if threads >= bm else threads
        a_copies = bk * bm // threads
        tid = np.arange(threads)
        self.mpt = mpt
        self.mm = np.stack([(tid % bm if threads >= bm else tid) + j * col_step for j in range(mpt)])
        a_col0 = tid % bm if threads >= bm else tid
        a_row0 = tid // bm if threads >= bm else np.zeros_like(tid)
        row_step = threads // bm if threads >= bm else 1
        self.a_j = np.stack([np.full(threads, 0 if threads >= bm else i % mpt) for i in range(a_copies)])
        self.a_row = np.stack([a_row0 + (i if threads >= bm else i // mpt) * row_step for i in range(a_copies)])
        self.a_dst = self.a_row * self.lda + a_col0[None, :] + self.a_j * col_step
        # every (row < BK, column < BM) of As written once per chunk, no padding column written
        hits = np.bincount(self.a_dst.ravel(), minlength=self.a_stage).reshape(bk, self.lda)
        assert (hits[:, :bm] == 1).all() and (hits[:, bm:] == 0).all(), "A copies do not tile As"
        b_segs = bk * bn // 4
        e = np.arange(b_segs)                       # e = tid + i·THREADS over every thread and i < NB
        nb = -(-b_segs // threads)
        assert sorted((t + i * threads) for t in range(threads) for i in range(nb) if t + i * threads < b_segs) \
            == list(range(b_segs))
        self.b_row, self.b_col = e // (bn // 4), (e % (bn // 4)) * 4
        self.b_dst = self.b_row * self.ldb + self.b_col
        hits = np.zeros(self.b_stage, dtype=np.int64)
        for v in range(4):
            np.add.at(hits, self.b_dst + v, 1)
        hits = hits.reshape(bk, self.ldb)
        assert (hits[:, :bn] == 1).all() and (hits[:, bn:] == 0).all(), "B copies do not tile Bs"
        assert (self.b_dst % 4 == 0).all() and self.a_stage % 4 == 0 and (self.a_stage + self.b_stage) % 4 == 0
        # fragments and accumulators, warp by warp, lane by lane
        wtm, wtn = bm // c.warps_m, bn // c.warps_n
        mi_n, ni_n = wtm // 16, wtn // 8
        self.a_addr = np.full((bm, bk), -1, dtype=np.int64)
        self.b_addr = np.full((bk, bn), -1, dtype=np.int64)
        self.out_dm = np.full((bm, bn), -1, dtype=np.int64)
        self.out_dk = np.full((bm, bn), -1, dtype=np.int64)
        for warp in range(c.warps_m * c.warps_n):
            wm0, wn0 = (warp % c.warps_m) * wtm, (warp // c.warps_m) * wtn
            for lane in range(32):
                g, t4 = lane >> 2, lane & 3
                for kk in range(0, bk, 8):
                    for mi in range(mi_n):
                        ap = (kk + t4) * self.lda + wm0 + mi * 16 + g
                        for v, off in enumerate((0, 8, 4 * self.lda, 4 * self.lda + 8)):
                            # a_v holds A(row g + 8·(v & 1), col t + 4·(v >> 1)) of the 16 x 8 tile
                            ml, kl = wm0 + mi * 16 + g + 8 * (v & 1), kk + t4 + 4 * (v >> 1)
                            assert self.a_addr[ml, kl] in (-1, ap + off)
                            self.a_addr[ml, kl] = ap + off
                    for ni in range(ni_n):
                        bp = (kk + t4) * self.ldb + wn0 + ni * 8 + g
                        for v, off in enumerate((0, 4 * self.ldb)):
                            # b_v holds B(row t + 4·v, col g) of the 8 x 8 tile
                            kl, nl = kk + t4 + 4 * v, wn0 + ni * 8 + g
                            assert self.b_addr[kl, nl] in (-1, bp + off)
                            self.b_addr[kl, nl] = bp + off
                for mi in range(mi_n):
                    for ni in range(ni_n):
                        for v in range(4):
                            # c_v holds C(row g + 8·(v >> 1), col 2t + (v & 1)); the epilogue stores acc[half·2 + v']
                            ml, nl = wm0 + mi * 16 + g + 8 * (v >> 1), wn0 + ni * 8 + 2 * t4 + (v & 1)
                            half, vv = v >> 1, v & 1
                            assert self.out_dm[ml, nl] == -1, "two accumulators hold one C element"
                            self.out_dm[ml, nl] = wm0 + mi * 16 + g + half * 8
                            self.out_dk[ml, nl] = wn0 + ni * 8 + 2 * t4 + vv
        assert (self.a_addr >= 0).all() and (self.b_addr >= 0).all() and (self.out_dm >= 0).all()
        assert ((self.a_addr % self.lda) < bm).all() and (self.a_addr < self.a_stage).all()
        assert ((self.b_addr % self.ldb) < bn).all() and (self.b_addr < self.b_stage).all()
        flat = self.out_dm * bn + self.out_dk
        assert np.array_equal(np.sort(flat.ravel()), np.arange(bm * bn)), "the epilogue does not tile the block"


@cache
def _geometry(c: IgemmFwdConfig) -> _Geometry:
    return _Geometry(c)


def _pack_weights(w: np.ndarray, kp: int) -> np.ndarray:
    """The direct family's packed layout wpk (C, R, S, Kp), zero past K (as ``pack_weights`` writes it)."""
    k, c, r, s = w.shape
    out = np.zeros((c, r, s, kp))
    out[..., :k] = w.transpose(1, 2, 3, 0)
    return out


def _emulate(pl: IgemmFwdPlan, x: np.ndarray, wpk: np.ndarray) -> dict[str, np.ndarray]:
    """Run the kernel's index math in numpy, block by block, chunk by chunk, on float64 data.

    The scalar arguments are ``launcher.kernel_arguments(pl)`` as the kernel reads them (the low 32 bits of each
    slot: ``int`` or ``unsigned``). Returns y as the epilogue leaves it (NaN-poisoned first when not split), and
    the implied GEMM operands A (M x chunks·BK) and B (chunks·BK x Kp) assembled from the shared-memory tiles."""
    c = pl.config
    args = launcher.kernel_arguments(pl)
    (n_img, ch, h_in, w_in, k_out, kp, p_out, q_out, r_f, s_f, sh, sw, ph, pw, dh, dw, rs_magic, s_magic,
     chunks_per_split) = args
    assert (n_img, ch, h_in, w_in, k_out) == (pl.problem.N, pl.problem.C, pl.problem.H, pl.problem.W, pl.problem.K)
    geo = _geometry(c)
    bm, bn, bk = c.tile_m, c.tile_n, c.tile_k
    pq, rs, hw = p_out * q_out, r_f * s_f, h_in * w_in
    m_total, kr_total = n_img * pq, ch * rs
    chunks = -(-kr_total // bk)
    x_flat, w_flat = x.ravel(), wpk.ravel()
    y = np.full(n_img * k_out * pq, np.nan if c.splits == 1 else 0.0)
    stores = np.zeros(y.size, dtype=np.int64)
    a_full = np.full((pl.m_tiles * bm, chunks * bk), np.nan)
    b_full = np.full((chunks * bk, pl.n_tiles * bn), np.nan)
    for bz in range(c.splits):
        chunk0 = bz * chunks_per_split
        nchunks = min(chunks - chunk0, chunks_per_split)
        if nchunks <= 0:
            continue
        kr0 = (chunk0 + np.arange(nchunks)) * bk                                 # (chunk,)
        for bx in range(pl.m_tiles):
            m0 = bx * bm
            # the thread's pixel column origins, fixed for the block
            m = m0 + geo.mm                                                      # (j, tid)
            inside = m < m_total
            n = m // pq
            rem = m - n * pq
            op = rem // q_out
            oq = rem - op * q_out
            a_hb = np.where(inside, _wrap32(op * sh - ph), -(1 << 29))
            a_wb = np.where(inside, _wrap32(oq * sw - pw), 0)
            a_xoff = np.where(inside, _wrap32(n * ch * hw), 0)
            tid = np.arange(c.threads)
            hb, wb, xoff = a_hb[geo.a_j, tid], a_wb[geo.a_j, tid], a_xoff[geo.a_j, tid]   # (i, tid)
            kr = kr0[:, None, None] + geo.a_row[None]                             # (chunk, i, tid)
            # the kernel's identity branch for a divisor of 1 (no 32-bit magic number exists for it)
            cc = kr if rs == 1 else _umulhi(kr, rs_magic & U32)
            tap = _wrap32(kr - cc * rs)
            r = tap if s_f == 1 else _umulhi(tap, s_magic & U32)
            s = _wrap32(tap - r * s_f)
            h = _wrap32(hb + r * dh)
            w = _wrap32(wb + s * dw)
            ok = (kr < kr_total) & (h >= 0) & (h < h_in) & (w >= 0) & (w < w_in)  # (unsigned) h < H, w < W
            src = _wrap32(xoff + cc * hw + h * w_in + w)
            assert ((src[ok] >= 0) & (src[ok] < x_flat.size)).all(), "an A copy reads outside x"
            a_smem = np.zeros((nchunks, geo.a_stage))
            a_smem[:, geo.a_dst.ravel()] = np.where(ok, x_flat[np.where(ok, src, 0)], 0.0).reshape(nchunks, -1)
            a_tile = a_smem[:, geo.a_addr]                                        # (chunk, BM, BK)
            a_full[m0:m0 + bm, chunk0 * bk:(chunk0 + nchunks) * bk] = a_tile.transpose(1, 0, 2).reshape(bm, -1)
            for by in range(pl.n_tiles):
                n0 = by * bn
                krb = kr0[:, None] + geo.b_row[None]                              # (chunk, e)
                okb = (krb < kr_total) & (n0 + geo.b_col[None] < kp)
                srcb = krb * kp + n0 + geo.b_col[None]                            # long long
                assert (srcb[okb] % 4 == 0).all() and (srcb[okb] + 3 < w_flat.size).all()
                b_smem = np.zeros((nchunks, geo.b_stage))
                for v in range(4):
                    b_smem[:, geo.b_dst + v] = np.where(okb, w_flat[np.where(okb, srcb + v, 0)], 0.0)
                b_tile = b_smem[:, geo.b_addr]                                    # (chunk, BK, BN)
                b_full[chunk0 * bk:(chunk0 + nchunks) * bk, n0:n0 + bn] = b_tile.reshape(-1, bn)
                acc = np.einsum("cmk,ckn->mn", a_tile, b_tile)                    # logical C of the block
                om, ok_ = m0 + geo.out_dm, n0 + geo.out_dk
                keep = (om < m_total) & (ok_ < k_out)
                on = om // pq
                dst = on * k_out * pq + ok_ * pq + (om - on * pq)
                dst, val = dst[keep], acc[keep]
                if c.splits > 1:
                    np.add.at(y, dst, val)
                else:
                    y[dst] = val
                np.add.at(stores, dst, 1)
    assert (stores == c.splits).all(), "some output is stored by the wrong number of blocks"
    return {"y": y.reshape(n_img, k_out, p_out, q_out), "A": a_full, "B": b_full}


def _im2col(p: ConvProblem, x: np.ndarray) -> np.ndarray:
    """A[m, kr] = x[n, c, p·SH − PH + r·DH, q·SW − PW + s·DW] (zero outside x), m = (n, p, q), kr = (c, r, s)."""
    n, ch, op, oq, r, s = np.meshgrid(np.arange(p.N), np.arange(p.C), np.arange(p.P), np.arange(p.Q),
                                      np.arange(p.R), np.arange(p.S), indexing="ij")
    h = op * p.stride_h - p.pad_h + r * p.dil_h
    w = oq * p.stride_w - p.pad_w + s * p.dil_w
    inside = (h >= 0) & (h < p.H) & (w >= 0) & (w < p.W)
    vals = np.where(inside, x[n, ch, np.clip(h, 0, p.H - 1), np.clip(w, 0, p.W - 1)], 0.0)
    return vals.transpose(0, 2, 3, 1, 4, 5).reshape(p.N * p.P * p.Q, p.C * p.R * p.S)


def _first_mismatches(p: ConvProblem, got: np.ndarray, want: np.ndarray, limit: int = 4) -> str:
    bad = np.argwhere(got != want)[:limit]
    out = []
    for m, kr in bad:
        n, rem = divmod(int(m), p.P * p.Q)
        c, tap = divmod(int(kr), p.R * p.S)
        out.append(f"A[m={m} (n={n}, p={rem // p.Q}, q={rem % p.Q}), kr={kr} (c={c}, r={tap // p.S}, "
                   f"s={tap % p.S})] = {float(got[m, kr]):.6g}, expected {float(want[m, kr]):.6g}")
    return f"{int((got != want).sum())} wrong A elements; " + "; ".join(out)


#: configs of the emulation: tile_m below, equal to and above the thread count (1, 2 and 4 pixel columns per
#: thread), 1..4 warps per axis, every tile_k, splits 1..4
EMULATION_CONFIGS = [
    IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1),      # 64 threads > 32 pixels: 2 rows per copy step
    IgemmFwdConfig(32, 64, 16, 1, 2, 3, 2),     # 64 threads, split 2
    IgemmFwdConfig(64, 32, 8, 2, 2, 2, 1),      # 128 threads > 64 pixels
    IgemmFwdConfig(64, 64, 32, 2, 2, 5, 1),     # tile_k 32
    IgemmFwdConfig(128, 64, 8, 2, 1, 4, 1),     # 64 threads < 128 pixels: 2 columns per thread
    IgemmFwdConfig(256, 32, 8, 2, 1, 2, 1),     # 4 columns per thread, 32 A copies
    IgemmFwdConfig(128, 128, 16, 2, 2, 3, 1),   # 128 threads = 128 pixels
    IgemmFwdConfig(32, 256, 16, 1, 4, 3, 1),
    IgemmFwdConfig(256, 128, 8, 4, 2, 2, 2),    # 256 threads = 256 pixels, split 2
    IgemmFwdConfig(128, 32, 16, 4, 1, 3, 4),    # split 4
]

def _random_emulation_problems(count: int) -> list[ConvProblem]:
    rng = np.random.default_rng(20260714)
    problems: list[ConvProblem] = []
    while len(problems) < count:
        r, s = int(rng.integers(1, 8)), int(rng.integers(1, 8))
        sh, sw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        dh, dw = int(rng.integers(1, 4)), int(rng.integers(1, 4))
        ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
        n = int(rng.choice([1, 1, 1, 2, 3]))
        span_h, span_w = dh * (r - 1) + 1, dw * (s - 1) + 1
        h = max(1, span_h - 2 * ph) + int(rng.integers(0, 9))
        w = max(1, span_w - 2 * pw) + int(rng.integers(0, 9))
        p = ConvProblem(N=n, C=int(rng.integers(1, 41)), H=h, W=w, K=int(rng.integers(1, 71)), R=r, S=s,
                        stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, math="tf32")
        if p.N * p.P * p.Q <= 600:
            problems.append(p)
    return problems


def _valid_config(p: ConvProblem, config: IgemmFwdConfig) -> IgemmFwdConfig:
    """``config`` with its splits lowered until the reduction has work for every split."""
    splits = config.splits
    while True:
        cand = dataclasses.replace(config, splits=splits)
        try:
            plan(p, cand, H200)
            return cand
        except InvalidConfig as exc:
            if exc.field != "splits" or splits == 1:
                raise
            splits -= 1


def _emulation_cases() -> list[Any]:
    fixed = [
        P("N=1 C=8 H=1 W=1 K=16 R=3 S=3 pad=1 math=tf32"),          # 1×1 map, 3×3 pad 1: one tap in nine
        P("N=1 C=3 H=2 W=2 K=5 R=7 S=7 pad=3 math=tf32"),           # padding-dominated 7×7
        P("N=2 C=13 H=9 W=11 K=33 R=3 S=3 pad=2 dilation=2 math=tf32"),
        P("N=1 C=35 H=7 W=7 K=50 R=3 S=3 stride=2 pad=1 math=tf32"),
        P("N=1 C=40 H=5 W=6 K=40 R=2 S=5 pad_h=1 pad_w=2 math=tf32"),   # non-square, S ≥ 2
        P("N=3 C=1 H=4 W=4 K=3 R=1 S=1 math=tf32"),                 # C·R·S = 1
        P("N=1 C=6 H=5 W=5 K=7 R=3 S=2 stride=3 pad=2 math=tf32"),  # S = 2: magic 2³¹ + 1 (fits 32 bits)
        P("N=2 C=5 H=6 W=6 K=8 R=1 S=1 math=tf32"),                 # 1×1: R·S = 1, the identity branch
        P("N=1 C=4 H=7 W=5 K=6 R=3 S=1 pad_h=1 math=tf32"),         # 3×1: S = 1, the identity branch
    ]
    problems = fixed + _random_emulation_problems(26)
    cases = []
    for i, p in enumerate(problems):
        config = _valid_config(p, EMULATION_CONFIGS[i % len(EMULATION_CONFIGS)])
        cases.append(pytest.param(p, config, id=f"{i}-R{p.R}S{p.S}-{config.key().split(' ', 1)[1]}"))
    return cases


EMULATION_CASES = _emulation_cases()


def test_emulation_covers_enough_problems() -> None:
    passing = [c for c in EMULATION_CASES if not c.marks]
    assert len(passing) >= 20
    configs = {c.values[1] for c in EMULATION_CASES}
    assert any(c.tile_m > c.threads for c in configs) and any(c.tile_m < c.threads for c in configs)
    assert any(c.splits > 1 for c in configs)
    problems = [c.values[0] for c in passing]
    assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_w for p in problems} >= {1, 2, 3}
    assert any(p.R != p.S for p in problems) and any(p.C % 8 for p in problems)


def _check_emulation(problem: ConvProblem, config: IgemmFwdConfig) -> None:
    """Emulate ``plan(problem, config)`` on fresh normal data; assert the implied GEMM operands equal im2col(x)
    and w exactly and y matches a float64 direct convolution to 1e-12."""
    pl = plan(problem, config, H200)
    rng = np.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W))
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S))
    out = _emulate(pl, x, _pack_weights(w, pl.kp))
    m_total, kr_total = problem.N * problem.P * problem.Q, problem.C * problem.R * problem.S
    # the implied operands, as the shared-memory tiles hold them: exact copies of im2col(x) and of w
    a, b = out["A"], out["B"]
    want_a = _im2col(problem, x)
    assert np.array_equal(a[:m_total, :kr_total], want_a), _first_mismatches(problem, a[:m_total, :kr_total], want_a)
    assert (a[:, kr_total:] == 0).all() and (a[m_total:] == 0).all(), "ragged A edges are not zero-filled"
    want_b = np.zeros((kr_total, pl.n_tiles * config.tile_n))
    want_b[:, :problem.K] = w.reshape(problem.K, kr_total).T
    assert np.array_equal(b[:kr_total], want_b) and (b[kr_total:] == 0).all(), "B tiles differ from w"
    # the block tiles through the fragment and epilogue maps, against a float64 direct convolution
    ref = conv2d_reference_for(problem, x, w)
    y = out["y"]
    assert not np.isnan(y).any(), "some outputs were never written"
    err = relative_error(y, ref)   # an all-padding problem (ref = 0) must give exact zeros
    assert err <= 1e-12, f"relative error {err:.3e}"
    implied = (a[:m_total, :kr_total] @ b[:kr_total, :problem.K]).reshape(problem.N, problem.P * problem.Q,
                                                                           problem.K)
    assert np.allclose(implied.transpose(0, 2, 1).reshape(ref.shape), ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("problem", "config"), EMULATION_CASES)
def test_numpy_emulation_of_the_gather_matches_float64_convolution(problem: ConvProblem,
                                                                   config: IgemmFwdConfig) -> None:
    _check_emulation(problem, config)


@pytest.mark.parametrize("index", [13, 17])   # pad_w one off; s_magic of the wrong divisor
def test_the_emulation_catches_a_wrong_argument(index: int) -> None:
    """The emulation is not vacuous: one wrong scalar argument of the kernel is caught."""
    real = launcher.kernel_arguments

    def broken(pl: IgemmFwdPlan) -> tuple[int, ...]:
        args = list(real(pl))
        args[index] = args[index] + 1 if index == 13 else division_magic(pl.problem.S + 1)
        return tuple(args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launcher, "kernel_arguments", broken)
        with pytest.raises(AssertionError, match="wrong A elements"):
            _check_emulation(P("N=1 C=4 H=6 W=6 K=8 R=3 S=3 pad=1 math=tf32"), IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1))


# ---- the pipeline's slot schedule ------------------------------------------------------------------------------
@pytest.mark.parametrize("stages", [2, 3, 4, 5])
def test_pipeline_reads_each_chunk_from_a_landed_untouched_slot(stages: int) -> None:
    """The main loop's schedule (prologue of STAGES − 1 commit groups, then wait_group<STAGES − 2>, barrier, refill
    slot (it + STAGES − 1) % STAGES, compute slot it % STAGES): chunk ``it`` is read from the slot it was loaded
    into, its group has completed, and no load overwrites that slot until every thread has passed the barrier
    after reading it."""
    for nchunks in range(1, 14):
        groups: list[int | None] = []           # commit group -> chunk loaded in it (None: an empty group)
        slot_of: dict[int, int] = {}
        loaded_into: dict[int, int] = {}        # slot -> chunk it holds
        reads: list[tuple[int, int]] = []       # (chunk read, its slot) in order
        for st in range(stages - 1):
            if st < nchunks:
                loaded_into[st] = st
                slot_of[st] = st
            groups.append(st if st < nchunks else None)
        for it in range(nchunks):
            done = len(groups) - (stages - 2)   # wait_group<STAGES-2>: all but the newest STAGES-2 complete
            assert groups.index(it) < done, f"chunk {it} read before its copies landed"
            # barrier: every read of the previous iteration is finished; the refill below may reuse its slot
            nxt = it + stages - 1
            if nxt < nchunks:
                slot = nxt % stages
                assert loaded_into.get(slot, -1) < it, f"slot {slot} refilled before chunk {loaded_into[slot]} is read"
                loaded_into[slot] = nxt
                slot_of[nxt] = slot
            groups.append(nxt if nxt < nchunks else None)
            assert loaded_into[it % stages] == it and slot_of[it] == it % stages
            reads.append((it, it % stages))


# ---- the magic-number division -----------------------------------------------------------------------------
def _largest_reduction(d: int) -> int:
    """The largest C·R·S with R·S = d that ``supports`` allows (C·d·d < 2³²) and a problem can have (≤ 2³¹ − 1
    weights)."""
    return min((2**32 - 1) // (d * d), MAX_ELEMENTS // d) * d


def test_largest_reduction_is_what_supports_allows() -> None:
    for r, s in ((1, 1), (3, 3), (7, 7), (11, 11), (5, 11)):
        kr = _largest_reduction(r * s)
        c = kr // (r * s)
        at = ConvProblem(N=1, C=c, H=1, W=1, K=1, R=r, S=s, pad_h=r // 2, pad_w=s // 2, math="tf32")
        assert supports(at)
        if c * (r * s) ** 2 < 2**32 and (c + 1) * r * s <= MAX_ELEMENTS:   # the magic limit binds
            assert not supports(at.replace(C=c + 1))


@pytest.mark.parametrize("d", range(1, 122))
def test_division_magic_is_exact_over_every_reduction_index(d: int) -> None:
    """⌊k/d⌋ == (k·m) >> 32 for every k < 2¹⁶, densely below the largest C·R·S of divisor d that ``supports``
    allows (the rs divisor; the s divisor only sees k < R·S) and at random in between."""
    m = division_magic(d)
    top = _largest_reduction(d)
    step = d * max(1, top // (d * 2**12))
    rng = np.random.default_rng(d)
    k = np.unique(np.concatenate([
        np.arange(min(top, 2**16)),
        np.arange(max(0, top - 2**16), top),
        rng.integers(0, top, 2**16),
        np.arange(d - 1, top, step),                            # just below and at multiples of d: the floor steps
        np.arange(d, top, step),
    ])).astype(np.uint64)
    q = (k * np.uint64(m)) >> np.uint64(32)                     # < 2⁶⁴: k < 2³¹, m ≤ 2³² + 1
    bad = np.flatnonzero(q != k // np.uint64(d))
    assert bad.size == 0, f"d={d}, m={m}: k={k[bad[:5]].tolist()}"


def test_magic_arguments_fit_the_kernels_32_bit_slots() -> None:
    """Every divisor's argument is an int32 whose bits are the unsigned magic number; divisor 1 (whose magic 2³² + 1
    fits no 32-bit word) passes 0, unused: the kernel's identity branch."""
    assert launcher.magic_argument(1) == 0
    for d in range(2, 122):
        arg = launcher.magic_argument(d)
        assert -2**31 <= arg < 2**31 and arg & U32 == division_magic(d), d


# ---- the arguments the prepared launch writes -------------------------------------------------------------
def _launch_recorder(monkeypatch: pytest.MonkeyPatch) -> Any:
    from launch_recorder import install

    return install(monkeypatch)


@pytest.mark.parametrize("text", [
    pytest.param("N=1 C=8 H=6 W=6 K=16 R=3 S=3 pad=1 math=tf32", id="3x3"),
    pytest.param("N=2 C=5 H=9 W=7 K=20 R=5 S=3 stride=2 pad=2 dilation=2 math=tf32", id="5x3"),
    pytest.param("N=1 C=8 H=6 W=6 K=16 R=1 S=7 pad_w=3 math=tf32", id="1x7"),
    pytest.param("N=1 C=8 H=6 W=6 K=16 R=1 S=1 math=tf32", id="1x1"),
    pytest.param("N=1 C=8 H=6 W=6 K=16 R=3 S=1 pad_h=1 math=tf32", id="3x1"),
    pytest.param("N=1 C=8 H=6 W=6 K=16 R=3 S=2 math=tf32", id="3x2"),
])
def test_prepared_launch_passes_the_kernel_arguments(text: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the driver seam (no GPU): the slots the kernel reads hold the plan's arguments, the magic numbers
    as the 32-bit words the kernel's ``unsigned`` parameters read."""
    rec = _launch_recorder(monkeypatch)
    p = P(text)
    pl = plan(p, IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1), H200)
    prepared = launcher.prepare_plan(pl, 0, kernels=rec.kernel(launcher.ENTRY, 3, 19))
    prepared((0x1000, 0x2000, 0x3000), 0)
    (call,) = rec.launches()
    assert call.grid == pl.grid and call.block == (pl.threads, 1, 1) and call.smem_bytes == pl.smem_bytes
    assert call.pointers == (0x1000, 0x2000, 0x3000)
    ints = [v & U32 for v in call.ints]
    assert ints[:16] == [p.N, p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q, p.R, p.S, p.stride_h, p.stride_w, p.pad_h,
                         p.pad_w, p.dil_h, p.dil_w]
    rs = p.R * p.S
    assert ints[16] == (division_magic(rs) if rs > 1 else 0) and ints[17] == (division_magic(p.S) if p.S > 1 else 0)
    assert ints[18] == pl.chunks_per_split
    for kr in range(p.C * rs):   # the words the kernel reads divide exactly (divisor 1: the identity branch)
        c = kr if rs == 1 else (kr * ints[16]) >> 32
        r = kr % rs if p.S == 1 else ((kr % rs) * ints[17]) >> 32
        assert c == kr // rs and r == (kr % rs) // p.S


def test_kernel_arguments_are_int32_except_the_magic_numbers() -> None:
    pl = plan(P(RESNET_3X3), IgemmFwdConfig(), H200)
    args = launcher.kernel_arguments(pl)
    assert len(args) == 19
    struct.pack("<" + "i" * 19, *args)  # 3×3: both magics below 2³¹


# ---- the space -------------------------------------------------------------------------------------------------
def test_space_covers_resnet_layers_within_the_machine() -> None:
    for text in (RESNET_3X3, "N=32 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 math=tf32",
                 "N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 math=tf32",
                 "N=32 C=512 H=7 W=7 K=512 R=3 S=3 pad=1 math=tf32"):
        plans = list(enumerate_plans(P(text), H200))
        assert len(plans) >= 100, text
        for pl in plans:
            assert pl.smem_bytes <= H200.smem_per_block_bytes and 64 <= pl.config.threads <= 256
            assert pl.config.accumulators <= igemm_space.MAX_ACCUMULATORS
            assert pl.a_copies <= igemm_space.MAX_A_COPIES
    assert igemm_space.grid_size(P(RESNET_3X3)) == 4 * 4 * 3 * 3 * 3 * 4 * 5
    # small maps with many channels get split reductions; a grid that fills the GPU does not
    assert any(pl.config.splits > 1 for pl in enumerate_plans(P("N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1 math=tf32"),
                                                              H200))
    assert all(pl.config.splits == 1 for pl in enumerate_plans(P("N=32 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 math=tf32"),
                                                               H200))
    # tiles no larger than the next power of two of what they cover
    tiny = list(enumerate_plans(P("N=1 C=8 H=4 W=4 K=20 R=3 S=3 pad=1 math=tf32"), H200))
    assert tiny and all(pl.config.tile_m <= 32 and pl.config.tile_n <= 32 for pl in tiny)


# ---- the registry row ----------------------------------------------------------------------------------------
def test_registry_row_shares_the_direct_bound_and_filters() -> None:
    spec = get_spec("igemm")
    direct = get_spec("direct")
    p = P(RESNET_3X3)
    strict = p.replace(math="ieee")
    pl = plan(p, IgemmFwdConfig(), H200)
    assert spec.kind == "igemm.fwd" and spec.algorithm == "igemm" and spec.launcher is launcher
    assert spec.config_class is IgemmFwdConfig and spec.plan is plan
    assert spec.bound_words(pl, 12288) == direct.bound_words(direct.plan(strict, direct.config_class(), H200), 12288)
    assert spec.floor_work(p, 12288) == direct.floor_work(p, 12288)
    assert spec.launcher.filters_key(pl) == direct.launcher.filters_key(None) == ("direct",)
    assert len(spec.source_sha256()) == 64
    assert spec.traffic_words(pl) == sum(traffic_words(pl).values()) > 0
    assert spec.onchip_words(pl) > pl.config.threads * pl.config.accumulators
    assert spec.grid_size(p) == igemm_space.grid_size(p)
    assert 0 < spec.predict_s(pl, H200) < 1
    assert spec.launcher.tolerance(pl) == launcher.TOLERANCE
    assert IgemmFwdConfig().key().startswith("igemm.fwd tile_m=128 tile_n=128 tile_k=16")
    assert [s.kind for s in specs_for(p) if s.algorithm == "igemm"] == ["igemm.fwd"]
    assert spec not in specs_for(strict)


# ---- nvcc -----------------------------------------------------------------------------------------------------
REPRESENTATIVE = [
    ("128x128_2x2", RESNET_3X3, IgemmFwdConfig(128, 128, 16, 2, 2, 3, 1)),
    ("256x128_4x2", "N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(256, 128, 16, 4, 2, 3, 1)),
    ("64x64_k32_s5", "N=8 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(64, 64, 32, 2, 2, 5, 1)),
    ("32x256_1x4", "N=1 C=64 H=28 W=28 K=512 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(32, 256, 16, 1, 4, 3, 1)),
    ("128x32_split4", "N=4 C=512 H=7 W=7 K=32 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(128, 32, 16, 4, 1, 3, 4)),
    ("256x64_4x1_k8", "N=16 C=64 H=28 W=28 K=64 R=5 S=5 pad=2 math=tf32", IgemmFwdConfig(256, 64, 8, 4, 1, 4, 1)),
    ("256x32_2x1_32copies", "N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 math=tf32",
     IgemmFwdConfig(256, 32, 8, 2, 1, 2, 1)),
    ("128x64_2x1_s4", "N=32 C=256 H=14 W=14 K=64 R=3 S=3 pad=1 math=tf32", IgemmFwdConfig(128, 64, 8, 2, 1, 4, 1)),
]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    family = launcher._family_source()
    text, entries = family, {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = plan(P(problem), config, H200)
        wrapper = pl.source()[len(family):]
        entry = f"igemm_fwd_{i}"
        text += re.sub(rf"\b{launcher.ENTRY}\(", f"{entry}(", wrapper)
        entries[entry] = (name, pl)
    resources = nvcc_compile(text, "sm_90").resources
    for entry, (name, pl) in entries.items():
        res = resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.config.threads * pl.min_blocks)), f"{name}: {res.num_regs}"
        assert pl.smem_bytes + res.static_smem_bytes <= H200.smem_per_block_bytes, name


#: configs that ptxas (CUDA 13, sm_90) compiled with spills, found by compiling every distinct (template,
#: min_blocks) of the H200 space of a 3×3 layer: three spilled under a ``__launch_bounds__`` whose min_blocks came from
#: a register estimate ~130 low at tile_k = 32 (the estimate now counts the unrolled gathers) and must compile clean;
#: the 16 × 128 warp tiles (NI = 16: 255 registers + 8 B stack, or 44 B spilled) are out of the space.
FORMERLY_SPILLING = [
    pytest.param(IgemmFwdConfig(64, 128, 32, 1, 4, 2, 1), id="64x128k32s2_1x4"),    # was cap 168: 24 B spilled
    pytest.param(IgemmFwdConfig(256, 32, 32, 2, 4, 2, 1), id="256x32k32s2_2x4"),    # was cap 128: 12 B spilled
]
WIDE_WARP_TILES = [*(IgemmFwdConfig(32, 128, 32, 2, 1, stages, 1) for stages in (2, 3, 5)),
                   IgemmFwdConfig(64, 128, 32, 4, 1, 2, 1)]   # 16 × 128 warp tiles; the last spilled 44 B
SPILL_PROBLEM = "N=32 C=256 H=32 W=32 K=256 R=3 S=3 pad=1 math=tf32"


@cache
def _formerly_spilling_resources() -> dict[IgemmFwdConfig, Any]:
    family = launcher._family_source()
    text, entries = family, {}
    for i, param in enumerate(FORMERLY_SPILLING):
        (config,) = param.values
        pl = plan(P(SPILL_PROBLEM), config, H200)
        text += re.sub(rf"\b{launcher.ENTRY}\(", f"igemm_fwd_{i}(", pl.source()[len(family):])
        entries[f"igemm_fwd_{i}"] = config
    resources = nvcc_compile(text, "sm_90").resources
    return {config: resources[entry] for entry, config in entries.items()}


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
@pytest.mark.parametrize("config", FORMERLY_SPILLING)
def test_formerly_spilling_configs_compile_clean(config: IgemmFwdConfig) -> None:
    pl = plan(P(SPILL_PROBLEM), config, H200)
    res = _formerly_spilling_resources()[config]
    assert not res.spills, f"{config.key()} (min_blocks {pl.min_blocks}, estimate {pl.regs_estimate}): {res}"


@pytest.mark.parametrize("config", WIDE_WARP_TILES, ids=lambda c: f"{c.tile_m}x{c.tile_n}_{c.warps_m}x1_s{c.stages}")
def test_warp_tiles_wider_than_64_are_refused(config: IgemmFwdConfig) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(SPILL_PROBLEM), config, H200)
    assert err.value.field == "warps_n"
