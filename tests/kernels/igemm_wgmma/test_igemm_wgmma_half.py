"""The 16-bit wgmma family without a GPU: which problems it takes (any C, bfloat16 and float16), its geometry in
64-channel chunks, config rules naming the field, the traffic formula against a simulation of the kernels' copy
loops, the prepared launch's steps (layout change, GEMM, a split's zeroing and conversion), the registry row, and
the kernels compiled by nvcc for sm_90a (no spills, wgmma not serialised)."""

from __future__ import annotations

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit, simulated_copies

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, nvcc_compile, required_arch
from convtune.kernels.igemm_wgmma import half, launcher
from convtune.kernels.igemm_wgmma.half import IgemmWgmmaHalfFwdConfig, supports, traffic_elements
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
LAYER = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 dtype=bfloat16"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1 dtype=bfloat16", True),
    ("N=2 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16", True),     # any C: the stem too
    ("N=2 C=13 H=33 W=33 K=16 R=3 S=3 pad=6 dilation=6 dtype=float16", True),
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1", False),                                # strict float32
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1 math=tf32", False),                      # the TF32 family's
    ("N=2 C=8 H=7 W=7 K=8 R=3 S=3 groups=8 dtype=bfloat16", False),
])
def test_supports_16bit_dense_convolutions_of_any_channel_count(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("igemm_wgmma_half") in specs_for(P(text))) is ok


def test_small_chunks_are_searched_only_where_they_pad_less() -> None:
    """A stem (C = 3) searches chunks of 16, 32 and 64 channels; C = 20 pads to 32 with chunks of 16 or 32: 32 and 64
    only; C = 256 pads to nothing: 64 only. Any chunk stays a valid config (the rule is the search's)."""
    stem = P("N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16")
    for text, chunks in ((stem.key(), {16, 32, 64}), ("N=2 C=20 H=12 W=12 K=50 R=5 S=5 dtype=bfloat16", {32, 64}),
                         (LAYER, {64})):
        assert {pl.config.chunk for pl in enumerate_plans(P(text), H200, family="igemm_wgmma_half")} == chunks
    pl = plan(P(LAYER), IgemmWgmmaHalfFwdConfig(chunk=16), H200)
    assert (pl.cp, pl.chunks, pl.smem_bytes) == (256, 9 * 16, 4 * (128 + 128) * 32 + 1024)
    stem_plan = plan(stem, IgemmWgmmaHalfFwdConfig(chunk=16), H200)
    assert (stem_plan.cp, stem_plan.krp) == (16, 49 * 16) and "wg_bf16, 128, 2, 1, 4, 32, 0>" in stem_plan.source()
    with pytest.raises(InvalidConfig) as err:
        plan(stem, IgemmWgmmaHalfFwdConfig(chunk=8), H200)
    assert err.value.field == "chunk"


