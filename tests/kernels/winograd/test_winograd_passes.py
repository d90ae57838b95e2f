"""The unfused Winograd paths' passes over the batch (``images_per_pass``): the config key stays what it was at 0,
the space offers the L2-sized passes only where the whole batch's V and M do not fit, the passes cover every image
once, the traffic is the per-pass formula summed, and the model prices a pass's launches and waves and, where its V
and M fit L2, their bytes at L2 bandwidth. The launches themselves: tests/kernels/test_prepared.py."""

from __future__ import annotations

import dataclasses

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.config import parse_config_key
from convtune.kernels.winograd import model as wino_model
from convtune.kernels.winograd import space as wino_space
from convtune.kernels.winograd import unfused
from convtune.kernels.winograd_3xtf32 import launcher as x3
from convtune.kernels.winograd_large import launcher as large
from convtune.kernels.winograd_tf32 import launcher as tc
from convtune.kernels.winograd_tf32 import model as tc_model
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P = ConvProblem.parse
ALEXNET_CONV2 = P("N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2")
VGG_B32 = P("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1")
SMALL = P("N=2 C=16 H=14 W=14 K=24 R=3 S=3 pad=1")


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, unfused.PASSES)


def test_the_key_leaves_images_per_pass_out_at_0_and_positions_stay() -> None:
    old = "winograd_unfused.fwd m=4 tile_k=64 tile_t=128 chunk_c=8 thread_k=8 thread_t=8 stages=3"
    assert parse_config_key(old).key() == old and parse_config_key(old).images_per_pass == 0
    config = dataclasses.replace(parse_config_key(old), images_per_pass=8)
    assert config.key() == old + " images_per_pass=8" and parse_config_key(config.key()) == config
    large_key = "winograd_unfused_large.fwd m=4 tile_k=64 tile_t=128 chunk_c=16 thread_k=4 thread_t=8 stages=2 r=5"
    assert parse_config_key(large_key).key() == large_key
    assert large.WinogradLargeConfig(4, 64, 128, 16, 4, 8, 2, 5).r == 5          # r keeps its position
    assert x3.Winograd3xTf32Config(4, 64, 128, 16, 2, 4, 3, 5).r == 5
    with pytest.raises(InvalidConfig) as err:
        unfused.WinogradUnfusedConfig(images_per_pass=-1)
    assert err.value.field == "images_per_pass"


def test_choices_are_the_largest_l2_sized_power_of_two_and_its_half() -> None:
    # AlexNet conv2, F(4×4, 5×5): 4·64·49·256 B = 3.2 MB an image: 8 images (25.7 MB) fit 32 MiB, 16 do not
    assert unfused.pass_image_choices(ALEXNET_CONV2, 8, 8, 4, 4) == (4, 8)
    per_image = 4 * 64 * 49 * (64 + 192)
    assert 8 * per_image <= unfused.PASS_WORKSPACE_BYTES < 16 * per_image
    assert unfused.pass_image_choices(SMALL, 6, 6, 4, 4) == ()                   # the whole batch fits
    huge = P("N=4 C=512 H=224 W=224 K=512 R=3 S=3 pad=1")                        # not even one image fits
    assert unfused.pass_image_choices(huge, 6, 6, 4, 4) == ()
    three = P("N=3 C=256 H=56 W=56 K=256 R=3 S=3 pad=1")                        # 14.5 MB an image
    assert unfused.pass_image_choices(three, 6, 6, 4, 4) == (1, 2)
    assert unfused.pass_image_choices(three.replace(N=2), 6, 6, 4, 4) == ()      # 28.9 MB: one pass fits


@pytest.mark.parametrize(("space", "problem", "field_values"), [
    (wino_space.unfused_space, VGG_B32, (0, 1, 2)),
    (large.space, ALEXNET_CONV2, (0, 2, 4, 8)),
    (x3.space, ALEXNET_CONV2, (0, 2, 4, 8)),
    (tc.space, VGG_B32.replace(math="tf32"), (0, 1)),                          # F(2×2): 25.7 MB an image
    (wino_space.unfused_space, SMALL, (0,)),
])
def test_each_unfused_space_offers_its_passes(space, problem, field_values, monkeypatch) -> None:
    """Once enabled; until then every space runs the batch in one pass (read at each call, the spaces' caches keyed
    by what is enabled)."""
    assert space(problem).values["images_per_pass"] == (0,)
    monkeypatch.setenv(experimental.ENV, unfused.PASSES)
    assert space(problem).values["images_per_pass"] == field_values
    monkeypatch.setenv(experimental.ENV, "")
    assert space(problem).values["images_per_pass"] == (0,)


