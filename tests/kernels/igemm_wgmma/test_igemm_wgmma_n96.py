"""The column tiles of 96 and 192 (``igemm_wgmma_n96``, ``igemm_wgmma_half_n96``) without a GPU: the generated wgmma
header, the space (its tiles, the padding rule that keeps them where they pad K less than the power-of-two tile just
wider), the plan and model (no MACs on zero rows where K is a multiple of the tile), the registry rows (tuned and
chosen untuned), and the kernels compiled by nvcc for sm_90a without spills."""

from __future__ import annotations

from pathlib import Path

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import launcher, n96, wgmma_ss_gen
from convtune.kernels.igemm_wgmma.model import tile_efficiency
from convtune.kernels.igemm_wgmma.n96 import IgemmWgmmaHalfN96FwdConfig, IgemmWgmmaN96FwdConfig
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import REGISTRY, get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
ALEXNET_CONV2 = "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2"
GEMM_CUT = 'extern "C" __global__ void __launch_bounds__(256)'   # the helper entries after the GEMM's


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


def test_the_header_is_the_generators_text() -> None:
    header = Path(launcher.__file__).with_name("wgmma_ss_n96.cuh").read_text()
    assert header == wgmma_ss_gen.header()
    # the generator writes the power-of-two instructions exactly as the hand-checked headers hold them
    tf32 = Path(launcher.__file__).with_name("wgmma_tf32_ss.cuh").read_text()
    half16 = Path(launcher.__file__).with_name("wgmma_half_ss.cuh").read_text()
    for n in (64, 128, 256):
        assert wgmma_ss_gen.function("tf32", "tf32", 8, "1, 1", n) in tf32
        for prefix in ("bf16", "f16"):
            assert wgmma_ss_gen.function(prefix, prefix, 16, "1, 1, 0, 0", n) in half16
    assert "m64n192k8.f32.tf32.tf32 {%0," in header and "%95}, %96, %97, p, 1, 1;" in header
    assert header.count("template <> struct WgmmaSS<") == 6


@pytest.mark.parametrize(("k", "tiles"), [
    (192, {96, 192}), (96, {96}), (576, {96, 192}), (384, {192}), (256, set()), (128, set()), (64, set()),
    (160, {96, 192}), (100, set()),
])
def test_tiles_only_where_they_pad_k_less_than_the_wider_power_of_two(k: int, tiles: set[int]) -> None:
    for family, extra in ((n96.FAMILY, "math=tf32"), (n96.HALF_FAMILY, "dtype=bfloat16")):
        p = P(f"N=8 C=64 H=14 W=14 K={k} R=3 S=3 pad=1 {extra}")
        assert {pl.config.tile_n for pl in enumerate_plans(p, H200, family)} == tiles, family


def test_rules_name_the_field() -> None:
    p = P(f"{ALEXNET_CONV2} math=tf32")
    with pytest.raises(InvalidConfig) as err:
        plan(p, IgemmWgmmaN96FwdConfig(tile_n=128), H200)
    assert err.value.field == "tile_n" and "(96, 192)" in str(err.value)
    with pytest.raises(InvalidConfig) as err:   # 2 · 192 / 2 accumulators a thread
        plan(p, IgemmWgmmaN96FwdConfig(tile_n=192, m_blocks=2), H200)
    assert err.value.field == "tile_n" and "192 accumulators" in str(err.value)
    with pytest.raises(InvalidConfig) as err:
        plan(P(f"{ALEXNET_CONV2} dtype=bfloat16"), IgemmWgmmaN96FwdConfig(), H200)
    assert err.value.field == "problem"


def test_a_192_tile_computes_no_zero_rows_of_k_192() -> None:
    """AlexNet conv2 (K = 192): 128 × 192 tiles compute the useful MACs only (past the last pixel tile), the general
    family's 128 × 256 a third more; the model ranks the 192 tile ahead."""
    p = P(f"{ALEXNET_CONV2} math=tf32")
    ours = plan(p, IgemmWgmmaN96FwdConfig(192, 1, 2, 4, 1, 32, tma=1), H200)
    wide = plan(p, launcher.IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32, tma=1), H200)
    assert ours.grid == (365, 1, 1) and wide.grid == (365, 1, 1)
    assert tile_efficiency(ours) == pytest.approx(46656 / 46720) and tile_efficiency(wide) == pytest.approx(
        46656 * 192 / (46720 * 256))
    assert get_spec(n96.FAMILY).predict_s(ours, H200) < get_spec("igemm_wgmma").predict_s(wide, H200)
    assert launcher.traffic_words(ours)["weight"] == 365 * 192 * 25 * 64


