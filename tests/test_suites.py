"""The wider public suite (benchmarks/suites/wide.json): classes, counts, parsing and finite bounds."""

from __future__ import annotations

import json
import math
from collections import Counter
from pathlib import Path

import pytest

from convtune.bounds import depthwise_lower_bound, direct_lower_bound
from convtune.cli import main
from convtune.cli.bounds import load_suite
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

REPO = Path(__file__).resolve().parents[1]
WIDE = REPO / "benchmarks" / "suites" / "wide.json"

#: Entries per class, per family: the classes issue 17 asks for.
EXPECTED_CLASSES = {
    "conv2d": {"5x5": 6, "7x7": 5, "asymmetric": 6, "large_filter_stride": 4, "3x3_stride2": 5, "1x1_stride2": 4,
               "dilated": 5, "odd_channels": 6, "non_square": 2},
    "depthwise2d": {"dw_3x3_s1": 2, "dw_3x3_s2": 3, "dw_5x5_s1": 2, "dw_5x5_s2": 2, "dw_7x7": 3},
    "depthwise1d_causal": {"dw1d_decode": 2, "dw1d_medium": 4, "dw1d_long": 2, "dw1d_odd_channels": 1},
}


def raw() -> dict:
    return json.loads(WIDE.read_text())


def entries() -> list[tuple[str, dict, ConvProblem]]:
    """(family, JSON entry, problem) for every entry, through the CLI's suite loader."""
    data = raw()
    loaded = load_suite(str(WIDE))
    specs = [(family, spec) for family in EXPECTED_CLASSES for spec in data[family]]
    assert [(f, s["name"]) for f, s in specs] == [(f, n) for f, n, _ in loaded]
    return [(f, s, p) for (f, s), (_, _, p) in zip(specs, loaded, strict=True)]


def test_counts_per_class():
    data = raw()
    for family, expected in EXPECTED_CLASSES.items():
        assert Counter(e["class"] for e in data[family]) == expected, family
    assert len(data["conv2d"]) >= 40
    assert len(data["depthwise2d"]) + len(data["depthwise1d_causal"]) >= 16
    names = [e["name"] for family in EXPECTED_CLASSES for e in data[family]]
    assert len(set(names)) == len(names)
    assert all(isinstance(e.get("source"), str) and e["source"] for f in EXPECTED_CLASSES for e in data[f])


def test_every_entry_is_a_valid_problem_of_its_class():
    for family, spec, p in entries():
        cls, name = spec["class"], spec["name"]
        assert p == ConvProblem.parse(p.key()), name
        if family == "depthwise1d_causal":
            assert p.causal and p.is_depthwise, name
            continue
        if family == "depthwise2d":
            assert p.is_depthwise and p.R == p.S and not p.causal, name
            kernel, stride = cls.removeprefix("dw_").split("_s") if "_s" in cls else (cls.removeprefix("dw_"), "1")
            assert f"{p.R}x{p.S}" == kernel and p.stride_h == p.stride_w == int(stride), name
            continue
        assert p.groups == 1 and not p.causal, name
        checks = {
            "5x5": p.R == p.S == 5,
            "7x7": p.R == p.S == 7,
            "asymmetric": min(p.R, p.S) == 1 and max(p.R, p.S) > 1,
            "large_filter_stride": max(p.R, p.S) >= 7 and min(p.stride_h, p.stride_w) >= 2,
            "3x3_stride2": p.R == p.S == 3 and p.stride_h == p.stride_w == 2,
            "1x1_stride2": p.R == p.S == 1 and p.stride_h == p.stride_w == 2,
            "dilated": min(p.dil_h, p.dil_w) >= 2,
            "odd_channels": p.C % 8 != 0 or p.K % 8 != 0,
            "non_square": p.H != p.W,
        }
        assert checks[cls], (name, cls)


def test_suite_covers_the_issue_ranges():
    all_entries = entries()
    conv = [p for f, _, p in all_entries if f == "conv2d"]
    dw1 = [p for f, _, p in all_entries if f == "depthwise1d_causal"]
    assert {1, 4, 8, 16, 64} <= {p.N for p in conv}
    assert min(min(p.H, p.W) for p in conv) == 7 and max(max(p.H, p.W) for p in conv) == 224
    assert {3, 13, 50} <= {p.C for p in conv} | {p.K for p in conv}
    assert any(p.H != p.W for p in conv)
    assert any(p.dil_h >= 6 for p in conv) and any(p.dil_h == 2 for p in conv)
    assert (min(p.W for p in dw1), max(p.W for p in dw1)) == (1, 4096)          # L from 1 to 4096
    assert (min(p.C for p in dw1), max(p.C for p in dw1)) == (37, 1024)          # C from 37 to 1024
    assert any(p.W < p.S for p in dw1)                                           # a decode step, L < K


@pytest.mark.parametrize("level", ["block", "l2"])
def test_bounds_compute_finite_and_positive_for_every_entry(level):
    machine = MachineModel.preset("h200")
    for _, spec, p in entries():
        s = machine.fast_memory_words(level, word_bytes=p.itemsize_bytes)
        b = depthwise_lower_bound(p, s) if p.is_depthwise else direct_lower_bound(p, s)
        assert b.valid and math.isfinite(b.words) and b.words > 0, spec["name"]
        assert b.words >= p.compulsory_elements > 0, spec["name"]


def test_cli_bounds_reads_the_wide_suite(capsys):
    rc = main(["bounds", "--suite", str(WIDE), "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == ""
    reports = json.loads(out)
    assert len(reports) == sum(sum(c.values()) for c in EXPECTED_CLASSES.values())
    assert all(r["reported"]["words"] > 0 and r["reported"]["valid"] for r in reports)


def test_the_model_problem_keys_parse_as_batch_32_float32_problems() -> None:
    """benchmarks/suites/models_b32_fp32_problems.txt (ResNet-50 and MobileNetV2 at batch 32, what
    ``precompile_cubins.py --warm-start --problems`` reads): every line a distinct float32 problem of batch 32."""
    lines = (REPO / "benchmarks" / "suites" / "models_b32_fp32_problems.txt").read_text().splitlines()
    problems = [ConvProblem.parse(line) for line in lines]
    assert len(problems) == len({p.key() for p in problems}) == 53
    assert all(p.N == 32 and p.dtype == "float32" for p in problems)
    assert sum(p.groups > 1 for p in problems) > 0 and sum(p.groups == 1 for p in problems) > 23
