"""The depthwise traffic model (``traffic.py``) against replays of the kernels' loops (``depthwise_sim.py``),
the fast kernel's dataflow emulated numerically against the float64 references, and the closed forms
(FLOPs, compulsory bytes) at the S4ConvD paper shape."""

from __future__ import annotations

import itertools
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from convtune.bounds import depthwise_lower_bound
from convtune.kernels.depthwise.configs import CONFIG_CLASSES_1D, MODE_ATOMIC, MODE_DETERMINISTIC
from convtune.kernels.depthwise.conv1d.plan import plan
from convtune.kernels.depthwise.conv1d.traffic import (
    causal_taps_per_row,
    compulsory_bytes,
    compulsory_words,
    flops,
    traffic_words,
)
from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_fwd_reference, dw1d_wgrad_reference
from convtune.kernels.depthwise.space import enumerate_plans
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depthwise_sim import emulate_fast, emulate_warp_reg, emulate_warp_reg_wgrad, sim_shared, sim_simple, sim_warp

H200 = MachineModel.preset("h200")
#: one SM: persistent grids then loop over several row groups per block
TINY = replace(H200, name="one-SM H200", sm_count=1)

SMALL = [ConvProblem.depthwise1d(*s) for s in
         ((3, 5, 13, 4), (2, 3, 7, 9), (1, 3, 7, 7), (4, 4, 40, 1), (5, 3, 50, 5), (2, 6, 64, 12), (7, 2, 9, 3))]


def _nonzero(d: dict[str, int]) -> dict[str, int]:
    return {k: v for k, v in d.items() if v}


