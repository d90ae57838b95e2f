"""The 16-bit implicit-GEMM family (``igemm_half``) without a GPU: which problems it takes and the errors naming the
field, the word view its geometry comes from, its traffic against the direct bound (in elements), the prepared
launch's steps and arguments (a split adds into an fp32 workspace and converts), a numpy emulation of the 16-bit
filter pack (word pairs in fragment order, the table in words) against the TF32 pack's layout, and nvcc (no
spills, registers within ``__launch_bounds__``, shared memory within the H200's limit) on representative configs
of both dtypes."""

from __future__ import annotations

import re

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile, source_hash
from convtune.kernels.igemm import half
from convtune.kernels.igemm import launcher as _nchw
from convtune.kernels.igemm.half import IgemmHalfFwdConfig
from convtune.kernels.igemm.launcher import IgemmFwdConfig
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P = ConvProblem.parse
BF16 = P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 dtype=bfloat16")


def test_supported_problems_and_errors_name_the_field() -> None:
    assert [s.kind for s in specs_for(BF16)] == ["igemm_half.fwd", "igemm_wgmma_half.fwd", "igemm_wgmma_half_n96.fwd"]
    assert half.supports(BF16.replace(dtype="float16"))
    for odd in (BF16.replace(C=12), BF16.replace(C=3), BF16.replace(C=1, R=5, S=5)):   # any C: Cp = ⌈C/8⌉·8 stored
        assert half.supports(odd) and half.word_view(odd).C == half.stored_channels(odd) // 2 == -(-odd.C // 8) * 4
    for bad in (BF16.replace(dtype="float32"), BF16.replace(dtype="float32", math="tf32"), BF16.replace(groups=2)):
        assert not half.supports(bad)
        with pytest.raises(InvalidConfig) as err:
            half.plan(bad, IgemmHalfFwdConfig(), H200)
        assert err.value.field == "problem"
    with pytest.raises(InvalidConfig) as err:
        half.plan(BF16, IgemmHalfFwdConfig(tile_k=12), H200)
    assert err.value.field == "tile_k"


def test_word_view_halves_the_channels_only() -> None:
    view = half.word_view(BF16)
    assert (view.C, view.K, view.H, view.P, view.dtype) == (128, 256, 14, 14, "float32")
    pl = half.plan(BF16, IgemmHalfFwdConfig(128, 128, 16, 2, 2, 3, 1), H200)
    assert pl.problem == BF16 and pl.view.problem == view
    assert pl.view.krp == 128 * 9 and pl.view.chunks == 128 * 9 // 16    # words: C/2 · R · S
    assert pl.config.family == "igemm_half" and pl.view.config.family == "igemm_nhwc"


@pytest.mark.parametrize("splits", [1, 4])
def test_traffic_is_above_the_direct_bound_in_elements(splits: int) -> None:
    spec = get_spec("igemm_half")
    pl = half.plan(BF16, IgemmHalfFwdConfig(64, 128, 32, 1, 4, 2, splits), H200)
    s = H200.fast_memory_words("l2") * 2          # 16-bit elements of the same fast memory
    assert spec.traffic_words(pl) >= spec.bound_words(pl, s)
    out = BF16.output_elements
    assert half.traffic_elements(pl)["output"] == (out if splits == 1 else 2 * splits * out + 5 * out)


def test_split_adds_into_an_fp32_workspace_and_converts() -> None:
    from convtune.kernels.describe import describe

    config = IgemmHalfFwdConfig(64, 128, 32, 1, 4, 2, 4)
    src = describe(BF16, config, H200)         # the prepared launch's steps, no GPU needed
    x_bytes = 2 * BF16.input_elements
    transpose, memset, gemm, convert = src.steps
    assert transpose["entry"] == half.TRANSPOSE_ENTRY and transpose["pointers"] == ["x", "workspace"]
    assert memset == {"memset": "workspace", "offset_bytes": x_bytes, "nbytes": 4 * BF16.output_elements}
    assert gemm["entry"] == half.ENTRY and gemm["pointers"] == ["workspace", "filters", f"workspace+{x_bytes}"]
    assert convert["entry"] == "igemm_f32_to_bf16" and convert["pointers"] == [f"workspace+{x_bytes}", "y"]
    assert convert["int_args"] == [BF16.output_elements]
    assert src.workspace_bytes == x_bytes + 4 * BF16.output_elements
    single = describe(BF16.replace(dtype="float16"), IgemmHalfFwdConfig(), H200)
    assert [s.get("entry") for s in single.steps] == [half.TRANSPOSE_ENTRY, half.ENTRY]
    assert single.steps[1]["pointers"] == ["workspace", "filters", "y"]
    assert "convtune::half16" in next(k.source for k in single.kernels if k.entry == half.ENTRY)


