"""``convtune analyze`` and :mod:`convtune.analysis.depthwise1d`: rows, table, JSON and roofline from synthetic
timings (CPU), every input error and a missing GPU as one line with exit status 2, and a real run (gpu)."""

from __future__ import annotations

import contextlib
import io
import json
import sys
from pathlib import Path

import pytest

from convtune.analysis import depthwise1d as da
from convtune.cli import main
from convtune.errors import InvalidConfig
from convtune.kernels.depthwise.conv1d import traffic
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
PROBLEM = ConvProblem.depthwise1d(B=64, C=16, L=48, K=7)
CEILINGS = da.Ceilings(4.2e12, 50.0e12, "synthetic")


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


def _synthetic() -> list[da.Measurement]:
    """The model's plans, 'timed' at 2× the model's time."""
    plans = da.choose_plans(PROBLEM, H200, da.VARIANTS_1D, da.PATHS)
    from convtune.kernels.depthwise.model import predict_1d

    return [da.Measurement(pl.variant, pl.path, da.mode_of(pl), pl.config.key(),
                           2e3 * predict_1d(pl, H200).time_s, 1.9e3 * predict_1d(pl, H200).time_s,
                           2.1e3 * predict_1d(pl, H200).time_s, traffic.total_traffic_bytes(pl), 1e-7) for pl in plans]


def test_parse_list_keeps_the_canonical_order_and_names_the_field() -> None:
    assert da.parse_list("all", da.PATHS, "--paths") == ["fwd", "dgrad", "wgrad"]
    assert da.parse_list("wgrad, fwd", da.PATHS, "--paths") == ["fwd", "wgrad"]
    with pytest.raises(InvalidConfig) as exc:
        da.parse_list("fwd,bwd", da.PATHS, "--paths")
    assert exc.value.field == "--paths" and "bwd" in str(exc.value)
    with pytest.raises(InvalidConfig, match="empty"):
        da.parse_list(" , ", da.VARIANTS_1D, "--variants")


def test_one_plan_per_variant_path_and_wgrad_mode() -> None:
    plans = da.choose_plans(PROBLEM, H200, ["shared", "fast"], ["fwd", "wgrad"])
    keys = [(pl.variant, pl.path, da.mode_of(pl)) for pl in plans]
    assert keys == [("shared", "fwd", ""), ("shared", "wgrad", "deterministic"), ("shared", "wgrad", "atomic"),
                    ("fast", "fwd", ""), ("fast", "wgrad", "deterministic"), ("fast", "wgrad", "atomic")]
    only = da.choose_plans(PROBLEM, H200, ["warp"], ["wgrad"], modes=["atomic"])
    assert [da.mode_of(pl) for pl in only] == ["atomic"]


def test_rows_compute_bandwidth_intensity_floor_and_efficiency() -> None:
    measurements = _synthetic()
    rows = da.analysis_rows(PROBLEM, measurements, CEILINGS, H200)
    assert len(rows) == len(measurements) + len(da.VARIANTS_1D)       # one total per variant
    flops = traffic.flops(PROBLEM)
    for m, r in zip(measurements, rows, strict=False):
        t = m.median_ms * 1e-3
        assert r["effective_gbps"] == pytest.approx(m.modelled_bytes / t / 1e9)
        assert r["pct_copy"] == pytest.approx(100 * m.modelled_bytes / t / CEILINGS.copy_bytes_per_s)
        assert r["intensity"] == pytest.approx(flops / m.modelled_bytes)
        assert r["floor_ms"] == pytest.approx(1e3 * max(flops / CEILINGS.peak_flops_per_s,
                                                        da.bound_bytes(PROBLEM, m.path, H200)
                                                        / CEILINGS.copy_bytes_per_s))
        assert r["efficiency"] == pytest.approx(r["floor_ms"] / m.median_ms)
        assert 0 < r["efficiency"] < 1
    totals = {r["variant"]: r for r in rows if r["path"] == "total"}
    fast = [m for m in measurements if m.variant == "fast" and m.mode != "atomic"]
    assert totals["fast"]["median_ms"] == pytest.approx(sum(m.median_ms for m in fast))
    assert totals["fast"]["config"] == "fwd+dgrad+wgrad"


def test_bound_bytes_per_path() -> None:
    assert da.bound_bytes(PROBLEM, "fwd", H200) == 4 * PROBLEM.compulsory_elements
    assert da.bound_bytes(PROBLEM, "wgrad", H200) == traffic.compulsory_bytes(PROBLEM, "wgrad")


def test_markdown_table_has_a_row_per_measurement() -> None:
    rows = da.analysis_rows(PROBLEM, _synthetic(), CEILINGS, H200)
    text = da.markdown_table(PROBLEM, rows, CEILINGS)
    assert text.startswith(f"# Depthwise 1-D analysis: {PROBLEM.key()}")
    assert "4.20 TB/s" in text and "| fast | wgrad | atomic |" in text and "| naive | total |" in text
    table = [line for line in text.splitlines() if line.startswith("| ") and not line.startswith("| variant")]
    assert len(table) == len(rows)


