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
block."""

from __future__ import annotations

import dataclasses
import re
import subprocess
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.compile import NVRTC_OPTIONS, NvccResult, nvcc_available, nvcc_compile
from convtune.kernels.config import parse_config_key
from convtune.kernels.describe import describe
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.winograd import launcher as wino
from convtune.kernels.winograd import unfused as wino_unfused
from convtune.kernels.winograd.space import plan_unfused
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
GEMM_FIELDS = ("tile_k", "tile_t", "chunk_c", "warps_k", "warps_t", "stages")


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, x3.FAMILY)


def gemm(config: tc.WinogradUnfusedTf32Config) -> tuple[int, ...]:
    return tuple(getattr(config, f) for f in GEMM_FIELDS)


def ranked(problem: ConvProblem) -> list[x3.Winograd3xTf32Plan]:
    """The family's plans for ``problem`` on the H200, fastest modelled first (ties in enumeration order)."""
    spec = get_spec(x3.FAMILY)
    return sorted(x3.enumerate_plans(problem, H200), key=lambda pl: spec.predict_s(pl, H200))


def test_the_family_runs_nothing_until_enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(experimental.ENV, raising=False)
    for problem in (*LAYERS, SMALL3):
        assert not x3.supports(problem) and x3.FAMILY not in {s.family for s in specs_for(problem)}
    monkeypatch.setenv(experimental.ENV, "winograd_unfused_tf32, winograd_unfused_large")   # not this family
    assert not x3.supports(ALEXNET_CONV2) and not x3.supports(THREE)
    monkeypatch.setenv(experimental.ENV, f"igemm_wgmma, {x3.FAMILY}")
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
    monkeypatch.setenv(experimental.ENV, "all")
    assert x3.supports(SEVEN) and x3.supports(THREE)


def test_space_is_the_tf32_gemm_block_with_the_fp32_familys_m_per_r() -> None:
    assert {r: sorted(points) for r, points in x3.POINTS.items()} == {3: [2, 4], 5: [2, 4], 7: [2]}
    three, five, seven = (x3.space(p).values for p in LAYERS)
    assert (three["m"], three["r"]) == ((2, 4), (3,))
    assert (five["m"], five["r"]) == ((2, 4), (5,)) and (seven["m"], seven["r"]) == ((2,), (7,))
    for values in (three, five, seven):
        assert {k: v for k, v in values.items() if k not in ("m", "r")} == tc.GEMM_VALUES
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
            assert pl.template_args() == (*gemm(pl.config), 3), pl.config.key()
            assert pl.config.alpha == pl.config.m + pl.config.r - 1
        for pl in plans[::41]:
            c, src = pl.config, pl.source()
            targs = ", ".join(map(str, pl.template_args()))
            assert f"winograd_tc_gemm_body<{targs}>(U, V, Mo, Cp, Kp, Tp)" in src and targs.endswith(", 3")
            assert c.r == problem.R and f"winograd_input_body_r<{c.m}, {c.r}>(x, V" in src
            assert f"winograd_output_body_r<{c.m}, {c.r}>(Mi, y" in src
            assert f"// F({c.m}x{c.m},{c.r}x{c.r})" in src and f"__launch_bounds__({c.threads})" in src
            assert all(f"\n{entry}(" in src for entry in ENTRY_NAMES)
            assert "#include" not in src and src.count("void tf32_split(") == 1   # each include expanded once
            assert f"winograd_input_body<{c.m}>(" not in src      # r = 3 too: the r-generic transforms, not the 3×3


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
    # the family's point: the model's best plan beats the fp32 unfused family's best of the same r (resnet50's 3×3
    # 256 layer: winograd_unfused; AlexNet conv2 and the 7×7 layer: winograd_unfused_large)
    for problem, family in ((THREE, "winograd_unfused"), (ALEXNET_CONV2, large.FAMILY), (SEVEN, large.FAMILY)):
        fp32 = get_spec(family)
        fp32_best = min(fp32.predict_s(pl, H200) for pl in fp32.enumerate_plans(problem, H200))
        assert spec.predict_s(ranked(problem)[0], H200) < fp32_best, (problem.key(), family)


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
            assert spec.onchip_words(pl) == pl.smem_bytes // 4 + pl.config.tile_k * pl.config.tile_t


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
        for pl in list(x3.enumerate_plans(problem, H200))[::17]:
            key = pl.config.key()
            assert key.startswith(f"{x3.FAMILY}.fwd ") and key.endswith(f" r={problem.R}")
            again = parse_config_key(key)
            assert type(again) is Config and again == pl.config and again.products == 3
    with pytest.raises(InvalidConfig) as err:
        parse_config_key(f"{x3.FAMILY}.fwd m=2 products=1")                            # not a field
    assert err.value.field == "products"


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
def _compiled_configs() -> list[tuple[ConvProblem, Config]]:
    """The model's top 3 on AlexNet conv2 and on a 7×7 layer, its top 1 on resnet50's 3×3 256 layer, and the widest
    warp tile (128 × 256, 2 × 4 warps) of each."""
    chosen = [(ALEXNET_CONV2, pl.config) for pl in ranked(ALEXNET_CONV2)[:3]]
    chosen += [(SEVEN, pl.config) for pl in ranked(SEVEN)[:3]]
    chosen += [(THREE, ranked(THREE)[0].config)]
    chosen += [(ALEXNET_CONV2, Config(4, 128, 256, 16, 2, 4, 3, 5)), (SEVEN, Config(2, 128, 256, 16, 2, 4, 3, 7)),
               (THREE, Config(4, 128, 256, 16, 2, 4, 3, 3))]
    return chosen


NVCC = pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH (no GPU needed)")


@pytest.fixture(scope="module")
def compiled(tmp_path_factory: pytest.TempPathFactory) -> dict[str, tuple[x3.Winograd3xTf32Plan, NvccResult]]:
    """Every representative config's plan and nvcc result (sm_90), compiled in parallel."""
    out = tmp_path_factory.mktemp("cubins_3xtf32")
    plans = [x3.plan(problem, config, H200) for problem, config in _compiled_configs()]
    with ThreadPoolExecutor(max_workers=4) as pool:
        results = list(pool.map(lambda pl: nvcc_compile(pl.source(), "sm_90", out), plans))
    return {pl.config.key(): (pl, res) for pl, res in zip(plans, results, strict=True)}


@NVCC
def test_representative_tiles_compile_without_spills(compiled: dict[str, tuple[x3.Winograd3xTf32Plan, NvccResult]]
                                                     ) -> None:
    assert len(compiled) >= 8
    assert {(pl.config.m, pl.config.r) for pl, _ in compiled.values()} == {(4, 3), (4, 5), (2, 7)}
    assert sum(pl.config.r == 3 for pl, _ in compiled.values()) == 2
    limit = H200.smem_per_block_bytes - H200.smem_reserved_per_block_bytes
    for key, (pl, result) in compiled.items():
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
