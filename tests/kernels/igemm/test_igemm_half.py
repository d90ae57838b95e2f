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
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.igemm import half
from convtune.kernels.igemm import launcher as _nchw
from convtune.kernels.igemm.half import IgemmHalfFwdConfig
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P = ConvProblem.parse
BF16 = P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 dtype=bfloat16")


def test_supported_problems_and_errors_name_the_field() -> None:
    assert [s.kind for s in specs_for(BF16)] == ["igemm_half.fwd"]
    assert half.supports(BF16.replace(dtype="float16"))
    for bad in (BF16.replace(C=12), BF16.replace(dtype="float32"), BF16.replace(dtype="float32", math="tf32")):
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
    """igemm_pack_16 in numpy: one uint32 per output word."""
    args = half.pack_arguments(pl)
    K, KRw, KRp, NB8, RS, S, W, DH, DW, C = args
    bits = w.view(np.uint16).reshape(-1)
    weights = KRp * NB8 * 8
    out = np.zeros(weights + 4 * KRp, dtype=np.int64)
    for idx in range(weights):
        j, slot, tile = idx & 1, (idx >> 1) & 31, idx >> 6
        nb, kb = tile % NB8, tile // NB8
        kw, k = kb * 8 + (slot >> 3) + 4 * j, nb * 8 + (slot & 7)
        if kw < KRw and k < K:
            kr = 2 * kw
            c, rs = kr % C, kr // C
            at = (k * C + c) * RS + rs
            out[idx] = int(bits[at]) | (int(bits[at + RS]) << 16)
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


REPRESENTATIVE = [
    ("bf16_128x128k16_2x2", BF16, IgemmHalfFwdConfig(128, 128, 16, 2, 2, 3, 1)),
    ("bf16_128x256k16_2x4", P("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 dtype=bfloat16"),
     IgemmHalfFwdConfig(128, 256, 16, 2, 4, 4, 1)),
    ("bf16_64x128k32_1x4_split", BF16, IgemmHalfFwdConfig(64, 128, 32, 1, 4, 3, 4)),
    ("fp16_128x64k32_4x1", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(128, 64, 32, 4, 1, 2, 1)),
    ("fp16_64x64k64_2x2", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(64, 64, 64, 2, 2, 2, 2)),
    ("fp16_32x64k8_1x2", BF16.replace(dtype="float16"), IgemmHalfFwdConfig(32, 64, 8, 1, 2, 2, 1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_without_spills() -> None:
    family = _nchw._family_source()
    text, entries = family, {}
    for i, (name, problem, config) in enumerate(REPRESENTATIVE):
        pl = half.plan(problem, config, H200)
        text += re.sub(rf"\b{half.ENTRY}\(", f"{half.ENTRY}_{i}(", pl.source()[len(family):])
        entries[f"{half.ENTRY}_{i}"] = (name, pl)
    resources = nvcc_compile(text, "sm_90").resources
    for entry, (name, pl) in entries.items():
        res = resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.threads * pl.min_blocks)), f"{name}: {res.num_regs}"
        assert pl.smem_bytes + res.static_smem_bytes <= H200.smem_per_block_bytes, name
    for helper in (half.TRANSPOSE_ENTRY, half.PACK_ENTRY, *half.CONVERT_ENTRIES.values()):
        assert not resources[helper].spills, helper


def test_the_shared_workspace_covers_every_plan_with_the_same_filters_key() -> None:
    """Plans of one problem share prepare_filters' result (benchmarkers cache it by filters_key), so its workspace
    must hold the largest plan's: a split's fp32 output after x's NHWC copy (a split sized by an unsplit plan's
    workspace wrote past it: the H200 bf16 table's 'wrong' split rows)."""
    for problem in (BF16, BF16.replace(dtype="float16", N=3, H=9, W=11)):
        plans = list(half.enumerate_plans(problem, H200))
        assert {pl.config.splits for pl in plans} >= {1, 2}
        keys = {half.filters_key(pl) for pl in plans}
        assert len(keys) == 1
        shared = half.shared_workspace_bytes(plans[0])
        assert all(half.workspace_bytes(pl) <= shared for pl in plans)
        assert shared % 4 == 0