def test_stems_fold_a_filter_rows_taps_into_one_chunk() -> None:
    """C ≤ 8 and S > 1: the search adds row_taps = S with the smallest chunk holding S·Cq columns (Cq = 2, 4, 8 ≥ C);
    the plan's workspace has Cq channels, the reduction R chunks; the kernel and the packing get FQ = Cq."""
    stem = P("N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16")
    folded = {(pl.config.row_taps, pl.config.chunk) for pl in enumerate_plans(stem, H200, family="igemm_wgmma_half")}
    assert folded == {(1, 16), (1, 32), (1, 64), (7, 32)}
    for text, taps in (("N=2 C=1 H=28 W=28 K=20 R=5 S=5 dtype=float16", {(1, 16), (1, 32), (1, 64), (5, 16)}),
                       ("N=2 C=8 H=9 W=9 K=20 R=3 S=3 pad=1 dtype=bfloat16", {(1, 16), (1, 32), (1, 64), (3, 32)}),
                       ("N=2 C=9 H=9 W=9 K=20 R=3 S=3 pad=1 dtype=bfloat16", {(1, 16), (1, 32), (1, 64)}),  # C > 8
                       ("N=2 C=3 H=9 W=9 K=20 R=3 S=1 pad_h=1 dtype=bfloat16", {(1, 16), (1, 32), (1, 64)})):
        assert {(pl.config.row_taps, pl.config.chunk)
                for pl in enumerate_plans(P(text), H200, family="igemm_wgmma_half")} == taps, text
    pl = plan(stem, IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32, 7), H200)
    assert (pl.cp, pl.krp, pl.chunks, pl.fold_channels) == (4, 7 * 32, 7, 4)
    assert "wg_bf16, 64, 2, 2, 4, 64, 4>" in pl.source() and "pack_body<convtune::wg_bf16, 4, 32>" in pl.source()
    assert half.nhwc_bytes(pl) == 2 * 2 * 32 * 32 * 4
    unfolded = plan(stem, IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32), H200)
    assert half.layout_key(pl) != half.layout_key(unfolded) and unfolded.fold_channels == 0
    for config, field in ((IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32, 3), "row_taps"),
                          (IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 16, 7), "chunk"),       # 7·4 columns > 16
                          (IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 8, 32, 7), "splits")):     # 7 chunks
        with pytest.raises(InvalidConfig) as err:
            plan(stem, config, H200)
        assert err.value.field == field, config
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER), IgemmWgmmaHalfFwdConfig(row_taps=3), H200)     # C = 256: no fold
    assert err.value.field == "row_taps" and "C ≤ 8" in str(err.value)


def test_geometry_counts_64_channel_chunks() -> None:
    pl = plan(P("N=2 C=70 H=9 W=9 K=40 R=3 S=3 pad=1 dtype=float16"), IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1), H200)
    assert (pl.cp, pl.krp, pl.chunks) == (128, 9 * 128, 18)
    assert isinstance(pl, half.IgemmWgmmaHalfPlan) and "convtune::wg_f16" in pl.source()
    assert required_arch(pl.source()) == "sm_90a"
    bf = plan(P(LAYER), IgemmWgmmaHalfFwdConfig(), H200)
    assert "convtune::wg_bf16" in bf.source() and "igemm_wgmma_half_fwd(" in bf.source()


@pytest.mark.parametrize(("config", "field"), [
    (IgemmWgmmaHalfFwdConfig(tile_n=96), "tile_n"),
    (IgemmWgmmaHalfFwdConfig(tile_n=256, m_blocks=2), "tile_n"),
    (IgemmWgmmaHalfFwdConfig(splits=37), "splits"),                    # 36 chunks of 64 (3·3·256 channels)
    (IgemmWgmmaHalfFwdConfig(warpgroups=2, m_blocks=2, tile_n=128, stages=8), "stages"),   # shared memory
])
def test_bad_configs_name_the_field(config: IgemmWgmmaHalfFwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER), config, H200)
    assert err.value.field == field


def test_a_tf32_problem_is_refused_naming_the_problem() -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER).replace(dtype="float32", math="tf32"), IgemmWgmmaHalfFwdConfig(), H200)
    assert err.value.field == "problem" and "igemm_wgmma_half" in str(err.value)


