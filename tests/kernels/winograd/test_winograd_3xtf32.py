"""The 3xTF32 Winograd family (``winograd_unfused_3xtf32``) without a GPU: it runs nothing until
``CONVTUNE_EXPERIMENTAL`` names it, then takes the fp32 Winograd paths' problems (3×3, 5×5 and 7×7, stride 1,
float32); its space is the TF32 family's GEMM block with the fp32 unfused families' m per r (3×3: F(2), F(4); 5×5:
F(2), F(4); 7×7: F(2)) and r fixed to the filter, and names the field that breaks a rule; every plan instantiates
``winograd_tc_gemm_body`` with PRODUCTS = 3 (the TF32 family's instantiation keeps six arguments) around the F(m, r)
transforms (``winograd_input_body_r<m, r>``, r = 3 included); its prepared launch, workspace and traffic are the fp32
unfused path's (3×3: ``winograd_unfused``; 5×5, 7×7: ``winograd_unfused_large``); its register estimate counts the lo
words, its model prices three MMAs per term; its gates and filter keys are the fp32 unfused family's of the same r
(so the tuner shares U with it); the split the GEMM body computes (emulated bit for bit) keeps a GEMM at fp32's
error; nvcc compiles representative tiles (3×3, 5×5, 7×7) without spills, with three times the MMAs of the same TF32
block.

``fuse = 1`` (GEMMs and output transform in one kernel, ``winograd_fused_out``): the space holds fuse ∈ {0, 1} and
refuses fused blocks whose 4·MI·NI·m² output registers exceed :data:`MAX_FUSED_OUTPUTS` (naming ``fuse``), which the
register estimate adds; the fold table (coef[a·α + b][i][j] = Aᵀ[i][a]·Aᵀ[j][b]) is Aᵀ M A and its CUDA text says
so; a numpy emulation of the fused kernel's dataflow (ξ-major chunks, the fold after each ξ, the epilogue's map from
accumulator to (k, t) and its crop) equals the unfused path's GEMM + output transform, and the convolution, with
every output written once; a fused plan is the unfused plan's GEMM grid without the frequency axis, V alone as its
workspace, no M traffic, its own filter key, a source of the input transform and the fused entry only, two prepared
launches; the model drops M's DRAM traffic, adds the fold and one launch less; nvcc compiles the model's top fused
tiles without spills near the register estimate."""

from __future__ import annotations

import dataclasses
import functools
import math
import re
import subprocess
import zlib
from concurrent.futures import ThreadPoolExecutor
from fractions import Fraction
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import NVRTC_OPTIONS, NvccResult, nvcc_available, nvcc_compile
from convtune.kernels.config import parse_config_key
from convtune.kernels.describe import describe
from convtune.kernels.direct.model import LAUNCH_OVERHEAD_S
from convtune.kernels.reference import conv2d_reference
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.winograd import launcher as wino
from convtune.kernels.winograd import unfused as wino_unfused
from convtune.kernels.winograd.space import plan_unfused
from convtune.kernels.winograd.transforms import cook_toom, filter_transform, matrices
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
from convtune.kernels.winograd_3xtf32 import launcher as x3
from convtune.kernels.winograd_3xtf32.launcher import Winograd3xTf32Config as Config
from convtune.kernels.winograd_large import launcher as large
from convtune.kernels.winograd_large.launcher import WinogradLargeConfig
from convtune.kernels.winograd_tf32 import launcher as tc
from convtune.kernels.winograd_tf32 import model as tc_model
from convtune.machine import PRESETS
from convtune.problem import ConvProblem

H200 = PRESETS["h200"]
P = ConvProblem.parse
ALEXNET_CONV2 = P("N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2")
SEVEN = P("N=4 C=185 H=46 W=46 K=128 R=7 S=7 pad=3")
SMALL5 = P("N=1 C=8 H=9 W=9 K=8 R=5 S=5 pad=2")
THREE = P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1")    # resnet50's 3×3 256 at batch 32
SMALL3 = P("N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1")
NINE = P("N=1 C=8 H=19 W=19 K=8 R=9 S=9 pad=4")
LAYERS = (THREE, ALEXNET_CONV2, SEVEN)                   # one layer per r
ENTRY_NAMES = ("winograd_input", x3.ENTRY, "winograd_output")   # one module: transforms around the GEMM
FUSED_ENTRY_NAMES = ("winograd_input", x3.FUSED_ENTRY)          # fuse = 1: the input transform, GEMMs + output
GEMM_FIELDS = ("tile_k", "tile_t", "chunk_c", "warps_k", "warps_t", "stages")


def refused_by_the_fuse_rule(err: pytest.ExceptionInfo[InvalidConfig], fuse: int = 1) -> bool:
    """The space's fuse rule refused the config, naming ``fuse`` (not the last field it reads, ``warps_t``)."""
    text = str(err.value)
    return (err.value.field == "fuse" and f"fuse={fuse}: 0 or 1" in text
            and f"≤ {x3.MAX_FUSED_OUTPUTS} registers" in text)


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, x3.FAMILY)


def gemm(config: tc.WinogradUnfusedTf32Config) -> tuple[int, ...]:
    return tuple(getattr(config, f) for f in GEMM_FIELDS)


@functools.cache
def ranked(problem: ConvProblem) -> list[x3.Winograd3xTf32Plan]:
    """The family's plans for ``problem`` on the H200, fastest modelled first (ties in enumeration order)."""
    spec = get_spec(x3.FAMILY)
    return sorted(x3.enumerate_plans(problem, H200), key=lambda pl: spec.predict_s(pl, H200))


def mma_outputs(config: Config) -> int:
    """4·MI·NI·m²: the fused kernel's output registers per thread for ``config``'s block (fused or not)."""
    mi, ni = tc.mma_tiles(config)
    return 4 * mi * ni * config.m * config.m


def test_the_family_runs_by_default_on_the_fp32_winograd_problems(monkeypatch: pytest.MonkeyPatch) -> None:
    """On since its GPU tests passed: no ``CONVTUNE_EXPERIMENTAL`` needed, in the strict and TF32 classes."""
    monkeypatch.delenv(experimental.ENV, raising=False)
    for problem in (*LAYERS, SMALL5, SMALL3, ALEXNET_CONV2.replace(math="tf32"),   # strict and TF32 classes
                    THREE.replace(math="tf32")):
        assert x3.applies(problem) is None, problem.key()
        assert x3.supports(problem) and x3.FAMILY in {s.family for s in specs_for(problem)}, problem.key()
    # a 3×3 problem: beside the fp32 3×3 unfused family, whose U it shares
    assert {x3.FAMILY, "winograd_unfused"} <= {s.family for s in specs_for(THREE)}
    for refused in (SMALL5.replace(stride_h=2, stride_w=2), SMALL5.replace(dtype="bfloat16"),
                    SMALL5.replace(dil_h=2, dil_w=2, pad_h=4, pad_w=4), NINE,
                    SMALL3.replace(stride_h=2, stride_w=2), SMALL3.replace(dtype="bfloat16"),
                    SMALL3.replace(dil_h=2, dil_w=2, pad_h=2, pad_w=2), P("N=1 C=8 H=9 W=9 K=8 R=3 S=5 pad=1")):
        assert x3.applies(refused) is not None, refused.key()
        assert not x3.supports(refused) and x3.FAMILY not in {s.family for s in specs_for(refused)}, refused.key()
    assert x3.applies(NINE) == "square 3×3, 5×5 or 7×7 filters only, got 9×9"


def test_space_is_the_tf32_gemm_block_with_the_fp32_familys_m_per_r() -> None:
    assert {r: sorted(points) for r, points in x3.POINTS.items()} == {3: [2, 4], 5: [2, 4], 7: [2]}
    three, five, seven = (x3.space(p).values for p in LAYERS)
    assert (three["m"], three["r"]) == ((2, 4), (3,))
    assert (five["m"], five["r"]) == ((2, 4), (5,)) and (seven["m"], seven["r"]) == ((2,), (7,))
    for values in (three, five, seven):
        assert {k: v for k, v in values.items() if k not in ("m", "r", "fuse", "images_per_pass")} == tc.GEMM_VALUES
        assert values["fuse"] == (0, 1) and values["images_per_pass"][0] == 0
    assert {(pl.config.m, pl.config.r) for pl in x3.enumerate_plans(THREE, H200)} == {(2, 3), (4, 3)}
    assert {(pl.config.m, pl.config.r) for pl in x3.enumerate_plans(ALEXNET_CONV2, H200)} == {(2, 5), (4, 5)}
    assert {(pl.config.m, pl.config.r) for pl in x3.enumerate_plans(SEVEN, H200)} == {(2, 7)}
    for problem in LAYERS:
        assert 0 < len(list(x3.enumerate_plans(problem, H200))) <= x3.grid_size(problem)


