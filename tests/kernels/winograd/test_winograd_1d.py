"""The 1-D Winograd family (``winograd_unfused_1d``: 1×r and r×1 filters) without a GPU: the 1-D F(m, r) transforms
exact in rational arithmetic, an fp32 emulation within the family's gate, the float64 model of the dataflow against
direct convolution, the 2-D families' CUDA text unchanged, the plan (validation, per-axis tiles), the traffic formula
against a replay of the three kernels, traffic ≥ the bound, the space, the registry row, and nvcc compile checks."""

from __future__ import annotations

from fractions import Fraction

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.errors import InvalidConfig
from convtune.kernels.compile import nvcc_available
from convtune.kernels.reference import conv2d_reference
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.winograd.transforms import (
    POINTS_1D,
    cook_toom_1d,
    device_code_1d,
    matrices_1d,
    winograd_axis_conv2d_numpy,
)
from convtune.kernels.winograd.unfused import dram_words, traffic_words
from convtune.kernels.winograd_1d.launcher import (
    ENTRY,
    FAMILY,
    FILTER_ENTRY,
    TOLERANCE,
    Winograd1dConfig,
    enumerate_plans,
    filter_layout,
    filter_source,
    filters_key,
    grid_size,
    onchip_words,
    plan,
    supports,
    total_traffic_words,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from tests.kernels.winograd.test_winograd_unfused import simulate  # replays the three kernels for any tile

H200 = MachineModel.preset("h200")
MR = [(m, r) for r in sorted(POINTS_1D) for m in sorted(POINTS_1D[r])]
ROW = "N=16 C=160 H=17 W=17 K=160 R=1 S=7 pad_h=0 pad_w=3"      # Inception-v3 Mixed_6c 1×7
COL = "N=8 C=128 H=17 W=17 K=192 R=7 S=1 pad_h=3 pad_w=0"       # Inception-v3 Mixed_6b 7×1
SMALL = [Winograd1dConfig(m=2, tile_k=32, tile_t=32, chunk_c=8, thread_k=4, thread_t=4, stages=2, r=7, along_w=1),
         Winograd1dConfig(m=4, tile_k=32, tile_t=64, chunk_c=16, thread_k=4, thread_t=8, stages=3, r=7, along_w=0),
         Winograd1dConfig(m=6, tile_k=64, tile_t=32, chunk_c=8, thread_k=8, thread_t=4, stages=4, r=3, along_w=1),
         Winograd1dConfig(m=4, tile_k=64, tile_t=32, chunk_c=8, thread_k=8, thread_t=4, stages=3, r=5, along_w=0)]


def _problem(cfg: Winograd1dConfig, n: int, c: int, k: int, h: int, w: int, pad: int) -> ConvProblem:
    """A problem of cfg's filter (1×r along W or r×1 along H) with ``pad`` along the filter's axis."""
    if cfg.along_w:
        return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=cfg.r, pad_h=0, pad_w=pad)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=cfg.r, S=1, pad_h=pad, pad_w=0)


@pytest.mark.parametrize(("m", "r"), MR)
def test_one_dimensional_identity_is_exact(m: int, r: int) -> None:
    """y = Aᵀ[(G g) ⊙ (Bᵀ d)] equals the correlation y_i = Σ_k g_k d_{i+k} of r taps in exact arithmetic."""
    at, g, bt = cook_toom_1d(m, r)
    alpha = m + r - 1
    rng = np.random.default_rng(m * 10 + r)
    for _ in range(20):
        d = [Fraction(int(v)) for v in rng.integers(-9, 10, alpha)]
        taps = [Fraction(int(v), 7) for v in rng.integers(-9, 10, r)]
        gg = [sum(g[j][k] * taps[k] for k in range(r)) for j in range(alpha)]
        bd = [sum(bt[j][k] * d[k] for k in range(alpha)) for j in range(alpha)]
        y = [sum(at[i][j] * gg[j] * bd[j] for j in range(alpha)) for i in range(m)]
        assert y == [sum(taps[k] * d[i + k] for k in range(r)) for i in range(m)]


@pytest.mark.parametrize(("m", "r"), MR)
def test_fp32_emulation_stays_well_inside_the_gate(m: int, r: int) -> None:
    """The kernels' arithmetic in fp32 (U rounded from float64, V, the C-sum and the output transform in fp32) on
    C = K = 64 normal inputs: relative error ≤ TOLERANCE / 20 (measured 1.3e-7 to 2.0e-6)."""
    at, g, bt = (a.astype(np.float32) if i != 1 else a for i, a in enumerate(matrices_1d(m, r)))
    alpha, tiles, c, k = m + r - 1, 2000, 64, 64
    rng = np.random.default_rng(m * 10 + r)
    d, w = rng.standard_normal((tiles, c, alpha)), rng.standard_normal((k, c, r))
    ref = np.einsum("tcir,kcr->tki", np.stack([d[:, :, i:i + r] for i in range(m)], axis=2), w)
    u = np.einsum("ar,kcr->akc", g, w).astype(np.float32)
    v = np.einsum("ab,tcb->atc", bt, d.astype(np.float32))
    y = np.einsum("ia,atk->tki", at, np.einsum("akc,atc->atk", u, v))
    err = np.linalg.norm(y - ref) / np.linalg.norm(ref)
    assert y.dtype == np.float32 and 0 < err <= TOLERANCE / 20, err


