"""The fused 1-D backward on the CPU: plan rules, the traffic model and the kernel's dataflow (staging, dy in
registers, dx through the dy slot, dw over x, partial slots and reduction) replayed numerically against
the float64 references of dgrad and wgrad."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.config import parse_config_key
from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC, FusedBwdConfig
from convtune.kernels.depthwise.conv1d.fused import issued_macs, plan, traffic_words
from convtune.kernels.depthwise.conv1d.traffic import compulsory_words, flops
from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_wgrad_reference
from convtune.kernels.depthwise.space import enumerate_plans_fused
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depthwise_fused_sim import emulate_fused

H200 = MachineModel.preset("h200")
TINY = replace(H200, name="one-SM H200", sm_count=1)
PAPER = ConvProblem.depthwise1d(16384, 128, 48, 48)

CASES = [((3, 5, 13, 4), 32, 1), ((2, 3, 7, 9), 32, 1), ((1, 3, 7, 7), 32, 1), ((4, 4, 40, 1), 32, 4),
         ((40, 6, 24, 24), 32, 4), ((5, 3, 50, 5), 64, 1), ((2, 6, 64, 12), 32, 4), ((9, 7, 48, 48), 32, 4)]


@pytest.mark.parametrize(("shape", "rows", "vec"), CASES, ids=str)
@pytest.mark.parametrize("mode", [MODE_DETERMINISTIC, MODE_ATOMIC])
@pytest.mark.parametrize("machine", [H200, TINY], ids=["h200", "one_sm"])
def test_dataflow_computes_dgrad_and_wgrad(shape, rows: int, vec: int, mode: int, machine: MachineModel) -> None:
    problem = ConvProblem.depthwise1d(*shape)
    B, C, L, K = shape
    rng = np.random.default_rng(5)
    x, dy, w = rng.standard_normal((B, C, L)), rng.standard_normal((B, C, L)), rng.standard_normal((C, K))
    pl = plan(problem, FusedBwdConfig(rows=rows, vec=vec, mode=mode, blocks_per_sm=1), machine)
    counts, (dx, dw) = emulate_fused(pl, x, dy, w)
    assert not np.isnan(dx).any(), "some dx were never written"
    np.testing.assert_allclose(dx, dw1d_dgrad_reference(dy, w), rtol=1e-12, atol=1e-12)
    np.testing.assert_allclose(dw, dw1d_wgrad_reference(x, dy, K), rtol=1e-12, atol=1e-12)
    assert dict(counts) == {k: v for k, v in traffic_words(pl).items() if v}


def test_paper_shape_reads_the_compulsory_words_and_the_triangles() -> None:
    pl = plan(PAPER, FusedBwdConfig(rows=128, blocks_per_sm=2), H200)
    words = traffic_words(pl)
    assert words["x"] + words["dy"] + words["dx"] == 3 * PAPER.N * PAPER.C * PAPER.W
    assert sum(words.values()) <= 1.02 * compulsory_words(PAPER, "bwd")  # + taps per thread and partials
    assert issued_macs(pl) == flops(PAPER)  # dx's anti-causal triangle + dw's causal triangle, nothing more


INVALID = [
    (ConvProblem.depthwise1d(2, 3, 100, 4), FusedBwdConfig(), "problem"),
    (ConvProblem.depthwise1d(2, 3, 50, 4), FusedBwdConfig(vec=4), "vec"),
    (PAPER, FusedBwdConfig(rows=48), "rows"),
    (PAPER, FusedBwdConfig(stages=3), "stages"),
    (PAPER, FusedBwdConfig(mode=3), "mode"),
    (PAPER, FusedBwdConfig(rows=256, blocks_per_sm=4), "blocks_per_sm"),
]


@pytest.mark.parametrize(("problem", "config", "field"), INVALID, ids=lambda v: v.key() if hasattr(v, "key") else v)
def test_invalid_config_names_its_field(problem: ConvProblem, config: FusedBwdConfig, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(problem, config, H200)
    assert info.value.field == field


@pytest.mark.parametrize("shape", [(16384, 128, 48, 48), (16384, 128, 48, 4), (3, 5, 13, 4)])
def test_space_is_valid_with_round_tripping_keys(shape) -> None:
    plans = list(enumerate_plans_fused(ConvProblem.depthwise1d(*shape), H200))
    assert len(plans) >= 8
    assert {pl.config.mode for pl in plans} == {MODE_DETERMINISTIC, MODE_ATOMIC}
    for pl in plans:
        assert parse_config_key(pl.config.key()) == pl.config