@pytest.mark.parametrize(("field", "config", "problem"), [
    ("r", Config(r=7), SMALL5),
    ("r", Config(m=2, r=5), SEVEN),
    ("r", Config(m=2, r=5), SMALL3),
    ("r", Config(m=2, r=3), SMALL5),
    ("m", Config(m=4, r=7), SEVEN),                       # F(4×4,7×7) is not provided
    ("m", Config(m=3), SMALL5),
    ("m", Config(m=6), SMALL5),
    ("m", Config(m=6, r=3), SMALL3),                      # F(6×6,3×3) is not provided
    ("m", Config(m=3, r=3), SMALL3),
    ("warps_k", Config(tile_k=32, warps_k=4), SMALL5),    # tile_k not a multiple of 16·warps_k
    ("warps_k", Config(tile_k=64, warps_k=8), SMALL5),
    ("warps_t", Config(tile_t=64, warps_t=16), SMALL5),
    ("chunk_c", Config(chunk_c=40), SMALL5),
    ("chunk_c", Config(chunk_c=12), SMALL5),
    ("stages", Config(stages=5), SMALL5),
    ("stages", Config(stages=1), SMALL5),
    ("problem", Config(), NINE),
    ("problem", Config(), SMALL5.replace(stride_h=2, stride_w=2)),
    ("problem", Config(), SMALL5.replace(dtype="bfloat16")),
    ("problem", Config(), SMALL5.replace(dil_h=2, dil_w=2, pad_h=4, pad_w=4)),
    ("problem", Config(r=3), SMALL3.replace(stride_h=2, stride_w=2)),
    ("problem", Config(r=3), SMALL3.replace(dtype="bfloat16")),
    ("problem", Config(r=3), SMALL3.replace(dil_h=2, dil_w=2, pad_h=2, pad_w=2)),
    # fused: 4·MI·NI·m² output registers past MAX_FUSED_OUTPUTS (128), or fuse not 0 / 1
    ("fuse", Config(m=4, tile_k=64, tile_t=128, warps_k=2, warps_t=4, fuse=1), SMALL5),       # MI = NI = 2: 256
    ("fuse", Config(m=4, tile_k=32, tile_t=64, warps_k=1, warps_t=2, fuse=1), SMALL5),        # MI = 2, NI = 4: 512
    ("fuse", Config(m=2, tile_k=128, tile_t=256, warps_k=2, warps_t=4, fuse=1), SMALL5),      # MI = 4, NI = 8: 512
    ("fuse", Config(m=2, tile_k=64, tile_t=128, warps_k=2, warps_t=2, r=3, fuse=1), SMALL3),  # 2 × 8: 256
    ("fuse", Config(m=4, tile_k=64, tile_t=64, warps_k=2, warps_t=2, r=3, fuse=1), SMALL3),   # 2 × 4: 512
    ("fuse", Config(fuse=2), SMALL5),
    ("fuse", Config(m=2, tile_k=32, tile_t=64, warps_k=2, warps_t=4, r=3, fuse=2), SMALL3),
])
def test_rules_name_the_field(field: str, config: Config, problem: ConvProblem) -> None:
    with pytest.raises(InvalidConfig) as err:
        x3.plan(problem, config, H200)
    assert err.value.field == field


def test_a_3x3_config_plans_and_the_refusal_names_the_filter_sizes() -> None:
    pl = x3.plan(SMALL3, Config(m=4, r=3), H200)
    assert (pl.config.m, pl.config.r, pl.config.alpha) == (4, 3, 6)
    assert x3.plan(SMALL3, Config(m=2, r=3), H200).config.alpha == 4
    with pytest.raises(InvalidConfig) as err:
        x3.plan(NINE, Config(), H200)
    assert "3×3, 5×5 or 7×7" in str(err.value) and "9×9" in str(err.value)


def test_every_plan_instantiates_the_3xtf32_gemm_around_the_r_transforms(enabled: None) -> None:
    for problem in LAYERS:
        plans = list(x3.enumerate_plans(problem, H200))
        assert len(plans) > 100
        for pl in plans:
            c = pl.config   # fused: winograd_fused_out_body<m, r, BK, BT, BC, WK, WT, STAGES>
            expected = (c.m, c.r, *gemm(c)) if pl.fused else (*gemm(c), 3)
            assert pl.template_args() == expected, c.key()
            assert pl.config.alpha == pl.config.m + pl.config.r - 1
        assert {pl.config.fuse for pl in plans} == {0, 1}
        for pl in [pl for pl in plans if not pl.fused][::41]:
            c, src = pl.config, pl.source()
            targs = ", ".join(map(str, pl.template_args()))
            assert f"winograd_tc_gemm_body<{targs}>(U, V, Mo, Cp, Kp, Tp)" in src and targs.endswith(", 3")
            assert c.r == problem.R and f"winograd_input_body_r<{c.m}, {c.r}>(x, V" in src
            assert f"winograd_output_body_r<{c.m}, {c.r}>(Mi, y" in src
            assert f"// F({c.m}x{c.m},{c.r}x{c.r})" in src and f"__launch_bounds__({c.threads})" in src
            assert all(f"\n{entry}(" in src for entry in ENTRY_NAMES)
            assert "#include" not in src and src.count("void tf32_split(") == 1   # each include expanded once
            assert f"winograd_input_body<{c.m}>(" not in src      # r = 3 too: the r-generic transforms, not the 3×3
            assert f"\n{x3.FUSED_ENTRY}(" not in src


def test_prepared_launch_is_the_large_path_with_the_3xtf32_gemm(enabled: None) -> None:
    """5×5: the large family's geometry, workspace and traffic (3×3: the next test)."""
    config = Config(m=4, tile_k=128, tile_t=64, chunk_c=16, warps_k=4, warps_t=2, stages=2)
    pl = x3.plan(ALEXNET_CONV2, config, H200)
    src = describe(ALEXNET_CONV2, config, H200)
    transform, step, output = src.steps
    assert [transform["entry"], step["entry"], output["entry"]] == ["winograd_input", x3.ENTRY, "winograd_output"]
    assert step["block"] == [256, 1, 1] and step["dynamic_smem_bytes"] == tc.smem_bytes(config) == pl.smem_bytes
    assert step["grid"] == [pl.tp // 64, pl.kp // 128, 8 * 8]                       # α² = 64 GEMMs
    assert step["pointers"] == ["filters", "workspace", f"workspace+{x3.m_offset_bytes(pl)}"]
    assert step["int_args"] == [pl.cp, pl.kp, pl.tp] and src.workspace_bytes == pl.workspace_bytes
    # the large family's geometry and workspace for the same block
    fp32 = large.plan(ALEXNET_CONV2, WinogradLargeConfig(4, 128, 64, 16, 8, 8, 2, 5), H200)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles, pl.tp, pl.cp, pl.kp) == (fp32.tiles_p, fp32.tiles_q, fp32.tiles,
                                                                       fp32.tp, fp32.cp, fp32.kp)
    assert pl.workspace_bytes == fp32.workspace_bytes and x3.traffic_words(pl) == large.traffic_words(fp32)