def _simulated_traffic(pl: half.IgemmWgmmaHalfPlan) -> dict[str, int]:
    """Elements the kernels request (:func:`wgmma_cases.simulated_copies`, chunks of ``config.chunk`` channels) and
    the epilogue's: y once in 16 bits, or split: fp32 zeroing (2 elements a value), atomics (2 each per split), the
    conversion's read (2) and write (1)."""
    out = pl.problem.output_elements
    output = out if pl.splits_launched == 1 else 2 * out + 2 * out * pl.splits_launched + 2 * out + out
    return {**simulated_copies(pl, pl.config.chunk), "output": output}


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=5 H=7 W=9 K=37 R=3 S=3 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1)),
    ("N=2 C=80 H=15 W=13 K=20 R=7 S=7 stride=2 pad=3 dtype=float16", IgemmWgmmaHalfFwdConfig(128, 2, 1, 4, 2)),
    ("N=2 C=2 H=6 W=6 K=130 R=3 S=3 pad=4 dilation=4 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(256, 1, 1, 4, 3)),
    ("N=2 C=3 H=11 W=10 K=20 R=7 S=7 stride=2 pad=3 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 2, 4, 2, 16)),
    ("N=1 C=40 H=9 W=9 K=70 R=3 S=1 pad_h=1 dtype=float16", IgemmWgmmaHalfFwdConfig(128, 1, 1, 4, 1, 32)),
    # folded taps: a 7×7 stem (Cq = 4, split over 7 filter rows), C = 1 dilated (Cq = 2), C = 6 (Cq = 8)
    ("N=2 C=3 H=11 W=10 K=20 R=7 S=7 stride=2 pad=3 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 2, 4, 3, 32, 7)),
    ("N=3 C=1 H=9 W=12 K=70 R=3 S=5 pad=2 dilation=2 dtype=float16", IgemmWgmmaHalfFwdConfig(128, 1, 1, 4, 1, 16, 5)),
    ("N=1 C=6 H=6 W=5 K=8 R=2 S=3 stride=3 pad=3 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 2, 1, 6, 2, 32, 3)),
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmWgmmaHalfFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_elements(pl) == _simulated_traffic(pl)


def test_prepared_launch_passes_the_kernel_arguments(monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the driver seam (no GPU). Unsplit: layout change into the workspace, the GEMM writing y. Split: the
    fp32 output after x's copy in the workspace is zeroed, added into, converted into y."""
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=2 C=70 H=9 W=9 K=40 R=3 S=3 stride=2 pad=1 dtype=bfloat16")
    nhwc = 2 * 2 * 9 * 9 * 128
    kernels = half.HalfKernels(rec.kernel(half.TO_NHWC_ENTRY, 2, 3), rec.kernel(half.ENTRY, 4, 16),
                               rec.kernel(half.CONVERT_ENTRY, 2, 1))
    gemm_ints = [2, 128, 9, 9, 40, p.P, p.Q, 3, 2, 2, 1, 1, 1, 1, 9 * 128]
    one_plan = plan(p, IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1), H200)
    one = half.prepare_plan(one_plan, 0, kernels)
    assert one.operands == ("x", "filters", "y", "workspace") and one.workspace_bytes == nhwc
    one((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    transpose, gemm = rec.calls
    assert (transpose.name, transpose.pointers, list(transpose.ints)) == (half.TO_NHWC_ENTRY, (0x1000, 0x4000),
                                                                          [70, 81, 128])
    assert transpose.grid == (2, 4, 2)                     # ⌈81/64⌉ pixels, 128/32 channel tiles, 2 images
    assert gemm.pointers == (0x4000, 0x2000, 0x3000, 0x4000 + nhwc) and list(gemm.ints) == [*gemm_ints, 18]
    assert gemm.grid == one_plan.grid and gemm.smem_bytes == one_plan.smem_bytes
    rec.calls.clear()
    split = half.prepare_plan(plan(p, IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 3), H200), 0, kernels)
    assert split.workspace_bytes == nhwc + 4 * p.output_elements
    split((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    assert [(c.kind, c.name) for c in rec.calls] == [("launch", half.TO_NHWC_ENTRY), ("memset", ""),
                                                      ("launch", half.ENTRY), ("launch", half.CONVERT_ENTRY)]
    _, zero, gemm, convert = rec.calls
    assert zero.pointers == (0x4000 + nhwc,) and zero.nbytes == 4 * p.output_elements
    assert gemm.pointers[3] == 0x4000 + nhwc and gemm.grid[2] == 3 and list(gemm.ints) == [*gemm_ints, 6]
    assert convert.pointers == (0x4000 + nhwc, 0x3000) and list(convert.ints) == [p.output_elements]
    assert {c.stream for c in rec.calls} == {0x77}


def test_prepared_launch_of_folded_taps_changes_the_layout_a_pixel_a_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folded taps: the workspace holds Cq = 4 channels a pixel, made by the per-pixel layout change (blocks of 256
    pixels, images along y; arguments C, H·W); the GEMM gets Cp = 4 and KRp = R·chunk."""
    from launch_recorder import install

    rec = install(monkeypatch)
    p = P("N=3 C=3 H=30 W=20 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16")
    pl = plan(p, IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1, 32, 7), H200)
    kernels = half.HalfKernels(rec.kernel(launcher.TO_NHWC_FOLD_ENTRY, 2, 2), rec.kernel(half.ENTRY, 4, 16),
                               rec.kernel(half.CONVERT_ENTRY, 2, 1))
    assert half.to_nhwc_entry(pl) == launcher.TO_NHWC_FOLD_ENTRY
    prepared = half.prepare_plan(pl, 0, kernels)
    assert prepared.workspace_bytes == 2 * 3 * 30 * 20 * 4
    prepared((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    transpose, gemm = rec.calls
    assert (transpose.name, transpose.grid, transpose.block, list(transpose.ints)) == (
        launcher.TO_NHWC_FOLD_ENTRY, (3, 3, 1), (256, 1, 1), [3, 600])
    assert list(gemm.ints) == [3, 4, 30, 20, 64, p.P, p.Q, 7, 2, 2, 3, 3, 1, 1, 7 * 32, 7]


def test_registry_row_and_model() -> None:
    spec = get_spec("igemm_wgmma_half")
    p = P(LAYER)
    pl = plan(p, IgemmWgmmaHalfFwdConfig(), H200)
    assert spec.floor_work(p, 12288) == get_spec("direct").floor_work(p, 12288)
    # one kernel template for TF32 and 16-bit storage: one source, one version
    assert spec.source == get_spec("igemm_wgmma").source and len(spec.source_sha256()) == 64
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0
    assert IgemmWgmmaHalfFwdConfig().key().startswith("igemm_wgmma_half.fwd tile_n=128")
    # the 16-bit class's compute ceiling is about twice TF32's: the model predicts the 16-bit kernel faster
    from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig

    t16 = spec.predict_s(pl, H200)
    t32 = get_spec("igemm_wgmma").predict_s(plan(p.replace(dtype="float32", math="tf32"), IgemmWgmmaFwdConfig(),
                                                 H200), H200)
    assert 0 < t16 < t32 < 1
    assert len(list(enumerate_plans(p, H200, family="igemm_wgmma_half"))) >= 12


REPRESENTATIVE = [
    ("bf16_128x128", LAYER, IgemmWgmmaHalfFwdConfig(128, 2, 1, 4, 1)),
    ("f16_128x256_wg2", "N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 dtype=float16",
     IgemmWgmmaHalfFwdConfig(256, 1, 2, 4, 1)),
    ("bf16_256x128_wg2", LAYER, IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 2)),
    ("bf16_64x64_s6", "N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 6, 8)),
    ("bf16_stem_c16", "N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16",
     IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 16)),
    ("f16_c32_wg2", "N=64 C=20 H=12 W=12 K=50 R=5 S=5 dtype=float16", IgemmWgmmaHalfFwdConfig(128, 1, 2, 6, 1, 32)),
    # folded taps: 8-, 4- and 16-byte copies
    ("bf16_fold7_q4", "N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16",
     IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32, 7)),
    ("f16_fold5_q2", "N=64 C=1 H=28 W=28 K=20 R=5 S=5 dtype=float16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 6, 1, 16, 5)),
    ("bf16_fold3_q8_wg2", "N=8 C=8 H=56 W=56 K=128 R=3 S=3 pad=1 dtype=bfloat16",
     IgemmWgmmaHalfFwdConfig(128, 1, 2, 3, 1, 32, 3)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    # the helper entries once (their type is the first plan's)
    result, entries = compile_unit(half._family_source(), plans, half.ENTRY,
                                   'extern "C" __global__ void __launch_bounds__(256)', helpers_once=True)
    assert_within_launch_bounds(result, entries)
    for helper in (half.TO_NHWC_ENTRY, launcher.TO_NHWC_FOLD_ENTRY, launcher.PACK_ENTRY, half.CONVERT_ENTRY):
        assert not result.resources[helper].spills


@pytest.mark.parametrize(("text", "config", "entry", "words"), [
    # TF32: one word per element of (K, R·S·Cp) = (20, 9·64)
    ("N=2 C=40 H=9 W=9 K=20 R=3 S=3 pad=1 math=tf32", None, "igemm_wgmma_pack", 20 * 9 * 64),
    # bf16, chunks of 16 channels: (K, R·S·Cp) = (20, 9·48) elements, two to a word
    ("N=2 C=40 H=9 W=9 K=20 R=3 S=3 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1, 16),
     "igemm_wgmma_pack", 20 * 9 * 48 // 2),
    # bf16, folded taps: (K, R·chunk) = (20, 3·32) elements, Cp = Cq = 4
    ("N=2 C=3 H=9 W=9 K=20 R=3 S=5 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1, 32, 5),
     "igemm_wgmma_pack", 20 * 3 * 32 // 2),
])
def test_filter_packing_launch_passes_its_arguments(text: str, config: IgemmWgmmaHalfFwdConfig | None, entry: str,
                                                   words: int, monkeypatch: pytest.MonkeyPatch) -> None:
    """The filter operand's packing launch (one thread per element, arguments K, C, R, S, Cp) and its size in
    float32 words, for the TF32 and 16-bit wgmma families, through the driver seam."""
    from launch_recorder import install

    from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig

    rec = install(monkeypatch)
    p = P(text)
    pl = plan(p, config or IgemmWgmmaFwdConfig(64, 1, 1, 4, 1), H200)
    module = launcher if config is None else half
    pack = rec.kernel(entry, 2, 5)
    monkeypatch.setattr(launcher, "load_kernel", lambda *a, **k: pack)
    layout = module.filter_layout(pl, 0)
    assert layout.words == words and layout.key == module.layout_key(pl)
    assert layout.prep is not None
    layout.prep((0x1000, 0x2000), 0x77)
    (call,) = rec.launches()
    assert call.name == entry and call.pointers == (0x1000, 0x2000) and list(call.ints) == [20, p.C, p.R, p.S, pl.cp]
    elements = p.K * pl.krp
    assert call.grid[0] * call.block[0] >= elements > (call.grid[0] - 1) * call.block[0]


# ---- tma = 1 (the TF32 config's switch, inherited): the GEMM fed by TMA from a producer warpgroup ------------------
def test_tma_switch_of_the_16bit_family() -> None:
    """The 16-bit config inherits ``tma`` (minimum 0, keys without it parse to 0); the space searches both values
    and refuses tma=1 with folded taps, naming ``tma``; the plan adds the producer warpgroup and the barriers' 128
    bytes (64 elements of on-chip memory) to the same tile copying."""
    import dataclasses

    from convtune.kernels.config import parse_config_key

    before = "igemm_wgmma_half.fwd tile_n=128 m_blocks=2 warpgroups=2 stages=4 splits=1 chunk=64 row_taps=1"
    config = IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 1, 64, tma=1)
    assert parse_config_key(before).tma == 0 and parse_config_key(config.key()) == config
    with pytest.raises(InvalidConfig) as err:
        IgemmWgmmaHalfFwdConfig(tma=-1)
    assert err.value.field == "tma"
    assert {pl.config.tma for pl in enumerate_plans(P(LAYER), H200, family="igemm_wgmma_half")} == {0, 1}
    stem = P("N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16")
    with pytest.raises(InvalidConfig) as err:
        plan(stem, IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32, 7, tma=1), H200)
    assert err.value.field == "tma"
    copy = plan(P(LAYER), dataclasses.replace(config, tma=0), H200)
    tma = plan(P(LAYER), config, H200)
    assert (tma.config.threads, tma.min_blocks, tma.regs_estimate) == (384, 1, 168)
    assert tma.smem_bytes == copy.smem_bytes + launcher.TMA_BARRIER_BYTES
    assert half.onchip_elements(tma) == half.onchip_elements(copy) + launcher.TMA_BARRIER_BYTES // 2
    assert "igemm_wgmma_tma_body<convtune::wg_bf16, 128, 2, 2, 4, 128>(" in tma.source()


def test_prepared_tma_launch_of_a_split(monkeypatch: pytest.MonkeyPatch) -> None:
    """bf16, split in 3: the GEMM step carries the im2col map of x's channels-last copy at the workspace's start
    (operand 3, not the fp32 output after it) and the filters' tile map, 16-bit types and 64-byte rows (chunks of
    32); the zeroing, the GEMM and the conversion keep their places; only the GEMM has maps."""
    from launch_recorder import install

    from convtune.kernels.tensor_map import Im2colMap, TiledMap

    rec = install(monkeypatch)
    p = P("N=2 C=70 H=9 W=9 K=40 R=3 S=3 stride=2 pad=1 dtype=bfloat16")
    pl = plan(p, IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 3, 32, tma=1), H200)
    kernels = half.HalfKernels(rec.kernel(half.TO_NHWC_ENTRY, 2, 3), rec.kernel(half.ENTRY, 4, 16, n_maps=2),
                               rec.kernel(half.CONVERT_ENTRY, 2, 1))
    prepared = half.prepare_plan(pl, 0, kernels)
    x_map = Im2colMap("bfloat16", n=2, h=9, w=9, c=96, lower=(-1, -1), upper=(-1, -1), stride_w=2, stride_h=2,
                      channels=32, pixels=64, swizzle_bytes=64)
    filter_map = TiledMap("bfloat16", inner=9 * 96, rows=40, box_inner=32, box_rows=64, swizzle_bytes=64)
    assert [getattr(s, "maps", ()) for s in prepared.steps] == [(), (), ((3, x_map), (1, filter_map)), ()]
    ws = 0x40000
    prepared((0x10000, 0x20000, 0x30000, ws), 0x77)
    assert [(c.kind, c.name) for c in rec.calls] == [("launch", half.TO_NHWC_ENTRY), ("memset", ""),
                                                      ("launch", half.ENTRY), ("launch", half.CONVERT_ENTRY)]
    gemm = rec.calls[2]
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded] == [(x_map, ws), (filter_map, 0x20000)]
    assert gemm.maps == tuple(data for *_, data in rec.encoded) and gemm.block == (256, 1, 1)
    assert gemm.pointers == (ws, 0x20000, 0x30000, ws + half.nhwc_bytes(pl)) and gemm.grid[2] == 3


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_tma_kernel_compiles_for_sm90a_without_spills() -> None:
    """bf16, 256 × 128 tiles of two consumer warpgroups, chunks of 64: no spills, at most 168 registers (one block of
    384 threads), the shared memory within the block's limit."""
    pl = plan(P("N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 dtype=bfloat16"),
              IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 1, 64, tma=1), H200)
    result = nvcc_compile(pl.source(), "sm_90a")
    assert "serialized" not in result.log, result.log[-2000:]
    res = result.resources[half.ENTRY]
    assert not res.spills, res
    assert res.num_regs <= 168 == pl.regs_estimate, res
    assert res.static_smem_bytes + pl.smem_bytes <= H200.smem_per_block_bytes == 232448, res