def _configs(problem: ConvProblem, variant: str, path: str):
    cls = CONFIG_CLASSES_1D[(variant, path)]
    modes = [{"mode": MODE_DETERMINISTIC}, {"mode": MODE_ATOMIC}] if path == "wgrad" else [{}]
    if variant in ("naive", "coalesced"):
        fields = [{"threads": 64}]
    elif variant == "shared":
        fields = [{"rows": min(2, problem.N), "tile_l": min(8, problem.W), "threads": 64},
                  {"rows": problem.N, "tile_l": problem.W, "threads": 32}]
    elif variant == "warp":
        fields = [{"warps": 2, "outputs_per_lane": 1}, {"warps": 1, "outputs_per_lane": 2}]
        if path == "wgrad":
            fields = [dict(f, rows=min(3, problem.N)) for f in fields]
            fields += [{"warps": 2, "outputs_per_lane": 4, "lanes_per_row": 4, "design": 2},
                       {"warps": 1, "outputs_per_lane": 3, "lanes_per_row": 8, "design": 2}]
        else:
            fields += [{"warps": 2, "outputs_per_lane": 4, "lanes_per_row": 4},
                       {"warps": 1, "outputs_per_lane": 3, "lanes_per_row": 8}]
    else:
        L4 = -(-problem.W // 4) * 4
        fields = [{"rows": 32, "tile_l": min(L4, 64), "lanes_per_row": 1, "vec": 1},
                  {"rows": 16, "tile_l": 4, "lanes_per_row": 2, "vec": 1},
                  {"rows": 8, "tile_l": 8, "lanes_per_row": 4, "vec": 4 if problem.W % 4 == 0 else 1}]
    for f, m in itertools.product(fields, modes):
        yield cls(**f, **m)


CASES = [pytest.param(p, v, path, id=f"{v}-{path}-{p.key().replace(' ', '_')}")
         for p in SMALL for v in ("naive", "coalesced", "shared", "warp", "fast") for path in ("fwd", "dgrad", "wgrad")]
SIMS = {"naive": sim_simple, "coalesced": sim_simple, "shared": sim_shared,
        "warp": lambda pl: (emulate_warp_reg_wgrad(pl)[0] if pl.path == "wgrad" else emulate_warp_reg(pl)[0])
        if pl.geometry.get("register") else sim_warp(pl),
        "fast": lambda pl: emulate_fast(pl)[0]}


@pytest.mark.parametrize(("problem", "variant", "path"), CASES)
def test_traffic_formula_equals_the_replayed_loops(problem: ConvProblem, variant: str, path: str) -> None:
    checked = 0
    for machine in (H200, TINY):
        for config in _configs(problem, variant, path):
            try:
                pl = plan(problem, config, machine)
            except Exception:  # a config this shape rejects (e.g. a segment ≥ 2·L)
                continue
            model = _nonzero(traffic_words(pl))
            simulated = _nonzero(dict(SIMS[variant](pl)))
            assert model == simulated, f"{config.key()} on {machine.name}: model {model} != replay {simulated}"
            assert sum(model.values()) >= compulsory_words(problem, path) - (problem.C * problem.S
                                                                              if path == "wgrad" else 0)
            checked += 1
    assert checked >= 1


# ---- the fast kernel's dataflow, numerically ------------------------------------------------------------
FAST_NUMERIC = [
    ((3, 5, 13, 4), {"rows": 32, "tile_l": 16, "lanes_per_row": 1, "vec": 1}),     # one segment, no halo
    ((3, 5, 13, 4), {"rows": 16, "tile_l": 4, "lanes_per_row": 2, "vec": 1}),      # halo, 2 segments
    ((2, 3, 7, 9), {"rows": 32, "tile_l": 8, "lanes_per_row": 1, "vec": 1}),       # K > L
    ((5, 3, 50, 5), {"rows": 8, "tile_l": 12, "lanes_per_row": 4, "vec": 1}),      # L % 4 ≠ 0, tail segment
    ((4, 4, 40, 6), {"rows": 32, "tile_l": 40, "lanes_per_row": 1, "vec": 4}),     # 16-byte copies, dgrad swizzle
    ((4, 4, 40, 6), {"rows": 8, "tile_l": 4, "lanes_per_row": 4, "vec": 4}),       # swizzle + halo + segments
    ((40, 6, 24, 24), {"rows": 32, "tile_l": 24, "lanes_per_row": 1, "vec": 4}),    # K = L, several groups/block
    ((2, 6, 64, 12), {"rows": 4, "tile_l": 8, "lanes_per_row": 8, "vec": 4}),       # one segment, TPR > 1: halo
]


@pytest.mark.parametrize(("shape", "fields"), FAST_NUMERIC, ids=lambda v: str(v))
@pytest.mark.parametrize("path", ["fwd", "dgrad", "wgrad"])
@pytest.mark.parametrize("machine", [H200, TINY], ids=["h200", "one_sm"])
def test_fast_dataflow_computes_the_reference(shape, fields, path: str, machine: MachineModel) -> None:
    problem = ConvProblem.depthwise1d(*shape)
    B, C, L, K = shape
    rng = np.random.default_rng(7)
    x, dy, w = rng.standard_normal((B, C, L)), rng.standard_normal((B, C, L)), rng.standard_normal((C, K))
    for mode in ([MODE_DETERMINISTIC, MODE_ATOMIC] if path == "wgrad" else [None]):
        extra = {} if mode is None else {"mode": mode}
        pl = plan(problem, CONFIG_CLASSES_1D[("fast", path)](**fields, **extra), machine)
        if path == "fwd":
            _, out = emulate_fast(pl, x, w)
            ref = dw1d_fwd_reference(x, w)
        elif path == "dgrad":
            _, out = emulate_fast(pl, dy, w)
            ref = dw1d_dgrad_reference(dy, w)
        else:
            _, out = emulate_fast(pl, x, dy)
            ref = dw1d_wgrad_reference(x, dy, K)
        assert out is not None and not np.isnan(out).any(), "some outputs were never written"
        np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


# ---- the warp variant's register design, numerically -----------------------------------------------------
WARP_NUMERIC = [
    ((3, 5, 13, 4), {"warps": 2, "outputs_per_lane": 4, "lanes_per_row": 4}),    # one segment, tail lanes
    ((2, 3, 7, 9), {"warps": 1, "outputs_per_lane": 3, "lanes_per_row": 4}),     # K > L
    ((5, 3, 50, 5), {"warps": 2, "outputs_per_lane": 3, "lanes_per_row": 4}),    # several segments, L % V ≠ 0
    ((4, 4, 40, 13), {"warps": 1, "outputs_per_lane": 4, "lanes_per_row": 4}),   # float4, KE = SEG − 3, prev lanes
    ((4, 4, 40, 17), {"warps": 2, "outputs_per_lane": 4, "lanes_per_row": 4}),   # KE = SEG + 1: d = G from prev
    ((40, 6, 24, 24), {"warps": 1, "outputs_per_lane": 12, "lanes_per_row": 2}),  # K = L, several row passes
    ((2, 6, 64, 12), {"warps": 1, "outputs_per_lane": 2, "lanes_per_row": 32}),   # a warp per row, 1 segment
    ((7, 2, 9, 3), {"warps": 1, "outputs_per_lane": 2, "lanes_per_row": 1}),     # a lane per row, 5 segments
    ((3, 3, 48, 48), {"warps": 1, "outputs_per_lane": 6, "lanes_per_row": 8}),   # the paper's row, K = L
]


@pytest.mark.parametrize(("shape", "fields"), WARP_NUMERIC, ids=lambda v: str(v))
@pytest.mark.parametrize("path", ["fwd", "dgrad"])
@pytest.mark.parametrize("machine", [H200, TINY], ids=["h200", "one_sm"])
def test_warp_register_dataflow_computes_the_reference(shape, fields, path: str, machine: MachineModel) -> None:
    problem = ConvProblem.depthwise1d(*shape)
    B, C, L, K = shape
    rng = np.random.default_rng(8)
    a, w = rng.standard_normal((B, C, L)), rng.standard_normal((C, K))
    pl = plan(problem, CONFIG_CLASSES_1D[("warp", path)](**fields), machine)
    assert pl.geometry["register"] == 1
    _, out = emulate_warp_reg(pl, a, w)
    ref = dw1d_fwd_reference(a, w) if path == "fwd" else dw1d_dgrad_reference(a, w)
    assert out is not None and not np.isnan(out).any(), "some outputs were never written"
    np.testing.assert_allclose(out, ref, rtol=1e-12, atol=1e-12)


@pytest.mark.parametrize(("shape", "fields"), WARP_NUMERIC, ids=lambda v: str(v))
@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC])
@pytest.mark.parametrize("machine", [H200, TINY], ids=["h200", "one_sm"])
def test_warp_register_wgrad_dataflow_computes_the_reference(shape, fields, mode: int, machine: MachineModel) -> None:
    problem = ConvProblem.depthwise1d(*shape)
    B, C, L, K = shape
    rng = np.random.default_rng(10)
    x, dy = rng.standard_normal((B, C, L)), rng.standard_normal((B, C, L))
    pl = plan(problem, CONFIG_CLASSES_1D[("warp", "wgrad")](**fields, design=2, rows=1, mode=mode), machine)
    assert pl.geometry["register"] == 1
    counts, dw = emulate_warp_reg_wgrad(pl, x, dy)
    np.testing.assert_allclose(dw, dw1d_wgrad_reference(x, dy, K), rtol=1e-12, atol=1e-12)
    assert {k: v for k, v in counts.items() if v} == _nonzero(traffic_words(pl))