def test_prepared_launch_of_a_3x3_layer_is_the_unfused_path_with_the_3xtf32_gemm(enabled: None) -> None:
    config = Config(m=4, tile_k=128, tile_t=64, chunk_c=16, warps_k=4, warps_t=2, stages=2, r=3)
    pl = x3.plan(THREE, config, H200)
    src = describe(THREE, config, H200)
    transform, step, output = src.steps
    assert [transform["entry"], step["entry"], output["entry"]] == ["winograd_input", x3.ENTRY, "winograd_output"]
    assert step["block"] == [256, 1, 1] and step["dynamic_smem_bytes"] == tc.smem_bytes(config) == pl.smem_bytes
    assert step["grid"] == [pl.tp // 64, pl.kp // 128, 6 * 6]                       # α² = 36 GEMMs
    assert step["pointers"] == ["filters", "workspace", f"workspace+{x3.m_offset_bytes(pl)}"]
    assert step["int_args"] == [pl.cp, pl.kp, pl.tp] and src.workspace_bytes == pl.workspace_bytes
    # the fp32 3×3 unfused family's geometry, workspace and traffic for the same block
    fp32 = plan_unfused(THREE, WinogradUnfusedConfig(4, 128, 64, 16, 8, 8, 2), H200)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles, pl.tp, pl.cp, pl.kp) == (fp32.tiles_p, fp32.tiles_q, fp32.tiles,
                                                                       fp32.tp, fp32.cp, fp32.kp)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles) == (4, 4, 32 * 16)
    assert pl.workspace_bytes == fp32.workspace_bytes and x3.traffic_words(pl) == wino_unfused.traffic_words(fp32)


def test_the_tf32_familys_instantiation_is_unchanged(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, tc.FAMILY)
    layer = P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32")
    plans = list(tc.enumerate_plans(layer, H200))
    assert plans and tc.WinogradUnfusedTf32Config.products == 1 and Config.products == 3
    for pl in plans:
        assert pl.template_args() == gemm(pl.config)                                   # six values, no PRODUCTS
    for pl in plans[::29]:
        assert f"winograd_tc_gemm_body<{', '.join(map(str, gemm(pl.config)))}>(U, V" in pl.source()


@pytest.mark.parametrize("fields", [(64, 128, 16, 2, 4, 3), (128, 256, 16, 2, 4, 3), (32, 64, 8, 1, 2, 3),
                                    (128, 64, 16, 4, 2, 2)])
def test_the_register_estimate_counts_the_lo_words(fields: tuple[int, ...]) -> None:
    config, single = Config(4, *fields, 5), tc.WinogradUnfusedTf32Config(2, *fields)
    assert tc.regs_estimate(config) > tc.regs_estimate(single)
    assert x3.plan(ALEXNET_CONV2, config, H200).regs_estimate == tc.regs_estimate(config)
    assert tc.plan(P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"), single, H200).regs_estimate == (
        tc.regs_estimate(single))


@dataclasses.dataclass(frozen=True, slots=True)
class OneProduct(Config):
    """The same config with one TF32 product per term (no family: not registered for config keys)."""

    family = ""
    products = 1


def one_product(pl: x3.Winograd3xTf32Plan) -> x3.Winograd3xTf32Plan:
    """The same plan (geometry, registers, shared memory) with one TF32 product per term."""
    return dataclasses.replace(pl, config=OneProduct(**dataclasses.asdict(pl.config)))


def test_the_model_prices_three_products_per_term(enabled: None) -> None:
    spec = get_spec(x3.FAMILY)
    scaled = dearer = 0
    for problem in LAYERS:
        for pl in x3.enumerate_plans(problem, H200):
            three, one = tc_model.predict(pl, H200), tc_model.predict(one_product(pl), H200)
            assert spec.predict_s(pl, H200) == three.time_s and 0 < three.time_s < 1.0
            assert (three.l2_s, three.dram_s, three.waves) == (one.l2_s, one.dram_s, one.waves)
            assert three.issue_s <= 3 * one.issue_s * (1 + 1e-12), pl.config.key()   # the hidden stall: the slack
            if pl.config.stages == 2:     # chunk + unhidden stall = max(chunk, latency): never less with three
                assert three.issue_s >= one.issue_s and three.time_s >= one.time_s, pl.config.key()
                dearer += three.time_s > one.time_s
            scaled += three.issue_s == pytest.approx(3 * one.issue_s, rel=1e-12)     # no stall: the MMA time × 3
    assert scaled > 100 and dearer > 10
    # with TF32_MMA_FRACTION fitted on the H100 tables, the model's best plan beats the fp32 unfused family's best
    # where the measured margin was widest among the b1 layers (vgg16 conv4 b1: 56.9 against 60.7 µs on the H100)
    vgg16_conv4 = P("N=1 C=512 H=28 W=28 K=512 R=3 S=3 pad=1")
    fp32 = get_spec("winograd_unfused")
    fp32_best = min(fp32.predict_s(pl, H200) for pl in fp32.enumerate_plans(vgg16_conv4, H200))
    assert spec.predict_s(ranked(vgg16_conv4)[0], H200) < fp32_best


def test_three_products_are_never_modelled_faster_than_one(enabled: None) -> None:
    """The pipeline term is max(chunk time, latency / (stages − 1)): it never falls as a chunk costs more (it once
    priced AlexNet conv2's F(4×4,5×5) 32 × 64 block, 3 stages, at 144.8 µs with three products and 195.9 with one)."""
    faster = [pl.config.key() for problem in LAYERS for pl in x3.enumerate_plans(problem, H200)
              if tc_model.predict(pl, H200).time_s < tc_model.predict(one_product(pl), H200).time_s]
    assert not faster, f"{len(faster)} plans, e.g. {faster[:3]}"


def test_traffic_is_above_the_winograd_bound_and_onchip_is_the_gemm_block(enabled: None) -> None:
    spec = get_spec(x3.FAMILY)
    for problem in (*LAYERS, P("N=3 C=5 H=9 W=11 K=7 R=5 S=5 pad=4"), P("N=3 C=5 H=9 W=11 K=7 R=3 S=3 pad=2")):
        plans = list(spec.enumerate_plans(problem, H200))
        assert plans
        for pl in plans[::13]:
            assert spec.traffic_words(pl) >= spec.bound_words(pl, spec.onchip_words(pl)), pl.config.key()
            c = pl.config
            assert spec.onchip_words(pl) == (pl.smem_bytes // 4 + c.tile_k * c.tile_t
                                             + c.fuse * mma_outputs(c) * c.threads), c.key()   # fused: the m² outputs


def test_tolerance_and_filters_are_the_fp32_unfused_familys(enabled: None) -> None:
    assert {**{(m, 3): gate for m, gate in wino.TOLERANCE.items()}, **large.TOLERANCE} == x3.TOLERANCE
    assert set(x3.TOLERANCE) == {(m, r) for r, points in x3.POINTS.items() for m in points}
    problems = {3: P("N=2 C=5 H=9 W=11 K=7 R=3 S=3 pad=1"), 5: P("N=2 C=5 H=9 W=11 K=7 R=5 S=5 pad=2"),
                7: P("N=2 C=5 H=9 W=11 K=7 R=7 S=7 pad=3")}
    keys = set()
    for m, gate in wino.TOLERANCE.items():
        pl = x3.plan(problems[3], Config(m=m, tile_k=64, tile_t=64, chunk_c=16, warps_k=2, warps_t=2, r=3), H200)
        assert x3.tolerance(pl) == gate == x3.TOLERANCE[(m, 3)]
        fp32 = plan_unfused(problems[3], WinogradUnfusedConfig(m, 64, 64, 16, 8, 8, 3), H200)
        assert wino_unfused.tolerance(fp32) == gate
        # same padded sizes: the fp32 3×3 unfused family's key, so the tuner shares U (and the workspace) with it
        assert x3.filters_key(pl) == wino_unfused.filters_key(fp32) == ("winograd_unfused", m, pl.cp, pl.kp, pl.tp)
        keys.add(x3.filters_key(pl))
    for (m, r), gate in large.TOLERANCE.items():
        pl = x3.plan(problems[r], Config(m=m, tile_k=64, tile_t=64, chunk_c=16, warps_k=2, warps_t=2, r=r), H200)
        assert x3.tolerance(pl) == gate
        fp32 = large.plan(problems[r], WinogradLargeConfig(m, 64, 64, 16, 8, 8, 3, r), H200)
        assert large.tolerance(fp32) == gate
        # same padded sizes: the same key, so the tuner shares one transformed U (the large family's layout)
        assert x3.filters_key(pl) == large.filters_key(fp32) == (large.FAMILY, m, r, pl.cp, pl.kp, pl.tp)
        keys.add(x3.filters_key(pl))
    assert len(keys) == 5


