"""Depthwise plans: every invalid config names its field, spaces are non-empty and valid, the references
agree with an independent loop and with PyTorch's convention (w flipped), config keys round-trip."""

from __future__ import annotations

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.config import parse_config_key
from convtune.kernels.depthwise.configs import (
    CONFIG_CLASSES_1D,
    Dw2dTiledFwdConfig,
    FastFwdConfig,
    FastWgradConfig,
    NaiveWgradConfig,
    SharedFwdConfig,
    WarpDgradConfig,
    WarpFwdConfig,
    WarpWgradConfig,
)
from convtune.kernels.depthwise.conv1d.plan import persistent_grid, plan
from convtune.kernels.depthwise.conv2d.tiled import plan as plan_2d
from convtune.kernels.depthwise.reference import (
    dw1d_dgrad_reference,
    dw1d_fwd_reference,
    dw1d_wgrad_reference,
    dw2d_fwd_reference,
)
from convtune.kernels.depthwise.space import enumerate_plans, enumerate_plans_2d
from convtune.kernels.reference import conv2d_reference_for, depthwise_conv1d_causal_reference
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PAPER = ConvProblem.depthwise1d(16384, 128, 48, 48)
SMALL = ConvProblem.depthwise1d(3, 5, 13, 4)

INVALID = [
    (SMALL, NaiveWgradConfig(mode=3), "mode"),
    (SMALL, NaiveWgradConfig(threads=48), "threads"),
    (SMALL, SharedFwdConfig(rows=4, tile_l=8), "rows"),
    (SMALL, SharedFwdConfig(rows=2, tile_l=14), "tile_l"),
    (SMALL, WarpFwdConfig(outputs_per_lane=5), "outputs_per_lane"),
    (SMALL, WarpWgradConfig(outputs_per_lane=3, rows=2), "outputs_per_lane"),
    (SMALL, WarpWgradConfig(rows=2, design=3), "design"),
    (SMALL, WarpWgradConfig(rows=2, design=2, lanes_per_row=3), "lanes_per_row"),
    (ConvProblem.depthwise1d(2, 3, 100, 80), WarpWgradConfig(rows=2, design=2), "design"),
    (SMALL, WarpFwdConfig(lanes_per_row=6), "lanes_per_row"),
    (ConvProblem.depthwise1d(2, 3, 100, 80), WarpDgradConfig(lanes_per_row=16), "lanes_per_row"),
    (SMALL, WarpFwdConfig(warps=64), "warps"),
    (SMALL, WarpWgradConfig(rows=4), "rows"),
    (SMALL, FastFwdConfig(tile_l=6), "tile_l"),
    (SMALL, FastFwdConfig(rows=32, tile_l=8, lanes_per_row=3), "lanes_per_row"),
    (SMALL, FastFwdConfig(rows=32, tile_l=8, vec=4), "vec"),
    (SMALL, FastFwdConfig(rows=32, tile_l=8, vec=1, stages=3), "stages"),
    (SMALL, FastFwdConfig(rows=32, tile_l=8, vec=1, blocks_per_sm=17), "blocks_per_sm"),
    (SMALL, FastFwdConfig(rows=32, tile_l=64, vec=1), "tile_l"),
    (PAPER, FastFwdConfig(rows=256, tile_l=48, stages=2, blocks_per_sm=4), "blocks_per_sm"),
    (PAPER, FastWgradConfig(rows=128, tile_l=48, stages=2, blocks_per_sm=4), "blocks_per_sm"),
    (ConvProblem.depthwise1d(2, 3, 100, 80), FastFwdConfig(rows=32, tile_l=64), "problem"),
    (ConvProblem.depthwise1d(2, 3, 48, 4, dilation=2), FastFwdConfig(), "dilation"),
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 groups=8"), FastFwdConfig(), "problem"),
]


