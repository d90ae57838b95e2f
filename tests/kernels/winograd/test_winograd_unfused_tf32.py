"""The TF32 unfused Winograd family (``winograd_unfused_tf32``) without a GPU: it runs nothing until enabled, its space
names the field that breaks a rule, its prepared launch is the fp32 path's three launches with the tensor-core GEMM
in the middle, its traffic stays above the Winograd bound, a numpy emulation of the GEMM's index maps (every block,
warp and lane reading the shared-memory words its fragments name, the MMA, the epilogue's stores) equals Uᵀ·V
exactly with every element stored once and every fragment load conflict-free, and nvcc compiles its tiles for sm_80
and sm_90 without spills."""

from __future__ import annotations

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import nvcc_available, nvcc_compile
from convtune.kernels.describe import describe
from convtune.kernels.registry import get_spec, model_fastest, specs_for
from convtune.kernels.winograd_tf32 import launcher as tc
from convtune.kernels.winograd_tf32.launcher import WinogradUnfusedTf32Config as Config
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P = ConvProblem.parse
LAYER = P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32")


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, tc.FAMILY)


def test_the_family_runs_nothing_until_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(experimental.ENV, raising=False)
    assert tc.FAMILY not in {s.family for s in specs_for(LAYER)}
    monkeypatch.setenv(experimental.ENV, "igemm_wgmma, winograd_unfused_tf32")
    assert tc.FAMILY in {s.family for s in specs_for(LAYER)}
    assert tc.FAMILY not in {s.family for s in specs_for(LAYER.replace(math="ieee"))}     # strict fp32: never
    assert tc.FAMILY not in {s.family for s in specs_for(LAYER.replace(stride_h=2, stride_w=2))}
    monkeypatch.setenv(experimental.ENV, "all")
    assert experimental.enabled(tc.FAMILY)