def _emulate_pack16(w: np.ndarray, pl: half.IgemmHalfPlan) -> np.ndarray:
    """The 16-bit packs in numpy, one uint32 per output word: ``igemm_pack_16`` (the 1×1 variant: C) and
    ``igemm_pack_16_pad`` (igemm_half: Cp, C; words of channels ≥ C zero)."""
    args = half.pack_arguments(pl)
    K, KRw, KRp, NB8, RS, S, W, DH, DW, C = args[:10]
    Cs = args[10] if len(args) == 11 else C
    bits = w.view(np.uint16).reshape(-1)

    def element(k: int, c: int, rs: int) -> int:
        return int(bits[(k * Cs + c) * RS + rs]) if c < Cs else 0

    weights = KRp * NB8 * 8
    out = np.zeros(weights + 4 * KRp, dtype=np.int64)
    for idx in range(weights):
        j, slot, tile = idx & 1, (idx >> 1) & 31, idx >> 6
        nb, kb = tile % NB8, tile // NB8
        kw, k = kb * 8 + (slot >> 3) + 4 * j, nb * 8 + (slot & 7)
        if kw < KRw and k < K:
            kr = 2 * kw
            c, rs = kr % C, kr // C
            out[idx] = element(k, c, rs) | (element(k, c + 1, rs) << 16)
    for kw in range(KRp):
        e = (0, -(1 << 29), 0, 0)
        if kw < KRw:
            c, rs = (2 * kw) % C, (2 * kw) // C
            r, s = divmod(rs, S)
            e = ((r * DH * W + s * DW) * (C // 2) + c // 2, r * DH, s * DW, 0)
        out[weights + 4 * kw: weights + 4 * kw + 4] = e
    return out


def test_pack16_words_hold_consecutive_channels_of_one_tap_in_fragment_order() -> None:
    p = P("N=1 C=16 H=5 W=7 K=12 R=2 S=3 pad=1 dilation=2 dtype=float16")
    pl = half.plan(p, IgemmHalfFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    rng = np.random.default_rng(3)
    w = rng.standard_normal((p.K, p.C, p.R, p.S)).astype(np.float16)
    packed = _emulate_pack16(w, pl)
    assert len(packed) == half.filter_words(pl)
    NB8 = pl.view.kp8 // 8
    for k in range(p.K):
        for c in range(0, p.C, 2):
            for r in range(p.R):
                for s in range(p.S):
                    kw = ((r * p.S + s) * p.C + c) // 2          # the (r, s, c) reduction, in words
                    kb, t, jj = kw // 8, (kw % 8) % 4, (kw % 8) // 4
                    slot = t * 8 + k % 8
                    word = packed[((kb * NB8 + k // 8) * 32 + slot) * 2 + jj]
                    pair = np.array([word & 0xFFFF, word >> 16], dtype=np.uint16).view(np.float16)
                    assert pair[0] == w[k, c, r, s] and pair[1] == w[k, c + 1, r, s]
    table = packed[pl.view.krp * pl.view.kp8:].reshape(-1, 4)
    kw = ((1 * p.S + 2) * p.C + 6) // 2
    assert tuple(table[kw]) == ((1 * 2 * p.W + 2 * 2) * 8 + 3, 2, 4, 0)
    assert table[-1][1] == -(1 << 29)        # rows past KRw read nothing


@pytest.mark.parametrize("text", ["N=1 C=3 H=6 W=7 K=10 R=3 S=3 stride=2 pad=1 dtype=bfloat16",
                                  "N=2 C=13 H=5 W=5 K=9 R=2 S=3 dilation=2 dtype=float16"])
def test_pad_pack_holds_every_channel_and_zero_words_past_c(text: str) -> None:
    """C not a multiple of 8: the operand is the pack of a problem of Cp channels whose extra channels are zero
    (a pad kernel bug that read channel c + 1 of the next filter would show as a non-zero upper half here)."""
    p = P(text)
    pl = half.plan(p, IgemmHalfFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    cp = half.stored_channels(p)
    assert half.pack_arguments(pl)[-2:] == (cp, p.C) and half.filter_layout(pl, 0).words == half.filter_words(pl)
    rng = np.random.default_rng(5)
    w = (rng.standard_normal((p.K, p.C, p.R, p.S)) + 3.0).astype(np.float16)    # never zero
    packed = _emulate_pack16(w, pl)
    wide = np.zeros((p.K, cp, p.R, p.S), np.float16)
    wide[:, :p.C] = w
    padded = half.plan(p.replace(C=cp), IgemmHalfFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    assert np.array_equal(packed, _emulate_pack16(wide, padded))
    nonzero = np.count_nonzero(packed[:pl.view.krp * pl.view.kp8].astype(np.uint32).view(np.uint16))
    assert nonzero == w.size


def test_odd_channels_take_the_padding_layout_change() -> None:
    from convtune.kernels.describe import describe

    p = P("N=3 C=3 H=20 W=17 K=16 R=3 S=3 stride=2 pad=1 dtype=bfloat16")
    src = describe(p, IgemmHalfFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    transpose, gemm = src.steps
    assert transpose["entry"] == half.PAD_TRANSPOSE_ENTRY and transpose["pointers"] == ["x", "workspace"]
    assert transpose["int_args"] == [3, 20 * 17, 8, 3]
    threads = transpose["grid"][0] * transpose["block"][0]
    assert threads >= 3 * 20 * 17 and transpose["block"] == [half.PAD_TRANSPOSE_THREADS, 1, 1]
    assert src.workspace_bytes == half.stored_input_bytes(p) == 2 * 3 * 20 * 17 * 8
    assert gemm["pointers"] == ["workspace", "filters", "y"]
    pl = half.plan(p, IgemmHalfFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    assert half.traffic_elements(pl)["layout"] == 3 * 20 * 17 * (3 + 8)
    spec = get_spec("igemm_half")   # the padded channels' reads keep the traffic above the bound of the real ones
    assert spec.traffic_words(pl) >= spec.bound_words(pl, H200.fast_memory_words("l2") * 2)


REPRESENTATIVE = [
    ("bf16_128x128k16_2x2", BF16, IgemmHalfFwdConfig(128, 128, 16, 2, 2, 3, 1)),
    ("bf16_128x256k16_2x4", P("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 dtype=bfloat16"),
     IgemmHalfFwdConfig(128, 256, 16, 2, 4, 4, 1)),
    ("bf16_64x128k32_1x4_split", BF16, IgemmHalfFwdConfig(64, 128, 32, 1, 4, 3, 4)),
    ("fp16_128x64k32_4x1", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(128, 64, 32, 4, 1, 2, 1)),
    ("fp16_64x64k64_2x2", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(64, 64, 64, 2, 2, 2, 2)),
    ("fp16_32x64k8_1x2", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(32, 64, 8, 1, 2, 2, 1)),
    ("bf16_1x1_128x64k16_2x2", P("N=32 C=256 H=56 W=56 K=64 R=1 S=1 dtype=bfloat16"),
     half.IgemmHalfPointwiseFwdConfig(128, 64, 16, 2, 2, 3, 1)),
    ("fp16_1x1_256x128k16_2x4", P("N=32 C=512 H=28 W=28 K=128 R=1 S=1 dtype=float16"),
     half.IgemmHalfPointwiseFwdConfig(256, 128, 16, 2, 4, 2, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    # one translation unit: the 1×1 source (igemm_fwd.cu included whole) and every plan's entry after its own prefix
    text, entries = half._family_source(half.POINTWISE_HALF_FAMILY), {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = half.plan(problem, config, H200)
        family = half._family_source(pl.config.family)
        assert pl.source().startswith(family)
        text += re.sub(rf"\b{pl.entry}\(", f"{pl.entry}_{i}(", pl.source()[len(family):])
        entries[f"{pl.entry}_{i}"] = (name, pl)
    resources = nvcc_compile(text, "sm_90").resources
    for entry, (name, pl) in entries.items():
        res = resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.threads * pl.min_blocks)), f"{name}: {res.num_regs}"
        assert pl.smem_bytes + res.static_smem_bytes <= H200.smem_per_block_bytes, name
    for helper in (half.TRANSPOSE_ENTRY, half.PACK_ENTRY, *half.CONVERT_ENTRIES.values()):
        assert not resources[helper].spills, helper
    padding = nvcc_compile(half._family_source(half.HALF_FAMILY), "sm_90").resources   # igemm_half.cu's own kernels
    for helper in (half.PAD_TRANSPOSE_ENTRY, half.PAD_PACK_ENTRY):
        assert not padding[helper].spills, helper


def test_the_shared_workspace_covers_every_plan_with_the_same_filters_key() -> None:
    """Plans of one problem share prepare_filters' result (benchmarkers cache it by filters_key), so its workspace
    must hold the largest plan's: a split's fp32 output after x's NHWC copy (a split sized by an unsplit plan's
    workspace wrote past it: the H200 bf16 table's 'wrong' split rows)."""
    pointwise = P("N=4 C=64 H=8 W=10 K=48 R=1 S=1 dtype=bfloat16")   # both families: one filter operand
    for problem in (BF16, BF16.replace(dtype="float16", N=3, H=9, W=11), pointwise, BF16.replace(C=3, N=3)):
        for family in half.ENTRIES:
            plans = list(half.enumerate_plans(problem, H200, family))
            if family == half.POINTWISE_HALF_FAMILY and problem is not pointwise:
                assert not plans
                continue
            assert len({(half.pack_arguments(pl), half.filter_words(pl)) for pl in plans}) == 1   # one pack
            assert {pl.config.splits for pl in plans} >= {1, 2}
            keys = {half.filters_key(pl) for pl in plans}
            assert len(keys) == 1
            shared = half.shared_workspace_bytes(plans[0])
            assert all(half.workspace_bytes(pl) <= shared for pl in plans)
            assert shared % 4 == 0


# ---- the 1×1 variant (igemm_half_1x1: A straight from NCHW x, ldmatrix.trans fragments) ------------------------
PW16 = P("N=2 C=48 H=4 W=6 K=40 R=1 S=1 dtype=float16")


def test_1x1_source_includes_igemm_fwd_whole_so_the_other_versions_stay() -> None:
    """The 1×1 body has a file of its own: the other igemm rows' source (and version, what the replay tables are
    pinned to) is igemm_fwd.cu's text alone, which the 1×1 text holds unchanged after its include marker."""
    shared = _nchw._family_source()
    sixteen = [get_spec("igemm_half"), get_spec("igemm_half_1x1")]
    assert [s.source for s in sixteen] == ["igemm_half.cu", "igemm_half_1x1.cu"]
    for spec in sixteen:
        assert f"// ---- {_nchw.SOURCE} ----\n{shared}" in half._family_source(spec.family)
    others = [get_spec(f) for f in ("igemm", "igemm_nhwc", "igemm_1x1")]
    assert {s.source for s in others} == {_nchw.SOURCE}
    assert {s.source_sha256() for s in others} == {source_hash(shared)}
    assert len({s.source_sha256() for s in sixteen} | {source_hash(shared)}) == 3


def test_1x1_variant_takes_pointwise_problems_and_needs_no_layout_change() -> None:
    from convtune.kernels.describe import describe

    assert [s.kind for s in specs_for(PW16)] == ["igemm_half.fwd", "igemm_half_1x1.fwd", "igemm_wgmma_half.fwd",
                                              "igemm_wgmma_half_1x1.fwd", "igemm_wgmma_half_1x1_resident.fwd",
                                              "igemm_wgmma_half_n96.fwd", "pointwise_sliced.fwd"]
    for bad in (PW16.replace(W=5), PW16.replace(R=3, S=3, pad_h=1, pad_w=1), PW16.replace(stride_h=2, stride_w=2)):
        assert "igemm_half_1x1.fwd" not in [s.kind for s in specs_for(bad)], bad.key()
    src = describe(PW16, half.IgemmHalfPointwiseFwdConfig(32, 32, 8, 1, 2, 2, 1), H200)
    assert [s["entry"] for s in src.steps] == ["igemm_half_1x1_fwd"] and src.workspace_bytes == 0
    assert src.steps[0]["pointers"] == ["x", "filters", "y"]
    split = describe(PW16, half.IgemmHalfPointwiseFwdConfig(32, 32, 8, 1, 2, 2, 2), H200)
    assert [s.get("entry", "memset") for s in split.steps] == ["memset", "igemm_half_1x1_fwd", "igemm_f32_to_f16"]
    assert split.steps[1]["pointers"] == ["x", "filters", "workspace"]


def _ldmatrix_x4_trans(smem: np.ndarray, addresses: list[tuple[int, int]]) -> list[list[tuple[int, int]]]:
    """PTX ldmatrix.sync.m8n8.x4.trans.b16 on a 2-D array of 16-bit values: lanes 8j..8j+7 give the (row, column)
    of the 8 rows of matrix j (8 consecutive elements each); lane l receives, per matrix, the elements
    (2(l%4), l/4) and (2(l%4) + 1, l/4) of it (lower half first)."""
    mats = [np.stack([smem[r, c:c + 8] for r, c in addresses[8 * j:8 * j + 8]]) for j in range(4)]
    return [[(mats[j][2 * (lane % 4), lane // 4], mats[j][2 * (lane % 4) + 1, lane // 4]) for j in range(4)]
            for lane in range(32)]


@pytest.mark.parametrize("config", [half.IgemmHalfPointwiseFwdConfig(64, 32, 16, 2, 1, 2, 1),
                                    half.IgemmHalfPointwiseFwdConfig(128, 64, 8, 2, 2, 3, 1),
                                    half.IgemmHalfPointwiseFwdConfig(32, 64, 32, 1, 2, 2, 1)],
                         ids=lambda c: f"{c.tile_m}x{c.tile_n}k{c.tile_k}_{c.warps_m}x{c.warps_n}")
def test_1x1_copies_and_trans_fragments_give_the_m16n8k16_a_layout(config: IgemmFwdConfig) -> None:
    """The kernel's index maps in numpy: each thread's 16-byte copies of 8 pixels land As[c][ml] = A[m0 + ml][c]
    (A[m][c] = x[n, c, pq]); each lane's ldmatrix.trans registers are the PTX m16n8k16 A fragment of its warp tile
    (a0 (g, 2t..2t+1), a1 (g+8, ..), a2 (g, 2t+8..), a3 (g+8, 2t+8..))."""
    p = P("N=3 C=64 H=8 W=12 K=64 R=1 S=1 dtype=float16")
    pl = half.plan(p, config, H200)
    c = pl.config
    threads, bm, rows = c.threads, c.tile_m, 2 * c.tile_k
    pix, groups, lda = 8, c.tile_m // 8, c.tile_m + 8
    x = np.arange(p.N * p.C * p.H * p.W, dtype=np.int64).reshape(p.N, p.C, p.H * p.W)   # distinct "values"
    hw, m_total = p.H * p.W, p.N * p.H * p.W
    a_full = x.transpose(0, 2, 1).reshape(m_total, p.C)                                 # A[m][c]
    for block in range(pl.view.m_tiles):
        m0 = block * bm
        smem = np.full((rows, lda), -1, dtype=np.int64)
        for tid in range(threads):
            group, row0 = tid % groups, tid // groups
            m = m0 + pix * group
            for i in range(rows * groups // threads):
                ch = row0 + i * (threads // groups)
                if m < m_total and ch < p.C:
                    img = m // hw
                    smem[ch, pix * group: pix * group + pix] = x[img, ch, m - img * hw: m - img * hw + pix]
                else:
                    smem[ch, pix * group: pix * group + pix] = 0
        valid = min(bm, m_total - m0)
        assert (smem[:rows, :valid] == a_full[m0:m0 + valid, :rows].T).all()
        mi_count = (c.tile_m // c.warps_m) // 16
        for warp in range(c.warps_m * c.warps_n):
            wm0 = (warp % c.warps_m) * (c.tile_m // c.warps_m)
            for mi in range(mi_count):
                for kb in range(c.tile_k // 8):
                    addresses = [(kb * 16 + (lane & 7) + 8 * (lane >> 4), wm0 + mi * 16 + 8 * ((lane >> 3) & 1))
                                 for lane in range(32)]
                    regs = _ldmatrix_x4_trans(smem, addresses)
                    tile = smem[kb * 16: kb * 16 + 16, wm0 + mi * 16: wm0 + mi * 16 + 16].T    # A[m][k], 16 × 16
                    for lane in range(32):
                        g, t = lane // 4, lane % 4
                        want = [(tile[g, 2 * t], tile[g, 2 * t + 1]), (tile[g + 8, 2 * t], tile[g + 8, 2 * t + 1]),
                                (tile[g, 2 * t + 8], tile[g, 2 * t + 9]),
                                (tile[g + 8, 2 * t + 8], tile[g + 8, 2 * t + 9])]
                        assert regs[lane] == want, (block, warp, mi, kb, lane)
