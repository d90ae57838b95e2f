"""The large-filter Winograd family (``winograd_unfused_large``: 5×5, 7×7) without a GPU: F(m, 5) and F(2, 7)
transforms exact in rational arithmetic, the float64 model of the dataflow against direct convolution, the CUDA text of
the 3×3 families unchanged, the plan (validation, padded sizes), the traffic formula against a simulation of the three
kernels, traffic ≥ the Winograd bound, the space, the registry row, and nvcc compile checks of every entry."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.bounds.winograd import winograd_cdag_bound
from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available
from convtune.kernels.reference import conv2d_reference
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.winograd import filters
from convtune.kernels.winograd.transforms import POINTS_BY_R, cook_toom, device_code, winograd_conv2d_numpy
from convtune.kernels.winograd.unfused import dram_words, traffic_words
from convtune.kernels.winograd_large.launcher import (
    ENTRY,
    FAMILY,
    WinogradLargeConfig,
    enumerate_plans,
    filters_key,
    grid_size,
    onchip_words,
    plan,
    supports,
    tolerance,
    total_traffic_words,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from tests.kernels.winograd.test_winograd_unfused import simulate  # replays the three kernels for any α

H200 = MachineModel.preset("h200")
SMALL = [WinogradLargeConfig(m=2, tile_k=32, tile_t=32, chunk_c=8, thread_k=4, thread_t=4, stages=2),
         WinogradLargeConfig(m=4, tile_k=32, tile_t=64, chunk_c=16, thread_k=4, thread_t=8, stages=3),
         WinogradLargeConfig(m=4, tile_k=64, tile_t=32, chunk_c=8, thread_k=8, thread_t=4, stages=4),
         WinogradLargeConfig(m=2, tile_k=64, tile_t=32, chunk_c=8, thread_k=8, thread_t=4, stages=3, r=7)]
KEY = "N=1 C=8 H=9 W=9 K=8 R=5 S=5 pad=2"
ALEXNET_CONV2 = "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2"


MR = [(m, r) for r in (5, 7) for m in sorted(POINTS_BY_R[r])]


@pytest.mark.parametrize(("m", "r"), MR)
def test_one_dimensional_identity_is_exact(m: int, r: int) -> None:
    """y = Aᵀ[(G g) ⊙ (Bᵀ d)] equals the correlation y_i = Σ_k g_k d_{i+k} of r taps in exact arithmetic."""
    at, g, bt = cook_toom(m, r)
    alpha = m + r - 1
    rng = np.random.default_rng(m)
    for _ in range(20):
        d = [Fraction(int(v)) for v in rng.integers(-9, 10, alpha)]
        taps = [Fraction(int(v), 7) for v in rng.integers(-9, 10, r)]
        gg = [sum(g[j][k] * taps[k] for k in range(r)) for j in range(alpha)]
        bd = [sum(bt[j][k] * d[k] for k in range(alpha)) for j in range(alpha)]
        y = [sum(at[i][j] * gg[j] * bd[j] for j in range(alpha)) for i in range(m)]
        assert y == [sum(taps[k] * d[i + k] for k in range(r)) for i in range(m)]


def test_unprovided_tiles_are_refused() -> None:
    with pytest.raises(ValueError, match="F\\(6,5\\) is not provided"):
        cook_toom(6, 5)
    with pytest.raises(ValueError, match="not provided"):
        cook_toom(4, 7)


@settings(max_examples=40, deadline=None)
@given(mr=st.sampled_from(MR), n=st.integers(1, 2), c=st.integers(1, 4), k=st.integers(1, 3),
       h=st.integers(1, 12), w=st.integers(1, 12), pad_h=st.integers(0, 6), pad_w=st.integers(0, 6))
def test_float64_model_equals_direct_convolution(mr: tuple[int, int], n: int, c: int, k: int, h: int, w: int,
                                                 pad_h: int, pad_w: int) -> None:
    m, r = mr
    if h + 2 * pad_h < r or w + 2 * pad_w < r:
        return
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    x, wt = rng.standard_normal((n, c, h, w)), rng.standard_normal((k, c, r, r))
    y = winograd_conv2d_numpy(x, wt, m, pad_h, pad_w)
    ref = conv2d_reference(x, wt, padding=(pad_h, pad_w))
    assert y.shape == ref.shape
    assert np.abs(y - ref).max() <= 1e-11 * max(1.0, float(np.abs(ref).max()))


def test_device_code_names_the_filter_size() -> None:
    code = device_code(4, 5)
    assert code.startswith("// F(4x4,5x5), points 0, -1, 1, 1/2, -1/2, 2, -2")
    assert "const float (&in)[8][8], float (&out)[8][8]" in code      # the input transform: α = 8
    assert "const float (&in)[8][8], float (&out)[4][4]" in code      # the output transform
    assert "const float (&in)[8][8], float (&out)[2][2]" in device_code(2, 7)


def test_filter_source_is_the_3x3_one_for_3x3_and_r_generic_otherwise() -> None:
    assert "winograd_filter_body<6>(w, U" in filters.source(4)
    five = filters.source(4, 5)
    assert "const double G[8][5]" in five and "winograd_filter_body_r<8, 5>(w, U" in five
    assert "winograd_filter_body_r<8, 7>(w, U" in filters.source(2, 7)


@settings(max_examples=30, deadline=None)
@given(cfg=st.sampled_from(SMALL), n=st.integers(1, 2), ch=st.integers(1, 20), k=st.integers(1, 40),
       h=st.integers(1, 13), w=st.integers(1, 13), pad=st.integers(0, 3))
def test_traffic_formula_equals_simulation(cfg: WinogradLargeConfig, n: int, ch: int, k: int, h: int, w: int,
                                           pad: int) -> None:
    if h + 2 * pad < cfg.r or w + 2 * pad < cfg.r:
        return
    pl = plan(ConvProblem(N=n, C=ch, H=h, W=w, K=k, R=cfg.r, S=cfg.r, pad_h=pad, pad_w=pad), cfg, H200)
    assert pl.config.alpha == cfg.m + cfg.r - 1
    assert traffic_words(pl) == simulate(pl)


@pytest.mark.parametrize("key", [ALEXNET_CONV2, "N=16 C=16 H=28 W=28 K=32 R=5 S=5 pad=2",
                                 "N=8 C=48 H=35 W=35 K=64 R=5 S=5 pad=2", "N=3 C=5 H=9 W=11 K=7 R=5 S=5 pad=4",
                                 "N=2 C=7 H=1 W=1 K=9 R=5 S=5 pad=2", "N=4 C=185 H=46 W=46 K=128 R=7 S=7 pad=3",
                                 "N=1 C=3 H=5 W=5 K=4 R=7 S=7 pad=3"])
def test_every_config_moves_at_least_the_lower_bound(key: str) -> None:
    """Every valid config: modelled traffic ≥ the CDAG bound at its own on-chip size; DRAM words ≥ compulsory."""
    problem = ConvProblem.parse(key)
    spec = get_spec(FAMILY)
    checked = 0
    for pl in enumerate_plans(problem, H200):
        assert total_traffic_words(pl) >= spec.bound_words(pl, onchip_words(pl)), pl.config.key()
        compulsory = winograd_cdag_bound(problem, 1 << 40, pl.config.m, pretransformed_filters=True).terms["compulsory"]
        assert dram_words(pl) >= compulsory
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("field", "cfg", "key"), [
    ("problem", WinogradLargeConfig(), "N=1 C=8 H=9 W=9 K=8 R=5 S=5 stride=2 pad=2"),
    ("problem", WinogradLargeConfig(), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("problem", WinogradLargeConfig(), "N=1 C=8 H=9 W=9 K=8 R=5 S=5 dilation=2 pad=4"),
    ("problem", WinogradLargeConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=5 pad_w=2"),
    ("problem", WinogradLargeConfig(), "N=1 C=8 H=19 W=19 K=8 R=9 S=9 pad=4"),
    ("r", WinogradLargeConfig(r=7), KEY),
    ("m", WinogradLargeConfig(m=4, r=7), "N=1 C=8 H=9 W=9 K=8 R=7 S=7 pad=3"),
    ("m", WinogradLargeConfig(m=3), KEY),
    ("m", WinogradLargeConfig(m=6), KEY),
    ("thread_k", WinogradLargeConfig(thread_k=6), KEY),
    ("stages", WinogradLargeConfig(stages=5), KEY),
    ("chunk_c", WinogradLargeConfig(chunk_c=64), KEY),
])
def test_invalid_configs_name_the_field(field: str, cfg: WinogradLargeConfig, key: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(ConvProblem.parse(key), cfg, H200)
    assert info.value.field == field


def test_plan_geometry() -> None:
    pl = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=5 S=5 pad=2"), WinogradLargeConfig(), H200)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles) == (3, 3, 18)          # F(4): ⌈9/4⌉ × ⌈11/4⌉ per image
    assert (pl.tp, pl.cp, pl.kp) == (128, 8, 64)
    assert pl.grid == (1, 1, 64)                                     # α² = 64 GEMMs
    assert pl.workspace_bytes == 4 * 64 * 128 * (8 + 64)
    assert filters_key(pl) != get_spec("winograd_unfused").launcher.filters_key(pl)
    assert tolerance(pl) == 2e-4
    seven = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=7 S=7 pad=3"), WinogradLargeConfig(m=2, r=7), H200)
    assert seven.config.alpha == 8 and seven.grid == (1, 1, 64) and (seven.tiles_p, seven.tiles_q) == (5, 6)
    assert tolerance(seven) == 2e-4 and filters_key(seven) != filters_key(pl)
    assert seven.config.key().endswith(" r=7")


def test_space_registry_row_and_model() -> None:
    problem = ConvProblem.parse(ALEXNET_CONV2)
    plans = list(enumerate_plans(problem, H200))
    assert 0 < len(plans) <= grid_size(problem)
    assert {pl.config.m for pl in plans} == {2, 4}
    assert supports(problem) and not supports(ConvProblem.parse("N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"))
    assert FAMILY + ".fwd" in [s.kind for s in specs_for(problem)]
    assert FAMILY + ".fwd" not in [s.kind for s in specs_for(ConvProblem.parse("N=1 C=8 H=9 W=9 K=8 R=3 S=3"))]
    spec = get_spec(FAMILY)
    best = min(plans, key=lambda pl: spec.predict_s(pl, H200))
    # 6.25× fewer multiplications: the model's best F(4×4,5×5) plan beats its best direct plan on AlexNet conv2
    direct = get_spec("direct")
    direct_best = min(direct.predict_s(pl, H200) for pl in direct.enumerate_plans(problem, H200))
    assert best.config.m == 4 and spec.predict_s(best, H200) < direct_best
    names = [name for name, _, _ in spec.floor_work(problem, 1 << 14)]
    assert names == ["F(2x2,5x5)", "F(4x4,5x5)"]
    openpose = ConvProblem.parse("N=4 C=128 H=46 W=46 K=128 R=7 S=7 pad=3")
    assert {(pl.config.m, pl.config.r) for pl in enumerate_plans(openpose, H200)} == {(2, 7)}
    assert [name for name, _, _ in spec.floor_work(openpose, 1 << 14)] == ["F(2x2,7x7)"]


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH")
@pytest.mark.parametrize("cfg", [*SMALL, WinogradLargeConfig(),
                                 WinogradLargeConfig(m=4, tile_k=128, tile_t=128, chunk_c=16, stages=4)])
def test_nvcc_compiles_all_three_entries_without_spills(cfg: WinogradLargeConfig, tmp_path) -> None:
    from convtune.kernels.compile import nvcc_compile
    from convtune.kernels.winograd.unfused import ENTRIES

    pl = plan(ConvProblem(N=4, C=64, H=28, W=28, K=64, R=cfg.r, S=cfg.r, pad_h=cfg.r // 2, pad_w=cfg.r // 2), cfg,
              H200)
    result = nvcc_compile(pl.source(), "sm_90", tmp_path)
    assert set(result.resources) == set(ENTRIES) and ENTRY in ENTRIES
    for entry, res in result.resources.items():
        assert not res.spills, f"{entry}: {result.log}"
        assert res.num_regs <= 255


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH")
@pytest.mark.parametrize(("m", "r"), MR)
def test_filter_transform_compiles_without_spills(m: int, r: int, tmp_path) -> None:
    from convtune.kernels.compile import nvcc_compile

    res = nvcc_compile(filters.source(m, r), "sm_90", tmp_path).resources[filters.ENTRY]
    assert not res.spills, f"F({m},{r}): {res}"
    assert res.num_regs <= 255 and res.static_smem_bytes == 0