def test_unprovided_tiles_are_refused() -> None:
    with pytest.raises(ValueError, match="F\\(6,7\\) is not provided"):
        cook_toom_1d(6, 7)


@settings(max_examples=60, deadline=None)
@given(mr=st.sampled_from(MR), along_w=st.booleans(), n=st.integers(1, 2), c=st.integers(1, 4), k=st.integers(1, 3),
       h=st.integers(1, 12), w=st.integers(1, 12), pad=st.integers(0, 7), pad_across=st.integers(0, 2))
def test_float64_model_equals_direct_convolution(mr: tuple[int, int], along_w: bool, n: int, c: int, k: int, h: int,
                                                 w: int, pad: int, pad_across: int) -> None:
    """Padding along the filter's axis up to r (tiles of padding only included) and across it (rows of zeros)."""
    m, r = mr
    if (w if along_w else h) + 2 * pad < r:
        return
    rng = np.random.default_rng(n * 1000 + c * 100 + h * 10 + w)
    x = rng.standard_normal((n, c, h, w))
    wt = rng.standard_normal((k, c, 1, r) if along_w else (k, c, r, 1))
    pads = (pad_across, pad) if along_w else (pad, pad_across)
    y = winograd_axis_conv2d_numpy(x, wt, m, *pads)
    ref = conv2d_reference(x, wt, padding=pads)
    assert y.shape == ref.shape
    assert np.abs(y - ref).max() <= 1e-10 * max(1.0, float(np.abs(ref).max()))


def test_device_code_and_filter_source() -> None:
    code = device_code_1d(4, 7)
    assert code.startswith("// 1-D F(4,7), points 0, -1, 1, 1/2, -1/2, 2, -2, 3/2, -2/3")
    assert "wino1_input_transform(const float (&in)[10], float (&out)[10])" in code
    assert "wino1_output_transform(const float (&in)[10], float (&out)[4])" in code
    src = filter_source(2, 7)
    assert "const double G[8][7]" in src and "winograd_filter_body_1d<8, 7>(w, U" in src and FILTER_ENTRY in src
    row = plan(ConvProblem.parse(ROW), Winograd1dConfig(), H200).source()
    assert "winograd_input_body_1d<4, 7, true>" in row and "winograd_output_body_1d<4, 7, true>" in row
    col = plan(ConvProblem.parse(COL), Winograd1dConfig(along_w=0), H200).source()
    assert "winograd_input_body_1d<4, 7, false>" in col


@settings(max_examples=40, deadline=None)
@given(cfg=st.sampled_from(SMALL), n=st.integers(1, 2), ch=st.integers(1, 20), k=st.integers(1, 40),
       h=st.integers(1, 13), w=st.integers(1, 13), pad=st.integers(0, 4))
def test_traffic_formula_equals_simulation(cfg: Winograd1dConfig, n: int, ch: int, k: int, h: int, w: int,
                                           pad: int) -> None:
    if (w if cfg.along_w else h) + 2 * pad < cfg.r:
        return
    pl = plan(_problem(cfg, n, ch, k, h, w, pad), cfg, H200)
    assert pl.config.points == cfg.m + cfg.r - 1
    assert traffic_words(pl) == simulate(pl)


@pytest.mark.parametrize("key", [ROW, COL, "N=8 C=384 H=8 W=8 K=384 R=1 S=3 pad_w=1",
                                 "N=8 C=384 H=8 W=8 K=384 R=3 S=1 pad_h=1", "N=2 C=7 H=1 W=1 K=9 R=1 S=7 pad_w=3",
                                 "N=3 C=5 H=9 W=2 K=7 R=7 S=1 pad_h=6", "N=1 C=3 H=5 W=5 K=4 R=5 S=1 pad_h=2"])
def test_every_config_moves_at_least_the_lower_bound(key: str) -> None:
    """Every valid config, padding-dominated maps included: modelled traffic and DRAM words ≥ the bound, which is the
    problem's padding-aware compulsory traffic."""
    problem = ConvProblem.parse(key)
    spec = get_spec(FAMILY)
    checked = 0
    for pl in enumerate_plans(problem, H200):
        bound = spec.bound_words(pl, onchip_words(pl))
        assert bound == problem.compulsory_elements
        assert total_traffic_words(pl) >= bound and dram_words(pl) >= bound, pl.config.key()
        checked += 1
    assert checked >= 5


