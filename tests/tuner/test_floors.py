"""Honest floors (docs/bounds.md §11): every committed H200 measurement sits at or above every floor, on the measured
ceilings and on the datasheet peaks; tiny shapes are launch-bound; the CLI shows the new fields."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convtune.cli import main
from convtune.kernels.registry import specs_for
from convtune.machine import H200_LAUNCH_FLOOR_S, PRESETS, MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import OK, ReplayBenchmarker
from convtune.tuner.efficiency import BINDINGS, family_choice, floors

DATA = Path(__file__).resolve().parents[1] / "data"
TABLES = sorted(DATA.glob("replay_h200_*.json.gz"))
H200 = MachineModel.preset("h200")


@pytest.mark.parametrize("table", TABLES, ids=lambda p: p.name)
def test_every_replay_measurement_is_at_or_above_every_floor(table):
    bench = ReplayBenchmarker(table)
    machine = bench.device().machine
    assert machine.launch_floor_s == H200_LAUNCH_FLOOR_S and machine.has_datasheet
    checked = 0
    for key, rows in bench.table.problems.items():
        problem = ConvProblem.parse(key)
        by_kind = {spec.kind: floors(problem, machine, spec) for spec in specs_for(problem)}
        for config, row in rows.items():
            if row.get("status") != OK:
                continue
            kind = config.split(" ", 1)[0]
            measured_s = min(row["median_ms"], row.get("min_ms") or row["median_ms"]) * 1e-3
            # the family's floor of each kind: the least over its algorithm's variants (F(2) and F(4) for Winograd)
            for name in ("floor_s", "dram_floor_s", "onchip_floor_s", "launch_floor_s", "datasheet_floor_s",
                         "datasheet_dram_floor_s"):
                floor = min(f[name] for f in by_kind[kind])
                assert floor / measured_s <= 1.0, (key, config, name, floor, measured_s)
            for f in by_kind[kind]:
                assert f["datasheet_floor_s"] <= f["floor_s"] * (1 + 1e-12)
            checked += 1
    assert checked > 100


def test_tiny_shape_is_launch_bound():
    p = ConvProblem.parse("N=1 C=2 H=4 W=4 K=2 R=3 S=3 pad=1")
    for spec in specs_for(p):
        for f in floors(p, H200, spec):
            assert f["binding"] == "launch" and f["launch_bound"] and f["floor_s"] == H200_LAUNCH_FLOOR_S
            assert f["dram_floor_s"] < f["floor_s"] and f["onchip_floor_s"] < f["floor_s"]


def test_presets_without_measurements_have_no_launch_floor():
    # the H200's and the H100's empty kernels were measured (the H100 preset's since 2026-12-05)
    assert [k for k, m in PRESETS.items() if m.launch_floor_s > 0] == ["h200", "h100"]
    a100 = MachineModel.preset("a100")
    p = ConvProblem.parse("N=1 C=2 H=4 W=4 K=2 R=3 S=3 pad=1")
    assert all(f["binding"] != "launch" and f["binding"] in BINDINGS
               for spec in specs_for(p) for f in floors(p, a100, spec))


def test_datasheet_peaks_are_at_least_the_ceilings():
    for m in PRESETS.values():
        assert m.datasheet_bandwidth_bytes_per_s >= m.copy_bandwidth_bytes_per_s
        assert m.datasheet_fp32_flops_per_s >= m.fp32_peak_flops_per_s * 0.999   # H100: 66.9 vs 67
        assert m.l2_bandwidth_bytes_per_s > m.datasheet_bandwidth_bytes_per_s   # errs high: on-chip floor is lower
        assert m.datasheet().ceilings_source == m.datasheet_source


def test_floor_keys_kept_and_max_floor():
    p = ConvProblem.parse("N=8 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
    for spec in specs_for(p):
        for f in floors(p, H200, spec):
            assert f["floor_s"] == max(f["dram_floor_s"], f["onchip_floor_s"], f["launch_floor_s"])
            assert f["binding"] in BINDINGS and {"variant", "flops", "bound_bytes"} <= set(f)


def test_cli_bounds_shows_the_floors(capsys):
    assert main(["bounds", "N=1", "C=2", "H=4", "W=4", "K=2", "R=3", "S=3", "pad=1", "--json"]) == 0
    r = json.loads(capsys.readouterr().out)
    fl, m = r["floors"], r["machine"]
    for key in ("dram_floor_ms", "onchip_floor_ms", "launch_floor_ms", "floor_ms", "binding", "launch_bound",
                "datasheet_floor_ms", "datasheet_binding", "ceilings_source", "datasheet_source",
                "onchip_fast_memory_words_per_sm", "sm_count"):
        assert key in fl
    assert fl["binding"] == "launch" and fl["launch_bound"] is True
    assert m["datasheet_bandwidth_bytes_per_s"] == 4.8e12 and m["datasheet_fp32_flops_per_s"] == 67e12
    assert m["launch_floor_s"] == H200_LAUNCH_FLOOR_S and m["l2_bandwidth_bytes_per_s"] > 0
    assert main(["bounds", "N=1", "C=2", "H=4", "W=4", "K=2", "R=3", "S=3", "pad=1"]) == 0
    text = capsys.readouterr().out
    assert "LAUNCH-BOUND" in text and "on-chip" in text and "datasheet (NVIDIA H200 SXM)" in text
    assert "measured (H200" in text


def test_a_one_channel_problem_has_floors_and_a_family_choice(capsys) -> None:
    """C = K = groups = 1 is depthwise and dense at once: the 2-D depthwise kernels take it, and the depthwise bound
    (groups == C, one channel included) gives their floor instead of raising."""
    problem = ConvProblem.parse("N=1 C=1 H=8 W=8 K=1 R=3 S=3 pad=1")
    choice = family_choice(problem, H200)
    assert {"direct", "depthwise"} <= {r["algorithm"] for r in choice["floors"]}
    assert all(r["floor_ms"] > 0 for r in choice["floors"])
    assert main(["bounds", *problem.key().split()]) == 0
    assert "the bound favours" in capsys.readouterr().out
