"""report.svg: the pure renderer (valid XML, the expected series, escaped text, geometry of the roofline) and
its data builder on a database filled by a replay tune."""

from __future__ import annotations

import itertools
import math
import random
import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

from convtune.api.labels import Box, Request, Spot, place, text_box
from convtune.api.report import (
    FloorPoint,
    ReportData,
    Trial,
    build_report,
    render_report_svg,
    report_svg,
    roofline_layout,
    si,
)
from convtune.errors import NotFound
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope, upgrade
from convtune.storage import queries as repo
from convtune.tuner.benchmark import ReplayBenchmarker, TrialResult
from convtune.tuner.tune import tune

SVG = "{http://www.w3.org/2000/svg}"
REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay_h200_vs_cudnn.json.gz"
PROBLEM = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")

BW, PEAK = 4.19e12, 50.9e12
TRIALS = [Trial("ok", 0.30, "cfg a", 1), Trial("wrong", None, "cfg b", 1), Trial("ok", 0.20, "cfg c", 1),
          Trial("ok", 0.25, "cfg d", 1), Trial("compile_error", None, "cfg e", 2), Trial("ok", 0.12, "cfg f", 2),
          Trial("ok", 0.40, "cfg g", 2)]


def _data(**changes: object) -> ReportData:
    fields: dict[str, object] = dict(problem="N=1 C=64 H=56 W=56 K=64 R=3 S=3", device="NVIDIA H200", flops=2e9,
                                     compulsory_bytes=4e6, copy_bandwidth_bytes_per_s=BW,
                                     fp32_peak_flops_per_s=PEAK, trials=TRIALS, floor_ms=0.06)
    fields.update(changes)
    return ReportData(**fields)  # type: ignore[arg-type]


def _parse(svg: str) -> ET.Element:
    root = ET.fromstring(svg)
    assert root.tag == f"{SVG}svg"
    return root


def _by_id(root: ET.Element, element_id: str) -> ET.Element | None:
    return next((e for e in root.iter() if e.get("id") == element_id), None)


def _points(polyline: ET.Element) -> list[tuple[float, float]]:
    return [(float(x), float(y)) for x, y in (p.split(",") for p in polyline.get("points", "").split())]


def _text(root: ET.Element) -> str:
    return " ".join("".join(e.itertext()) for e in root.iter(f"{SVG}text"))


def test_valid_svg_with_every_series() -> None:
    root = _parse(render_report_svg(_data()))
    for element_id in ("convergence", "roofline", "best-so-far", "failed-trials", "trials", "floor-line",
                       "ceiling-bandwidth", "ceiling-peak", "floor-point", "best-point", "efficiency-label",
                       "run-boundaries"):
        assert _by_id(root, element_id) is not None, element_id
    trials = _by_id(root, "trials")
    failed = _by_id(root, "failed-trials")
    assert trials is not None and failed is not None
    assert len(trials.findall(f"{SVG}circle")) == 5  # the ok trials
    assert len(failed.findall(f"{SVG}path")) == 2
    titles = ["".join(p.itertext()) for p in failed.iter(f"{SVG}title")]
    assert titles == ["#2 wrong cfg b", "#5 compile_error cfg e"]
    # one boundary: run 2 starts at trial 5
    boundaries = _by_id(root, "run-boundaries")
    assert boundaries is not None and len(boundaries.findall(f"{SVG}line")) == 1
    text = _text(root)
    assert "efficiency 50.0%" in text  # 0.06 / 0.12
    assert "best 0.12 ms" in text and "floor 0.06 ms" in text and "7 trials" in text
    assert "fp32 peak 50.9 TFLOP/s" in text and "copy 4.19 TB/s" in text


def test_best_so_far_is_a_descending_step_line() -> None:
    root = _parse(render_report_svg(_data()))
    line = _by_id(root, "best-so-far")
    assert line is not None
    pts = _points(line)
    # SVG y grows downwards: a best time that only falls has y that only grows; x never goes back
    assert all(b[0] >= a[0] for a, b in itertools.pairwise(pts))
    assert all(b[1] >= a[1] for a, b in itertools.pairwise(pts))
    # three improvements (0.30, 0.20, 0.12): 3 levels, each a distinct y
    assert len({y for _, y in pts}) == 3
    assert "0.12 ms" in "".join(line.itertext())
    # the last level is the best trial's height: the same y as its dot
    trials = _by_id(root, "trials")
    assert trials is not None
    best_dot = next(c for c in trials.iter(f"{SVG}circle") if "cfg f" in "".join(c.itertext()))
    assert float(best_dot.get("cy", "nan")) == pytest.approx(pts[-1][1], abs=0.11)