def test_config_keys_round_trip(enabled: None) -> None:
    for problem in LAYERS:
        sample = list(x3.enumerate_plans(problem, H200))[::17]
        assert {pl.config.fuse for pl in sample} == {0, 1}
        for pl in sample:
            key = pl.config.key()
            assert key.startswith(f"{x3.FAMILY}.fwd ") and key.endswith(f" r={problem.R} fuse={pl.config.fuse}")
            again = parse_config_key(key)
            assert type(again) is Config and again == pl.config and again.products == 3
    # the key of a config without fuse parses to the unfused path
    assert parse_config_key(f"{x3.FAMILY}.fwd m=4 tile_k=64 tile_t=64 chunk_c=16 warps_k=2 warps_t=2 stages=3 r=5"
                            ).fuse == 0
    with pytest.raises(InvalidConfig) as err:
        parse_config_key(f"{x3.FAMILY}.fwd m=2 products=1")                            # not a field
    assert err.value.field == "products"


# ---- fuse = 1: the GEMMs and the output transform in one kernel ----------------------------------------------------
FUSED_BLOCKS = ((32, 64, 16, 2, 4, 3), (32, 32, 8, 2, 2, 2), (64, 64, 16, 2, 2, 4), (32, 64, 32, 1, 4, 4),
                (64, 128, 16, 2, 4, 3), (32, 128, 8, 1, 2, 2))   # tile_k, tile_t, chunk_c, warps_k, warps_t, stages


def test_the_space_has_fuse_and_caps_the_fused_outputs(enabled: None) -> None:
    """fuse ∈ {0, 1}; a fused block keeps 4·MI·NI·m² ≤ MAX_FUSED_OUTPUTS output registers, and the rule that refuses
    it names ``fuse`` (other limits, e.g. the register estimate, keep their own fields)."""
    assert x3.MAX_FUSED_OUTPUTS == 128
    for problem in LAYERS:
        assert x3.space(problem).values["fuse"] == (0, 1)
        plans = list(x3.enumerate_plans(problem, H200))
        fused = {pl.config for pl in plans if pl.fused}
        assert fused and len(fused) < len(plans) - len(fused)
        assert {pl.config.fuse for pl in plans} == {0, 1}
        assert {c.m for c in fused} == set(x3.POINTS[problem.R])            # F(4×4) fuses too (MI·NI ≤ 2)
        refused = kept = 0
        for pl in plans:
            c = pl.config
            assert c.output_registers == c.fuse * mma_outputs(c), c.key()
            if c.fuse:
                assert 0 < c.output_registers <= x3.MAX_FUSED_OUTPUTS and c.images_per_pass == 0, c.key()
                continue
            twin = dataclasses.replace(c, fuse=1)
            if c.images_per_pass:                  # a fused plan runs the batch in one pass
                with pytest.raises(InvalidConfig) as err:
                    x3.plan(problem, twin, H200)
                assert refused_by_the_fuse_rule(err), twin.key()
                continue
            if mma_outputs(c) > x3.MAX_FUSED_OUTPUTS:
                with pytest.raises(InvalidConfig) as err:
                    x3.plan(problem, twin, H200)
                assert refused_by_the_fuse_rule(err), twin.key()
                assert f"({mma_outputs(c)})" in str(err.value), twin.key()
                refused += 1
                continue
            try:
                x3.plan(problem, twin, H200)
            except InvalidConfig as exc:           # another limit: the estimate with the outputs, the SM's registers
                assert exc.field in ("tile_t", "threads") and "fuse=" not in str(exc), (twin.key(), str(exc))
                continue
            assert twin in fused, twin.key()
            kept += 1
        assert refused > 50 and kept == len(fused)
    with pytest.raises(InvalidConfig) as err:
        Config(fuse=-1)
    assert err.value.field == "fuse"
    for problem, fuse in ((SMALL5, 2), (SMALL3, 3)):
        with pytest.raises(InvalidConfig) as err:
            x3.plan(problem, Config(m=2, tile_k=32, tile_t=64, warps_k=2, warps_t=4, r=problem.R, fuse=fuse), H200)
        assert refused_by_the_fuse_rule(err, fuse)


@pytest.mark.parametrize("block", FUSED_BLOCKS)
@pytest.mark.parametrize(("m", "r"), [(2, 3), (4, 3), (2, 5), (4, 5), (2, 7)])
def test_output_registers_grow_the_register_estimate(block: tuple[int, ...], m: int, r: int) -> None:
    unfused, fused = Config(m, *block, r), Config(m, *block, r, fuse=1)
    mi, ni = tc.mma_tiles(unfused)
    assert unfused.output_registers == 0 and fused.output_registers == 4 * mi * ni * m * m
    assert tc.regs_estimate(unfused) == 4 * mi * ni + 2 * (4 * mi + 2 * ni) + 40     # the 3xTF32 GEMM block's
    assert tc.regs_estimate(fused) - tc.regs_estimate(unfused) == fused.output_registers
    assert tc.WinogradUnfusedTf32Config(2, *block).output_registers == 0
    problem = {3: SMALL3, 5: SMALL5, 7: SEVEN}[r]
    assert x3.plan(problem, unfused, H200).regs_estimate == tc.regs_estimate(unfused)
    if fused.output_registers <= x3.MAX_FUSED_OUTPUTS:
        assert x3.plan(problem, fused, H200).regs_estimate == tc.regs_estimate(fused)
    else:
        with pytest.raises(InvalidConfig) as err:
            x3.plan(problem, fused, H200)
        assert refused_by_the_fuse_rule(err)


# ---- the fold table -----------------------------------------------------------------------------------------------
LITERAL = re.compile(r"\((-?\d+)\.0f / (\d+)\.0f\)|(-?\d+)\.0f")
TABLE = re.compile(r"__constant__ float wino_fold_coef\[(\d+)\]\[(\d+)\]\[(\d+)\] = \{\n(.*?)\};\n", re.S)


def parse_fold_table(text: str) -> tuple[tuple[int, int, int], list[Fraction]]:
    """(dimensions, the literals' values in text order) of the ``wino_fold_coef`` array in ``text``."""
    found = TABLE.search(text)
    assert found is not None
    dims = (int(found[1]), int(found[2]), int(found[3]))
    values = [Fraction(int(a), int(b)) if a else Fraction(int(c)) for a, b, c in LITERAL.findall(found[4])]
    assert set(LITERAL.sub("", found[4])) <= set("{}, \n")                      # nothing but the literals
    return dims, values


