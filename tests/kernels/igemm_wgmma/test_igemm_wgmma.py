"""The wgmma TF32 family without a GPU: which problems and machines it takes, config rules naming the field, the
traffic formula against a simulation of the kernels' copy loops (padding, strides, dilation, tails, channel
padding), the space, the registry row, and the kernels compiled by nvcc for sm_90a (no spills, registers within
``__launch_bounds__``, wgmma not serialised)."""

from __future__ import annotations

import dataclasses

import pytest
from wgmma_cases import assert_within_launch_bounds, compile_unit, simulated_copies

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available, required_arch
from convtune.kernels.igemm_wgmma import launcher
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig, supports, traffic_words
from convtune.kernels.igemm_wgmma.space import enumerate_plans, plan
from convtune.kernels.registry import get_spec, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
GEMM_CUT = 'extern "C" __global__ void __launch_bounds__(256)'   # the helper entries after the GEMM's
LAYER = "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"


def P(text: str) -> ConvProblem:
    return ConvProblem.parse(text)


@pytest.mark.parametrize(("text", "ok"), [
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1 math=tf32", True),
    ("N=2 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 math=tf32", True),
    ("N=2 C=8 H=33 W=33 K=16 R=3 S=3 pad=6 dilation=6 math=tf32", True),
    ("N=2 C=8 H=7 W=7 K=16 R=3 S=3 pad=1", False),                 # strict float32: never TF32
    ("N=2 C=8 H=7 W=7 K=8 R=3 S=3 groups=8 math=tf32", False),
    ("N=2 C=8 H=7 W=7 K=8 R=3 S=3 dtype=bfloat16", False),
])
def test_supports_tf32_dense_convolutions_only(text: str, ok: bool) -> None:
    assert supports(P(text)) is ok
    assert (get_spec("igemm_wgmma") in specs_for(P(text))) is ok


def test_other_machines_get_no_plan() -> None:
    """sm_90a code runs on compute capability 9.0 only: an sm_80 or sm_100 machine has no wgmma plan."""
    for cc in ((8, 0), (10, 0)):
        other = dataclasses.replace(H200, name=f"cc{cc}", compute_capability=cc)
        assert list(enumerate_plans(P(LAYER), other)) == []
        with pytest.raises(InvalidConfig) as err:
            plan(P(LAYER), IgemmWgmmaFwdConfig(), other)
        assert err.value.field == "problem" and "sm_90a" in str(err.value)


@pytest.mark.parametrize(("config", "field"), [
    (IgemmWgmmaFwdConfig(tile_n=96), "tile_n"),
    (IgemmWgmmaFwdConfig(tile_n=256, m_blocks=2), "tile_n"),         # 256 accumulators per thread
    (IgemmWgmmaFwdConfig(m_blocks=3), "m_blocks"),
    (IgemmWgmmaFwdConfig(warpgroups=4), "warpgroups"),
    (IgemmWgmmaFwdConfig(stages=2), "stages"),
    (IgemmWgmmaFwdConfig(splits=73), "splits"),                        # 72 chunks of 32 (3·3·256 words)
    (IgemmWgmmaFwdConfig(warpgroups=2, m_blocks=2, tile_n=128, stages=8), "stages"),   # shared memory
])
def test_bad_configs_name_the_field(config: IgemmWgmmaFwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER), config, H200)
    assert err.value.field == field


def test_a_split_without_chunks_is_refused() -> None:
    with pytest.raises(InvalidConfig) as err:  # 9 chunks (3·3 taps of 32 channels) in 4 splits of 3 leave one empty
        plan(P("N=1 C=20 H=8 W=8 K=64 R=3 S=3 pad=1 math=tf32"), IgemmWgmmaFwdConfig(splits=4), H200)
    assert err.value.field == "splits" and "splits=3" in str(err.value)


def _simulated_traffic(pl: launcher.IgemmWgmmaFwdPlan) -> dict[str, int]:
    """Words the kernels request (:func:`wgmma_cases.simulated_copies`, chunks of the config's words) and the
    epilogue's."""
    p = pl.problem
    out = p.N * p.K * p.P * p.Q
    return {**simulated_copies(pl, launcher.chunk_elements(p, pl.config)),
            "output": out * pl.splits_launched + (out if pl.splits_launched > 1 else 0)}