def test_text_is_escaped() -> None:
    nasty = "<script>alert('x')</script> & \"q\""
    data = _data(problem=nasty, device="GPU <b>&", trials=[Trial("ok", 0.2, nasty), Trial("wrong", None, "a<b")])
    svg = render_report_svg(data)
    assert "<script>" not in svg and "<b>" not in svg and "a<b" not in svg
    root = _parse(svg)  # still well-formed
    title = _by_id(root, "report-title")
    assert title is not None and "".join(title.itertext()) == nasty
    assert root.get("aria-label") == "tuning report: " + nasty
    assert "Roofline (GPU <b>&)" in _text(root)
    failed = _by_id(root, "failed-trials")
    assert failed is not None and "".join(failed.itertext()).strip() == "#2 wrong a<b"


def _line_y_at(line: ET.Element, x: float) -> float:
    x1, y1, x2, y2 = (float(line.get(a, "nan")) for a in ("x1", "y1", "x2", "y2"))
    return y1 + (y2 - y1) * (x - x1) / (x2 - x1)


def _diamond_centre(path: ET.Element) -> tuple[float, float]:
    numbers = [float(v) for v in re.findall(r"-?\d+(?:\.\d+)?", path.get("d", ""))]
    xs, ys = numbers[0::2], numbers[1::2]
    return (min(xs) + max(xs)) / 2, (min(ys) + max(ys)) / 2


def test_roofline_geometry() -> None:
    # a memory-bound floor: 4e8 bound bytes at 4.19 TB/s take 95.5 µs, more than 2e9 FLOPs at 50.9 TFLOP/s (39 µs)
    bound_bytes = 4e8
    floor_ms = bound_bytes / BW * 1e3
    root = _parse(render_report_svg(_data(floor_ms=floor_ms, bound_bytes=bound_bytes, trials=TRIALS)))
    bandwidth, peak = _by_id(root, "ceiling-bandwidth"), _by_id(root, "ceiling-peak")
    floor_point, best_point = _by_id(root, "floor-point"), _by_id(root, "best-point")
    assert bandwidth is not None and peak is not None and floor_point is not None and best_point is not None
    # the ceilings meet at the ridge (peak / bandwidth), the roof is flat
    assert float(bandwidth.get("x2", "0")) == pytest.approx(float(peak.get("x1", "1")))
    assert float(bandwidth.get("y2", "0")) == pytest.approx(float(peak.get("y1", "1")))
    assert peak.get("y1") == peak.get("y2")
    # a memory-bound floor point lies on the bandwidth slope
    fx, fy = _diamond_centre(floor_point)
    assert fy == pytest.approx(_line_y_at(bandwidth, fx), abs=0.3)
    # the best point lies below the roof, at the compulsory intensity (right of the floor's: fewer bytes)
    bx, by = float(best_point.get("cx", "nan")), float(best_point.get("cy", "nan"))
    assert bx > fx and by > fy
    assert "at 500 FLOP/B" in "".join(best_point.itertext())  # 2e9 / 4e6
    eff = floor_ms / 0.12
    assert f"efficiency {eff:.1%}" in _text(root)


def test_compute_bound_floor_sits_on_the_peak() -> None:
    floor_ms = 2e9 / PEAK * 1e3
    root = _parse(render_report_svg(_data(floor_ms=floor_ms)))
    peak, floor_point = _by_id(root, "ceiling-peak"), _by_id(root, "floor-point")
    assert peak is not None and floor_point is not None
    assert _diamond_centre(floor_point)[1] == pytest.approx(float(peak.get("y1", "nan")), abs=0.3)


def test_no_trials_and_no_floor() -> None:
    root = _parse(render_report_svg(_data(trials=[], floor_ms=None)))
    assert "no trials yet" in _text(root)
    for element_id in ("best-so-far", "best-point", "floor-point", "efficiency-label"):
        assert _by_id(root, element_id) is None
    assert _by_id(root, "ceiling-peak") is not None


def test_only_failed_trials() -> None:
    root = _parse(render_report_svg(_data(trials=[Trial("timeout"), Trial("crashed")], floor_ms=None)))
    failed = _by_id(root, "failed-trials")
    assert failed is not None and len(failed.findall(f"{SVG}path")) == 2
    assert _by_id(root, "best-so-far") is None and _by_id(root, "best-point") is None


