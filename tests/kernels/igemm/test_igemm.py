"""The implicit-GEMM tensor-core family without a GPU: which problems it takes, config rules naming the field, the
traffic formula against a simulation of the kernel's copy loops, a numpy emulation of the filter pack (fragment-
ordered B tiles, the gather table) and of the kernel's gather (its exact index math, shared-memory tiles, fragment
and epilogue maps) against a float64 convolution, the space, the registry row, the argument slots of the prepared
launches, and the kernel compiled by nvcc (no spills, registers within ``__launch_bounds__``) at representative
configs."""

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
from convtune.kernels.igemm import model as _igemm_model
from convtune.kernels.igemm import space as igemm_space
from convtune.kernels.igemm.launcher import (
    IgemmFwdConfig,
    IgemmFwdPlan,
    supports,
    traffic_words,
)
from convtune.kernels.igemm.nhwc import IgemmNhwcFwdConfig
from convtune.kernels.igemm.pointwise import IgemmPointwiseFwdConfig
from convtune.kernels.igemm.space import enumerate_plans, plan
from convtune.kernels.reference import conv2d_reference_for, relative_error
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
RESNET_3X3 = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"
RESNET_1X1 = "N=32 C=256 H=56 W=56 K=64 R=1 S=1 math=tf32"
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
    (IgemmFwdConfig(tile_m=128, tile_n=128, tile_k=64, warps_m=2, warps_n=4, stages=5), "stages"),  # 320 KiB smem
    (IgemmFwdConfig(tile_m=128, tile_n=128, tile_k=32, warps_m=2, warps_n=2), "tile_k"),  # 128 accumulators, k32
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
    (igemm_fwd.cu): an A copy reads 1 word when m < M, kr < C·R·S and its tap lies inside x, and its row's table
    entry (4 words, counted once per block: the block's threads share it); a B copy 4 words when its 8-wide channel
    tile starts below Kp8; zero-filled copies read nothing. Output: the epilogue's stores (every split stores its
    tile; atomics) plus the zeroing of y before a split launch."""
    p, c = pl.problem, pl.config
    threads, bm, bn, bk = c.threads, c.tile_m, c.tile_n, c.tile_k
    m_total, kr_total, pq, rs = p.N * p.P * p.Q, p.C * p.R * p.S, p.P * p.Q, p.R * p.S
    chunks = -(-kr_total // bk)
    mpt = bm // threads if bm > threads else 1
    a_copies, b_segs = bk * bm // threads, bk * bn // 4
    words = {"input": 0, "weight": 0, "table": 0, "output": 0}
    nb8 = pl.kp8 // 8
    for bz in range(c.splits):
        chunk0 = bz * pl.chunks_per_split
        nchunks = min(chunks - chunk0, pl.chunks_per_split)
        for bx in range(pl.m_tiles):
            for by in range(pl.n_tiles):
                for chunk in range(max(0, nchunks)):
                    kr0 = (chunk0 + chunk) * bk
                    table_rows: set[int] = set()
                    for tid in range(threads):
                        for i in range(a_copies):
                            if threads >= bm:
                                mm, row = tid % bm, tid // bm + i * (threads // bm)
                            else:
                                mm, row = tid + (i % mpt) * threads, i // mpt
                            m, kr = bx * bm + mm, kr0 + row
                            table_rows.add(kr)
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
                            ln = (e // 16) % (bn // 8)
                            if by * bn // 8 + ln < nb8:
                                words["weight"] += 4
                    words["table"] += 4 * len(table_rows)
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


def _simulated_piece_traffic(pl: IgemmFwdPlan) -> dict[str, int]:
    """The NHWC and 1×1 variants' copy loops, walked as for :func:`_simulated_traffic`: a 16-byte A copy reads 4
    words when its pixel and its tap (NHWC: table row kr0 + 4·piece, read once per block and piece) or channel (1×1)
    are in range; B as the NCHW kernel; the NHWC layout change reads and writes x once."""
    p, c = pl.problem, pl.config
    threads, bm, bn, bk = c.threads, c.tile_m, c.tile_n, c.tile_k
    m_total, kr_total, pq = p.N * p.P * p.Q, p.C * p.R * p.S, p.P * p.Q
    chunks = -(-kr_total // bk)
    nb8 = pl.kp8 // 8
    words = {"input": 0, "weight": 0, "output": 0}
    if pl.channels_last:
        words.update(table=0, layout=2 * p.N * p.C * p.H * p.W)
    pieces = bk // 4 if pl.channels_last else bm // 4          # per pixel row (NHWC) / per channel row (1×1)
    copies = bk * bm // 4 // threads
    for bz in range(c.splits):
        chunk0 = bz * pl.chunks_per_split
        nchunks = min(chunks - chunk0, pl.chunks_per_split)
        for bx in range(pl.m_tiles):
            for by in range(pl.n_tiles):
                for chunk in range(max(0, nchunks)):
                    kr0 = (chunk0 + chunk) * bk
                    entries: set[int] = set()
                    for tid in range(threads):
                        piece, first = tid % pieces, tid // pieces
                        for i in range(copies):
                            if pl.channels_last:
                                m, kr = bx * bm + first + i * (threads // pieces), kr0 + 4 * piece
                                entries.add(kr)
                                if m >= m_total or kr >= kr_total:
                                    continue
                                op, oq = divmod(m % pq, p.Q)
                                r, s = divmod(kr // p.C, p.S)
                                h = op * p.stride_h - p.pad_h + r * p.dil_h
                                w = oq * p.stride_w - p.pad_w + s * p.dil_w
                                if 0 <= h < p.H and 0 <= w < p.W:
                                    words["input"] += 4
                            else:
                                m, ch = bx * bm + 4 * piece, kr0 + first + i * (threads // pieces)
                                if m < m_total and ch < p.C:
                                    words["input"] += 4
                        for i in range(pl.b_copies):
                            e = tid + i * threads
                            if e < bk * bn // 4 and by * bn // 8 + (e // 16) % (bn // 8) < nb8:
                                words["weight"] += 4
                    if pl.channels_last:
                        words["table"] += 4 * len(entries)
    out = p.N * p.K * p.P * p.Q
    words["output"] = out * c.splits + (out if c.splits > 1 else 0)
    return words


PIECE_TRAFFIC_CASES = [
    ("nhwc_3x3_pad1", "N=1 C=8 H=5 W=6 K=16 R=3 S=3 pad=1 math=tf32", IgemmNhwcFwdConfig(32, 32, 8, 2, 1, 2, 1)),
    ("nhwc_dil2_split2", "N=2 C=12 H=9 W=7 K=40 R=3 S=3 pad=2 dilation=2 math=tf32",
     IgemmNhwcFwdConfig(64, 32, 16, 2, 1, 3, 2)),
    ("nhwc_stride2_k64", "N=1 C=20 H=11 W=10 K=24 R=3 S=2 stride=2 pad=1 math=tf32",
     IgemmNhwcFwdConfig(64, 64, 64, 2, 2, 2, 1)),
    ("nhwc_pad_dominated", "N=1 C=4 H=2 W=2 K=8 R=5 S=5 pad=2 math=tf32", IgemmNhwcFwdConfig(32, 32, 16, 1, 2, 2, 1)),
    ("1x1_c13", "N=2 C=13 H=6 W=6 K=20 R=1 S=1 math=tf32", IgemmPointwiseFwdConfig(32, 32, 8, 2, 1, 2, 1)),
    ("1x1_split3", "N=3 C=70 H=2 W=6 K=9 R=1 S=1 math=tf32", IgemmPointwiseFwdConfig(64, 32, 16, 2, 1, 3, 3)),
    ("1x1_k64_ragged_m", "N=1 C=40 H=3 W=12 K=33 R=1 S=1 math=tf32", IgemmPointwiseFwdConfig(64, 64, 64, 2, 2, 2, 1)),
]


@pytest.mark.parametrize(("text", "config"), [pytest.param(t, c, id=n) for n, t, c in PIECE_TRAFFIC_CASES])
def test_variant_traffic_formulas_match_their_copy_loops(text: str, config: IgemmFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    spec = get_spec(config.family)
    formula = _igemm_model.traffic_words(pl)
    assert formula == _simulated_piece_traffic(pl)
    assert spec.traffic_words(pl) == sum(formula.values())


# ---- a numpy emulation of the kernel's data path -----------------------------------------------------------
def _wrap32(v: Any) -> Any:
    """C ``int`` arithmetic: the two's-complement value of the low 32 bits (numpy int64 in, int64 out)."""
    return ((np.asarray(v, dtype=np.int64) + (1 << 31)) & U32) - (1 << 31)


