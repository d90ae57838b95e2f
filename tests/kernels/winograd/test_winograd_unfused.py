"""The unfused Winograd path's plan (validation, padded sizes, grids), its traffic formula against a
simulation of the three kernels' loads and stores, traffic ≥ the Winograd lower bound, the space, and
nvcc compile checks of all three entries."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.bounds.winograd import winograd_cdag_bound
from convtune.errors import InvalidConfig
from convtune.kernels.winograd.space import enumerate_unfused_plans, unfused_grid_size
from convtune.kernels.winograd.space import plan_unfused as plan
from convtune.kernels.winograd.unfused import (
    WinogradUnfusedConfig,
    WinogradUnfusedPlan,
    dram_words,
    onchip_words,
    total_traffic_words,
    traffic_words,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
SMALL = [WinogradUnfusedConfig(m=2, tile_k=32, tile_t=32, chunk_c=8, thread_k=4, thread_t=4, stages=2),
         WinogradUnfusedConfig(m=4, tile_k=32, tile_t=64, chunk_c=16, thread_k=4, thread_t=8, stages=3),
         WinogradUnfusedConfig(m=2, tile_k=64, tile_t=32, chunk_c=8, thread_k=8, thread_t=4, stages=4)]
KEY = "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"


def simulate(pl: WinogradUnfusedPlan) -> dict[str, int]:
    """Replay winograd_unfused.cu thread by thread and block by block (not the formula); tiles of m_h × m_w outputs
    from α_h × α_w windows (m × m and α × α in the 2-D families, 1 × m or m × 1 in the 1-D one)."""
    p, c = pl.problem, pl.config
    ah, aw, mh, mw = c.alpha_h, c.alpha_w, c.m_h, c.m_w
    words = dict.fromkeys(("input", "v_store", "filter", "v_load", "m_store", "m_load", "output"), 0)
    # input transform: one thread per (c, t) of Cp × Tp; live threads read the in-image part of the window
    for ch in range(pl.cp):
        for t in range(pl.tp):
            if t < pl.tiles and ch < p.C:
                tq, tp = t % pl.tiles_q, (t // pl.tiles_q) % pl.tiles_p
                h0, w0 = tp * mh - p.pad_h, tq * mw - p.pad_w
                words["input"] += sum(1 for i in range(ah) for j in range(aw)
                                      if 0 <= h0 + i < p.H and 0 <= w0 + j < p.W)
            words["v_store"] += ah * aw
    # GEMM: every block copies its BC×BK and BC×BT tiles per chunk, stores BK×BT
    gx, gy, gz = pl.grid
    for _ in range(gx * gy * gz):
        for _chunk in range(pl.cp // c.chunk_c):
            words["filter"] += 4 * (c.chunk_c * c.tile_k // 4)
            words["v_load"] += 4 * (c.chunk_c * c.tile_t // 4)
        words["m_store"] += c.tile_k * c.tile_t
    # output transform: one thread per (k, t) with t < T reads α_h·α_w and writes the in-range m_h × m_w pixels
    for _k in range(p.K):
        for t in range(pl.tiles):
            tq, tp = t % pl.tiles_q, (t // pl.tiles_q) % pl.tiles_p
            words["m_load"] += ah * aw
            words["output"] += sum(1 for i in range(mh) for j in range(mw)
                                   if tp * mh + i < p.P and tq * mw + j < p.Q)
    return words


@settings(max_examples=30, deadline=None)
@given(cfg=st.sampled_from(SMALL), n=st.integers(1, 2), ch=st.integers(1, 20), k=st.integers(1, 40),
       h=st.integers(1, 13), w=st.integers(1, 13), pad=st.integers(0, 2))
def test_traffic_formula_equals_simulation(cfg: WinogradUnfusedConfig, n: int, ch: int, k: int, h: int, w: int,
                                           pad: int) -> None:
    if h + 2 * pad < 3 or w + 2 * pad < 3:
        return
    pl = plan(ConvProblem(N=n, C=ch, H=h, W=w, K=k, R=3, S=3, pad_h=pad, pad_w=pad), cfg, H200)
    assert traffic_words(pl) == simulate(pl)


@pytest.mark.parametrize("key", [
    "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1", "N=1 C=64 H=224 W=224 K=64 R=3 S=3 pad=1",
    "N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1", "N=3 C=5 H=9 W=11 K=7 R=3 S=3 pad=2"])
@pytest.mark.parametrize("cfg", [*SMALL, WinogradUnfusedConfig()])
def test_traffic_is_at_least_the_winograd_lower_bound(key: str, cfg: WinogradUnfusedConfig) -> None:
    problem = ConvProblem.parse(key)
    pl = plan(problem, cfg, H200)
    block_bound = winograd_cdag_bound(problem, onchip_words(pl), cfg.m, pretransformed_filters=True)
    assert total_traffic_words(pl) >= block_bound.words
    # what reaches DRAM at best (x, U, V and M once, y) is still at least the compulsory traffic
    compulsory = winograd_cdag_bound(problem, 1 << 40, cfg.m, pretransformed_filters=True).terms["compulsory"]
    assert dram_words(pl) >= compulsory


@pytest.mark.parametrize(("field", "cfg", "key"), [
    ("problem", WinogradUnfusedConfig(), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 stride=2 pad=1"),
    ("problem", WinogradUnfusedConfig(), "N=1 C=8 H=9 W=9 K=8 R=1 S=1"),
    ("m", WinogradUnfusedConfig(m=6), KEY),
    ("thread_k", WinogradUnfusedConfig(thread_k=6), KEY),
    ("thread_t", WinogradUnfusedConfig(tile_t=36, thread_t=8), KEY),
    ("threads", WinogradUnfusedConfig(tile_k=32, tile_t=32, thread_k=8, thread_t=8), KEY),
    ("stages", WinogradUnfusedConfig(stages=1), KEY),
    ("stages", WinogradUnfusedConfig(stages=5), KEY),
    ("chunk_c", WinogradUnfusedConfig(chunk_c=64), KEY),
])
def test_invalid_configs_name_the_field(field: str, cfg: WinogradUnfusedConfig, key: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(ConvProblem.parse(key), cfg, H200)
    assert info.value.field == field


def test_plan_geometry() -> None:
    pl = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=3 S=3 pad=1"), WinogradUnfusedConfig(), H200)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles) == (3, 3, 18)          # F(4): ⌈9/4⌉ × ⌈11/4⌉ per image
    assert (pl.tp, pl.cp, pl.kp) == (128, 8, 64)
    assert pl.grid == (1, 1, 36)
    assert pl.input_grid == (1, 8, 1) and pl.output_grid == (1, 7, 1)
    assert pl.smem_bytes == 4 * 3 * 8 * (64 + 128)
    assert pl.workspace_bytes == 4 * 36 * 128 * (8 + 64)


def test_space_is_valid_and_bounded() -> None:
    problem = ConvProblem.parse("N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1")
    plans = list(enumerate_unfused_plans(problem, H200))
    assert 0 < len(plans) <= unfused_grid_size(problem)
    assert len({pl.config for pl in plans}) == len(plans)
    assert {pl.config.m for pl in plans} == {2, 4}
    assert all(64 <= pl.config.threads <= 256 for pl in plans)
    assert not list(enumerate_unfused_plans(ConvProblem.parse("N=1 C=8 H=9 W=9 K=8 R=3 S=3 stride=2"), H200))


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")
@pytest.mark.parametrize("cfg", [*SMALL, WinogradUnfusedConfig(),
                                 WinogradUnfusedConfig(m=4, tile_k=128, tile_t=128, chunk_c=16, stages=4)])
def test_nvcc_compiles_all_three_entries_without_spills(cfg: WinogradUnfusedConfig) -> None:
    from convtune.kernels.compile import nvcc_compile
    from convtune.kernels.winograd.unfused import ENTRIES

    pl = plan(ConvProblem.parse("N=4 C=64 H=28 W=28 K=64 R=3 S=3 pad=1"), cfg, H200)
    result = nvcc_compile(pl.source())
    assert set(result.resources) == set(ENTRIES)
    for entry, res in result.resources.items():
        assert res.local_bytes == 0 and not res.spills, f"{entry}: {result.log}"
        assert res.num_regs <= 255


@pytest.mark.parametrize("key", ["N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1", "N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1",
                                 "N=3 C=5 H=9 W=11 K=7 R=3 S=3 pad=2"])
def test_every_winograd_config_moves_at_least_the_lower_bound(key: str) -> None:
    """Both Winograd spaces, every valid config: modelled traffic ≥ the CDAG bound at its own on-chip size."""
    from convtune.kernels.registry import get_spec

    problem = ConvProblem.parse(key)
    checked = 0
    for family in ("winograd", "winograd_unfused"):
        spec = get_spec(family)
        for pl in spec.enumerate_plans(problem, H200):
            assert spec.traffic_words(pl) >= spec.bound_words(pl, spec.onchip_words(pl)), pl.config.key()
            checked += 1
    assert checked > 100