def test_report_with_plots(tmp_path: Path) -> None:
    pytest.importorskip("matplotlib")
    rows = da.analysis_rows(PROBLEM, _synthetic(), CEILINGS, H200)
    files, note = da.write_report(tmp_path / "out", PROBLEM, rows, CEILINGS)
    assert note is None
    assert sorted(f.name for f in files) == ["analysis.json", "analysis.md", "roofline.png", "roofline.svg"]
    assert (tmp_path / "out" / "roofline.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "<svg" in (tmp_path / "out" / "roofline.svg").read_text()
    data = json.loads((tmp_path / "out" / "analysis.json").read_text())
    assert data["problem"] == PROBLEM.key() and len(data["rows"]) == len(rows)
    assert data["ceilings"]["copy_bytes_per_s"] == CEILINGS.copy_bytes_per_s


def test_report_without_matplotlib_skips_the_plots(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "matplotlib", None)   # import matplotlib -> ImportError
    rows = da.analysis_rows(PROBLEM, _synthetic(), CEILINGS, H200)
    files, note = da.write_report(tmp_path, PROBLEM, rows, CEILINGS)
    assert [f.name for f in files] == ["analysis.md", "analysis.json"]
    assert note is not None and "matplotlib" in note and len(note.splitlines()) == 1
    assert not (tmp_path / "roofline.png").exists()


@pytest.mark.parametrize(("argv", "field"), [
    (["B=4", "C=8", "L=48"], "K"),
    (["B=4", "C=8", "L=48", "K=0"], "K"),
    (["N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "groups=8"], "problem"),
    (["B=4", "C=8", "L=48", "K=4", "dilation=2"], "problem"),
    (["B=4", "C=8", "L=48", "K=4", "--variants", "fast,tiled"], "--variants"),
    (["B=4", "C=8", "L=48", "K=4", "--paths", "bwd"], "--paths"),
    (["B=4", "C=8", "L=48", "K=4", "--modes", "fast"], "--modes"),
    (["B=4", "C=8", "L=48", "K=4", "--reps", "0"], "--reps"),
    (["B=4", "C=8", "L=48", "K=4", "--candidates", "0"], "--candidates"),
], ids=["missing-K", "zero-K", "not-1d", "dilation", "variant", "path", "mode", "reps", "candidates"])
def test_bad_input_is_one_line_naming_the_field(argv: list[str], field: str) -> None:
    rc, out, err = _run(["analyze", *argv])
    assert rc == 2 and out == ""
    assert len(err.strip().splitlines()) == 1 and err.startswith(f"convtune: error: {field}: ")


def test_without_a_gpu_analyze_fails_with_one_line(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(da, "device_ready", lambda: "no CUDA device found")
    rc, out, err = _run(["analyze", *PROBLEM.key().split(), "--out", str(tmp_path / "a")])
    assert rc == 2 and out == ""
    assert err.strip() == "convtune: error: device: no CUDA device found: convtune analyze times kernels on a CUDA GPU"
    assert not (tmp_path / "a").exists()


def test_device_ready_says_why_here() -> None:
    why = da.device_ready()
    assert why is None or ("CUDA" in why or "cupy" in why.lower())


@pytest.mark.gpu
def test_analyze_on_the_gpu_writes_the_report(tmp_path: Path) -> None:
    rc, out, err = _run(["analyze", "B=32", "C=16", "L=48", "K=7", "--reps", "5", "--out", str(tmp_path), "--json"])
    assert rc == 0, err
    rows = json.loads(out)
    assert {(r["variant"], r["path"]) for r in rows} >= {(v, p) for v in da.VARIANTS_1D for p in da.PATHS}
    assert all(r["median_ms"] > 0 and r["efficiency"] > 0 for r in rows)
    assert all(r["rel_error"] <= da.TOLERANCE[r["path"]] for r in rows if r["path"] != "total")
    assert (tmp_path / "analysis.md").is_file() and (tmp_path / "analysis.json").is_file()


def test_candidate_groups_are_the_models_ranking_per_row() -> None:
    groups = da.candidate_groups(PROBLEM, H200, ["shared", "warp"], ["fwd", "wgrad"], candidates=3)
    assert groups and all(1 <= len(g) <= 3 for g in groups)
    firsts = [g[0] for g in groups]
    assert firsts == da.choose_plans(PROBLEM, H200, ["shared", "warp"], ["fwd", "wgrad"])
    for g in groups:
        assert len({(pl.variant, pl.config.key().split()[0]) for pl in g}) == 1   # one variant × path per row
        times = [da.model.predict_1d(pl, H200).time_s for pl in g]
        assert times == sorted(times)