@pytest.mark.parametrize(("problem", "config", "field"), INVALID, ids=lambda v: getattr(v, "key", lambda: str(v))())
def test_invalid_config_names_its_field(problem: ConvProblem, config, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(problem, config, H200)
    assert info.value.field == field, str(info.value)


def test_invalid_2d_configs_name_their_field() -> None:
    p = ConvProblem.parse("N=2 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 groups=8")
    for config, field in ((Dw2dTiledFwdConfig(8, 30, 4, 1), "outputs_per_thread"),
                          (Dw2dTiledFwdConfig(2, 4, 4, 1), "tile_w")):
        with pytest.raises(InvalidConfig) as info:
            plan_2d(p, config, H200)
        assert info.value.field == field
    with pytest.raises(InvalidConfig, match="problem"):
        plan_2d(ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1"), Dw2dTiledFwdConfig(), H200)


@pytest.mark.parametrize(("variant", "path"), list(CONFIG_CLASSES_1D))
def test_spaces_are_valid_and_keys_round_trip(variant: str, path: str) -> None:
    for problem in (PAPER, SMALL, ConvProblem.depthwise1d(1, 3, 7, 9)):
        plans = list(enumerate_plans(problem, H200, variant, path))
        assert plans, f"{variant} {path}: empty space for {problem.key()}"
        for pl in plans[:50]:
            assert parse_config_key(pl.config.key()) == pl.config
            assert plan(problem, pl.config, H200).grid == pl.grid


def test_fast_grids_keep_each_threads_channel() -> None:
    for problem in (PAPER, ConvProblem.depthwise1d(64, 768, 1024, 4), ConvProblem.depthwise1d(33, 17, 100, 7)):
        for pl in enumerate_plans(problem, H200, "fast", "fwd"):
            rows = pl.config.rows
            assert pl.grid >= pl.geometry["ngroups"] or pl.grid * rows % problem.C == 0
    assert persistent_grid(1000, 128, 128, 528) == 528
    assert persistent_grid(1000, 4, 768, 528) == 192 * 2
    assert persistent_grid(3, 32, 7, 528) == 3


def test_2d_space_covers_the_suite_shapes() -> None:
    for text in ("N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144",
                 "N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960",
                 "N=32 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96",
                 "N=8 C=32 H=112 W=112 K=32 R=3 S=3 stride=2 pad=1 groups=32"):
        assert list(enumerate_plans_2d(ConvProblem.parse(text), H200))


# ---- references -----------------------------------------------------------------------------------------
def _loops(x, w, dy):
    B, C, L = x.shape
    K = w.shape[1]
    y, dx, dw = np.zeros_like(x), np.zeros_like(x), np.zeros((C, K))
    for b, c, t, j in np.ndindex(B, C, L, K):
        if t - j >= 0:
            y[b, c, t] += w[c, j] * x[b, c, t - j]
            dw[c, j] += dy[b, c, t] * x[b, c, t - j]
        if t + j < L:
            dx[b, c, t] += w[c, j] * dy[b, c, t + j]
    return y, dx, dw


@pytest.mark.parametrize("shape", [(2, 3, 7, 1), (2, 3, 7, 7), (1, 3, 7, 10), (3, 2, 13, 4)])
def test_1d_references_match_loops_and_the_problem_convention(shape) -> None:
    B, C, L, K = shape
    rng = np.random.default_rng(3)
    x, dy, w = rng.standard_normal((B, C, L)), rng.standard_normal((B, C, L)), rng.standard_normal((C, K))
    y, dx, dw = _loops(x, w, dy)
    np.testing.assert_allclose(dw1d_fwd_reference(x, w), y, atol=1e-12)
    np.testing.assert_allclose(dw1d_dgrad_reference(dy, w), dx, atol=1e-12)
    np.testing.assert_allclose(dw1d_wgrad_reference(x, dy, K), dw, atol=1e-12)
    # the project's (PyTorch) convention stores the taps flipped
    np.testing.assert_allclose(depthwise_conv1d_causal_reference(x, w[:, ::-1]), y, atol=1e-12)
    # dgrad is the adjoint of fwd: <fwd(x), dy> = <x, dgrad(dy)>
    assert np.vdot(y, dy) == pytest.approx(np.vdot(x, dx))


@pytest.mark.parametrize("text", ["N=2 C=3 H=9 W=11 K=3 R=3 S=3 pad=1 groups=3",
                                  "N=1 C=4 H=17 W=10 K=4 R=5 S=3 stride=2 pad_h=2 pad_w=0 groups=4",
                                  "N=2 C=2 H=8 W=8 K=2 R=7 S=7 stride=2 pad=3 groups=2"])
def test_2d_reference_matches_the_grouped_reference(text: str) -> None:
    p = ConvProblem.parse(text)
    rng = np.random.default_rng(5)
    x, w = rng.standard_normal((p.N, p.C, p.H, p.W)), rng.standard_normal((p.C, 1, p.R, p.S))
    ours = dw2d_fwd_reference(x, w, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w))
    np.testing.assert_allclose(ours, conv2d_reference_for(p, x, w), atol=1e-12)
