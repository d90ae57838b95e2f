"""benchmarks/ab_compare.py: two vs_cudnn.py runs side by side (the kernel_ab step's table)."""

from __future__ import annotations

import json
from pathlib import Path

from benchmark_scripts import load_benchmark

ab_compare = load_benchmark("ab_compare")


def _run(path: Path, rows: list[tuple[str, dict[str, float], float]]) -> Path:
    path.write_text(json.dumps({"results": [{"name": name, "baseline": "fp32", "family_best_ms": best,
                                             "cudnn_ms": {"fp32": cudnn, "tf32": cudnn / 2}}
                                            for name, best, cudnn in rows]}))
    return path


def test_the_table_pairs_shapes_and_families_and_keeps_what_one_side_lacks(tmp_path: Path) -> None:
    before = _run(tmp_path / "before.json", [("se_expand", {"pointwise": 0.0108, "direct": 0.0030}, 0.0026)])
    after = _run(tmp_path / "after.json", [("se_expand", {"pointwise": 0.0027}, 0.0027),
                                           ("mnv2_7x7", {"pointwise": 0.0300}, 0.0279)])
    rows = [line.split(" | ") for line in ab_compare.table(ab_compare.family_best_us(before),
                                                          ab_compare.family_best_us(after)).splitlines()[2:]]
    cells = {(r[0].strip("| "), r[1]): [c.strip(" |") for c in r[2:]] for r in rows}
    # µs before / after, after ÷ before, × cuDNN of the run's class (fp32) in each run
    assert cells[("se_expand", "pointwise")] == ["10.8", "2.7", "0.250", "0.24", "1.00"]
    assert cells[("se_expand", "direct")] == ["3.0", "—", "—", "0.87", "—"]
    assert cells[("mnv2_7x7", "pointwise")] == ["—", "30.0", "—", "—", "0.93"]