@pytest.mark.parametrize(("text", "config"), [
    ("N=3 C=5 H=7 W=9 K=37 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 4, 1)),
    ("N=2 C=40 H=15 W=13 K=20 R=7 S=7 stride=2 pad=3 math=tf32", IgemmWgmmaFwdConfig(128, 2, 1, 4, 2)),
    ("N=1 C=64 H=9 W=11 K=16 R=1 S=5 pad_h=0 pad_w=2 math=tf32", IgemmWgmmaFwdConfig(64, 1, 2, 6, 1)),
    ("N=2 C=2 H=6 W=6 K=130 R=3 S=3 pad=4 dilation=4 math=tf32", IgemmWgmmaFwdConfig(256, 1, 1, 4, 3)),
    ("N=2 C=13 H=9 W=7 K=50 R=3 S=3 pad=1 stride=2 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 3, 2, 16)),
    ("N=1 C=21 H=8 W=8 K=20 R=2 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(128, 1, 1, 4, 1, 8)),
    # folded taps: Cq = 4 (C = 3) and Cq = 1, each pixel's S taps one copy per filter row
    ("N=2 C=3 H=15 W=13 K=20 R=7 S=7 stride=2 pad=3 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 4, 2, 32, 7)),
    ("N=2 C=1 H=9 W=9 K=20 R=5 S=5 pad=4 dilation=2 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 4, 1, 8, 5)),
])
def test_traffic_formula_matches_the_copy_loops(text: str, config: IgemmWgmmaFwdConfig) -> None:
    pl = plan(P(text), config, H200)
    assert traffic_words(pl) == _simulated_traffic(pl)


def test_space_covers_the_layers_it_is_for_within_the_machine() -> None:
    for text in (LAYER, "N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 math=tf32",
                 "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2 math=tf32", "N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32"):
        plans = list(enumerate_plans(P(text), H200))
        assert len(plans) >= 12, text
        for pl in plans:
            assert pl.smem_bytes <= H200.smem_per_block_bytes and pl.config.accumulators <= 128
    assert any(pl.config.splits > 1 for pl in enumerate_plans(P("N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1 math=tf32"),
                                                                H200))


def test_chunks_and_folded_taps() -> None:
    """Chunks of 32, 16, 8 channels (rows of 128, 64, 32 bytes; a smaller one only where it pads C less); stems
    with C ≤ 4 fold a filter row's taps into one chunk (Cq = 1, 2, 4 words a pixel: copies of 4, 8, 16 bytes), the
    smallest chunk holding S·Cq columns; the workspace has Cq channels, the reduction R chunks."""
    def chunks(text: str) -> set[tuple[int, int]]:
        return {(pl.config.row_taps, pl.config.chunk) for pl in enumerate_plans(P(text), H200)}

    unfolded = {(1, 32), (1, 16), (1, 8)}
    assert chunks(LAYER) == {(1, 32)} and chunks("N=2 C=48 H=9 W=9 K=20 R=3 S=3 pad=1 math=tf32") == {(1, 32), (1, 16)}
    assert chunks("N=2 C=40 H=9 W=9 K=20 R=3 S=3 pad=1 math=tf32") == unfolded     # 64, 48, 40 channels a tap
    assert chunks("N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 math=tf32") == unfolded | {(7, 32)}
    assert chunks("N=2 C=1 H=28 W=28 K=20 R=5 S=5 math=tf32") == unfolded | {(5, 8)}
    assert chunks("N=2 C=2 H=9 W=9 K=20 R=3 S=3 pad=1 math=tf32") == unfolded | {(3, 8)}
    assert chunks("N=2 C=5 H=9 W=9 K=20 R=3 S=3 pad=1 math=tf32") == unfolded                  # C > 4: no fold
    stem = P("N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 math=tf32")
    pl = plan(stem, IgemmWgmmaFwdConfig(64, 2, 2, 4, 1, 32, 7), H200)
    assert (pl.cp, pl.krp, pl.chunks, pl.fold_channels, launcher.fold_channels(stem)) == (4, 7 * 32, 7, 4, 4)
    assert "<convtune_tf32, 64, 2, 2, 4, 128, 4>" in pl.source() and "pack_body<convtune_tf32, 4, 32>" in pl.source()
    assert launcher.workspace_bytes(pl) == 4 * 2 * 32 * 32 * 4
    flat = plan(stem, IgemmWgmmaFwdConfig(64, 2, 2, 4, 1, 8), H200)
    assert launcher.layout_key(pl) != launcher.layout_key(flat) and flat.fold_channels == 0
    assert IgemmWgmmaFwdConfig(128, 2, 1, 4, 1) == IgemmWgmmaFwdConfig(128, 2, 1, 4, 1, 32, 1)   # earlier keys
    for config, field in ((IgemmWgmmaFwdConfig(64, 2, 2, 4, 1, 32, 3), "row_taps"),
                          (IgemmWgmmaFwdConfig(64, 2, 2, 4, 1, 16, 7), "chunk"),       # 7·4 columns > 16
                          (IgemmWgmmaFwdConfig(64, 2, 2, 4, 1, 64), "chunk"),          # TF32 chunks: 32, 16, 8
                          (IgemmWgmmaFwdConfig(64, 2, 2, 4, 8, 32, 7), "splits")):     # 7 chunks
        with pytest.raises(InvalidConfig) as err:
            plan(stem, config, H200)
        assert err.value.field == field, config


def test_prepared_launch_of_folded_taps(monkeypatch: pytest.MonkeyPatch) -> None:
    """Folded TF32 taps: the per-pixel layout change (blocks of 256 pixels, images along y; arguments C, H·W) into a
    workspace of Cq = 4 words a pixel; a split zeroes y and the GEMM adds into y itself (no conversion)."""
    from launch_recorder import install

    from convtune.kernels.igemm.nhwc import NhwcKernels

    rec = install(monkeypatch)
    p = P("N=3 C=3 H=30 W=20 K=64 R=7 S=7 stride=2 pad=3 math=tf32")
    pl = plan(p, IgemmWgmmaFwdConfig(64, 1, 1, 4, 2, 32, 7), H200)
    kernels = NhwcKernels(rec.kernel(launcher.TO_NHWC_FOLD_ENTRY, 2, 2), rec.kernel(launcher.ENTRY, 3, 16))
    prepared = launcher.prepare_plan(pl, 0, kernels)
    assert prepared.workspace_bytes == 4 * 3 * 30 * 20 * 4
    prepared((0x1000, 0x2000, 0x3000, 0x4000), 0x77)
    transpose, gemm = rec.launches()
    assert (transpose.name, transpose.grid, transpose.block, list(transpose.ints)) == (
        launcher.TO_NHWC_FOLD_ENTRY, (3, 3, 1), (256, 1, 1), [3, 600])
    assert transpose.pointers == (0x1000, 0x4000) and gemm.pointers == (0x4000, 0x2000, 0x3000)
    assert list(gemm.ints) == [3, 4, 30, 20, 64, p.P, p.Q, 7, 2, 2, 3, 3, 1, 1, 7 * 32, 4]
    (zero,) = [c for c in rec.calls if c.kind == "memset"]
    assert zero.pointers == (0x3000,) and zero.nbytes == 4 * p.output_elements


def test_registry_row() -> None:
    spec = get_spec("igemm_wgmma")
    direct = get_spec("direct")
    p = P(LAYER)
    pl = plan(p, IgemmWgmmaFwdConfig(), H200)
    assert spec.floor_work(p, 12288) == direct.floor_work(p, 12288)
    assert len(spec.source_sha256()) == 64 and required_arch(pl.source()) == "sm_90a"
    assert spec.traffic_words(pl) > 0 and spec.onchip_words(pl) > 0
    assert IgemmWgmmaFwdConfig().key().startswith("igemm_wgmma.fwd tile_n=128")
    assert 0 < spec.predict_s(pl, H200) < 1


REPRESENTATIVE = [
    ("128x128", LAYER, IgemmWgmmaFwdConfig(128, 2, 1, 4, 1)),
    ("128x256_wg2", "N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 math=tf32",
     IgemmWgmmaFwdConfig(256, 1, 2, 4, 1)),
    ("256x128_wg2", LAYER, IgemmWgmmaFwdConfig(128, 2, 2, 4, 2)),
    ("64x64_s6", "N=1 C=512 H=7 W=7 K=512 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 6, 8)),
    ("128x64_wg2_s6", "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2 math=tf32", IgemmWgmmaFwdConfig(64, 1, 2, 6, 1)),
    ("128x128_c16_s3", "N=8 C=16 H=56 W=56 K=128 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(128, 2, 1, 3, 1, 16)),
    ("128x256_c8", "N=8 C=8 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 8)),
    ("fold4_7x7", "N=8 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 math=tf32",
     IgemmWgmmaFwdConfig(64, 1, 2, 4, 1, 32, 7)),
    ("fold1_5x5", "N=8 C=1 H=28 W=28 K=20 R=5 S=5 math=tf32", IgemmWgmmaFwdConfig(64, 2, 1, 4, 1, 8, 5)),
    ("fold2_3x3", "N=8 C=2 H=28 W=28 K=32 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(128, 1, 2, 6, 1, 8, 3)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_kernels_compile_for_sm90a_without_spills() -> None:
    plans = [(name, plan(P(problem), config, H200)) for name, problem, config in REPRESENTATIVE]
    # the GEMM entries only (the helpers follow the first 256-thread entry)
    result, entries = compile_unit(launcher._family_source(), plans, launcher.ENTRY, GEMM_CUT)
    assert_within_launch_bounds(result, entries)


# ---- tma = 1: the GEMM fed by TMA from a producer warpgroup (igemm_wgmma_tma.cuh) ---------------------------------
DILATED = "N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 math=tf32"
STEM = "N=2 C=3 H=32 W=32 K=64 R=7 S=7 stride=2 pad=3 math=tf32"
#: every (h, w) pair differs, so a swapped axis in a map shows
ODD = "N=2 C=35 H=15 W=11 K=70 R=3 S=5 stride_h=2 stride_w=3 pad_h=1 pad_w=2 dilation=2 math=tf32"


def test_tma_is_a_switch_of_the_space_where_an_im2col_map_fits() -> None:
    """tma takes 0 and 1 and the search yields both on an ordinary layer; tma=1 is refused, naming ``tma``, with
    folded taps (a chunk is then S taps of a few channels, no im2col box) and where the driver's im2col box cannot
    describe the convolution (corners past ±128, strides past 8); the same configs copying stay valid."""
    from convtune.kernels.igemm_wgmma.space import space

    assert space(P(LAYER), None).values["tma"] == (0, 1)
    assert {pl.config.tma for pl in enumerate_plans(P(LAYER), H200)} == {0, 1}
    assert {(pl.config.row_taps, pl.config.tma) for pl in enumerate_plans(P(STEM), H200)} == {(1, 0), (1, 1), (7, 0)}
    folded = IgemmWgmmaFwdConfig(64, 1, 1, 4, 1, 32, 7, tma=1)
    plan(P(STEM), dataclasses.replace(folded, tma=0), H200)
    with pytest.raises(InvalidConfig) as err:
        plan(P(STEM), folded, H200)
    assert err.value.field == "tma" and "row_taps" in str(err.value)
    for text, named in (("N=1 C=8 H=8 W=8 K=16 R=3 S=3 pad=200 math=tf32", "pad_h=200"),
                        ("N=1 C=8 H=210 W=210 K=16 R=3 S=3 pad=1 dilation=100 math=tf32", "pad_h=1"),
                        ("N=1 C=8 H=40 W=40 K=16 R=3 S=3 stride=9 math=tf32", "stride_h=9")):
        copying = IgemmWgmmaFwdConfig(64, 1, 1, 4, 1, 8)
        plan(P(text), copying, H200)
        with pytest.raises(InvalidConfig) as err:
            plan(P(text), dataclasses.replace(copying, tma=1), H200)
        assert err.value.field == "tma" and named in str(err.value), text
    with pytest.raises(InvalidConfig) as err:
        plan(P(LAYER), IgemmWgmmaFwdConfig(tma=2), H200)
    assert err.value.field == "tma"


def test_tma_keys_and_the_switchs_minimum() -> None:
    """Keys written before the switch (no ``tma=``) parse to tma=0, so stored results keep their config; tma=1
    round-trips. ``tma`` declares its minimum 0 (``metadata``), the other fields keep theirs of 1."""
    from convtune.kernels.config import parse_config_key

    before = "igemm_wgmma.fwd tile_n=256 m_blocks=1 warpgroups=2 stages=4 splits=1 chunk=32 row_taps=1"
    assert parse_config_key(before) == IgemmWgmmaFwdConfig(256, 1, 2, 4, 1) and parse_config_key(before).tma == 0
    config = IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32, tma=1)
    assert config.key() == before + " tma=1" and parse_config_key(config.key()) == config
    assert IgemmWgmmaFwdConfig(tma=0).tma == 0
    for bad in (-1, True):
        with pytest.raises(InvalidConfig) as err:
            IgemmWgmmaFwdConfig(tma=bad)
        assert err.value.field == "tma"
    with pytest.raises(InvalidConfig) as err:
        parse_config_key(before + " tma=-1")
    assert err.value.field == "tma"
    for name in ("splits", "row_taps", "stages"):
        with pytest.raises(InvalidConfig) as err:
            IgemmWgmmaFwdConfig(**{name: 0})
        assert err.value.field == name


@pytest.mark.parametrize("config", [IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32), IgemmWgmmaFwdConfig(64, 2, 1, 4, 3, 16),
                                    IgemmWgmmaFwdConfig(128, 1, 2, 6, 1, 8)], ids=str)
def test_tma_plan_resources(config: IgemmWgmmaFwdConfig) -> None:
    """Against the same tile copying: 128 more threads (the producer), 128 bytes more shared memory (2·stages
    mbarriers), one block per SM, the registers one block may hold up to the consumers' setmaxnreg count; the
    accumulators of the consumer warpgroups only; the same geometry and traffic; the TMA GEMM wrapper."""
    p = P(DILATED)
    copy = plan(p, config, H200)
    tma = plan(p, dataclasses.replace(config, tma=1), H200)
    wg = config.warpgroups
    assert (copy.config.threads, tma.config.threads) == (128 * wg, 128 * (wg + 1))
    assert tma.config.compute_threads == copy.config.compute_threads == 128 * wg
    assert tma.smem_bytes == copy.smem_bytes + launcher.TMA_BARRIER_BYTES == launcher.smem_bytes(tma.config)
    assert tma.min_blocks == 1
    assert tma.regs_estimate == min(232, 65536 // tma.config.threads // 8 * 8) == (232 if wg == 1 else 168)
    assert launcher.onchip_words(tma) == launcher.onchip_words(copy) + launcher.TMA_BARRIER_BYTES // 4
    assert get_spec("igemm_wgmma").onchip_words(tma) == launcher.onchip_words(tma)
    assert (tma.grid, tma.cp, tma.krp, tma.chunks_per_split) == (copy.grid, copy.cp, copy.krp, copy.chunks_per_split)
    assert traffic_words(tma) == traffic_words(copy)
    c = config
    body = f"igemm_wgmma_tma_body<convtune_tf32, {c.tile_n}, {c.m_blocks}, {wg}, {c.stages}, {c.row_bytes}>("
    assert body in tma.source() and body not in copy.source()
    gemm = tma.source()[len(launcher._family_source()):]
    assert f"__launch_bounds__({128 * (wg + 1)}, 1)" in gemm and gemm.count("__grid_constant__") == 2
    assert "__grid_constant__" not in copy.source()[len(launcher._family_source()):]


@pytest.mark.parametrize(("config", "ch"), [(IgemmWgmmaFwdConfig(128, 1, 2, 4, 1, 32, tma=1), 32),
                                            (IgemmWgmmaFwdConfig(64, 2, 1, 4, 3, 8, tma=1), 8)], ids=["c32", "c8x3"])
def test_prepared_tma_launch_passes_the_maps(config: IgemmWgmmaFwdConfig, ch: int,
                                             monkeypatch: pytest.MonkeyPatch) -> None:
    """Through the driver seam: the GEMM step carries (3, im2col map of the workspace) and (1, tile map of the
    filters) with the plan's geometry written out here, its block has the producer warpgroup; the encodings are
    for the workspace's and the filters' pointers, passed after the ints, and only a moved operand's is redone."""
    from launch_recorder import install

    from convtune.kernels.igemm.nhwc import NhwcKernels
    from convtune.kernels.tensor_map import Im2colMap, TiledMap

    rec = install(monkeypatch)
    p = P(ODD)
    pl = plan(p, config, H200)
    cp = -(-35 // ch) * ch
    kernels = NhwcKernels(rec.kernel(launcher.TO_NHWC_ENTRY, 2, 3), rec.kernel(launcher.ENTRY, 3, 16, n_maps=2))
    prepared = launcher.prepare_plan(pl, 0, kernels)
    x_map = Im2colMap("float32", n=2, h=15, w=11, c=cp, lower=(-2, -1), upper=(2 - 2 * 4, 1 - 2 * 2), stride_w=3,
                      stride_h=2, channels=ch, pixels=config.tile_m, swizzle_bytes=4 * ch)
    filter_map = TiledMap("float32", inner=15 * cp, rows=70, box_inner=ch, box_rows=config.tile_n,
                          swizzle_bytes=4 * ch)
    *others, gemm_step = prepared.steps
    assert gemm_step.maps == ((3, x_map), (1, filter_map)) and all(getattr(s, "maps", ()) == () for s in others)
    threads = 128 * (config.warpgroups + 1)
    assert gemm_step.block == (threads, 1, 1) and gemm_step.smem_bytes == pl.smem_bytes
    x, filters, y, ws = 0x10000, 0x20000, 0x30000, 0x40000
    prepared((x, filters, y, ws), 0x77)
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded] == [(x_map, ws), (filter_map, filters)]
    gemm = rec.launches()[-1]
    assert gemm.name == launcher.ENTRY and gemm.block == (threads, 1, 1) and gemm.grid == pl.grid
    assert gemm.pointers == (ws, filters, y) and gemm.ints == launcher.gemm_arguments(pl)
    assert gemm.maps == tuple(data for *_, data in rec.encoded)
    prepared((x, filters, y, ws), 0x77)
    prepared((x, filters, y, ws + 0x1000), 0x77)
    assert [(spec, ptr) for spec, ptr, _ in rec.encoded[2:]] == [(x_map, ws + 0x1000)]
    assert rec.launches()[-1].maps == (rec.encoded[2][2], rec.encoded[1][2])


def test_copying_plans_carry_no_maps(monkeypatch: pytest.MonkeyPatch) -> None:
    from launch_recorder import install

    from convtune.kernels.igemm.nhwc import NhwcKernels

    rec = install(monkeypatch)
    kernels = NhwcKernels(rec.kernel(launcher.TO_NHWC_ENTRY, 2, 3), rec.kernel(launcher.ENTRY, 3, 16))
    for config in (IgemmWgmmaFwdConfig(128, 1, 2, 4, 1, 32), IgemmWgmmaFwdConfig(64, 2, 1, 4, 3, 8)):
        pl = plan(P(ODD), config, H200)
        assert launcher.tensor_maps(pl) == ()
        prepared = launcher.prepare_plan(pl, 0, kernels)
        assert all(getattr(s, "maps", ()) == () for s in prepared.steps)
        prepared((0x10000, 0x20000, 0x30000, 0x40000), 0x77)
        assert rec.launches()[-1].block == (128 * config.warpgroups, 1, 1)
    assert rec.encoded == []


def test_model_ranks_tma_ahead_of_the_same_tile_copying() -> None:
    """Where TMA measured faster (the wip_wgmma_ws experiment, benchmarks/results/igemm_wgmma_h200/tma_v1; the
    dilated 512-channel layer): the model's smaller per-chunk fixed cost and the producer's deeper run-ahead make the
    TMA plan the faster prediction, at one block per SM."""
    from convtune.kernels.igemm_wgmma.model import predict

    config = IgemmWgmmaFwdConfig(256, 1, 2, 4, 1)
    copy = predict(plan(P(DILATED), config, H200), H200)
    tma = predict(plan(P(DILATED), dataclasses.replace(config, tma=1), H200), H200)
    assert tma.resident_blocks == 1 and tma.time_s < copy.time_s


def test_model_prices_a_folded_row_a_thread_above_half_a_row() -> None:
    """Folded taps (the ResNet-50 stem, bf16 and TF32): one warpgroup over two m64 blocks copies a whole folded row a
    thread per chunk, two warpgroups over one block half a row each; the pair measured 1.31–1.59× apart
    (tile_pairs.md), so the model ranks (m_blocks 2, warpgroups 1) behind (1, 2) at the same tile; unfolded, the
    row-copy factor does not apply."""
    from convtune.kernels.igemm_wgmma.half import IgemmWgmmaHalfFwdConfig
    from convtune.kernels.igemm_wgmma.model import FOLD_FACTOR, FOLD_ROW_COPY_FACTOR, fold_factor, predict

    for family, config_class, stem in (("igemm_wgmma", IgemmWgmmaFwdConfig, STEM),
                                       ("igemm_wgmma_half", IgemmWgmmaHalfFwdConfig,
                                        STEM.replace("math=tf32", "dtype=bfloat16"))):
        one_wg = config_class(64, 2, 1, 6, 1, 32, 7)
        two_wg = dataclasses.replace(one_wg, m_blocks=1, warpgroups=2)
        slow, fast = (predict(get_spec(family).plan(P(stem), c, H200), H200) for c in (one_wg, two_wg))
        assert slow.time_s > fast.time_s
    assert fold_factor(IgemmWgmmaFwdConfig(64, 2, 1, 6, 1, 32, 7)) == FOLD_FACTOR * FOLD_ROW_COPY_FACTOR > FOLD_FACTOR
    assert fold_factor(IgemmWgmmaFwdConfig(64, 1, 2, 6, 1, 32, 7)) == FOLD_FACTOR
    assert fold_factor(IgemmWgmmaFwdConfig(64, 2, 1, 6, 1, 32, 1)) == 1.0


TMA_REPRESENTATIVE = [
    ("tma_256x256_wg2_c32", IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32, tma=1)),
    ("tma_128x64_wg1_c16_x3", IgemmWgmmaFwdConfig(64, 2, 1, 4, 3, 16, tma=1)),
    ("tma_128x128_wg2_s6_c8", IgemmWgmmaFwdConfig(128, 1, 2, 6, 1, 8, tma=1)),
]


@pytest.mark.slow
@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH (no GPU needed)")
def test_tma_kernels_compile_for_sm90a_without_spills() -> None:
    """The TMA GEMM of chunks of 32, 16 and 8 words: no spills, registers within the consumers' setmaxnreg count
    (232; 168 with two consumer warpgroups: what one block of 384 threads may hold), the dynamic shared memory plus
    any static within the block's limit."""
    plans = [(name, plan(P(DILATED), config, H200)) for name, config in TMA_REPRESENTATIVE]
    result, entries = compile_unit(launcher._family_source(), plans, launcher.ENTRY, GEMM_CUT,
                                   prefix="igemm_wgmma_tma")
    for entry, (name, pl) in entries.items():
        res = result.resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= (232 if pl.config.warpgroups == 1 else 168) == pl.regs_estimate, f"{name}: {res}"
        assert res.static_smem_bytes + pl.smem_bytes <= H200.smem_per_block_bytes == 232448, f"{name}: {res}"