@pytest.mark.parametrize(("config", "field"), [
    (Config(tile_k=64, warps_k=8), "warps_k"),            # 64 rows cannot hold 8 warps of m16
    (Config(tile_t=64, warps_t=16), "warps_t"),
    (Config(chunk_c=12), "chunk_c"),
    (Config(stages=5), "stages"),
    (Config(m=3), "m"),
    (Config(m=4), "m"),                                   # F(4×4) misses the class's accuracy gate
])
def test_rules_name_the_field(config: Config, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        tc.plan(LAYER, config, H200)
    assert err.value.field == field


def test_strict_problems_are_refused_by_name() -> None:
    with pytest.raises(InvalidConfig) as err:
        tc.plan(LAYER.replace(math="ieee"), Config(), H200)
    assert err.value.field == "problem" and "tf32" in str(err.value)


@pytest.mark.parametrize("spec", ["N=2 C=5 H=2 W=2 K=22 R=3 S=3 pad=1", "N=1 C=8 H=6 W=5 K=3 R=3 S=3",
                                  "N=1 C=44 H=2 W=2 K=6 R=3 S=3 pad=3"])
def test_maps_below_four_a_side_are_refused_by_name(enabled: None, spec: str) -> None:
    """The H200 cases whose error passed twice cuDNN TF32's (an input or output axis < 4) are not this family's."""
    problem = P(spec + " math=tf32")
    assert not tc.supports(problem) and tc.FAMILY not in {s.family for s in specs_for(problem)}
    with pytest.raises(InvalidConfig) as err:
        tc.plan(problem, Config(), H200)
    assert err.value.field == "problem" and f"≥ {tc.MIN_MAP}" in str(err.value)
    assert tc.supports(problem.replace(H=8, W=8, pad_h=1, pad_w=1))


def test_prepared_launch_is_the_fp32_path_with_the_tensor_core_gemm(enabled: None) -> None:
    config = Config(m=2, tile_k=128, tile_t=64, chunk_c=16, warps_k=4, warps_t=2, stages=2)
    pl = tc.plan(LAYER, config, H200)
    src = describe(LAYER, config, H200)
    transform, gemm, output = src.steps
    assert [transform["entry"], gemm["entry"], output["entry"]] == ["winograd_input", tc.ENTRY, "winograd_output"]
    assert gemm["block"] == [256, 1, 1] and gemm["dynamic_smem_bytes"] == tc.smem_bytes(config)
    assert tc.smem_bytes(config) == 4 * 2 * 16 * (128 + 8 + 64 + 8)
    assert gemm["grid"] == [pl.tp // 64, pl.kp // 128, 16]
    assert gemm["pointers"] == ["filters", "workspace", f"workspace+{tc.m_offset_bytes(pl)}"]
    assert gemm["int_args"] == [pl.cp, pl.kp, pl.tp] and src.workspace_bytes == pl.workspace_bytes
    assert "winograd_tc_gemm_body<128, 64, 16, 4, 2, 2>" in next(k.source for k in src.kernels if k.entry == tc.ENTRY)


def test_traffic_is_above_the_winograd_bound_and_the_model_is_finite(enabled: None) -> None:
    spec = get_spec(tc.FAMILY)
    s_words = H200.fast_memory_words("l2")
    plans = list(spec.enumerate_plans(LAYER, H200))
    assert len(plans) > 100 and {pl.config.m for pl in plans} == {2}
    for pl in plans[::17]:
        assert spec.traffic_words(pl) >= spec.bound_words(pl, s_words)
        assert 0 < spec.predict_s(pl, H200) < 1.0
        assert spec.onchip_words(pl) == pl.smem_bytes // 4 + pl.config.tile_k * pl.config.tile_t
    chosen = model_fastest(LAYER, H200, specs_for(LAYER))
    assert chosen is not None and chosen[0] > 0


# ---- the GEMM's index maps, emulated ----------------------------------------------------------------------------
def emulate_gemm(U: np.ndarray, V: np.ndarray, config: Config) -> tuple[np.ndarray, np.ndarray]:
    """M (α², Kp, Tp) as ``winograd_tc_gemm_body`` computes it (the PTX m16n8k8 .tf32 fragment layouts of the .cu
    header, without the rounding), and how many times each element is stored."""
    a2, cp_, kp = U.shape
    tp = V.shape[2]
    bk, bt, bc, warps_k, warps_t = config.tile_k, config.tile_t, config.chunk_c, config.warps_k, config.warps_t
    lda, ldb = bk + tc.ROW_PAD_WORDS, bt + tc.ROW_PAD_WORDS
    wtk, wtt = bk // warps_k, bt // warps_t
    mi_n, ni_n = tc.mma_tiles(config)
    out = np.full((a2, kp, tp), np.nan)
    writes = np.zeros((a2, kp, tp), dtype=int)
    lanes = np.arange(32)
    g, t4 = lanes >> 2, lanes & 3
    for xi in range(a2):
        for k0 in range(0, kp, bk):
            for t0 in range(0, tp, bt):
                acc = np.zeros((warps_k * warps_t, mi_n, ni_n, 4, 32))
                for c0 in range(0, cp_, bc):
                    a_s, b_s = np.zeros(bc * lda), np.zeros(bc * ldb)   # the stage as the copies fill it
                    for cc in range(bc):
                        a_s[cc * lda: cc * lda + bk] = U[xi, c0 + cc, k0: k0 + bk]
                        b_s[cc * ldb: cc * ldb + bt] = V[xi, c0 + cc, t0: t0 + bt]
                    for warp in range(warps_k * warps_t):
                        wk, wt = divmod(warp, warps_t)
                        for kk in range(0, bc, 8):
                            for i in range(mi_n):
                                ap = (kk + t4) * lda + wk * wtk + 16 * i + g
                                a_addrs = (ap, ap + 8, ap + 4 * lda, ap + 4 * lda + 8)
                                assert all(len(set((ad % 32).tolist())) == 32 for ad in a_addrs), "A bank conflict"
                                A = np.zeros((16, 8))
                                A[g, t4], A[g + 8, t4], A[g, t4 + 4], A[g + 8, t4 + 4] = (a_s[ad] for ad in a_addrs)
                                for j in range(ni_n):
                                    bp = (kk + t4) * ldb + wt * wtt + 8 * j + g
                                    assert all(len(set((ad % 32).tolist())) == 32 for ad in (bp, bp + 4 * ldb))
                                    B = np.zeros((8, 8))
                                    B[t4, g], B[t4 + 4, g] = b_s[bp], b_s[bp + 4 * ldb]
                                    D = A @ B
                                    acc[warp, i, j] += (D[g, 2 * t4], D[g, 2 * t4 + 1], D[g + 8, 2 * t4],
                                                        D[g + 8, 2 * t4 + 1])
                for warp in range(warps_k * warps_t):
                    wk, wt = divmod(warp, warps_t)
                    for i in range(mi_n):
                        k = k0 + wk * wtk + 16 * i + g
                        for j in range(ni_n):
                            t = t0 + wt * wtt + 8 * j + 2 * t4
                            for e, (dk, dt) in enumerate(((0, 0), (0, 1), (8, 0), (8, 1))):
                                out[xi, k + dk, t + dt] = acc[warp, i, j, e]
                                np.add.at(writes[xi], (k + dk, t + dt), 1)
    return out, writes


@pytest.mark.parametrize(("config", "sizes"), [
    (Config(tile_k=64, tile_t=128, chunk_c=16, warps_k=2, warps_t=4), (2, 32, 128, 256)),
    (Config(tile_k=128, tile_t=64, chunk_c=16, warps_k=4, warps_t=2, stages=2), (1, 16, 128, 128)),
    (Config(tile_k=32, tile_t=128, chunk_c=8, warps_k=1, warps_t=4), (1, 16, 64, 128)),
])
def test_the_gemm_index_maps_give_u_transposed_times_v(config: Config, sizes: tuple[int, int, int, int]) -> None:
    a2, cp_, kp, tp = sizes
    rng = np.random.default_rng(7)
    U, V = rng.standard_normal((a2, cp_, kp)), rng.standard_normal((a2, cp_, tp))
    got, writes = emulate_gemm(U, V, config)
    assert (writes == 1).all()
    np.testing.assert_allclose(got, np.einsum("xck,xct->xkt", U, V), rtol=1e-12, atol=1e-11)


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
@pytest.mark.parametrize("arch", ["sm_80", "sm_90"])
def test_tiles_compile_without_spills(arch: str) -> None:
    configs = [Config(2, 64, 128, 16, 2, 4, 3), Config(2, 128, 128, 16, 2, 4, 3), Config(2, 128, 256, 8, 2, 4, 3),
               Config(2, 64, 64, 32, 2, 2, 4), Config(2, 128, 64, 16, 4, 2, 2), Config(2, 32, 128, 16, 1, 4, 3)]
    for config in configs:
        pl = tc.plan(LAYER, config, H200)
        res = nvcc_compile(pl.source(), arch).resources[tc.ENTRY]
        assert not res.spills, f"{config.key()}: {res}"
        assert res.num_regs <= min(255, 65536 // config.threads), f"{config.key()}: {res.num_regs}"
        assert abs(res.num_regs - pl.regs_estimate) <= 32, f"{config.key()}: {res.num_regs} vs {pl.regs_estimate}"