@pytest.mark.parametrize(("m", "r"), [(m, r) for r, points in x3.POINTS.items() for m in points])
def test_the_fold_coefficients_are_the_output_transform(m: int, r: int) -> None:
    """Σ_ξ coef[ξ]·M_ξ = Aᵀ M A for ξ = a·α + b (M[a][b] the frequency of M_ξ), exactly as fractions and in float64."""
    alpha = m + r - 1
    coef = x3.fold_coefficients(m, r)
    assert (len(coef), len(coef[0]), len(coef[0][0])) == (alpha * alpha, m, m)
    at_exact = cook_toom(m, r)[0]
    for a in range(alpha):
        for b in range(alpha):
            assert coef[a * alpha + b] == [[at_exact[i][a] * at_exact[j][b] for j in range(m)] for i in range(m)]
    at = matrices(m, r)[0]
    c64 = np.array([[[float(v) for v in row] for row in xi] for xi in coef])
    rng = np.random.default_rng(m * 10 + r)
    for _ in range(5):
        mm = rng.standard_normal((alpha, alpha))
        folded = np.zeros((m, m))
        for xi in range(alpha * alpha):                       # one frequency at a time, as the kernel folds
            folded += c64[xi] * mm[xi // alpha, xi % alpha]
        np.testing.assert_allclose(folded, at @ mm @ at.T, rtol=1e-12, atol=1e-12 * np.abs(mm).max())
    # every coefficient is a product of powers of the points: exact in float32 (the table's literals are exact)
    assert all(float(np.float32(float(v))) == v for xi in coef for row in xi for v in row)


@pytest.mark.parametrize(("m", "r"), [(m, r) for r, points in x3.POINTS.items() for m in points])
def test_the_fold_table_text_is_the_coefficients_in_order(m: int, r: int) -> None:
    alpha = m + r - 1
    text = x3.fold_table(m, r)
    dims, values = parse_fold_table(text)
    assert dims == (alpha * alpha, m, m) and len(values) == alpha * alpha * m * m
    assert values == [v for xi in x3.fold_coefficients(m, r) for row in xi for v in row]
    assert text.count("{") == 1 + alpha * alpha + alpha * alpha * m                # [ξ][i][j] nesting
    # both paths' sources carry the table once (the family source: the fused body reads it)
    problem = {3: SMALL3, 5: SMALL5, 7: SEVEN}[r]
    for fuse in (0, 1):
        src = x3.plan(problem, Config(m, 32, 64, 16, 2, 4, 3, r, fuse=fuse), H200).source()
        assert src.count("__constant__ float wino_fold_coef[") == 1 and text in src
        assert src.count("wino_fold_coef[xi][u][v]") == 1


# ---- the fused kernel's dataflow, emulated ------------------------------------------------------------------------
def emulate_fused(pl: x3.Winograd3xTf32Plan, u: np.ndarray, v: np.ndarray,
                  coefficients: list[list[list[Fraction]]] | None = None) -> tuple[np.ndarray, np.ndarray]:
    """y (N, K, P, Q) and the number of stores to each element, as ``winograd_fused_out_body`` computes them from U
    (α², Cp, Kp) and V (α², Cp, Tp) in float64: block (x, y) of the grid owns tiles t0 = x·BT.. and channels
    k0 = y·BK..; it walks step = 0 .. α²·Cp/BC − 1, ξ = step / chunks, channels c0 = (step mod chunks)·BC .., adding
    the chunk's U[ξ]ᵀ V[ξ] to its accumulators; after ξ's last chunk each accumulator folds coef[ξ]·acc into its m × m
    outputs and restarts from 0. Accumulator e of MMA tile (i, j) of warp (wk, wt), lane (g, t4) holds
    k = k0 + wk·WTK + 16i + g + 8·(e >> 1), t = t0 + wt·WTT + 8j + 2·t4 + (e & 1) (the m16n8 C fragment); the
    epilogue stores its outputs (u, v) at y[img, k, tp·m + u, tq·m + v] for k < K, t < T, inside P × Q.
    ``coefficients``: the fold table (default: the launcher's :func:`fold_coefficients`, what the kernel reads)."""
    p, c = pl.problem, pl.config
    a2, cp, kp = u.shape
    assert v.shape == (a2, cp, pl.tp) and (a2, cp, kp) == (c.points, pl.cp, pl.kp)
    bk, bt, bc, warps_k, warps_t = c.tile_k, c.tile_t, c.chunk_c, c.warps_k, c.warps_t
    wtk, wtt = bk // warps_k, bt // warps_t
    mi, ni = wtk // 16, wtt // 8
    table = coefficients if coefficients is not None else x3.fold_coefficients(c.m, c.r)
    coef = np.array([[[float(x) for x in row] for row in xi] for xi in table])
    # the thread registers: (wk, wt, g, t4, i, j, e) -> row, column of the block's BK × BT tile
    wk, wt, g, t4, i, j, e = np.meshgrid(np.arange(warps_k), np.arange(warps_t), np.arange(8), np.arange(4),
                                         np.arange(mi), np.arange(ni), np.arange(4), indexing="ij")
    row = wk * wtk + 16 * i + g + 8 * (e >> 1)
    col = wt * wtt + 8 * j + 2 * t4 + (e & 1)
    assert np.all(np.bincount((row * bt + col).ravel(), minlength=bk * bt) == 1)   # each element: one register
    assert row.size == 4 * mi * ni * c.threads
    gx, gy, gz = pl.grid
    assert gz == 1 and (gx * bt, gy * bk) == (pl.tp, pl.kp)
    chunks = cp // bc
    y = np.full((p.N, p.K, p.P, p.Q), np.nan)
    writes = np.zeros(y.shape, dtype=np.int64)
    for bx in range(gx):
        for by in range(gy):
            t0, k0 = bx * bt, by * bk
            acc = np.zeros(row.shape)
            out = np.zeros((*row.shape, c.m, c.m))
            for step in range(a2 * chunks):
                xi, c0 = step // chunks, (step % chunks) * bc
                tile = u[xi, c0:c0 + bc, k0:k0 + bk].T @ v[xi, c0:c0 + bc, t0:t0 + bt]   # BK × BT of this chunk
                acc += tile[row, col]
                if (step + 1) % chunks == 0:                   # M_ξ complete: fold it, restart the accumulators
                    out += coef[step // chunks] * acc[..., None, None]
                    acc[...] = 0.0
            k, t = k0 + row, t0 + col
            live = (k < p.K) & (t < pl.tiles)
            tq, tp, img = t % pl.tiles_q, (t // pl.tiles_q) % pl.tiles_p, t // (pl.tiles_q * pl.tiles_p)
            for du in range(c.m):
                for dv in range(c.m):
                    pp, qq = tp * c.m + du, tq * c.m + dv
                    ok = live & (pp < p.P) & (qq < p.Q)
                    where = (img[ok], k[ok], pp[ok], qq[ok])
                    y[where] = out[..., du, dv][ok]
                    np.add.at(writes, where, 1)
    return y, writes


def unfused_output(pl: x3.Winograd3xTf32Plan, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """The unfused path on the same operands: the α² GEMMs M[ξ] = U[ξ]ᵀ V[ξ] (α², Kp, Tp), then the output transform
    Y = Aᵀ M A of each (k < K, t < T), tile t = (img·tiles_p + tp)·tiles_q + tq, cropped to P × Q."""
    p, c = pl.problem, pl.config
    at = matrices(c.m, c.r)[0]
    mm = np.einsum("xck,xct->xkt", u, v)[:, :p.K, :pl.tiles]
    mm = mm.reshape(c.alpha, c.alpha, p.K, p.N, pl.tiles_p, pl.tiles_q)
    y = np.einsum("ia,abknst,jb->nksitj", at, mm, at).reshape(p.N, p.K, pl.tiles_p * c.m, pl.tiles_q * c.m)
    return y[:, :, :p.P, :p.Q]


def winograd_operands(pl: x3.Winograd3xTf32Plan, x: np.ndarray, w: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """U (α², Cp, Kp) = G g Gᵀ zero-padded, and V (α², Cp, Tp) as ``winograd_input_body_r`` writes it:
    V[a·α + b][c][t] = (Bᵀ d B)[a][b] of the α × α window of tile t at (tp·m − pad_h, tq·m − pad_w), zero outside the
    image and for c ≥ C, t ≥ T."""
    p, c = pl.problem, pl.config
    bt = matrices(c.m, c.r)[2]
    u = np.zeros((c.points, pl.cp, pl.kp))
    u[:, :p.C, :p.K] = filter_transform(w, c.m)
    extra_h = max(0, (pl.tiles_p - 1) * c.m + c.alpha - p.pad_h - p.H)
    extra_w = max(0, (pl.tiles_q - 1) * c.m + c.alpha - p.pad_w - p.W)
    padded = np.pad(x, ((0, 0), (0, 0), (p.pad_h, extra_h), (p.pad_w, extra_w)))
    v = np.zeros((c.points, pl.cp, pl.tp))
    for t in range(pl.tiles):
        tq, tp, img = t % pl.tiles_q, (t // pl.tiles_q) % pl.tiles_p, t // (pl.tiles_q * pl.tiles_p)
        d = padded[img, :, tp * c.m:tp * c.m + c.alpha, tq * c.m:tq * c.m + c.alpha]
        v[:, :p.C, t] = np.einsum("ai,cij,bj->abc", bt, d, bt).reshape(c.points, p.C)
    return u, v


EMULATED = [   # (problem, F(m, r) and fused block): a partial last block on k and t, padded channels
    (P("N=3 C=12 H=9 W=11 K=40 R=3 S=3 pad=1"), Config(2, 32, 64, 8, 2, 4, 3, 3, fuse=1)),
    (P("N=1 C=5 H=15 W=14 K=7 R=3 S=3 pad=1"), Config(4, 32, 32, 8, 2, 2, 2, 3, fuse=1)),
    (P("N=2 C=9 H=11 W=10 K=33 R=5 S=5 pad=2"), Config(4, 32, 64, 8, 2, 4, 3, 5, fuse=1)),
    (P("N=2 C=17 H=8 W=9 K=20 R=5 S=5 pad=1"), Config(2, 64, 64, 16, 2, 2, 4, 5, fuse=1)),
    (P("N=2 C=20 H=13 W=12 K=20 R=7 S=7 pad=3"), Config(2, 32, 32, 16, 2, 2, 2, 7, fuse=1)),
]


EMULATED_IDS = [f"F{c.m}r{c.r}-k{c.tile_k}t{c.tile_t}c{c.chunk_c}_{c.warps_k}x{c.warps_t}" for _, c in EMULATED]


@pytest.mark.parametrize(("problem", "config"), EMULATED, ids=EMULATED_IDS)
def test_the_fused_dataflow_is_the_unfused_gemm_and_output_transform(problem: ConvProblem, config: Config) -> None:
    pl = x3.plan(problem, config, H200)
    assert pl.fused and pl.tiles < pl.tp and pl.cp > problem.C                   # padded tiles and channels
    assert pl.kp > problem.K or pl.kp // config.tile_k > 1                     # a cropped or a second k block
    rng = np.random.default_rng(zlib.crc32(config.key().encode()))
    u = rng.standard_normal((config.points, pl.cp, pl.kp))
    v = rng.standard_normal((config.points, pl.cp, pl.tp))
    y, writes = emulate_fused(pl, u, v)
    assert np.all(writes == 1), f"{int((writes == 0).sum())} outputs never written, {int((writes > 1).sum())} twice"
    ref = unfused_output(pl, u, v)
    np.testing.assert_allclose(y, ref, rtol=1e-10, atol=1e-10 * np.abs(ref).max())
    # and a convolution: V and U as the input and filter transforms write them
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W))
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S))
    y, writes = emulate_fused(pl, *winograd_operands(pl, x, w))
    assert np.all(writes == 1)
    ref = conv2d_reference(x, w, padding=(problem.pad_h, problem.pad_w))
    np.testing.assert_allclose(y, ref, rtol=1e-9, atol=1e-9 * np.abs(ref).max())


@pytest.mark.parametrize("index", [0, 2])
def test_a_fold_in_another_frequency_order_is_caught(index: int) -> None:
    """The comparison bites: the table indexed ξ = b·α + a (Aᵀ[i][b]·Aᵀ[j][a]) folds each M_ξ into the wrong outputs."""
    problem, config = EMULATED[index]
    pl = x3.plan(problem, config, H200)
    rng = np.random.default_rng(5)
    u = rng.standard_normal((config.points, pl.cp, pl.kp))
    v = rng.standard_normal((config.points, pl.cp, pl.tp))
    alpha, table = config.alpha, x3.fold_coefficients(config.m, config.r)
    transposed = [table[b * alpha + a] for a in range(alpha) for b in range(alpha)]
    y, writes = emulate_fused(pl, u, v, transposed)
    assert np.all(writes == 1) and not np.allclose(y, unfused_output(pl, u, v), rtol=1e-6)


# ---- fused plans -------------------------------------------------------------------------------------------------
def test_fused_plan_geometry_workspace_traffic_and_filters(enabled: None) -> None:
    """A fused plan runs the unfused plan's GEMM blocks over x, y without the frequency axis; its workspace is V alone;
    it moves no M; its filter key is its own (the unfused path's workspace holds M too)."""
    spec = get_spec(x3.FAMILY)
    checked = 0
    for problem in (*LAYERS, SMALL3, SMALL5, P("N=3 C=5 H=9 W=11 K=7 R=7 S=7 pad=3")):
        for m in x3.POINTS[problem.R]:
            for block in FUSED_BLOCKS:
                config = Config(m, *block, problem.R, fuse=1)
                if config.output_registers > x3.MAX_FUSED_OUTPUTS:
                    continue
                fused = x3.plan(problem, config, H200)
                unfused = x3.plan(problem, dataclasses.replace(config, fuse=0), H200)
                assert fused.fused and not unfused.fused
                gx, gy, gz = unfused.grid
                assert gz == config.points and fused.grid == (gx, gy, 1) == (fused.tp // config.tile_t,
                                                                             fused.kp // config.tile_k, 1)
                assert fused.blocks * config.points == unfused.blocks
                assert (fused.tiles_p, fused.tiles_q, fused.tiles, fused.tp, fused.cp, fused.kp, fused.smem_bytes) == (
                    unfused.tiles_p, unfused.tiles_q, unfused.tiles, unfused.tp, unfused.cp, unfused.kp,
                    unfused.smem_bytes)
                assert (fused.input_grid, fused.output_grid) == (unfused.input_grid, unfused.output_grid)
                assert fused.workspace_bytes == 4 * config.points * fused.tp * fused.cp == x3.m_offset_bytes(unfused)
                assert unfused.workspace_bytes == 4 * config.points * fused.tp * (fused.cp + fused.kp)
                words, unfused_words = x3.traffic_words(fused), x3.traffic_words(unfused)
                assert words["m_store"] == words["m_load"] == 0 < unfused_words["m_load"] <= unfused_words["m_store"]
                assert {k: n for k, n in words.items() if not k.startswith("m_")} == {
                    k: n for k, n in unfused_words.items() if not k.startswith("m_")}
                assert x3.total_traffic_words(fused) == (x3.total_traffic_words(unfused) - unfused_words["m_store"]
                                                         - unfused_words["m_load"]) == spec.traffic_words(fused)
                assert spec.onchip_words(fused) == spec.onchip_words(unfused) + config.output_registers * config.threads
                assert spec.traffic_words(fused) >= spec.bound_words(fused, spec.onchip_words(fused)), config.key()
                assert x3.filters_key(fused) != x3.filters_key(unfused)
                assert x3.filters_key(fused) == (x3.FAMILY, "fused", m, problem.R, fused.cp, fused.kp, fused.tp)
                # another fused block with the same padded sizes (warps, stages) shares the key, not other sizes
                same = x3.plan(problem, dataclasses.replace(config, stages=4 if config.stages != 4 else 3), H200)
                assert x3.filters_key(same) == x3.filters_key(fused)
                checked += 1
    assert checked > 30
    # different padded sizes (Tp of BT = 64 and 256 tiles; m) give different keys
    keys = {x3.filters_key(x3.plan(THREE, Config(m, 32, tile_t, 16, 2, 4, 3, 3, fuse=1), H200))
            for m in (2, 4) for tile_t in (64, 256) if Config(m, 32, tile_t, 16, 2, 4, 3, 3, fuse=1).output_registers
            <= x3.MAX_FUSED_OUTPUTS}
    assert len(keys) == 3      # F(2×2) with BT 64 and 256 (Tp 6272 and 6400), F(4×4) with BT 64


@pytest.mark.parametrize("problem", LAYERS, ids=lambda p: f"r{p.R}")
def test_fused_sources_hold_the_input_transform_and_the_fused_entry_only(problem: ConvProblem, enabled: None) -> None:
    plans = [pl for pl in x3.enumerate_plans(problem, H200) if pl.fused]
    for pl in plans[::23]:
        c, src = pl.config, pl.source()
        alpha2 = c.alpha * c.alpha
        targs = f"{c.m}, {c.r}, {c.tile_k}, {c.tile_t}, {c.chunk_c}, {c.warps_k}, {c.warps_t}, {c.stages}"
        assert f"\n{x3.FUSED_ENTRY}(" in src and "\nwinograd_input(" in src
        assert (f"convtune::winograd_fused_out_body<{targs}>(U, V, y, Cp, Kp, Tp, K, P, Q, tiles_p, tiles_q, tiles)"
                in src)
        assert f"__constant__ float wino_fold_coef[{alpha2}][{c.m}][{c.m}]" in src
        assert f"winograd_input_body_r<{c.m}, {c.r}>(x, V" in src and f"__launch_bounds__({c.threads})" in src
        assert f"\n{x3.ENTRY}(" not in src and "\nwinograd_output(" not in src        # the unfused entries: absent
        assert "winograd_tc_gemm_body<" not in src.split("\nwinograd_input(", 1)[1]   # no GEMM instantiation
        assert "#include" not in src and src.count("void tf32_split(") == 1
        # the same text as the unfused plan's up to the entries
        unfused = x3.plan(problem, dataclasses.replace(c, fuse=0), H200).source()
        head = src.split('extern "C"', 1)[0]
        assert unfused.startswith(head) and x3.fold_table(c.m, c.r) in head


def test_compile_plan_loads_the_fused_entries(monkeypatch: pytest.MonkeyPatch) -> None:
    loaded: list[tuple[str, int]] = []

    def fake_load(text: str, entry: str, dynamic_smem_bytes: int = 0) -> SimpleNamespace:
        loaded.append((entry, dynamic_smem_bytes))
        assert f"\n{entry}(" in text
        return SimpleNamespace(entry=entry, smem=dynamic_smem_bytes, resources=f"{entry} resources", compile_s=0.5)

    monkeypatch.setattr(x3, "load_kernel", fake_load)
    monkeypatch.setattr(tc, "load_kernel", fake_load)
    config = Config(4, 32, 64, 16, 2, 4, 3, 5)
    fused = x3.plan(ALEXNET_CONV2, dataclasses.replace(config, fuse=1), H200)
    kernels = x3.compile_plan(fused)
    assert isinstance(kernels, x3.FusedKernels)
    assert loaded == [("winograd_input", 0), (x3.FUSED_ENTRY, fused.smem_bytes)]
    assert (kernels.input.entry, kernels.gemm.entry) == FUSED_ENTRY_NAMES
    assert kernels.resources == f"{x3.FUSED_ENTRY} resources" and kernels.compile_s == 1.0   # the fused kernel's
    loaded.clear()
    unfused = x3.compile_plan(x3.plan(ALEXNET_CONV2, config, H200))
    assert isinstance(unfused, x3.UnfusedKernels)
    assert [entry for entry, _ in loaded] == list(ENTRY_NAMES)


@pytest.mark.parametrize(("problem", "config"), [
    (ALEXNET_CONV2, Config(4, 32, 64, 32, 2, 4, 4, 5, fuse=1)),
    (THREE, Config(2, 32, 64, 16, 2, 4, 4, 3, fuse=1)),
    (SEVEN, Config(2, 64, 64, 16, 2, 2, 3, 7, fuse=1)),
], ids=("alexnet_conv2", "resnet50_3x3", "7x7"))
def test_prepared_launch_of_a_fused_plan(problem: ConvProblem, config: Config, enabled: None) -> None:
    """Two launches: the input transform (x -> V at workspace + 0), then the fused kernel (U = filters, V, y)."""
    pl = x3.plan(problem, config, H200)
    src = describe(problem, config, H200)
    assert src.operands == ("x", "filters", "y", "workspace") and src.workspace_bytes == pl.workspace_bytes
    transform, step = src.steps
    assert [transform["entry"], step["entry"]] == list(FUSED_ENTRY_NAMES)
    assert transform["grid"] == list(pl.input_grid) and transform["block"] == [256, 1, 1]
    assert transform["pointers"] == ["x", "workspace"] and transform["dynamic_smem_bytes"] == 0
    assert transform["int_args"] == [problem.C, problem.H, problem.W, problem.pad_h, problem.pad_w, pl.tiles_p,
                                     pl.tiles_q, pl.tiles, pl.cp, pl.tp]
    assert step["grid"] == list(pl.grid) == [pl.tp // config.tile_t, pl.kp // config.tile_k, 1]
    assert step["block"] == [config.threads, 1, 1]
    assert step["dynamic_smem_bytes"] == pl.smem_bytes == tc.smem_bytes(config)
    assert step["pointers"] == ["filters", "workspace", "y"]                          # U, V at offset 0, y
    assert step["int_args"] == [pl.cp, pl.kp, pl.tp, problem.K, problem.P, problem.Q, pl.tiles_p, pl.tiles_q,
                                pl.tiles]
    # one module: both entries from the plan's source
    assert [k.entry for k in src.kernels] == list(FUSED_ENTRY_NAMES)
    assert {k.source for k in src.kernels} == {pl.source()}
    assert transform["source_sha256"] == step["source_sha256"]


# ---- the model of fused plans --------------------------------------------------------------------------------------
@dataclasses.dataclass(frozen=True, slots=True)
class NoFold(Config):
    """The same config without the fold's arithmetic (no family: not registered for config keys)."""

    family = ""

    @property
    def output_registers(self) -> int:
        return 0


def launches(pl: x3.Winograd3xTf32Plan) -> float:
    """The launch overheads in the model's time: time − transforms − max(issue, L2, GEMM DRAM), in launches (the
    transforms' DRAM words: x, V stores, M loads, y)."""
    pred = tc_model.predict(pl, H200)
    t = x3.traffic_words(pl)
    transforms = 4 * (pl.problem.input_elements + t["v_store"] + t["m_load"] + t["output"]) / (
        H200.copy_bandwidth_bytes_per_s)
    rest = pred.time_s - transforms - max(pred.issue_s, pred.l2_s, pred.dram_s - transforms)
    return rest / LAUNCH_OVERHEAD_S


def test_the_model_of_fused_plans(enabled: None) -> None:
    """No M in DRAM or L2, the fold on the fp32 pipes, two launches; finite."""
    spec = get_spec(x3.FAMILY)
    bw = H200.copy_bandwidth_bytes_per_s
    checked = 0
    for problem in LAYERS:
        for pl in x3.enumerate_plans(problem, H200):
            if not pl.fused:
                continue
            c = pl.config
            twin = x3.plan(problem, dataclasses.replace(c, fuse=0), H200)
            fused, unfused = tc_model.predict(pl, H200), tc_model.predict(twin, H200)
            assert math.isfinite(fused.time_s) and 0 < fused.time_s < 1.0 and spec.predict_s(pl, H200) == fused.time_s
            m_words = x3.traffic_words(twin)
            assert fused.dram_s < unfused.dram_s, c.key()
            assert unfused.dram_s - fused.dram_s == pytest.approx(4 * (m_words["m_store"] + m_words["m_load"]) / bw,
                                                                  rel=1e-9)
            assert fused.l2_s < unfused.l2_s
            # the fold: ⌈waves⌉ · α² · 2·outputs·threads of every resident block / the fp32 ceiling per SM
            no_fold = tc_model.predict(dataclasses.replace(pl, config=NoFold(**dataclasses.asdict(c))), H200)
            fold = (math.ceil(fused.waves) * c.points * 2 * c.output_registers * c.threads * fused.blocks_per_sm
                    / (H200.fp32_peak_flops_per_s / H200.sm_count))
            assert fused.issue_s - no_fold.issue_s == pytest.approx(fold, rel=1e-9) and fold > 0
            assert (no_fold.dram_s, no_fold.l2_s, no_fold.waves) == (fused.dram_s, fused.l2_s, fused.waves)
            assert fused.waves == pytest.approx(pl.blocks / (H200.sm_count * fused.blocks_per_sm))
            if checked % 7 == 0:
                assert launches(pl) == pytest.approx(2.0) and launches(twin) == pytest.approx(3.0)
            checked += 1
    assert checked > 300


# ---- the split the GEMM body computes, emulated --------------------------------------------------------------------
def tf32_rna(v: np.ndarray) -> np.ndarray:
    """``cvt.rna.tf32.f32``: round float32 to 10 mantissa bits, to nearest, ties away from zero (low 13 bits 0)."""
    bits = np.ascontiguousarray(v, dtype=np.float32).view(np.uint32)
    return ((bits + np.uint32(0x1000)) & np.uint32(0xFFFFE000)).view(np.float32)


def split(v: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """``tf32_split<3>``: hi = rna(v), lo = rna(v − hi) (the subtraction in float32)."""
    hi = tf32_rna(v)
    return hi, tf32_rna((v - hi).astype(np.float32))


def test_the_split_keeps_fp32_accuracy() -> None:
    rng = np.random.default_rng(3)
    v = (rng.standard_normal(100_000) * np.exp2(rng.integers(-20, 20, 100_000))).astype(np.float32)
    hi, lo = split(v)
    exact = v.astype(np.float64)
    assert np.all(np.abs(hi - exact) <= np.exp2(-11) * np.abs(exact))
    assert np.all(np.abs(hi.astype(np.float64) + lo - exact) <= np.exp2(-21) * np.abs(exact))
    # a GEMM of C = 256 in float32 chunks of 8 (the MMA's k): 3xTF32 within 4× fp32's error, one product far above
    u, w = rng.standard_normal((256, 64)).astype(np.float32), rng.standard_normal((256, 64)).astype(np.float32)
    ref = u.astype(np.float64).T @ w.astype(np.float64)
    (uh, ul), (wh, wl) = split(u), split(w)

    def accumulate(terms: list[tuple[np.ndarray, np.ndarray]]) -> float:
        acc = np.zeros((64, 64), dtype=np.float32)
        for c0 in range(0, 256, 8):
            for a, b in terms:      # each MMA: exact TF32 products summed, rounded into the fp32 accumulator
                acc = (acc + a[c0:c0 + 8].astype(np.float64).T @ b[c0:c0 + 8].astype(np.float64)).astype(np.float32)
        return float(np.linalg.norm(acc - ref) / np.linalg.norm(ref))

    fp32, three, one = accumulate([(u, w)]), accumulate([(ul, wh), (uh, wl), (uh, wh)]), accumulate([(uh, wh)])
    assert three <= 4 * fp32 and one > 100 * fp32, (fp32, three, one)


# ---- nvcc ------------------------------------------------------------------------------------------------------------
def unfused_ranked(problem: ConvProblem) -> list[x3.Winograd3xTf32Plan]:
    return [pl for pl in ranked(problem) if not pl.fused]


def top_fused(problem: ConvProblem, m: int | None = None) -> Config:
    """The model's fastest fused config for ``problem`` (of F(m×m) where given)."""
    return next(pl.config for pl in ranked(problem) if pl.fused and m in (None, pl.config.m))


def _compiled_configs() -> list[tuple[ConvProblem, Config]]:
    """Unfused: the model's top 3 on AlexNet conv2 and on a 7×7 layer, its top 1 on resnet50's 3×3 256 layer, and the
    widest warp tile (128 × 256, 2 × 4 warps) of each. Fused: the model's top fused config of each layer, of F(4×4)
    too where the layer has it (AlexNet conv2, resnet50's), and the widest fused warp tile (MI·NI = 8, F(2×2))."""
    chosen = [(ALEXNET_CONV2, pl.config) for pl in unfused_ranked(ALEXNET_CONV2)[:3]]
    chosen += [(SEVEN, pl.config) for pl in unfused_ranked(SEVEN)[:3]]
    chosen += [(THREE, unfused_ranked(THREE)[0].config)]
    chosen += [(ALEXNET_CONV2, Config(4, 128, 256, 16, 2, 4, 3, 5)), (SEVEN, Config(2, 128, 256, 16, 2, 4, 3, 7)),
               (THREE, Config(4, 128, 256, 16, 2, 4, 3, 3))]
    fused = [(ALEXNET_CONV2, top_fused(ALEXNET_CONV2, 4)), (ALEXNET_CONV2, top_fused(ALEXNET_CONV2, 2)),
             (THREE, top_fused(THREE, 4)), (THREE, top_fused(THREE, 2)), (SEVEN, top_fused(SEVEN)),
             (THREE, Config(2, 64, 64, 16, 2, 2, 3, 3, fuse=1))]
    return chosen + list(dict.fromkeys(fused))


NVCC = pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH (no GPU needed)")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[x3.Winograd3xTf32Plan, NvccResult]]:
    """Every representative config's plan and nvcc result (sm_90), compiled in parallel."""
    out = tmp_path_factory.mktemp("cubins_3xtf32")
    plans = [x3.plan(problem, config, H200) for problem, config in _compiled_configs()]
    with ThreadPoolExecutor(max_workers=6) as pool:
        results = list(pool.map(lambda pl: nvcc_compile(pl.source(), "sm_90", out), plans))
    return {pl.config.key(): (pl, res) for pl, res in zip(plans, results, strict=True)}


@NVCC
def test_representative_tiles_compile_without_spills(compiled: dict[str, tuple[x3.Winograd3xTf32Plan, NvccResult]]
                                                     ) -> None:
    unfused = {key: found for key, found in compiled.items() if not found[0].fused}
    assert len(unfused) >= 8
    assert {(pl.config.m, pl.config.r) for pl, _ in unfused.values()} == {(4, 3), (4, 5), (2, 7)}
    assert sum(pl.config.r == 3 for pl, _ in unfused.values()) == 2
    limit = H200.smem_per_block_bytes - H200.smem_reserved_per_block_bytes
    for key, (pl, result) in unfused.items():
        assert set(result.resources) == set(ENTRY_NAMES), key
        for entry, res in result.resources.items():
            assert not res.spills, f"{key} {entry}: {res}"
            assert res.num_regs <= 255, f"{key} {entry}: {res.num_regs}"
        res = result.resources[x3.ENTRY]
        assert res.num_regs <= min(255, 65536 // pl.config.threads), f"{key}: {res.num_regs}"
        assert abs(res.num_regs - pl.regs_estimate) <= 32, f"{key}: {res.num_regs} vs {pl.regs_estimate}"
        assert res.static_smem_bytes == 0 and pl.smem_bytes <= limit, f"{key}: {pl.smem_bytes}"


def _mma_count(text: str, tmp: Path) -> int:
    """mma.sync instructions in the PTX of ``text`` (sm_90): only the GEMM entry issues them."""
    src, ptx = tmp / "k.cu", tmp / "k.ptx"
    src.write_text(text)
    subprocess.run(["nvcc", *NVRTC_OPTIONS, "-arch=sm_90", "-ptx", str(src), "-o", str(ptx)], check=True,
                   capture_output=True)
    return len(re.findall(r"\bmma\.sync\.aligned\.m16n8k8\.row\.col\.f32\.tf32\.tf32\.f32\b", ptx.read_text()))


@NVCC
def test_the_gemm_issues_three_mmas_per_term_of_the_tf32_block(tmp_path: Path) -> None:
    fields = (64, 128, 16, 2, 4, 3)
    one = tc.plan(THREE.replace(math="tf32"), tc.WinogradUnfusedTf32Config(2, *fields), H200)
    mi, ni = tc.mma_tiles(one.config)
    n_one = _mma_count(one.source(), tmp_path)
    assert n_one == mi * ni * (16 // 8)                  # the chunk's k8 steps, unrolled
    for problem in (ALEXNET_CONV2, THREE):               # the transforms add none, r = 3 or 5
        three = x3.plan(problem, Config(4, *fields, problem.R), H200)
        assert _mma_count(three.source(), tmp_path) == 3 * n_one, problem.key()


@NVCC
def test_fused_tiles_compile_without_spills_near_the_estimate(
        compiled: dict[str, tuple[x3.Winograd3xTf32Plan, NvccResult]]) -> None:
    """The fused kernel holds 4·MI·NI·m² outputs beside the accumulators: ptxas keeps them in registers (no spills, at
    most 255, within 48 of :func:`regs_estimate`, which counts them) and uses no static shared memory."""
    fused = {key: found for key, found in compiled.items() if found[0].fused}
    assert 4 <= len(fused) <= 6
    assert {(pl.config.m, pl.config.r) for pl, _ in fused.values()} == {(2, 3), (4, 3), (2, 5), (4, 5), (2, 7)}
    assert max(pl.config.output_registers for pl, _ in fused.values()) == x3.MAX_FUSED_OUTPUTS
    limit = H200.smem_per_block_bytes - H200.smem_reserved_per_block_bytes
    for key, (pl, result) in fused.items():
        assert set(result.resources) == set(FUSED_ENTRY_NAMES), key
        for entry, res in result.resources.items():
            assert not res.spills, f"{key} {entry}: {res}"
            assert res.num_regs <= 255 and res.static_smem_bytes == 0, f"{key} {entry}: {res}"
        res = result.resources[x3.FUSED_ENTRY]
        assert res.num_regs <= min(255, 65536 // pl.config.threads), f"{key}: {res.num_regs}"
        assert abs(res.num_regs - pl.regs_estimate) <= 48, f"{key}: {res.num_regs} vs {pl.regs_estimate}"
        assert pl.regs_estimate == tc.regs_estimate(pl.config) and pl.smem_bytes <= limit, key