def _umulhi(a: Any, m: int) -> Any:
    """``__umulhi(unsigned a, unsigned m)``: the high 32 bits of the 64-bit product (int64 out)."""
    au = (np.asarray(a, dtype=np.int64) & U32).astype(np.uint64)
    return ((au * np.uint64(m & U32)) >> np.uint64(32)).astype(np.int64)


def _a_row_offset(kl: Any, bm: int) -> Any:
    """``a_row_offset<BM>(kl)`` of igemm_fwd.cu: the row part of A(kl, ml)'s float in a fragment-ordered stage."""
    kl = np.asarray(kl)
    return (kl >> 3) * (bm // 16) * 128 + (kl & 3) * 32 + ((kl >> 2) & 1) * 2


def _a_col_offset(ml: Any) -> Any:
    """``a_col_offset(ml)``: the column part."""
    ml = np.asarray(ml)
    return (ml >> 4) * 128 + (ml & 7) * 4 + ((ml >> 3) & 1)


def _nhwc_swizzle(ml: Any, bk: int) -> Any:
    """``nhwc_swizzle<BK>(ml)``: (ml / max(1, 32/BK)) mod min(BK/4, 8)."""
    return (np.asarray(ml) // max(1, 32 // bk)) & (min(bk // 4, 8) - 1)


class _Geometry:
    """The config-only maps of one block (igemm_fwd.cu, read index by index):

    * ``mm[j, tid]``: the pixel column (within the block) of thread ``tid``'s j-th column origin;
    * ``a_j[i, tid]``, ``a_row[i, tid]``, ``a_dst[i, tid]``: which column origin, which A row, which shared-memory
      float (within the A stage) copy i of load_stage writes, computed as the kernel does (a base plus a
      compile-time row offset plus the column step);
    * ``b_lk[e]``, ``b_ln[e]``, ``b_within[e]``: the filter tile (row, column of 8 × 8 tiles in the block) and the
      16-byte piece of it that B copy e reads; it lands at float 4e of the B stage;
    * ``a_addr[ml, kl]``, ``b_addr[kl, nl]``: the A-stage / B-stage float the mma fragments take as logical
      element A(ml, kl) / B(kl, nl) of the block tile (PTX m16n8k8 .tf32 fragment layouts);
    * ``out_dm[ml, nl]``, ``out_dk[ml, nl]``: the (pixel, channel) offset from (m0, n0) the epilogue stores the
      accumulator holding logical C(ml, nl) to.
    Each map is checked to be a bijection where the kernel needs one."""

    def __init__(self, c: IgemmFwdConfig) -> None:
        threads, bm, bn, bk = c.threads, c.tile_m, c.tile_n, c.tile_k
        self.a_stage, self.b_stage = bk * bm, bk * bn
        self.channels_last = c.family == "igemm_nhwc"
        self.pointwise = c.family == "igemm_1x1"
        if self.channels_last:
            self._nhwc_a_maps(c)
        elif self.pointwise:
            self._pointwise_a_maps(c)
        else:
            self._nchw_a_maps(c)
        b_segs = bk * bn // 4
        e = np.arange(b_segs)                       # e = tid + i·THREADS over every thread and i < NB
        nb = -(-b_segs // threads)
        assert sorted((t + i * threads) for t in range(threads) for i in range(nb) if t + i * threads < b_segs) \
            == list(range(b_segs))
        tile, self.b_within = e >> 4, e & 15
        self.b_lk, self.b_ln = tile // (bn // 8), tile % (bn // 8)
        self._fragment_maps(c)

    def _nchw_a_maps(self, c: IgemmFwdConfig) -> None:
        threads, bm, bk = c.threads, c.tile_m, c.tile_k
        mpt = bm // threads if bm > threads else 1
        col_step = 0 if threads >= bm else threads
        row_step = threads // bm if threads >= bm else 1
        a_copies = bk * bm // threads
        tid = np.arange(threads)
        self.mpt = mpt
        self.mm = np.stack([(tid % bm if threads >= bm else tid) + j * col_step for j in range(mpt)])
        a_col0 = tid % bm if threads >= bm else tid
        a_row0 = tid // bm if threads >= bm else np.zeros_like(tid)
        a_dst0 = _a_row_offset(a_row0, bm) + _a_col_offset(a_col0)
        self.a_j = np.stack([np.full(threads, 0 if threads >= bm else i % mpt) for i in range(a_copies)])
        drow = np.array([(i if threads >= bm else i // mpt) * row_step for i in range(a_copies)])
        self.a_row = a_row0[None, :] + drow[:, None]
        self.a_dst = a_dst0[None, :] + _a_row_offset(drow, bm)[:, None] + self.a_j * (col_step // 16) * 128
        # the kernel's additive shortcut lands every copy where the full formula puts A(row, column)
        cols = a_col0[None, :] + self.a_j * col_step
        assert np.array_equal(self.a_dst, _a_row_offset(self.a_row, bm) + _a_col_offset(cols))
        hits = np.bincount(self.a_dst.ravel(), minlength=self.a_stage)
        assert hits.size == self.a_stage and (hits == 1).all(), "A copies do not tile the A stage"

    def _nhwc_a_maps(self, c: IgemmFwdConfig) -> None:
        """igemm_nhwc_body: thread tid copies 16-byte piece tid % (BK/4) of pixel rows tid / (BK/4) + i·PIX_STEP;
        ``a_pix[i, tid]``, ``a_piece[tid]``, ``a_dst[i, tid]`` (first float of the piece in the A stage)."""
        threads, bm, bk = c.threads, c.tile_m, c.tile_k
        pieces = bk // 4
        copies, pix_step = bm * pieces // threads, threads // pieces
        tid = np.arange(threads)
        self.a_piece = tid % pieces
        self.a_pix = (tid // pieces)[None, :] + pix_step * np.arange(copies)[:, None]
        self.a_dst = self.a_pix * bk + ((self.a_piece[None, :] ^ _nhwc_swizzle(self.a_pix, bk)) << 2)
        hits = np.zeros(self.a_stage, dtype=np.int64)
        for v in range(4):
            np.add.at(hits, self.a_dst + v, 1)
        assert (hits == 1).all(), "A pieces do not tile the A stage"
        # 16-byte writes go in phases of 8 lanes: each phase's pieces on 8 distinct 16-byte bank groups
        for i in range(copies):
            for lane0 in range(0, threads, 8):
                groups = {int(q) % 8 for q in self.a_dst[i, lane0:lane0 + 8] // 4}
                assert len(groups) == 8, "A piece writes conflict"

    def _pointwise_a_maps(self, c: IgemmFwdConfig) -> None:
        """igemm_1x1_body: As[BK][BM + 8]; thread tid copies 4-pixel group tid % (BM/4) of channel rows
        tid / (BM/4) + i·ROW_STEP: ``a_group[tid]``, ``a_row[i, tid]``, ``a_dst[i, tid]`` (first float)."""
        threads, bm, bk = c.threads, c.tile_m, c.tile_k
        groups = bm // 4
        self.lda = bm + launcher.SMEM_PAD_1X1
        self.a_stage = bk * self.lda
        copies, row_step = bk * groups // threads, threads // groups
        tid = np.arange(threads)
        self.a_group = tid % groups
        self.a_row = (tid // groups)[None, :] + row_step * np.arange(copies)[:, None]
        self.a_dst = self.a_row * self.lda + 4 * self.a_group[None, :]
        hits = np.zeros(self.a_stage, dtype=np.int64)
        for v in range(4):
            np.add.at(hits, self.a_dst + v, 1)
        hits = hits.reshape(bk, self.lda)
        assert (hits[:, :bm] == 1).all() and (hits[:, bm:] == 0).all(), "A groups do not tile As"

    def _fragment_maps(self, c: IgemmFwdConfig) -> None:
        bm, bn, bk = c.tile_m, c.tile_n, c.tile_k
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
                slot = t4 * 8 + g
                for kb in range(bk // 8):
                    for mi in range(mi_n):
                        for v in range(4):
                            # a_v holds A(row g + 8·(v & 1), col t + 4·(v >> 1)) of the 16 x 8 tile
                            ml, kl = wm0 + mi * 16 + g + 8 * (v & 1), kb * 8 + t4 + 4 * (v >> 1)
                            if self.pointwise:       # pixels-contiguous rows of BM + 8 floats
                                addr = kl * self.lda + ml
                            elif self.channels_last:   # k-contiguous rows, pieces swizzled by swz(g) (the kernel's)
                                swz = int(_nhwc_swizzle(np.array(g), bk))
                                assert swz == int(_nhwc_swizzle(np.array(ml), bk)), "rows g and g + 8 differ in swz"
                                piece = 2 * kb + (v >> 1)
                                addr = ml * bk + ((piece ^ swz) << 2) + t4
                            else:                    # fragment order: one 16-byte load per lane
                                addr = ((kb * (bm // 16) + wm0 // 16 + mi) * 32 + slot) * 4 + v
                            assert self.a_addr[ml, kl] in (-1, addr)
                            self.a_addr[ml, kl] = addr
                    for ni in range(ni_n):
                        bp = ((kb * (bn // 8) + wn0 // 8 + ni) * 32 + slot) * 2      # one 8-byte load
                        for v in range(2):
                            # b_v holds B(row t + 4·v, col g) of the 8 x 8 tile
                            kl, nl = kb * 8 + t4 + 4 * v, wn0 + ni * 8 + g
                            assert self.b_addr[kl, nl] in (-1, bp + v)
                            self.b_addr[kl, nl] = bp + v
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
        if self.channels_last or self.pointwise:   # each of a warp's four 4-byte A reads: 32 distinct banks
            for warp in range(c.warps_m * c.warps_n):
                wm0 = (warp % c.warps_m) * wtm
                for kb in range(bk // 8):
                    for mi in range(mi_n):
                        for v in range(4):
                            banks = {int(self.a_addr[wm0 + mi * 16 + (lane >> 2) + 8 * (v & 1),
                                                     kb * 8 + (lane & 3) + 4 * (v >> 1)]) % 32 for lane in range(32)}
                            assert len(banks) == 32, "A fragment reads conflict"
        if not self.pointwise:   # (the 1×1 stage's padding columns are never read)
            assert np.array_equal(np.sort(self.a_addr.ravel()), np.arange(self.a_stage)), "fragments skip A floats"
        assert np.array_equal(np.sort(self.b_addr.ravel()), np.arange(self.b_stage)), "fragments skip B floats"
        flat = self.out_dm * bn + self.out_dk
        assert np.array_equal(np.sort(flat.ravel()), np.arange(bm * bn)), "the epilogue does not tile the block"


@cache
def _geometry(c: IgemmFwdConfig) -> _Geometry:
    return _Geometry(c)


def _pack(pl: IgemmFwdPlan, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``igemm_pack`` in numpy, index by index from ``launcher.pack_arguments(pl)`` (float64, not rounded to TF32:
    the emulation checks placement exactly): the fragment-ordered weight words and the gather table (KRp, 3), in
    the plan's reduction order ((c, r, s), or (r, s, c) for the NHWC variant)."""
    k_out, kr_total, krp, nb8, rs, s_f, hw, w_in, dh, dw, ch, channels_last = launcher.pack_arguments(pl)
    assert krp * nb8 * 8 + 4 * krp == launcher.filter_words(pl.problem)
    idx = np.arange(krp * nb8 * 8)
    j, slot, tile = idx & 1, (idx >> 1) & 31, idx >> 6
    nb, kb = tile % nb8, tile // nb8
    kr, k = kb * 8 + (slot >> 3) + 4 * j, nb * 8 + (slot & 7)
    inside = (kr < kr_total) & (k < k_out)
    crs = (kr % ch) * rs + kr // ch if channels_last else kr     # the (c, r, s) index of w at kr
    w_flat = w.ravel()
    filt = np.where(inside, w_flat[np.where(inside, k * kr_total + crs, 0)], 0.0)
    kr = np.arange(krp)
    c, tap = (kr % ch, kr // ch) if channels_last else (kr // rs, kr % rs)
    r, s = tap // s_f, tap % s_f
    off = (r * dh * w_in + s * dw) * ch + c if channels_last else c * hw + r * dh * w_in + s * dw
    table = np.where((kr < kr_total)[:, None], np.stack([off, r * dh, s * dw], axis=1), np.array([0, -(1 << 29), 0]))
    return filt, table


def _nchw_a_stage(geo: _Geometry, pl: IgemmFwdPlan, x_flat: np.ndarray, table: np.ndarray, kr0: np.ndarray,
                  m: np.ndarray, a_hb: np.ndarray, a_wb: np.ndarray, a_base: np.ndarray) -> np.ndarray:
    """The A stages (chunk, BK·BM floats) of one block, copy by copy as igemm_fwd_body's load_stage makes them."""
    p = pl.problem
    tid = np.arange(pl.config.threads)
    hb, wb, base = a_hb[geo.a_j, tid], a_wb[geo.a_j, tid], a_base[geo.a_j, tid]   # (i, tid)
    kr = kr0[:, None, None] + geo.a_row[None]                                     # (chunk, i, tid)
    entry = table[kr]                                                             # (chunk, i, tid, 3)
    h = _wrap32(hb + entry[..., 1])
    w = _wrap32(wb + entry[..., 2])
    ok = (h >= 0) & (h < p.H) & (w >= 0) & (w < p.W)                              # (unsigned) h < H, w < W
    src = _wrap32(base + entry[..., 0])
    assert ((src[ok] >= 0) & (src[ok] < x_flat.size)).all(), "an A copy reads outside x"
    a_smem = np.zeros((kr0.size, geo.a_stage))
    a_smem[:, geo.a_dst.ravel()] = np.where(ok, x_flat[np.where(ok, src, 0)], 0.0).reshape(kr0.size, -1)
    return a_smem


def _nhwc_a_stage(geo: _Geometry, pl: IgemmFwdPlan, x_flat: np.ndarray, table: np.ndarray, kr0: np.ndarray,
                  m0: int) -> np.ndarray:
    """The A stages of one block as igemm_nhwc_body's load_stage makes them: per thread one table entry per chunk
    (row kr0 + 4·piece), per copy a pixel origin and a 16-byte read of 4 channels of xh."""
    p = pl.problem
    pq = p.P * p.Q
    m = m0 + geo.a_pix                                                            # (i, tid)
    inside = m < p.N * pq
    n, rem = m // pq, m % pq
    hb = np.where(inside, rem // p.Q * p.stride_h - p.pad_h, -(1 << 29))
    wb = np.where(inside, rem % p.Q * p.stride_w - p.pad_w, 0)
    base = np.where(inside, _wrap32(((n * p.H + hb) * p.W + wb) * p.C), 0)
    entry = table[kr0[:, None] + 4 * geo.a_piece[None, :]][:, None]               # (chunk, 1, tid, 3)
    h = _wrap32(hb + entry[..., 1])
    w = _wrap32(wb + entry[..., 2])
    ok = (h >= 0) & (h < p.H) & (w >= 0) & (w < p.W)                              # (chunk, i, tid)
    src = _wrap32(base + entry[..., 0])
    assert (src[ok] % 4 == 0).all(), "a 16-byte A copy is not 16-byte aligned"
    assert ((src[ok] >= 0) & (src[ok] + 3 < x_flat.size)).all(), "an A copy reads outside x"
    a_smem = np.zeros((kr0.size, geo.a_stage))
    for v in range(4):
        a_smem[:, (geo.a_dst + v).ravel()] = np.where(ok, x_flat[np.where(ok, src + v, 0)], 0.0).reshape(kr0.size, -1)
    return a_smem


def _pointwise_a_stage(geo: _Geometry, pl: IgemmFwdPlan, x_flat: np.ndarray, kr0: np.ndarray, m0: int) -> np.ndarray:
    """The A stages of one block as igemm_1x1_body's load_stage makes them: per thread one 4-pixel group (one image:
    H·W is a multiple of 4), per copy a channel row, 16 bytes of NCHW x."""
    p = pl.problem
    hw = p.H * p.W
    m = m0 + 4 * geo.a_group                                                      # (tid,)
    m_ok = m < p.N * hw
    img = np.where(m_ok, m // hw, 0)
    base = np.where(m_ok, img * p.C * hw + (m - img * hw), 0)
    ch = kr0[:, None, None] + geo.a_row[None]                                     # (chunk, i, tid)
    ok = m_ok[None, None, :] & (ch < p.C)
    src = base[None, None, :] + ch * hw
    assert (src[ok] % 4 == 0).all(), "a 16-byte A copy is not 16-byte aligned"
    assert ((src[ok] >= 0) & (src[ok] + 3 < x_flat.size)).all(), "an A copy reads outside x"
    a_smem = np.zeros((kr0.size, geo.a_stage))
    for v in range(4):
        a_smem[:, (geo.a_dst + v).ravel()] = np.where(ok, x_flat[np.where(ok, src + v, 0)], 0.0).reshape(kr0.size, -1)
    return a_smem


def _emulate(pl: IgemmFwdPlan, x: np.ndarray, filt: np.ndarray, table: np.ndarray) -> dict[str, np.ndarray]:
    """Run the kernel's index math in numpy, block by block, chunk by chunk, on float64 data.

    The scalar arguments are ``launcher.kernel_arguments(pl)`` as the kernel reads them (32-bit ``int``). Returns y
    as the epilogue leaves it (NaN-poisoned first when not split), and the implied GEMM operands A (M x chunks·BK)
    and B (chunks·BK x Kp) assembled from the shared-memory tiles."""
    c = pl.config
    (n_img, ch, h_in, w_in, k_out, p_out, q_out, sh, sw, ph, pw, kr_total, krp, nb8,
     chunks_per_split) = launcher.kernel_arguments(pl)
    assert (n_img, ch, h_in, w_in, k_out) == (pl.problem.N, pl.problem.C, pl.problem.H, pl.problem.W, pl.problem.K)
    geo = _geometry(c)
    bm, bn, bk = c.tile_m, c.tile_n, c.tile_k
    pq, hw = p_out * q_out, h_in * w_in
    m_total = n_img * pq
    chunks = -(-kr_total // bk)
    assert chunks * bk <= krp == table.shape[0], "a chunk reads past the table"
    # the NHWC variant reads igemm_to_nhwc's copy of x: xh[n, p, c] = x[n, c, p] over the H·W pixels p
    x_flat = x.transpose(0, 2, 3, 1).ravel() if geo.channels_last else x.ravel()
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
            # the thread's pixel column origins, fixed for the block (the NHWC variant: one per copy)
            m = m0 + (geo.a_pix if geo.channels_last else 4 * geo.a_group if geo.pointwise else geo.mm)
            inside = m < m_total
            n = m // pq
            rem = m - n * pq
            op = rem // q_out
            oq = rem - op * q_out
            a_hb = np.where(inside, _wrap32(op * sh - ph), -(1 << 29))
            a_wb = np.where(inside, _wrap32(oq * sw - pw), 0)
            a_base = np.where(inside, _wrap32(n * ch * hw + a_hb * w_in + a_wb), 0)
            if geo.channels_last:
                a_smem = _nhwc_a_stage(geo, pl, x_flat, table, kr0, m0)
            elif geo.pointwise:
                a_smem = _pointwise_a_stage(geo, pl, x_flat, kr0, m0)
            else:
                a_smem = _nchw_a_stage(geo, pl, x_flat, table, kr0, m, a_hb, a_wb, a_base)
            a_tile = a_smem[:, geo.a_addr]                                        # (chunk, BM, BK)
            a_full[m0:m0 + bm, chunk0 * bk:(chunk0 + nchunks) * bk] = a_tile.transpose(1, 0, 2).reshape(bm, -1)
            for by in range(pl.n_tiles):
                n0, nb0 = by * bn, by * bn // 8
                okb = np.broadcast_to(nb0 + geo.b_ln < nb8, (nchunks, geo.b_ln.size))
                srcb = ((kr0[:, None] // 8 + geo.b_lk[None]) * nb8 + nb0 + geo.b_ln[None]) * 64 + geo.b_within * 4
                assert (srcb[okb] + 3 < filt.size).all(), "a B copy reads past the packed weights"
                b_smem = np.zeros((nchunks, geo.b_stage))
                for v in range(4):
                    b_smem[:, 4 * np.arange(geo.b_ln.size) + v] = np.where(okb, filt[np.where(okb, srcb + v, 0)], 0.0)
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


def _im2col(p: ConvProblem, x: np.ndarray, channels_last: bool = False) -> np.ndarray:
    """A[m, kr] = x[n, c, p·SH − PH + r·DH, q·SW − PW + s·DW] (zero outside x), m = (n, p, q), kr = (c, r, s), or
    (r, s, c) with ``channels_last``."""
    n, ch, op, oq, r, s = np.meshgrid(np.arange(p.N), np.arange(p.C), np.arange(p.P), np.arange(p.Q),
                                      np.arange(p.R), np.arange(p.S), indexing="ij")
    h = op * p.stride_h - p.pad_h + r * p.dil_h
    w = oq * p.stride_w - p.pad_w + s * p.dil_w
    inside = (h >= 0) & (h < p.H) & (w >= 0) & (w < p.W)
    vals = np.where(inside, x[n, ch, np.clip(h, 0, p.H - 1), np.clip(w, 0, p.W - 1)], 0.0)
    order = (0, 2, 3, 4, 5, 1) if channels_last else (0, 2, 3, 1, 4, 5)
    return vals.transpose(order).reshape(p.N * p.P * p.Q, p.C * p.R * p.S)


def _first_mismatches(p: ConvProblem, got: np.ndarray, want: np.ndarray, limit: int = 4) -> str:
    bad = np.argwhere(got != want)[:limit]
    out = []
    for m, kr in bad:   # (c, r, s) names in the NCHW kernel's order
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

#: configs of the 1×1 variant's emulation
POINTWISE_EMULATION_CONFIGS = [
    IgemmPointwiseFwdConfig(32, 32, 8, 2, 1, 2, 1),     # 64 threads, 8 groups: 8 rows per copy step
    IgemmPointwiseFwdConfig(128, 64, 16, 2, 2, 3, 2),
    IgemmPointwiseFwdConfig(256, 32, 32, 4, 1, 4, 1),   # 128 threads, 64 groups: 16 copies
    IgemmPointwiseFwdConfig(64, 64, 64, 2, 2, 2, 1),
]

#: configs of the NHWC variant's emulation: 1..16 pieces per thread, every tile_k (8 to 64), splits
NHWC_EMULATION_CONFIGS = [
    IgemmNhwcFwdConfig(32, 32, 8, 2, 1, 2, 1),     # 64 threads, 64 pieces: one copy each
    IgemmNhwcFwdConfig(64, 64, 16, 2, 2, 3, 2),
    IgemmNhwcFwdConfig(128, 32, 32, 4, 1, 4, 1),   # 8 copies per thread
    IgemmNhwcFwdConfig(64, 64, 64, 2, 2, 2, 1),    # tile_k 64: 16 pieces per pixel row
    IgemmNhwcFwdConfig(128, 128, 16, 2, 4, 3, 3),
    IgemmNhwcFwdConfig(256, 64, 8, 4, 2, 2, 1),
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
        P("N=1 C=6 H=5 W=5 K=7 R=3 S=2 stride=3 pad=2 math=tf32"),  # S = 2
        P("N=2 C=5 H=6 W=6 K=8 R=1 S=1 math=tf32"),                 # 1×1: R·S = 1
        P("N=1 C=4 H=7 W=5 K=6 R=3 S=1 pad_h=1 math=tf32"),         # 3×1: S = 1
        P("N=1 C=70 H=3 W=3 K=9 R=1 S=1 math=tf32"),                # C·R·S = 70: a second 64-row filter block
    ]
    problems = fixed + _random_emulation_problems(26)
    cases = []
    for i, p in enumerate(problems):
        config = _valid_config(p, EMULATION_CONFIGS[i % len(EMULATION_CONFIGS)])
        cases.append(pytest.param(p, config, id=f"{i}-R{p.R}S{p.S}-{config.key().split(' ', 1)[1]}"))
    pointwise = [P("N=2 C=13 H=6 W=6 K=20 R=1 S=1 math=tf32"), P("N=3 C=70 H=2 W=6 K=9 R=1 S=1 math=tf32"),
                 P("N=1 C=8 H=4 W=5 K=40 R=1 S=1 math=tf32"), P("N=5 C=33 H=3 W=4 K=17 R=1 S=1 math=tf32"),
                 P("N=1 C=3 H=1 W=4 K=3 R=1 S=1 math=tf32"), P("N=2 C=64 H=8 W=8 K=64 R=1 S=1 math=tf32")]
    for i, p in enumerate(pointwise):
        config = _valid_config(p, POINTWISE_EMULATION_CONFIGS[i % len(POINTWISE_EMULATION_CONFIGS)])
        cases.append(pytest.param(p, config, id=f"1x1_{i}-{config.key().split(' ', 1)[1]}"))
    for i, p in enumerate(problems[::2]):   # the NHWC variant: C a multiple of 4
        p4 = p.replace(C=-(-p.C // 4) * 4)
        config = _valid_config(p4, NHWC_EMULATION_CONFIGS[i % len(NHWC_EMULATION_CONFIGS)])
        cases.append(pytest.param(p4, config, id=f"nhwc{i}-R{p.R}S{p.S}-{config.key().split(' ', 1)[1]}"))
    return cases


EMULATION_CASES = _emulation_cases()


def test_emulation_covers_enough_problems() -> None:
    passing = [c for c in EMULATION_CASES if not c.marks]
    assert len(passing) >= 20
    configs = {c.values[1] for c in EMULATION_CASES}
    assert any(c.tile_m > c.threads for c in configs) and any(c.tile_m < c.threads for c in configs)
    assert sum(c.family == "igemm_nhwc" for c in configs) >= 5 and sum(c.family == "igemm_1x1" for c in configs) >= 4
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
    out = _emulate(pl, x, *_pack(pl, w))
    m_total, kr_total = problem.N * problem.P * problem.Q, problem.C * problem.R * problem.S
    # the implied operands, as the shared-memory tiles hold them: exact copies of im2col(x) and of w
    a, b = out["A"], out["B"]
    channels_last = config.family == "igemm_nhwc"
    want_a = _im2col(problem, x, channels_last)
    assert np.array_equal(a[:m_total, :kr_total], want_a), _first_mismatches(problem, a[:m_total, :kr_total], want_a)
    assert (a[:, kr_total:] == 0).all() and (a[m_total:] == 0).all(), "ragged A edges are not zero-filled"
    want_b = np.zeros((kr_total, pl.n_tiles * config.tile_n))
    w_ordered = w.transpose(0, 2, 3, 1) if channels_last else w
    want_b[:, :problem.K] = w_ordered.reshape(problem.K, kr_total).T
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


@pytest.mark.parametrize(("which", "index"), [("kernel_arguments", 10), ("pack_arguments", 9)])  # pad_w; dil_w
def test_the_emulation_catches_a_wrong_argument(which: str, index: int) -> None:
    """The emulation is not vacuous: one wrong scalar argument of the kernel (pad_w) or of the pack (the table's
    dil_w) is caught."""
    real = getattr(launcher, which)

    def broken(pl: IgemmFwdPlan) -> tuple[int, ...]:
        args = list(real(pl))
        args[index] += 1
        return tuple(args)

    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(launcher, which, broken)
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
    """Through the driver seam (no GPU): the slots the kernel and the filter pack read hold the plan's arguments."""
    rec = _launch_recorder(monkeypatch)
    p = P(text)
    pl = plan(p, IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1), H200)
    pack = rec.kernel(launcher.PACK_ENTRY, 2, 12)
    monkeypatch.setattr(launcher, "load_kernel", lambda *a, **k: pack)
    prepared = launcher.prepare_plan(pl, 0, kernels=rec.kernel(launcher.ENTRY, 3, 15))
    prepared((0x1000, 0x2000, 0x3000), 0)
    prepared.filters.prep((0x4000, 0x2000), 0)
    call, pack_call = rec.launches()
    assert call.grid == pl.grid and call.block == (pl.threads, 1, 1) and call.smem_bytes == pl.smem_bytes
    assert call.pointers == (0x1000, 0x2000, 0x3000)
    kr, krp, kp8 = p.C * p.R * p.S, -(-p.C * p.R * p.S // 64) * 64, -(-p.K // 8) * 8
    assert list(call.ints) == [p.N, p.C, p.H, p.W, p.K, p.P, p.Q, p.stride_h, p.stride_w, p.pad_h, p.pad_w, kr, krp,
                               kp8 // 8, pl.chunks_per_split]
    assert pack_call.pointers == (0x4000, 0x2000)
    assert list(pack_call.ints) == [p.K, kr, krp, kp8 // 8, p.R * p.S, p.S, p.H * p.W, p.W, p.dil_h, p.dil_w, p.C, 0]
    words = krp * kp8 + 4 * krp
    assert prepared.filters.words == words and pack_call.grid[0] * pack_call.block[0] >= words


def test_nhwc_prepared_launch_changes_the_layout_first(monkeypatch: pytest.MonkeyPatch) -> None:
    """The NHWC variant's prepared launch: x → workspace (NHWC, grid over 32 × 32 tiles of pixels × channels of every
    image), zero y when split, then the GEMM reading the workspace; filters in (r, s, c) order."""
    from convtune.kernels.igemm import nhwc

    rec = _launch_recorder(monkeypatch)
    p = P("N=2 C=40 H=6 W=7 K=16 R=3 S=3 pad=1 math=tf32")
    pl = plan(p, IgemmNhwcFwdConfig(32, 32, 16, 1, 2, 2, 2), H200)
    kernels = nhwc.NhwcKernels(rec.kernel(nhwc.TRANSPOSE_ENTRY, 2, 2), rec.kernel(launcher.NHWC_ENTRY, 3, 15))
    prepared = nhwc.prepare_plan(pl, 0, kernels)
    assert prepared.operands == ("x", "filters", "y", "workspace") and prepared.workspace_bytes == 4 * 2 * 40 * 42
    prepared((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    kinds = [(c.kind, c.name) for c in rec.calls]
    assert kinds == [("launch", nhwc.TRANSPOSE_ENTRY), ("memset", ""), ("launch", launcher.NHWC_ENTRY)]
    transpose, zero, gemm = rec.calls
    assert transpose.pointers == (0x1000, 0x4000) and list(transpose.ints) == [40, 42]
    assert transpose.grid == (2, 2, 2) and transpose.block == (32, 8, 1)      # ⌈42/32⌉ pixels, ⌈40/32⌉ channels
    assert zero.pointers == (0x3000,) and zero.nbytes == 4 * p.output_elements
    assert gemm.pointers == (0x4000, 0x2000, 0x3000) and gemm.grid == pl.grid
    assert {c.stream for c in rec.calls} == {0x77}
    assert launcher.pack_arguments(pl)[-1] == 1 and launcher.layout_key(pl)[1] == 1


def test_filters_are_shared_only_where_the_table_is_the_same() -> None:
    """The table holds H·W, W and the dilation: plans of one map share filters, other maps do not."""
    a = plan(P(RESNET_3X3), IgemmFwdConfig(), H200)
    b = plan(P(RESNET_3X3), IgemmFwdConfig(64, 64, 32, 2, 2, 5, 1), H200)
    c = plan(P(RESNET_3X3.replace("H=14 W=14", "H=16 W=14")), IgemmFwdConfig(), H200)
    d = plan(P(RESNET_3X3.replace("pad=1", "pad=2 dilation=2")), IgemmFwdConfig(), H200)
    assert launcher.filters_key(a) == launcher.filters_key(b)
    assert len({launcher.filters_key(x) for x in (a, c, d)}) == 3


def test_nhwc_kernels_report_the_gemms_resources() -> None:
    """What the tuner records of a compiled plan (``resources``, ``compile_s``), as every family's kernels give it."""
    from types import SimpleNamespace

    from convtune.kernels.igemm.nhwc import NhwcKernels

    transpose = SimpleNamespace(resources="transpose", compile_s=0.25)
    gemm = SimpleNamespace(resources="gemm", compile_s=1.5)
    kernels = NhwcKernels(transpose, gemm)  # type: ignore[arg-type]
    assert kernels.resources == "gemm" and kernels.compile_s == 1.75


def test_kernel_arguments_are_int32() -> None:
    pl = plan(P(RESNET_3X3), IgemmFwdConfig(), H200)
    args = launcher.kernel_arguments(pl)
    assert len(args) == 15
    struct.pack("<" + "i" * 15, *args)
    struct.pack("<" + "i" * 12, *launcher.pack_arguments(pl))


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
def test_registry_row_shares_the_direct_bound() -> None:
    spec = get_spec("igemm")
    direct = get_spec("direct")
    p = P(RESNET_3X3)
    strict = p.replace(math="ieee")
    pl = plan(p, IgemmFwdConfig(), H200)
    assert spec.kind == "igemm.fwd" and spec.algorithm == "igemm" and spec.launcher is launcher
    assert spec.config_class is IgemmFwdConfig and spec.plan is plan
    assert spec.bound_words(pl, 12288) == direct.bound_words(direct.plan(strict, direct.config_class(), H200), 12288)
    assert spec.floor_work(p, 12288) == direct.floor_work(p, 12288)
    assert spec.launcher.filters_key(pl)[0] == "igemm" != direct.launcher.filters_key(None)[0]
    assert len(spec.source_sha256()) == 64
    assert spec.traffic_words(pl) == sum(traffic_words(pl).values()) > 0
    assert spec.onchip_words(pl) > pl.config.threads * pl.config.accumulators
    assert spec.grid_size(p) == igemm_space.grid_size(p)
    assert 0 < spec.predict_s(pl, H200) < 1
    assert spec.launcher.tolerance(pl) == launcher.TOLERANCE
    assert IgemmFwdConfig().key().startswith("igemm.fwd tile_m=128 tile_n=128 tile_k=16")
    assert [s.kind for s in specs_for(p) if s.algorithm == "igemm"] == ["igemm.fwd", "igemm_nhwc.fwd",
                                                                         "igemm_wgmma.fwd", "igemm_wgmma_n96.fwd"]
    one = P("N=32 C=256 H=14 W=14 K=256 R=1 S=1 math=tf32")
    assert [s.kind for s in specs_for(one) if s.algorithm == "igemm"] == ["igemm.fwd", "igemm_nhwc.fwd",
                                                                         "igemm_1x1.fwd", "igemm_wgmma.fwd",
                                                                         "igemm_wgmma_1x1.fwd",
                                                                         "igemm_wgmma_1x1_resident.fwd",
                                                                         "igemm_wgmma_1x1_tma.fwd",
                                                                         "igemm_wgmma_n96.fwd"]
    assert "igemm_1x1.fwd" not in [s.kind for s in specs_for(one.replace(H=7, W=7))]   # H·W = 49
    # the NHWC variant: C a multiple of 4 only
    assert [s.kind for s in specs_for(p.replace(C=255)) if s.algorithm == "igemm"] == ["igemm.fwd",
                                                                                        "igemm_wgmma.fwd",
                                                                                        "igemm_wgmma_n96.fwd"]
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
    # the NHWC variant (pipelined main loop from tile_k 16, ldmatrix A fragments) and the 1×1 variant
    ("nhwc_128x128_2x2", RESNET_3X3, IgemmNhwcFwdConfig(128, 128, 16, 2, 2, 3, 1)),
    ("nhwc_256x128_4x2", RESNET_3X3, IgemmNhwcFwdConfig(256, 128, 16, 4, 2, 3, 1)),
    ("nhwc_64x64_k64", RESNET_3X3, IgemmNhwcFwdConfig(64, 64, 64, 2, 2, 3, 1)),
    ("nhwc_64x128_k8", RESNET_3X3, IgemmNhwcFwdConfig(64, 128, 8, 1, 2, 2, 1)),
    ("nhwc_64x64_k32_s5_split", RESNET_3X3, IgemmNhwcFwdConfig(64, 64, 32, 2, 2, 5, 4)),
    ("1x1_128x128_2x2", RESNET_1X1, IgemmPointwiseFwdConfig(128, 128, 16, 2, 2, 3, 1)),
    ("1x1_64x64_k64", RESNET_1X1, IgemmPointwiseFwdConfig(64, 64, 64, 2, 2, 2, 1)),
    ("1x1_256x128_k8", RESNET_1X1, IgemmPointwiseFwdConfig(256, 128, 8, 4, 2, 4, 1)),
]


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    family = launcher._family_source()
    text, entries = family, {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = plan(P(problem), config, H200)
        wrapper = pl.source()[len(family):]
        entry = f"{pl.entry}_{i}"
        text += re.sub(rf"\b{pl.entry}\(", f"{entry}(", wrapper)
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
    pytest.param(IgemmFwdConfig(256, 64, 16, 2, 2, 4, 1), id="256x64k16s4_2x2"),    # 128 accumulators, tile_k 16
]
#: 128 accumulators with tile_k = 32 spilled 8–16 B (the table-driven kernel): refused by the space
DEEP_CHUNKS = [IgemmFwdConfig(128, 128, 32, 2, 2, 3, 1), IgemmFwdConfig(128, 128, 32, 1, 4, 2, 1)]
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


@pytest.mark.parametrize("config", DEEP_CHUNKS, ids=lambda c: f"{c.tile_m}x{c.tile_n}k{c.tile_k}_{c.warps_m}x"
                                                               f"{c.warps_n}")
def test_deep_chunks_with_128_accumulators_are_refused(config: IgemmFwdConfig) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(SPILL_PROBLEM), config, H200)
    assert err.value.field == "tile_k"


@pytest.mark.parametrize("config", WIDE_WARP_TILES, ids=lambda c: f"{c.tile_m}x{c.tile_n}_{c.warps_m}x1_s{c.stages}")
def test_warp_tiles_wider_than_64_are_refused(config: IgemmFwdConfig) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(SPILL_PROBLEM), config, H200)
    assert err.value.field == "warps_n"
