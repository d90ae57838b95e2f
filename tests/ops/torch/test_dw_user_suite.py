"""benchmarks/dw_user_suite.py: its entries, set rotation, conventions and tables, on the CPU (timing needs a GPU)."""

from __future__ import annotations

import json
import math
import sys

import pytest

torch = pytest.importorskip("torch")
from benchmark_scripts import ROOT, load_benchmark  # noqa: E402

sys.path.insert(0, str(ROOT / "benchmarks"))   # its sibling torch_timing
suite_bench = load_benchmark("dw_user_suite")

WIDE = json.loads((ROOT / "benchmarks" / "suites" / "wide.json").read_text())


def test_entries_are_the_suites_depthwise_ones_with_their_geometry() -> None:
    entries = suite_bench.load_entries(WIDE, None)
    assert len([e for e in entries if e.kind == "dw2d"]) == len(WIDE["depthwise2d"])
    assert len([e for e in entries if e.kind == "dw1d"]) == len(WIDE["depthwise1d_causal"])
    first = WIDE["depthwise2d"][0]
    e = entries[0]
    assert e.name == first["name"] and e.fields["C"] == first["C"] and e.fields["stride"] == first["stride"]
    only = suite_bench.load_entries(WIDE, [WIDE["depthwise1d_causal"][0]["name"]])
    assert [x.kind for x in only] == ["dw1d"]


@pytest.mark.parametrize(("pass_bytes", "sets"), [(10**9, 1), (100 * 2**20, 1), (60 * 2**20, 2), (1, 64)])
def test_sets_make_a_pass_exceed_twice_the_l2(pass_bytes: int, sets: int) -> None:
    l2 = 50 * 2**20
    got = suite_bench.set_count(pass_bytes, l2)
    assert got == sets
    assert got == suite_bench.MAX_SETS or got * pass_bytes >= 2 * l2


@pytest.mark.parametrize("entry", [
    suite_bench.Entry("dw2d_s2_5x5", "dw2d", "t", {"N": 2, "C": 3, "H": 9, "W": 7, "R": 5, "S": 5, "stride": 2,
                                                   "pad": 2}),
    suite_bench.Entry("dw1d_decode", "dw1d", "t", {"B": 2, "C": 5, "L": 1, "K": 4}),
    suite_bench.Entry("dw1d", "dw1d", "t", {"B": 2, "C": 5, "L": 11, "K": 4}),
])
def test_both_sides_compute_the_same_convolution(entry: object) -> None:
    """convtune's op (its float64 reference path on the CPU) and the PyTorch baseline agree, gradients too: the
    benchmark times the same convolution on both sides."""
    ours, ref, x_shape, w_shape = suite_bench.conv_fns(entry)
    g = torch.Generator().manual_seed(0)
    x = torch.randn(x_shape, dtype=torch.float64, generator=g, requires_grad=True)
    w = torch.randn(w_shape, dtype=torch.float64, generator=g, requires_grad=True)
    y_ours, y_ref = ours(x, w), ref(x, w)
    assert y_ours.shape == y_ref.shape
    assert torch.allclose(y_ours, y_ref, rtol=1e-12, atol=1e-12)
    dy = torch.randn(y_ref.shape, dtype=torch.float64, generator=g)
    for a, b in zip(torch.autograd.grad(y_ours, (x, w), dy), torch.autograd.grad(y_ref, (x, w), dy), strict=True):
        assert torch.allclose(a, b, rtol=1e-12, atol=1e-12)


def _row(name: str, kind: str, fwd: float, both: float, mb: float, copy: float) -> dict:
    return {"name": name, "kind": kind, "class": "c", "sets": 1, "compulsory_fwd_bytes": int(mb * 1e6),
            "errors": {"ours_y": 1e-7, "ours_dx": 1e-7, "ours_dw": 1e-6},
            "modes": {"kernel:fwd:ours": {"us": 10.0}, "kernel:fwd:pytorch": {"us": 10.0 * fwd}},
            "speedup_kernel_fwd": fwd, "speedup_kernel_fwd+bwd": both, "copy_fraction_ours": copy}


def test_tables_state_every_target_from_the_rows() -> None:
    rows = [_row("a", "dw2d", 2.5, 4.0, 10, 0.7), _row("b", "dw2d", 1.5, 3.0, 20, 0.8),
            _row("big", "dw1d", 3.0, 4.0, 201, 0.76),
            {"name": "bad", "kind": "dw2d", "class": "c", "sets": 4, "compulsory_fwd_bytes": 10**6,
             "error": "over the float64 gate: ours_y 1.0e-03"}]
    summary = suite_bench.summarize(rows)
    assert math.isclose(summary["dw2d_kernel_fwd"], math.sqrt(2.5 * 1.5))
    assert summary["dw2d_kernel_fwd_lowest"] == 1.5 and summary["dw2d_kernel_fwd+bwd_lowest"] == 3.0
    assert summary["dw1d_over_100MB_copy_fraction"] == {"big": 0.76}
    meta = {"suite": "wide", "device": "dev", "torch": "t", "cudnn": 1, "date": "d", "copy_bytes_per_s": 3e12,
            "configs": "model"}
    text = suite_bench.markdown(rows, summary, meta)
    assert "forward NOT met (lowest 1.50), forward + backward met (lowest 3.00)" in text
    assert "big: 76% of copy" in text
    assert "| bad | c | 1.0 | 4 | over the float64 gate" in text
    assert "| a | c | 10.0 | 1 | 10.0 / 25.0 | 2.50 | 70 (—) |" in text


def test_served_plans_are_each_problems_fastest_verified_forward(tmp_path, monkeypatch) -> None:
    report = {"results": [{"problem": "P1", "candidates": [
        {"path": "fwd", "status": "ok", "median_ms": 0.02, "config": "slow"},
        {"path": "fwd", "status": "ok", "median_ms": 0.01, "config": "fast"},
        {"path": "fwd", "status": "wrong", "median_ms": 0.001, "config": "wrong"},
        {"path": "dgrad", "status": "ok", "median_ms": 0.0001, "config": "grad"}]},
        {"problem": "P2", "candidates": [{"path": "fwd", "status": "wrong", "median_ms": 0.01, "config": "x"}]}]}
    path = tmp_path / "depthwise_bench.json"
    path.write_text(json.dumps(report))
    served: dict = {}
    monkeypatch.setattr(suite_bench.resolver, "remember", lambda p, d, c: served.__setitem__((p, d), c))
    assert suite_bench.serve_plans([str(path)], "GPU") == 1
    assert served == {("P1", "GPU"): "fast"}