def test_plans_compile_from_their_own_source() -> None:
    for text, config, entry in ((f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(), "igemm_wgmma_fwd"),
                                (f"{ALEXNET_CONV2} dtype=float16", IgemmWgmmaHalfN96FwdConfig(),
                                 "igemm_wgmma_half_fwd")):
        pl = plan(P(text), config, H200)
        src = pl.source()
        assert "// ---- wgmma_ss_n96.cuh ----" in src and f"{entry}(" in src and required_arch(src) == "sm_90a"
        assert src.startswith(pl.family_source())


def test_registry_rows_and_the_untuned_choice_of_alexnet_conv2() -> None:
    """Both families are chosen untuned; on AlexNet conv2 the models of both presets pick the 128 × 192 TMA tile, the
    config that measured fastest in both classes on the H100 (benchmarks/results/igemm_wgmma_h200/n96_h100)."""
    for family, extra, general, scale in ((n96.FAMILY, "math=tf32", "igemm_wgmma", 2 ** -0.5),
                                          (n96.HALF_FAMILY, "dtype=bfloat16", "igemm_wgmma_half", 2 ** -0.75)):
        spec, p = get_spec(family), P(f"{ALEXNET_CONV2} {extra}")
        assert spec in specs_for(p) and spec.source == n96.SOURCE and spec.chosen_for(p)
        assert spec.source_sha256() != get_spec(general).source_sha256() and spec.choice_scale == scale
        for preset in ("h100", "h200"):
            choice = model_fastest(p, MachineModel.preset(preset), specs_for(p))
            assert choice is not None and choice[1].family == family
            assert (choice[1].tile_n, choice[1].tile_m, choice[1].tma) == (192, 128, 1)
    assert {s.family for (s_family, _), s in REGISTRY.items() if s.source == n96.SOURCE} == {n96.FAMILY,
                                                                                           n96.HALF_FAMILY}


REPRESENTATIVE = [   # (name, problem, config): both tiles, copying and TMA, every chunk, splits
    ("tf32_128x192_tma", f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(192, 1, 2, 4, 1, 32, tma=1)),
    ("tf32_64x192_tma_c16", f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(192, 1, 1, 6, 2, 16, tma=1)),
    ("tf32_128x192", f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(192, 1, 2, 3, 1, 32)),
    ("tf32_256x96", f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(96, 2, 2, 4, 1, 32)),
    ("tf32_128x96_c8_x4", f"{ALEXNET_CONV2} math=tf32", IgemmWgmmaN96FwdConfig(96, 1, 2, 6, 4, 8)),
    ("bf16_128x192_tma", f"{ALEXNET_CONV2} dtype=bfloat16", IgemmWgmmaHalfN96FwdConfig(192, 1, 2, 4, 1, 64, tma=1)),
    ("bf16_128x192", f"{ALEXNET_CONV2} dtype=bfloat16", IgemmWgmmaHalfN96FwdConfig(192, 1, 2, 4, 1, 64)),
    ("f16_256x96_c32_x2", f"{ALEXNET_CONV2} dtype=float16", IgemmWgmmaHalfN96FwdConfig(96, 2, 2, 4, 2, 32)),
    ("f16_128x96_tma_c16", f"{ALEXNET_CONV2} dtype=float16", IgemmWgmmaHalfN96FwdConfig(96, 2, 1, 3, 1, 16, tma=1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
@pytest.mark.parametrize("kind", ["tf32", "16"])
def test_kernels_compile_for_sm90a_without_spills(kind: str) -> None:
    """No spills, registers within ``__launch_bounds__`` (TMA: within the consumers' setmaxnreg count, 168 with
    two consumer warpgroups), shared memory within the block's limit."""
    rows = [(name, plan(P(text), config, H200)) for name, text, config in REPRESENTATIVE
            if name.startswith("tf32") == (kind == "tf32")]
    entry = "igemm_wgmma_fwd" if kind == "tf32" else "igemm_wgmma_half_fwd"
    for tma in (0, 1):
        plans = [(name, pl) for name, pl in rows if pl.config.tma == tma]
        result, entries = compile_unit(n96._source(), plans, entry, GEMM_CUT, prefix=f"n96_{kind}_{tma}")
        if not tma:
            assert_within_launch_bounds(result, entries)
        for entry_name, (name, pl) in entries.items():
            res = result.resources[entry_name]
            assert not res.spills, f"{name}: {res}"
            assert res.num_regs <= pl.regs_estimate or not tma, f"{name}: {res}"
            assert res.static_smem_bytes + pl.smem_bytes <= H200.smem_per_block_bytes, f"{name}: {res}"
