"""The pieces of ``benchmarks/model_calibration.py``: tie-aware Spearman, regret, the term split, and that the
leave-one-shape-out fit never sees the held-out shape; its main runs on truncated tables."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from tests.benchmark_scripts import load_benchmark

mc = load_benchmark("model_calibration")


def test_spearman_on_known_examples() -> None:
    assert mc.spearman([1, 2, 3, 4, 5], [5, 6, 7, 8, 7.5]) == pytest.approx(0.9)   # d² = 0,0,0,1,1 -> 1-6·2/120
    assert mc.spearman([1, 2, 3], [30, 20, 10]) == pytest.approx(-1.0)
    # ties share their mean rank: ranks (1.5, 1.5, 3, 4) vs (1, 2, 3, 4)
    r = np.corrcoef([1.5, 1.5, 3, 4], [1, 2, 3, 4])[0, 1]
    assert mc.spearman([7, 7, 8, 9], [1, 2, 3, 4]) == pytest.approx(r)
    assert list(mc.rank_rows(np.array([3.0, 1.0, 3.0, 2.0]))) == [2.5, 0.0, 2.5, 1.0]


def test_regret_is_the_measured_time_of_the_predicted_first() -> None:
    measured = np.array([2.0, 1.0, 4.0])
    assert list(mc.regret_rows(np.array([[0.1, 0.2, 0.3], [0.3, 0.1, 0.2]]), measured)) == [2.0, 1.0]


def _unit(problem: str, measured: list[float], t: list[list[float]]):
    return mc.Unit("winograd", "t", problem, problem, [str(i) for i in range(len(measured))], np.asarray(t),
                   np.asarray(measured))


def test_leave_one_out_never_trains_on_the_held_out_shape() -> None:
    rng = np.random.default_rng(0)
    shapes = ["a", "b", "c", "a"]   # shape "a" is in two tables: both units are held out together
    units = [_unit(s, list(rng.random(30)), rng.random((30, 4)).tolist()) for s in shapes]
    grid = mc.weight_grid("winograd")
    rho, _ = mc.score_table(units, grid)
    seen: list[np.ndarray] = []

    def spy(train_rho: np.ndarray, g: np.ndarray) -> int:
        seen.append(train_rho.copy())
        return mc.fit(train_rho, g)

    chosen = mc.leave_one_shape_out(units, rho, grid, spy)
    assert sorted(chosen) == ["a", "b", "c"]
    # the columns each fold trained on are exactly the other shapes' units
    expected = {"a": [1, 2], "b": [0, 2, 3], "c": [0, 1, 3]}
    for (_shape, cols), got in zip(sorted(expected.items()), seen, strict=True):
        np.testing.assert_array_equal(got, rho[:, cols])
    # changing the held-out shape's measurements cannot change the weights chosen for it
    scrambled = [_unit(u.problem, list(rng.random(30)) if u.problem == "b" else list(u.measured), u.terms.tolist())
                 for u in units]
    rho2, _ = mc.score_table(scrambled, grid)
    assert mc.leave_one_shape_out(scrambled, rho2, grid)["b"] == chosen["b"]


def test_the_fit_recovers_a_planted_weight() -> None:
    """Measured = the model with l2 weighted 4: the fit, on other shapes, picks l2 ×4 for the held-out one."""
    rng = np.random.default_rng(1)
    truth = np.array([1.0, 4.0, 1.0, 1.0])
    units = []
    for s in "abcd":
        t = rng.random((60, 4))
        units.append(_unit(s, list(mc.combine("winograd", t, truth)[0]), t.tolist()))
    grid = mc.weight_grid("winograd")
    rho, _ = mc.score_table(units, grid)
    for k in mc.leave_one_shape_out(units, rho, grid).values():
        assert rho[k].min() == pytest.approx(1.0)
        assert grid[k][1] == 4.0 and grid[k][0] == 1.0


def test_main_runs_on_truncated_tables(tmp_path: Path) -> None:
    """Every family's terms add up to its spec.predict_s on every row read (collect() checks it), and the report
    is written; 30 rows per problem keep it fast."""
    assert mc.main(["--max-rows", "30", "--out", str(tmp_path)]) == 0
    result = json.loads((tmp_path / "model_calibration.json").read_text())
    assert set(result["families"]) == {"direct", "winograd", "winograd_unfused"}
    for family, f in result["families"].items():
        assert len(f["units"]) >= 10, family
        for r in f["units"]:
            assert r["configs"] <= 30 and -1.0 <= r["rho_before"] <= 1.0 and r["regret_before"] >= 1.0
            assert r["rho_after"] is not None and r["regret_after"] >= 1.0
    assert "| class |" in (tmp_path / "model_calibration.md").read_text()