def test_warp_takes_the_shared_memory_design_beyond_64_taps() -> None:
    from convtune.errors import InvalidConfig
    from convtune.kernels.depthwise.configs import WarpFwdConfig

    problem = ConvProblem.depthwise1d(1, 7, 333, 70)
    assert plan(problem, WarpFwdConfig(warps=2, outputs_per_lane=2), H200).geometry["register"] == 0
    with pytest.raises(InvalidConfig, match="lanes_per_row"):
        plan(problem, WarpFwdConfig(warps=2, outputs_per_lane=2, lanes_per_row=8), H200)
    with pytest.raises(InvalidConfig, match="outputs_per_lane"):
        plan(problem, WarpFwdConfig(warps=2, outputs_per_lane=5), H200)


def test_one_sm_grids_loop_over_several_row_groups() -> None:
    pl = plan(ConvProblem.depthwise1d(40, 6, 24, 24), CONFIG_CLASSES_1D[("fast", "fwd")](rows=32, tile_l=24), TINY)
    assert pl.grid * pl.config.rows % 6 == 0 and pl.geometry["ngroups"] > pl.grid


# ---- closed forms ---------------------------------------------------------------------------------------
PAPER = ConvProblem.depthwise1d(16384, 128, 48, 48)


def test_paper_shape_flops_and_compulsory_bytes() -> None:
    assert causal_taps_per_row(48, 48) == 1176
    assert flops(PAPER) == pytest.approx(4.93e9, rel=1e-3)
    assert flops(PAPER, "dense") == pytest.approx(9.66e9, rel=1e-3)
    assert flops(PAPER) == 2 * PAPER.macs_nonpad and flops(PAPER, "dense") == PAPER.flops
    assert compulsory_bytes(PAPER, "fwd") == pytest.approx(805.3e6, rel=1e-3)
    assert compulsory_bytes(PAPER, "bwd") == pytest.approx(1.21e9, rel=1e-2)


@pytest.mark.parametrize("shape", [(3, 5, 13, 4), (2, 3, 7, 9), (16, 8, 48, 48)])
def test_flops_count_the_taps_of_the_references(shape) -> None:
    B, C, L, K = shape
    problem = ConvProblem.depthwise1d(*shape)
    taps = sum(min(K, t + 1) for t in range(L))
    assert flops(problem) == 2 * B * C * taps
    assert flops(problem) == 2 * problem.macs_nonpad


@pytest.mark.parametrize("path", ["fwd", "dgrad"])
def test_compulsory_is_the_depthwise_lower_bound(path: str) -> None:
    """fwd/dgrad compulsory words = the bound's compulsory term (the fast variant's best plan reaches it)."""
    for problem in (PAPER, ConvProblem.depthwise1d(64, 768, 1024, 4)):
        bound = depthwise_lower_bound(problem, H200.fast_memory_words("block"))
        assert compulsory_words(problem, path) == pytest.approx(bound.words, rel=1e-9)
        best = min(sum(traffic_words(pl).values()) for pl in enumerate_plans(problem, H200, "fast", path))
        assert best <= 1.01 * compulsory_words(problem, path)


def test_fast_issued_macs_match_the_compiled_triangle() -> None:
    """One thread per row without halo issues exactly the causal triangle (1176 per row at L = K = 48, the
    FFMA count ptxas emits); two lanes per row with a halo multiply zeros in the second lane's window."""
    from convtune.kernels.depthwise.configs import FastFwdConfig
    from convtune.kernels.depthwise.conv1d.traffic import fast_issued_macs

    exact = plan(PAPER, FastFwdConfig(rows=128, tile_l=48, lanes_per_row=1), H200)
    assert 2 * fast_issued_macs(exact) == flops(PAPER)
    halo = plan(PAPER, FastFwdConfig(rows=64, tile_l=24, lanes_per_row=2, blocks_per_sm=2), H200)
    assert fast_issued_macs(halo) == PAPER.N * PAPER.C * (sum(min(48, t + 1) for t in range(24)) + 24 * 48)