def test_predicted_and_explicit_best() -> None:
    root = _parse(render_report_svg(_data(predicted=True, best_ms=0.1)))
    text = _text(root)
    assert "model predictions, not measurements" in text and "best predicted 0.1 ms" in text
    assert "efficiency 60.0%" in text


def test_bad_ceilings() -> None:
    with pytest.raises(ValueError, match="ceilings"):
        render_report_svg(_data(copy_bandwidth_bytes_per_s=0))


@pytest.mark.parametrize(("value", "unit", "text"), [(4.19e12, "B/s", "4.19 TB/s"), (50.9e12, "FLOP/s", "50.9 TFLOP/s"),
                                                      (1e15, "", "1 P"), (0.5, "s", "500 ms"), (0, "x", "0 x")])
def test_si(value: float, unit: str, text: str) -> None:
    assert si(value, unit) == text


class _FlakyReplay(ReplayBenchmarker):
    """Every fourth trial comes back as a wrong result."""

    def __init__(self) -> None:
        super().__init__(REPLAY)
        self.calls = 0

    def measure(self, problem: ConvProblem, plan: object) -> TrialResult:
        self.calls += 1
        if self.calls % 4 == 2:
            return TrialResult("wrong", rel_error=0.5, error="mismatch")
        return super().measure(problem, plan)