def test_a_pass_value_is_refused_naming_the_field_until_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    # F(2×2,5×5): 36 points on 14·14 tiles, 7.2 MB an image, 4 images fit; F(4×4) takes 4 or 8
    assert unfused.pass_image_choices(ALEXNET_CONV2, 6, 6, 2, 2) == (2, 4)
    config = large.WinogradLargeConfig(m=4, tile_k=64, tile_t=128, chunk_c=16, thread_k=4, thread_t=8, stages=2,
                                       images_per_pass=16, r=5)
    eight = dataclasses.replace(config, images_per_pass=8)
    monkeypatch.delenv(experimental.ENV, raising=False)
    with pytest.raises(InvalidConfig) as err:
        large.plan(ALEXNET_CONV2, eight, H200)
    assert err.value.field == "images_per_pass" and "CONVTUNE_EXPERIMENTAL=winograd_passes" in str(err.value)
    monkeypatch.setenv(experimental.ENV, unfused.PASSES)
    with pytest.raises(InvalidConfig) as err:
        large.plan(ALEXNET_CONV2, config, H200)
    assert err.value.field == "images_per_pass" and "[4, 8]" in str(err.value)
    assert large.plan(ALEXNET_CONV2, eight, H200).config.images_per_pass == 8
    # the 1-D family (tiles 1 × m) runs the batch in one pass
    from convtune.kernels.winograd_1d import launcher as one_d

    row = P("N=8 C=64 H=28 W=28 K=64 R=1 S=7 pad_w=3")
    first = next(iter(one_d.enumerate_plans(row, H200)))
    with pytest.raises(InvalidConfig) as err:
        one_d.plan(row, dataclasses.replace(first.config, images_per_pass=2), H200)
    assert err.value.field == "images_per_pass" and "one pass" in str(err.value)


@pytest.mark.parametrize(("n", "images", "expected"), [(64, 8, [(0, 8)] * 1), (5, 2, [(0, 2), (2, 2), (4, 1)]),
                                                       (7, 0, [(0, 7)]), (7, 7, [(0, 7)]), (7, 9, [(0, 7)])])
def test_passes_cover_every_image_once(n: int, images: int, expected: list[tuple[int, int]]) -> None:
    p = SMALL.replace(N=n)
    pl = unfused.derive_plan(p, unfused.WinogradUnfusedConfig(m=2, tile_t=32, images_per_pass=images), H200)
    got = [(ps.first, ps.images) for ps in pl.passes]
    if n == 64:
        assert got == [(8 * i, 8) for i in range(8)]
    else:
        assert got == expected
    assert sum(ps.images for ps in pl.passes) == n
    assert all(ps.tiles == ps.images * pl.tiles_p * pl.tiles_q and ps.tp % 32 == 0 and ps.tp >= ps.tiles
               for ps in pl.passes)


def test_traffic_is_the_per_pass_formula_summed(enabled: None) -> None:
    config = dataclasses.replace(large.WinogradLargeConfig(m=4, tile_k=64, tile_t=64, chunk_c=16, thread_k=4,
                                                           thread_t=8, stages=2, r=5), images_per_pass=8)
    passed = large.plan(ALEXNET_CONV2, config, H200)
    whole = large.plan(ALEXNET_CONV2, dataclasses.replace(config, images_per_pass=0), H200)
    t, w = unfused.traffic_words(passed), unfused.traffic_words(whole)
    for term in ("input", "m_load", "output"):        # no padding in these: the same words
        assert t[term] == w[term]
    a2 = 64
    assert t["v_store"] == sum(a2 * passed.cp * ps.tp for ps in passed.passes) >= w["v_store"]
    assert t["filter"] == sum(ps.tp // 64 * a2 * passed.cp * passed.kp for ps in passed.passes)
    # one pass's V and M: 8·49 = 392 tiles padded to 448
    assert passed.tp == 448 and passed.workspace_bytes == 4 * a2 * 448 * (passed.cp + passed.kp)


def test_the_model_prices_launches_waves_and_l2_resident_workspace(enabled: None) -> None:
    config = large.WinogradLargeConfig(m=4, tile_k=64, tile_t=64, chunk_c=16, thread_k=4, thread_t=8, stages=2, r=5)
    whole = large.plan(ALEXNET_CONV2, config, H200)
    passed = large.plan(ALEXNET_CONV2, dataclasses.replace(config, images_per_pass=8), H200)
    one, eight = wino_model.predict_unfused(whole, H200), wino_model.predict_unfused(passed, H200)
    terms = wino_model.pass_terms(passed, H200, eight.blocks_per_sm)
    assert terms.launches == 24 and wino_model.pass_terms(whole, H200, one.blocks_per_sm).launches == 3
    assert passed.workspace_bytes <= wino_model.RESIDENT_L2_FRACTION * H200.l2_bytes
    assert terms.workspace_bytes_per_s == wino_model.L2_OVER_DRAM_BANDWIDTH * H200.copy_bandwidth_bytes_per_s
    assert eight.dram_s < one.dram_s                  # V and M at L2 bandwidth
    # a machine with a small L2 keeps the passes' V and M at DRAM bandwidth (and so never gains from them)
    small_l2 = dataclasses.replace(H200, l2_bytes=passed.workspace_bytes)
    assert wino_model.pass_terms(passed, small_l2, 1).workspace_bytes_per_s == H200.copy_bandwidth_bytes_per_s
    assert wino_model.predict_unfused(passed, small_l2).time_s > one.time_s
    # the TF32 path's model takes the same terms
    t3 = x3.plan(ALEXNET_CONV2, x3.Winograd3xTf32Config(m=4, tile_k=64, tile_t=64, chunk_c=16, warps_k=1, warps_t=2,
                                                        stages=2, images_per_pass=8, r=5), H200)
    t1 = x3.plan(ALEXNET_CONV2, dataclasses.replace(t3.config, images_per_pass=0), H200)
    assert tc_model.predict(t3, H200).dram_s < tc_model.predict(t1, H200).dram_s
