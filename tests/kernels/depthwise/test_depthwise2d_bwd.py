"""The 2-D depthwise input- and weight-gradient kernels on the CPU: the float64 references against PyTorch's
conventions (adjoint identities), every invalid config names its field, the traffic models against replays
of the kernels' loops, and the kernels' dataflow emulated numerically against the float64 references."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.config import parse_config_key
from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC
from convtune.kernels.depthwise.configs import Dw2dFastDgradConfig as Dgrad
from convtune.kernels.depthwise.configs import Dw2dFastWgradConfig as Wgrad
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.kernels.depthwise.reference import dw2d_dgrad_reference, dw2d_fwd_reference, dw2d_wgrad_reference
from convtune.kernels.depthwise.space import enumerate_plans_2d_dgrad, enumerate_plans_2d_wgrad
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depthwise2d_sim import emulate_dw2d_dgrad, emulate_dw2d_wgrad
from dw2d_problems import dw

H200 = MachineModel.preset("h200")


ADJOINT = [dw(2, 3, 9, 11, 3, 3, 1, 1), dw(2, 2, 13, 17, 5, 5, 2, 2), dw(1, 2, 16, 20, 5, 3, 2, 2, 1),
           dw(1, 3, 9, 24, 1, 7, 1, 0, 3), dw(2, 2, 12, 12, 7, 7, 2, 3), dw(1, 1, 5, 6, 2, 2, 2, 0)]


@pytest.mark.parametrize("problem", ADJOINT, ids=lambda p: p.key())
def test_references_are_adjoint(problem: ConvProblem) -> None:
    """⟨fwd(x), dy⟩ = ⟨x, dgrad(dy)⟩ and = ⟨w, wgrad(x, dy)⟩: the three references describe one operator."""
    rng = np.random.default_rng(9)
    p = problem
    x = rng.standard_normal((p.N, p.C, p.H, p.W))
    w = rng.standard_normal((p.C, 1, p.R, p.S))
    dy = rng.standard_normal((p.N, p.C, p.P, p.Q))
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    lhs = float((dw2d_fwd_reference(x, w, st, pad) * dy).sum())
    assert lhs == pytest.approx(float((x * dw2d_dgrad_reference(dy, w, (p.H, p.W), st, pad)).sum()), rel=1e-10)
    assert lhs == pytest.approx(float((w * dw2d_wgrad_reference(x, dy, (p.R, p.S), st, pad)).sum()), rel=1e-10)


DGRAD = [
    (dw(2, 3, 12, 12, 3, 3, 1, 1), Dgrad(4, 2, 4, 1, 32)),          # float4 copies and reads
    (dw(2, 3, 12, 12, 3, 3, 1, 1), Dgrad(12, 3, 8, 2, 32)),         # whole plane, 2 planes
    (dw(1, 5, 7, 7, 3, 3, 1, 1), Dgrad(7, 7, 7, 4, 32)),            # 7×7, item = whole plane, 4-byte copies
    (dw(2, 2, 13, 17, 5, 5, 2, 2), Dgrad(4, 2, 4, 1, 32)),          # stride 2, odd sizes
    (dw(2, 2, 16, 20, 5, 3, 2, 2, 1), Dgrad(4, 2, 8, 2, 32)),       # stride 2, float4 reads (VW/SW = 4)
    (dw(1, 2, 16, 16, 7, 7, 1, 3), Dgrad(8, 4, 8, 1, 32)),          # 7×7 pad 3
    (dw(1, 3, 9, 24, 1, 7, 1, 0, 3), Dgrad(3, 1, 4, 1, 32)),        # 1×7
    (dw(2, 3, 11, 9, 3, 5, 1, 0, 2), Dgrad(4, 2, 3, 2, 32)),        # band tail, W % VW ≠ 0
    (dw(1, 1, 5, 8, 1, 1, 1, 0), Dgrad(5, 5, 4, 1, 32)),            # 1×1
    (dw(1, 2, 21, 19, 3, 3, 2, 0), Dgrad(6, 2, 2, 1, 32)),          # stride 2 no padding: last rows get nothing
    (dw(1, 2, 12, 12, 2, 2, 2, 0), Dgrad(4, 2, 2, 2, 32)),          # 2×2 s2: every input meets exactly one tap
    (dw(2, 2, 12, 12, 7, 7, 2, 3), Dgrad(4, 4, 4, 1, 32)),          # 7×7 s2 pad 3
]


@pytest.mark.parametrize(("problem", "config"), DGRAD, ids=lambda v: v.key() if hasattr(v, "key") else str(v))
def test_dgrad_dataflow_computes_the_reference_and_the_traffic_model(problem: ConvProblem, config: Dgrad) -> None:
    pl = plan2d_dgrad.plan(problem, config, H200)
    rng = np.random.default_rng(4)
    p = problem
    dy = rng.standard_normal((p.N, p.C, p.P, p.Q))
    w = rng.standard_normal((p.C, 1, p.R, p.S))
    counts, dx = emulate_dw2d_dgrad(pl, dy, w)
    assert dx is not None and not np.isnan(dx).any(), "some outputs were never written"
    ref = dw2d_dgrad_reference(dy, w, (p.H, p.W), (p.stride_h, p.stride_w), (p.pad_h, p.pad_w))
    np.testing.assert_allclose(dx, ref, rtol=1e-12, atol=1e-12)
    assert dict(counts) == {k: v for k, v in plan2d_dgrad.traffic_words(pl).items() if v}


DGRAD_INVALID = [
    (dw(1, 2, 12, 12, 3, 3, 2, 1), Dgrad(band_h=4, rows_per_thread=1, outputs_per_thread=4), "rows_per_thread"),
    (dw(1, 2, 12, 12, 3, 3, 2, 1), Dgrad(band_h=4, rows_per_thread=2, outputs_per_thread=3), "outputs_per_thread"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Dgrad(band_h=5, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Dgrad(band_h=14, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Dgrad(band_h=8, rows_per_thread=8, outputs_per_thread=12), "outputs_per_thread"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Dgrad(threads=100), "threads"),
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=8"), Dgrad(), "problem"),
]


@pytest.mark.parametrize(("problem", "config", "field"), DGRAD_INVALID,
                         ids=lambda v: v.key() if hasattr(v, "key") else v)
def test_dgrad_invalid_config_names_its_field(problem: ConvProblem, config: Dgrad, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan2d_dgrad.plan(problem, config, H200)
    assert info.value.field == field


SUITE = ["N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144", "N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960",
         "N=32 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96",
         "N=8 C=96 H=112 W=112 K=96 R=3 S=3 stride=2 pad=1 groups=96"]


@pytest.mark.parametrize("text", SUITE)
def test_dgrad_space_is_valid_and_keys_round_trip(text: str) -> None:
    problem = ConvProblem.parse(text)
    plans = list(enumerate_plans_2d_dgrad(problem, H200))
    assert len(plans) >= 20
    for pl in plans:
        assert parse_config_key(pl.config.key()) == pl.config
        assert plan2d_dgrad.traffic_words(pl)["dx"] == problem.input_elements
    assert min(plan2d_dgrad.traffic_words(pl)["dy"] for pl in plans) <= 1.15 * problem.output_elements


WGRAD = [
    (dw(2, 3, 12, 12, 3, 3, 1, 1), Wgrad(4, 2, 4, 1, 32)),          # float4 copies, reads, dy reads
    (dw(3, 3, 12, 12, 3, 3, 1, 1), Wgrad(12, 3, 8, 2, 32)),         # whole plane, 2 batch entries, N % planes ≠ 0
    (dw(5, 2, 7, 7, 3, 3, 1, 1), Wgrad(7, 7, 7, 4, 32)),            # 7×7, 4-byte copies
    (dw(2, 2, 13, 17, 5, 5, 2, 2), Wgrad(6, 1, 1, 1, 64)),          # stride 2, odd sizes, two warps
    (dw(2, 2, 16, 20, 5, 3, 2, 2, 1), Wgrad(4, 2, 2, 2, 32)),       # stride 2, float4 x reads (VW·SW = 4)
    (dw(1, 2, 16, 16, 7, 7, 1, 3), Wgrad(8, 4, 8, 1, 32)),          # 7×7 pad 3
    (dw(2, 3, 9, 24, 1, 7, 1, 0, 3), Wgrad(3, 1, 4, 1, 32)),        # 1×7
    (dw(2, 3, 11, 9, 3, 5, 1, 0, 2), Wgrad(4, 2, 3, 2, 32)),        # band tail, Q % VW ≠ 0
    (dw(1, 1, 5, 8, 1, 1, 1, 0), Wgrad(5, 5, 4, 1, 32)),            # 1×1
    (dw(2, 2, 12, 12, 7, 7, 2, 3), Wgrad(2, 2, 4, 1, 32)),          # 7×7 s2 pad 3, reduction buffer > staging
    (dw(1, 2, 15, 15, 3, 3, 2, 1), Wgrad(4, 2, 3, 1, 32)),          # odd x staging (9·17), 16-byte dy copies
    (dw(1, 2, 15, 15, 3, 3, 2, 1), Wgrad(4, 2, 4, 1, 32)),          # odd x staging, float4 dy reads
]


@pytest.mark.parametrize(("problem", "config"), WGRAD, ids=lambda v: v.key() if hasattr(v, "key") else str(v))
@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC])
def test_wgrad_dataflow_computes_the_reference_and_the_traffic_model(problem: ConvProblem, config: Wgrad,
                                                                     mode: int) -> None:
    from dataclasses import replace

    pl = plan2d_wgrad.plan(problem, replace(config, mode=mode), H200)
    rng = np.random.default_rng(6)
    p = problem
    x = rng.standard_normal((p.N, p.C, p.H, p.W))
    dy = rng.standard_normal((p.N, p.C, p.P, p.Q))
    counts, dwv = emulate_dw2d_wgrad(pl, x, dy)
    ref = dw2d_wgrad_reference(x, dy, (p.R, p.S), (p.stride_h, p.stride_w), (p.pad_h, p.pad_w))
    np.testing.assert_allclose(dwv, ref, rtol=1e-12, atol=1e-12)
    assert dict(counts) == {k: v for k, v in plan2d_wgrad.traffic_words(pl).items() if v}


WGRAD_INVALID = [
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(band_h=5, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(band_h=14, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(planes=2), "planes"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(mode=5), "mode"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(threads=2048), "threads"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Wgrad(band_h=8, rows_per_thread=8, outputs_per_thread=12), "outputs_per_thread"),
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=8"), Wgrad(), "problem"),
]


@pytest.mark.parametrize(("problem", "config", "field"), WGRAD_INVALID,
                         ids=lambda v: v.key() if hasattr(v, "key") else v)
def test_wgrad_invalid_config_names_its_field(problem: ConvProblem, config: Wgrad, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan2d_wgrad.plan(problem, config, H200)
    assert info.value.field == field


@pytest.mark.parametrize("text", SUITE)
def test_wgrad_space_is_valid_and_keys_round_trip(text: str) -> None:
    problem = ConvProblem.parse(text)
    plans = list(enumerate_plans_2d_wgrad(problem, H200))
    assert len(plans) >= 20
    assert {pl.config.mode for pl in plans} == {MODE_DETERMINISTIC, MODE_ATOMIC}
    for pl in plans:
        assert parse_config_key(pl.config.key()) == pl.config
        assert plan2d_wgrad.traffic_words(pl)["dy"] == problem.output_elements