def test_build_report_from_a_replay_tune(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        result = tune(PROBLEM, _FlakyReplay(), engine, budget_trials=12, seed=0)
        with session_scope(engine) as session:
            problem = repo.find_problem(session, PROBLEM)
            assert problem is not None
            data = build_report(session, problem.id)
            best = repo.find_best_config(session, problem_key=PROBLEM)
            assert best is not None
            assert data.problem == PROBLEM.key() and data.device == result.device_name
            assert len(data.trials) == 12 and sum(not t.ok for t in data.trials) == 3
            assert all(t.run_id == result.run_id for t in data.trials)
            assert data.floor_ms == best.floor_ms and data.best_ms == best.time_ms
            assert data.efficiency == pytest.approx(best.efficiency)
            assert data.bound_bytes is not None and data.bound_bytes >= data.compulsory_bytes * 0.999
            assert data.flops == 2 * PROBLEM.macs_nonpad and not data.predicted
            root = _parse(report_svg(session, problem.id))
            assert f"efficiency {best.efficiency:.1%}" in _text(root)
            failed = _by_id(root, "failed-trials")
            assert failed is not None and len(failed.findall(f"{SVG}path")) == 3

            with pytest.raises(NotFound):
                build_report(session, problem.id + 1000)
            untuned = repo.get_or_create_problem(session, ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1"))
            with pytest.raises(NotFound, match="not been tuned"):
                build_report(session, untuned.id)
            # an untuned problem on a known device: the floor from the bounds, no trials
            empty = build_report(session, untuned.id, device_id=best.device_id)
            assert empty.trials == [] and empty.floor_ms is not None and math.isfinite(empty.floor_ms)
            assert "no trials yet" in _text(_parse(render_report_svg(empty)))
    finally:
        engine.dispose()


# ---- the roofline: each algorithm's own FLOPs, nothing above the roof, labels that do not collide --------
# An H200-like problem where Winograd's floor is compute-bound with ~2.5x fewer FLOPs than direct's
DIRECT = FloorPoint("direct", 6.06e9, 1.59e7, 6.06e9 / PEAK * 1e3)
WINOGRAD = FloorPoint("winograd", 2.42e9, 4.42e7, max(2.42e9 / PEAK, 4.42e7 / BW) * 1e3)


def _roof(intensity: float) -> float:
    return min(PEAK, BW * intensity)


def _plotted(root: ET.Element) -> list[tuple[str, float, float]]:
    """(id, intensity, FLOP/s) of every marker the SVG draws on the roofline."""
    roofline = _by_id(root, "roofline")
    assert roofline is not None
    return [(e.get("id", ""), float(e.get("data-intensity", "nan")), float(e.get("data-flops-per-s", "nan")))
            for e in roofline.iter() if e.get("class") in ("floor-point", "best-point")]


def _winograd_data(**changes: object) -> ReportData:
    fields: dict[str, object] = dict(flops=DIRECT.flops, compulsory_bytes=1.2e7, floor_ms=WINOGRAD.floor_ms,
                                     bound_bytes=WINOGRAD.bound_bytes, floors=(DIRECT, WINOGRAD),
                                     best_algorithm="winograd", best_ms=WINOGRAD.floor_ms / 0.6,
                                     trials=[Trial("ok", WINOGRAD.floor_ms / 0.6)])
    fields.update(changes)
    return _data(**fields)


def test_the_winograd_floor_counts_its_own_flops_and_stays_under_the_roof() -> None:
    # the bug this guards against: Winograd's floor time with the direct convolution's FLOPs is above the roof
    assert DIRECT.flops / (WINOGRAD.floor_ms * 1e-3) > PEAK * 2
    root = _parse(render_report_svg(_winograd_data()))
    plotted = _plotted(root)
    assert {p[0] for p in plotted} == {"floor-point", "floor-point-direct", "best-point"}
    for element_id, intensity, flops_per_s in plotted:
        assert flops_per_s <= _roof(intensity) * (1 + 1e-5), element_id
    floor = _by_id(root, "floor-point")
    assert floor is not None and floor.get("data-algorithm") == "winograd"
    assert float(floor.get("data-flops-per-s", "nan")) == pytest.approx(WINOGRAD.flops / (WINOGRAD.floor_ms * 1e-3),
                                                                         rel=1e-5)
    # the best (a Winograd config) counts Winograd's FLOPs too: 60 % of its floor's FLOP/s, at the same height ratio
    best = _by_id(root, "best-point")
    assert best is not None and best.get("data-algorithm") == "winograd"
    assert float(best.get("data-flops-per-s", "nan")) == pytest.approx(0.6 * WINOGRAD.flops_per_s, rel=1e-5)
    assert "efficiency 60.0%" in _text(root)


def test_a_best_of_another_algorithm_than_the_lowest_floor_says_whose_floor_the_gap_is() -> None:
    data = _winograd_data(best_algorithm="direct", best_ms=DIRECT.floor_ms / 0.5, floor_ms=WINOGRAD.floor_ms)
    root = _parse(render_report_svg(data))
    for element_id, intensity, flops_per_s in _plotted(root):
        assert flops_per_s <= _roof(intensity) * (1 + 1e-5), element_id
    label = _by_id(root, "efficiency-label")
    assert label is not None and "".join(label.itertext()) == "50.0% of the direct floor"
    assert f"efficiency {data.efficiency:.1%}" in _text(root)  # the subtitle: against the lowest floor


def _overlaps(boxes: list[tuple[str, Box]]) -> list[tuple[str, str]]:
    return [(a, b) for (a, box_a), (b, box_b) in itertools.combinations(boxes, 2) if box_a.overlap(box_b) > 0]


CASES = [
    _data(),  # memory-bound data, compute-bound-ish floor
    _data(floor_ms=2e9 / PEAK * 1e3, best_ms=2e9 / PEAK * 1e3 / 0.97),  # best almost at the peak, under its label
    _data(floor_ms=2e9 / PEAK * 1e3, compulsory_bytes=1e5, best_ms=0.05),  # far right of the ridge
    _data(flops=1e7, compulsory_bytes=1e7, floor_ms=1e7 / BW * 1e3, best_ms=1e7 / BW * 1e3 / 0.3),  # memory-bound
    _winograd_data(),
    _winograd_data(best_algorithm="direct", best_ms=DIRECT.floor_ms / 0.9),
    _winograd_data(best_ms=WINOGRAD.floor_ms / 0.99),
    _data(predicted=True, best_ms=0.1, device="a device with a long name " * 3),
]


@pytest.mark.parametrize("data", CASES, ids=range(len(CASES)))
def test_roofline_labels_do_not_collide(data: ReportData) -> None:
    layout = roofline_layout(data, 500, 70, 372, 270)
    area = Box(layout.ax.left, layout.ax.top, layout.ax.right, layout.ax.bottom)
    ids = {label.id for label in layout.labels}
    assert "peak-label" in ids and ("efficiency-label" in ids) == (len(layout.points) >= 2)
    boxes = [(label.id, label.box) for label in layout.labels]
    assert layout.bandwidth_label is not None
    boxes += [("legend", layout.legend), ("bandwidth-label", layout.bandwidth_label[2])]
    assert _overlaps(boxes) == []
    for name, box in boxes:
        assert box.inside(area.grown(1)), name
    # no label covers a marker
    for p in layout.points:
        marker = Box(layout.ax.x(p.intensity) - 6, layout.ax.y(p.flops_per_s) - 6,
                     layout.ax.x(p.intensity) + 6, layout.ax.y(p.flops_per_s) + 6)
        assert [label.id for label in layout.labels if label.box.overlap(marker)] == [], p.id
    # the SVG draws the labels where the layout put them
    root = _parse(render_report_svg(data))
    for label in layout.labels:
        element = _by_id(root, label.id)
        assert element is not None and "".join(element.itertext()) == label.text
        assert element.get("text-anchor") == label.spot.anchor


def test_place_moves_a_label_off_a_taken_spot() -> None:
    spots = [Spot(100, 100), Spot(100, 130)]
    a, b = place([Request("a", "some label", 10, spots), Request("b", "some label", 10, spots)], Box(0, 0, 400, 400))
    assert a.spot == spots[0] and b.spot == spots[1] and a.box.overlap(b.box) == 0
    # a box is never narrower than the text: 0.6 em per character
    assert text_box("12345", 10, Spot(0, 10, "end")) == Box(-30, 2, 0, 12.5)
    # nowhere clear: the least overlap, inside the area
    crowded = [Box(0, 0, 70, 100), Box(300, 40, 320, 45)]
    (c,) = place([Request("c", "x" * 10, 10, [Spot(0, 50), Spot(300, 50)])], Box(0, 0, 400, 100), obstacles=crowded)
    assert c.spot == Spot(300, 50)
    # ... unless the label is optional: then it is left out
    assert place([Request("c", "x" * 10, 10, [Spot(0, 50), Spot(300, 50)], optional=True)], Box(0, 0, 400, 100),
                 obstacles=crowded) == []


def test_the_report_of_a_replay_tune_stays_under_the_roof(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'convtune.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        tune(PROBLEM, ReplayBenchmarker(REPLAY), engine, budget_trials=12, seed=0)
        with session_scope(engine) as session:
            problem = repo.find_problem(session, PROBLEM)
            assert problem is not None
            data = build_report(session, problem.id)
            assert {f.algorithm for f in data.floors} == {"direct", "winograd"}
            winograd = next(f for f in data.floors if f.algorithm == "winograd")
            assert winograd.flops < data.flops  # fewer multiplications than the direct MACs
            assert data.best_algorithm in ("direct", "winograd")
            root = _parse(render_report_svg(data))
            plotted = _plotted(root)
            assert len(plotted) == 3
            for element_id, intensity, flops_per_s in plotted:
                roof = min(data.fp32_peak_flops_per_s, data.copy_bandwidth_bytes_per_s * intensity)
                assert flops_per_s <= roof * (1 + 1e-5), element_id
            layout = roofline_layout(data, 500, 70, 372, 270)
            assert _overlaps([(label.id, label.box) for label in layout.labels] + [("legend", layout.legend)]) == []
    finally:
        engine.dispose()


def _random_report(rng: random.Random) -> ReportData:
    """Ceilings, sizes, floors of one or two algorithms and a best no faster than its algorithm's floor."""
    bw, peak = 10 ** rng.uniform(11.5, 13), 10 ** rng.uniform(12.5, 14.5)
    flops = 10 ** rng.uniform(6, 11)
    compulsory = flops / 10 ** rng.uniform(-1, 3.5)
    floors = []
    for algorithm in ("direct", "winograd")[:rng.randint(1, 2)]:
        f = flops * (rng.uniform(0.3, 0.6) if algorithm == "winograd" else 1.0)
        b = compulsory * rng.uniform(1, 20)
        floors.append(FloorPoint(algorithm, f, b, max(f / peak, b / bw) * 1e3))
    floors.sort(key=lambda f: f.floor_ms)
    best = rng.choice(floors)
    return _data(flops=flops, compulsory_bytes=compulsory, copy_bandwidth_bytes_per_s=bw, fp32_peak_flops_per_s=peak,
                 floors=floors, floor_ms=floors[0].floor_ms, bound_bytes=floors[0].bound_bytes,
                 best_algorithm=best.algorithm, best_ms=best.floor_ms / rng.uniform(0.05, 1.0))


def test_random_reports_stay_under_the_roof_with_labels_apart() -> None:
    rng = random.Random(15)  # fixed: the same 300 reports every run
    for _ in range(300):
        data = _random_report(rng)
        layout = roofline_layout(data, 500, 70, 372, 270)
        for p in layout.points:
            roof = min(data.fp32_peak_flops_per_s, data.copy_bandwidth_bytes_per_s * p.intensity)
            assert p.flops_per_s <= roof * (1 + 1e-9), (p, data)
        boxes = [(label.id, label.box) for label in layout.labels] + [("legend", layout.legend)]
        if layout.bandwidth_label is not None:
            boxes.append(("bandwidth-label", layout.bandwidth_label[2]))
        assert _overlaps(boxes) == [], data
        assert {"peak-label", "efficiency-label"} <= {label.id for label in layout.labels}
