"""The fast 2-D depthwise forward on the CPU: plan rules (every invalid config names its field), the traffic
model against a replay of the kernel's loops, and the kernel's dataflow (staging, zero fill, window
arithmetic, stores) emulated numerically against the float64 reference; the configuration space."""

from __future__ import annotations

import sys
from pathlib import Path

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.config import parse_config_key
from convtune.kernels.depthwise.configs import Dw2dFastFwdConfig as Fast
from convtune.kernels.depthwise.conv2d.fast import plan, traffic_words
from convtune.kernels.depthwise.reference import dw2d_fwd_reference
from convtune.kernels.depthwise.space import enumerate_plans_2d_fast
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depthwise2d_sim import emulate_dw2d_fast
from dw2d_problems import dw

H200 = MachineModel.preset("h200")


CASES = [
    (dw(2, 3, 12, 12, 3, 3, 1, 1), Fast(4, 2, 4, 1, 32)),         # float4 copies and reads
    (dw(2, 3, 12, 12, 3, 3, 1, 1), Fast(12, 3, 8, 2, 32)),        # whole plane, 2 planes
    (dw(1, 5, 7, 7, 3, 3, 1, 1), Fast(7, 7, 7, 4, 32)),           # 7×7 planes, item = whole plane, 4-byte copies
    (dw(1, 5, 7, 7, 3, 3, 1, 1), Fast(7, 1, 7, 3, 32)),           # planes past N·C
    (dw(2, 2, 13, 17, 5, 5, 2, 2), Fast(2, 1, 4, 1, 32)),          # stride 2, odd sizes, W % 4 ≠ 0
    (dw(2, 2, 16, 20, 5, 3, 2, 2, 1), Fast(4, 2, 2, 2, 32)),       # stride 2, float4 reads (VW·SW = 4)
    (dw(1, 2, 16, 16, 7, 7, 1, 3), Fast(8, 4, 8, 1, 32)),          # 7×7 pad 3 (OFF 4, DELTA 1)
    (dw(1, 3, 9, 24, 1, 7, 1, 0, 3), Fast(3, 1, 4, 1, 32)),        # 1×7
    (dw(2, 3, 11, 9, 3, 5, 1, 0, 2), Fast(4, 2, 3, 2, 32)),        # band tail, Q % VW ≠ 0, scalar reads
    (dw(1, 1, 5, 8, 1, 1, 1, 0), Fast(5, 5, 4, 1, 32)),            # 1×1
    (dw(1, 2, 20, 20, 3, 3, 2, 0), Fast(3, 3, 8, 1, 32)),          # stride 2 no padding, VW·SW = 16
]


@pytest.mark.parametrize(("problem", "config"), CASES, ids=lambda v: v.key() if hasattr(v, "key") else str(v))
def test_dataflow_computes_the_reference_and_the_traffic_model(problem: ConvProblem, config: Fast) -> None:
    pl = plan(problem, config, H200)
    rng = np.random.default_rng(3)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W))
    w = rng.standard_normal((problem.C, 1, problem.R, problem.S))
    counts, y = emulate_dw2d_fast(pl, x, w)
    assert y is not None and not np.isnan(y).any(), "some outputs were never written"
    ref = dw2d_fwd_reference(x, w, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w))
    np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
    assert dict(counts) == {k: v for k, v in traffic_words(pl).items() if v}
    assert traffic_words(pl)["y"] == problem.output_elements


INVALID = [
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Fast(band_h=5, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Fast(band_h=14, rows_per_thread=2), "band_h"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Fast(band_h=8, rows_per_thread=8, outputs_per_thread=12), "outputs_per_thread"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Fast(threads=48), "threads"),
    (dw(1, 2, 12, 12, 3, 3, 1, 1), Fast(band_h=2, rows_per_thread=2, threads=256), "threads"),
    (dw(1, 2, 4000, 4000, 3, 3, 1, 1), Fast(band_h=64, rows_per_thread=1, outputs_per_thread=4, threads=1024),
     "band_h"),
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=8"), Fast(), "problem"),
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=8 R=3 S=3 pad=1 dilation=2 groups=8"), Fast(), "problem"),
]


@pytest.mark.parametrize(("problem", "config", "field"), INVALID, ids=lambda v: v.key() if hasattr(v, "key") else v)
def test_invalid_config_names_its_field(problem: ConvProblem, config: Fast, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(problem, config, H200)
    assert info.value.field == field


SUITE = ["N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144", "N=32 C=384 H=14 W=14 K=384 R=3 S=3 pad=1 groups=384",
         "N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960", "N=32 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96",
         "N=8 C=96 H=112 W=112 K=96 R=3 S=3 stride=2 pad=1 groups=96"]


@pytest.mark.parametrize("text", SUITE)
def test_space_is_valid_and_keys_round_trip(text: str) -> None:
    problem = ConvProblem.parse(text)
    plans = list(enumerate_plans_2d_fast(problem, H200))
    assert len(plans) >= 20
    for pl in plans:
        assert parse_config_key(pl.config.key()) == pl.config
        assert pl.smem_bytes <= H200.smem_per_block_bytes
        assert traffic_words(pl)["y"] == problem.output_elements
    # compulsory: at least one plan reads every input element at most 1.1 times
    assert min(traffic_words(pl)["x"] for pl in plans) <= 1.1 * problem.input_elements
