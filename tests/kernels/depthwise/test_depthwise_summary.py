"""benchmarks/depthwise_summary.py: best kernel per path, the forward and forward + backward ratios, and the misses
against issue 17's targets, on a synthetic report whose numbers are chosen by hand."""

from __future__ import annotations

import pytest
from benchmark_scripts import load_benchmark

summary = load_benchmark("depthwise_summary")


def _cand(path: str, ms: float | None, variant: str = "fast", status: str = "ok") -> dict:
    return {"path": path, "variant": variant, "median_ms": ms, "status": status}


def _result(kind: str, cands: list[dict], torch_ms: dict, mbytes: float) -> dict:
    return {"name": f"{kind}-x", "kind": kind, "candidates": cands, "torch_ms": torch_ms,
            "compulsory_bytes": {"fwd": mbytes * 1e6}}


def test_best_per_path_skips_failed_and_untimed() -> None:
    best = summary.best_by_path([_cand("fwd", 0.5), _cand("fwd", 0.1, status="wrong"), _cand("fwd", None),
                                 _cand("fwd", 0.3, "packed"), _cand("dgrad", 0.4)])
    assert best["fwd"]["median_ms"] == 0.3 and best["fwd"]["variant"] == "packed"
    assert best["dgrad"]["median_ms"] == 0.4


def test_ratios_and_the_2d_misses() -> None:
    r = _result("depthwise2d", [_cand("fwd", 0.010), _cand("dgrad", 0.010), _cand("wgrad", 0.020)],
                {"fwd": 0.015, "dgrad": 0.040, "wgrad": 0.040}, mbytes=20.0)
    row = summary.summarise(r, copy_bytes_per_s=4e12, cls="dw_3x3_s1")
    assert row["fwd_x"] == pytest.approx(1.5)
    assert row["fwd_bwd_x"] == pytest.approx((0.015 + 0.080) / 0.040)
    assert row["fwd_copy"] == pytest.approx(20e6 / 10e-6 / 4e12)
    assert summary.misses(row) == ["fwd 1.50×"]


def test_1d_uses_the_cheaper_backward_and_the_bandwidth_target() -> None:
    r = _result("depthwise1d_causal", [_cand("fwd", 0.060), _cand("dgrad", 0.050), _cand("wgrad", 0.050),
                                       _cand("bwd", 0.080, "fused")],
                {"fwd": 0.120, "dgrad": 0.1, "wgrad": 0.1, "bwd": 0.150}, mbytes=200.0)
    row = summary.summarise(r, copy_bytes_per_s=4e12, cls="dw1d_long")
    assert row["fwd_bwd_ms"] == pytest.approx(0.140)          # fused bwd 0.080 < dgrad + wgrad 0.100
    assert row["torch_fwd_bwd_ms"] == pytest.approx(0.270)    # PyTorch's joint backward
    assert row["fwd_copy"] == pytest.approx(200e6 / 60e-6 / 4e12)   # 83%: above the 80% target
    assert summary.misses(row) == []
    slow = summary.summarise(_result("depthwise1d_causal", [_cand("fwd", 0.070), _cand("dgrad", 1), _cand("wgrad", 1)],
                                     {"fwd": 0.1, "dgrad": 1, "wgrad": 1}, mbytes=200.0), 4e12, "dw1d_long")
    assert summary.misses(slow) == ["fwd 71% of copy"]
    small = summary.summarise(_result("depthwise1d_causal", [_cand("fwd", 0.070), _cand("dgrad", 1), _cand("wgrad", 1)],
                                      {"fwd": 0.1, "dgrad": 1, "wgrad": 1}, mbytes=50.0), 4e12, "dw1d_medium")
    assert summary.misses(small) == []                        # under 100 MB: no bandwidth target


def test_markdown_has_every_row_and_class() -> None:
    rows = [summary.summarise(_result("depthwise2d", [_cand("fwd", 0.01), _cand("dgrad", 0.01), _cand("wgrad", 0.01)],
                                      {"fwd": 0.03, "dgrad": 0.05, "wgrad": 0.05}, 10.0), 4e12, c) for c in ("a", "b")]
    text = summary.markdown(rows, ["x.json"])
    assert text.count("| depthwise2d-x |") == 2
    assert "| a | 1 | 3.00 (3.00) |" in text and "| **all depthwise2d** | 2 |" in text


def test_a_forward_only_report_has_no_backward_ratio() -> None:
    """``--no-bwd-2d`` reports: the forward is summarised, the forward + backward cells are "—", no backward miss."""
    fwd_only = summary.summarise(_result("depthwise2d", [_cand("fwd", 0.010)], {"fwd": 0.015}, 20.0), 4e12, "dw")
    assert fwd_only["fwd_x"] == pytest.approx(1.5) and fwd_only["fwd_bwd_x"] is None
    assert summary.misses(fwd_only) == ["fwd 1.50×"]
    text = summary.markdown([fwd_only], ["x.json"])
    assert "| 1.50 | fast | — | — |" in text and "| dw | 1 | 1.50 (1.50) | — |" in text
