"""benchmarks/kernel_breakdown.py: its table on a synthetic result (numbers chosen by hand; profiling needs a GPU)."""

from __future__ import annotations

import sys

import pytest

pytest.importorskip("torch")
from benchmark_scripts import ROOT, load_benchmark

sys.path.insert(0, str(ROOT / "benchmarks"))   # its sibling torch_timing
breakdown = load_benchmark("kernel_breakdown")


def test_markdown_lists_every_kernel_with_its_share_and_the_totals() -> None:
    result = {"problem": "N=1 C=8 H=9 W=9 K=8 R=5 S=5 pad=2", "config": "winograd_unfused_large.fwd m=4",
              "kernels_us": {"convtune": {"winograd_gemm": 30.0, "winograd_input": 6.0, "winograd_output": 4.0},
                             "cudnn": {"fft_kernel": 20.0}},
              "total_us": {"convtune": 40.0, "cudnn": 20.0}}
    text = breakdown.markdown([result], "test")
    assert "| convtune | `winograd_gemm` | 30.0 | 75% |" in text
    assert "| convtune | **total** | **40.0** | |" in text and "| cudnn | `fft_kernel` | 20.0 | 100% |" in text
