"""benchmarks/user_suite_merge.py: each shape's row from the last run that tuned it, else the first run's; the
committed TF32 H100 runs merge to the figures their README quotes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from benchmark_scripts import ROOT, load_benchmark

merge_script = load_benchmark("user_suite_merge")
RUNS = ROOT / "benchmarks" / "results" / "igemm_wgmma_h200" / "class_tuned_h100"


def _row(name: str, source: str, kernel: float) -> dict:
    return {"name": name, "config_source": source, "speedup_kernel": kernel, "speedup_graph": kernel,
            "speedup_eager": kernel}


def test_the_last_tuned_row_wins_and_untuned_shapes_keep_the_first_runs_row() -> None:
    first = {"meta": {"class": "tf32"}, "rows": [_row("a", "database", 2.0), _row("b", "model", 0.5),
                                                 _row("c", "model", 1.0)]}
    later = {"meta": {"class": "tf32"}, "rows": [_row("b", "database", 1.5), _row("c", "model", 3.0)]}
    merged = merge_script.merge([first, later])
    assert [(r["name"], r["speedup_kernel"]) for r in merged] == [("a", 2.0), ("b", 1.5), ("c", 1.0)]
    text = merge_script.summary(merged)
    assert "3 shapes, 2 tuned" in text and "| kernel | 1.44 | 1.00 (c) |" in text   # (2 · 1.5 · 1)^(1/3)


def test_runs_of_different_classes_are_refused(tmp_path: Path) -> None:
    paths = []
    for i, cls in enumerate(("tf32", "bfloat16")):
        paths.append(tmp_path / f"{i}.json")
        paths[-1].write_text(json.dumps({"meta": {"class": cls}, "rows": [_row("a", "database", 1.0)]}))
    with pytest.raises(SystemExit, match="different classes"):
        merge_script.main([str(p) for p in paths])


def test_the_committed_tf32_wide_runs_merge_to_the_quoted_figures() -> None:
    runs = [json.loads((RUNS / name / "user_suite.json").read_text()) for name in ("tf32_wide", "tf32_wide_rest")]
    merged = merge_script.merge(runs)
    assert len(merged) == 43 and all(r["config_source"] == "database" for r in merged)
    assert round(merge_script.geomean([r["speedup_kernel"] for r in merged]), 2) == 1.38
    assert min(merged, key=lambda r: r["speedup_kernel"])["name"] == "alexnet_conv2_b64"