@pytest.mark.parametrize(("field", "cfg", "key"), [
    ("problem", Winograd1dConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=7 stride=2 pad_w=3"),
    ("problem", Winograd1dConfig(), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("problem", Winograd1dConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=7 dilation=2 pad_w=6"),
    ("problem", Winograd1dConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=9 pad_w=4"),
    ("problem", Winograd1dConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=1"),
    ("r", Winograd1dConfig(r=5), "N=1 C=8 H=9 W=9 K=8 R=1 S=7 pad_w=3"),
    ("along_w", Winograd1dConfig(along_w=0), "N=1 C=8 H=9 W=9 K=8 R=1 S=7 pad_w=3"),
    ("m", Winograd1dConfig(m=6), "N=1 C=8 H=9 W=9 K=8 R=1 S=7 pad_w=3"),
    ("m", Winograd1dConfig(m=3, r=3), "N=1 C=8 H=9 W=9 K=8 R=1 S=3 pad_w=1"),
    ("thread_k", Winograd1dConfig(thread_k=6), ROW),
    ("stages", Winograd1dConfig(stages=5), ROW),
    ("chunk_c", Winograd1dConfig(chunk_c=64), ROW),
])
def test_invalid_configs_name_the_field(field: str, cfg: Winograd1dConfig, key: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(ConvProblem.parse(key), cfg, H200)
    assert info.value.field == field


def test_plan_geometry() -> None:
    row = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=1 S=7 pad_w=3"), Winograd1dConfig(), H200)
    assert (row.tiles_p, row.tiles_q, row.tiles) == (9, 3, 54)      # 1×4 tiles: 9 rows × ⌈11/4⌉ per image
    assert (row.tp, row.cp, row.kp) == (128, 8, 64)
    assert row.grid == (1, 1, 10)                                   # α = 10 GEMMs
    assert row.workspace_bytes == 4 * 10 * 128 * (8 + 64)
    col = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=7 S=1 pad_h=3"), Winograd1dConfig(m=2, along_w=0), H200)
    assert (col.tiles_p, col.tiles_q) == (5, 11) and col.grid == (1, 1, 8)
    assert filters_key(row) != filters_key(col) != get_spec("winograd_unfused").launcher.filters_key(col)
    assert col.config.key().endswith(" r=7 along_w=0")
    assert filter_layout(row, 0).words == 10 * 8 * 64


def test_space_registry_row_and_model() -> None:
    problem = ConvProblem.parse(ROW)
    plans = list(enumerate_plans(problem, H200))
    assert 0 < len(plans) <= grid_size(problem)
    assert {pl.config.m for pl in plans} == {2, 4}
    assert supports(problem) and supports(ConvProblem.parse(COL))
    assert not supports(ConvProblem.parse("N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"))
    assert FAMILY + ".fwd" in [s.kind for s in specs_for(problem)]
    spec = get_spec(FAMILY)
    assert spec.chosen_for(problem)                            # in the untuned choice, strict fp32 only
    assert not spec.chosen_for(problem.replace(math="tf32"))
    best = min(plans, key=lambda pl: spec.predict_s(pl, H200))
    # 2.8× fewer multiplications: the model's best F(4,7) plan beats its best direct plan on the 1×7 layer
    direct = get_spec("direct")
    direct_best = min(direct.predict_s(pl, H200) for pl in direct.enumerate_plans(problem, H200))
    assert best.config.m == 4 and spec.predict_s(best, H200) < direct_best
    assert [name for name, _, _ in spec.floor_work(problem, 1 << 14)] == ["F(2,7)", "F(4,7)"]
    three = ConvProblem.parse("N=8 C=384 H=8 W=8 K=384 R=3 S=1 pad_h=1")
    assert {pl.config.m for pl in enumerate_plans(three, H200)} == {2, 4, 6}


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH")
@pytest.mark.parametrize("cfg", [*SMALL, Winograd1dConfig(),
                                 Winograd1dConfig(m=4, tile_k=128, tile_t=128, chunk_c=16, stages=4, along_w=0)])
def test_nvcc_compiles_all_three_entries_without_spills(cfg: Winograd1dConfig, tmp_path) -> None:
    from convtune.kernels.compile import nvcc_compile
    from convtune.kernels.winograd.unfused import ENTRIES

    pl = plan(_problem(cfg, 4, 64, 64, 28, 28, cfg.r // 2), cfg, H200)
    result = nvcc_compile(pl.source(), "sm_90", tmp_path)
    assert set(result.resources) == set(ENTRIES) and ENTRY in ENTRIES
    for entry, res in result.resources.items():
        assert not res.spills, f"{entry}: {result.log}"
        assert res.num_regs <= 255


@pytest.mark.skipif(not nvcc_available(), reason="needs nvcc on PATH")
@pytest.mark.parametrize(("m", "r"), MR)
def test_filter_transform_compiles_without_spills(m: int, r: int, tmp_path) -> None:
    from convtune.kernels.compile import nvcc_compile

    res = nvcc_compile(filter_source(m, r), "sm_90", tmp_path).resources[FILTER_ENTRY]
    assert not res.spills, f"F({m},{r}): {res}"
    assert res.num_regs <= 255 and res.static_smem_bytes == 0
