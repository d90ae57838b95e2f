"""Tile optimiser and roofline sanity, and the purity of convtune.bounds."""

from __future__ import annotations

import math
import subprocess
import sys

import pytest
from bounds_strategies import PROPERTY, conv_problems
from hypothesis import assume, given
from hypothesis import strategies as st

from convtune.bounds import (
    direct_lower_bound,
    direct_tile,
    efficiency,
    floor_time,
    tiled_traffic,
    winograd_bounds,
    winograd_tile,
)
from convtune.bounds.tiles import tile_candidates
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")


@PROPERTY
@given(conv_problems(max_c=8, max_k=8, max_extra=10), st.integers(1, 3000))
def test_direct_tile_fits_and_predicts_the_exact_schedule_count(p, s):
    try:
        t = direct_tile(p, s)
    except ValueError:
        assert s < 1 + p.R * p.S + (p.dil_h * (p.R - 1) + 1) * (p.dil_w * (p.S - 1) + 1)
        return
    assert t.footprint_words <= s
    assert t.c_s >= 1
    assert t.x in tile_candidates(p.Q) and t.y in tile_candidates(p.P) and t.z in tile_candidates(p.K)
    assert t.predicted_words == t.input_words + t.weight_words + t.output_words
    assert t.predicted_words >= direct_lower_bound(p, s).words          # predicted / LB ≥ 1
    count = tiled_traffic(p, {"n": 1, "k": t.z, "p": t.y, "q": t.x, "c": t.c_s}, "nkpqcrs")
    assert count.footprint_words <= t.footprint_words
    if -(-p.channels_per_group // t.c_s) >= 2:   # two or more chunks: the loop nest reloads like a block
        assert count.total_words == t.predicted_words
    else:
        assert count.total_words <= t.predicted_words


@st.composite
def large_layers(draw) -> tuple[ConvProblem, int]:
    r = draw(st.sampled_from([1, 3, 5, 7]))
    h = draw(st.sampled_from([16, 32, 64, 128]))   # power-of-two extents: balanced tiles are not cut by tails
    stride = draw(st.sampled_from([1, 1, 2]))
    p = ConvProblem(N=draw(st.sampled_from([1, 8])), C=draw(st.sampled_from([32, 64, 128, 256, 512])), H=h, W=h,
                    K=draw(st.sampled_from([16, 64, 128, 256, 512])), R=r, S=r, pad_h=r // 2, pad_w=r // 2,
                    stride_h=stride, stride_w=stride)
    return p, draw(st.integers(4096, 90_880))


@PROPERTY
@given(large_layers())
def test_direct_tile_balances_xy_against_r_z_when_dims_allow(case):
    """xy/(R·z) ∈ [0.3, 2] when the balanced tile fits inside the extents (z* = √(S/R) ≤ K/2,
    x*y* = √(R·S) ≤ P·Q/4) and the reduction is long (L ≥ 2√S)."""
    p, s = case
    r = p.reuse_factor
    assume(math.sqrt(s / r) <= p.K / 2 and math.sqrt(r * s) <= p.P * p.Q / 4
           and p.reduction_length >= 2 * math.sqrt(s))
    t = direct_tile(p, s)
    assert 0.3 <= t.balance <= 2
    lb = direct_lower_bound(p, s)
    ratio = t.predicted_words / lb.words
    assert ratio >= 1
    if lb.binding_term == "literature":   # docs/bounds.md §10.6: within about 2× in the valid regime
        assert ratio <= 2.5


@PROPERTY
@given(conv_problems(max_n=2, max_c=32, max_k=32, max_taps=5, max_extra=24, square_unit_stride=True),
       st.integers(200, 50_000), st.sampled_from([2, 4, 6]), st.booleans())
def test_winograd_tile_fits_and_is_above_its_dataflow_floor(p, s, m, pre):
    try:
        t = winograd_tile(p, s, m, pretransformed_filters=pre)
    except ValueError:
        return
    assert t.footprint_words <= s
    floor = winograd_bounds(p, s, m, pretransformed_filters=pre).fused
    assert t.predicted_words >= floor.words * (1 - 1e-12)
    assert t.balance > 0


def test_winograd_tile_balance_on_a_big_layer():
    p = ConvProblem.parse("N=8 C=256 H=56 W=56 K=256 R=3 S=3 pad=1")
    for m in (2, 4):
        t = winograd_tile(p, 49_152, m)
        assert 0.25 <= t.balance <= 4, (m, t)


@PROPERTY
@given(st.floats(0, 1e15), st.floats(0, 1e12), st.floats(1.0, 10.0))
def test_roofline_floor(flops, nbytes, scale):
    r = floor_time(flops, nbytes, H200)
    assert r.time_s == max(r.compute_time_s, r.memory_time_s)
    assert r.compute_time_s == pytest.approx(flops / H200.fp32_peak_flops_per_s)
    assert r.memory_time_s == pytest.approx(nbytes / H200.copy_bandwidth_bytes_per_s)
    assert r.binding == ("compute" if r.compute_time_s >= r.memory_time_s else "memory")
    assert floor_time(flops * scale, nbytes * scale, H200).time_s >= r.time_s
    if r.time_s > 1e-300:   # a subnormal time loses the ratio to rounding (found at 2000 examples)
        assert efficiency(r.time_s, r.time_s * scale) == pytest.approx(1 / scale)


def test_roofline_examples_and_errors():
    vgg = ConvProblem.parse("N=1 C=64 H=224 W=224 K=64 R=3 S=3 pad=1")
    r = floor_time(vgg.flops, vgg.compulsory_bytes, H200)
    assert r.binding == "compute"
    assert r.time_s == pytest.approx(vgg.flops / 50.9e12)
    assert r.to_dict()["intensity_flops_per_byte"] == pytest.approx(vgg.flops / vgg.compulsory_bytes)
    dw = ConvProblem.depthwise1d(B=16384, C=128, L=48, K=48)
    assert floor_time(dw.flops, dw.compulsory_bytes, H200).binding == "memory"
    assert floor_time(0, 4.19e12, H200).time_s == pytest.approx(1.0)
    with pytest.raises(ValueError):
        efficiency(1.0, 0.0)
    with pytest.raises(ValueError):
        floor_time(-1, 0, H200)


def test_bounds_package_is_pure():
    code = ("import sys, convtune.bounds; "
            "bad = [m for m in ('cupy', 'sqlalchemy', 'optuna', 'fastapi', 'torch', 'alembic') if m in sys.modules]; "
            "print(','.join(bad))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=60)
    assert out.stdout.strip() == ""
