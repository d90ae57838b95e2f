"""The report plot of one problem on one device, as hand-written SVG (no plotting library).

Two panels, side by side:

* **convergence** (left): every trial's time (grey dots, log scale) and the best time so far (a blue
  step line) against the trial number, in the order the measurements were stored (by id); failed
  trials (compile error, wrong result, timeout, ...) are red crosses on the bottom edge; the bound's
  floor time is a dashed green line; a thin vertical line marks where a new tuning run began.
* **roofline** (right): log-log arithmetic intensity (FLOP/byte) against FLOP/s; the device's
  ceilings — copy bandwidth (the slope) and fp32 peak (the flat roof) — the bound's floor point (at
  the intensity of the lower bound's bytes, the floor time's FLOP/s) of each algorithm that runs the
  problem, and the best measured point (FLOPs / best time, at the intensity FLOPs / compulsory bytes).
  Every point counts its own algorithm's operations (a Winograd floor counts Winograd's multiplications:
  with the direct convolution's FLOPs it would sit above the fp32 roof). The vertical gap between the best
  point and its algorithm's floor is the efficiency. Labels are placed by :mod:`convtune.api.labels` so that
  none overlaps another, the legend or a marker.

:func:`render_report_svg` is pure: it turns a :class:`ReportData` into SVG text, every string
escaped. :func:`build_report` reads a :class:`ReportData` from the database (through the repository)
and :func:`report_svg` does both.
"""

from __future__ import annotations

import html
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from sqlalchemy.orm import Session

from convtune.api.labels import ASCENT_EM, CHAR_EM, DESCENT_EM, Box, Label, Request, Spot, place
from convtune.errors import NotFound
from convtune.machine import PRESETS, MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage.models import Device, Measurement, Problem
from convtune.vocabulary import OVERALL_SCOPE

WIDTH = 960
HEIGHT = 400
#: colours (the pages use the same ones)
BLUE = "#1f5fbf"
GREEN = "#1b8a3a"
RED = "#c62828"
GREY = "#8a8f98"
INK = "#222"


@dataclass(frozen=True, slots=True)
class Trial:
    """One trial of the history: ``time_ms`` is ``None`` unless it succeeded (status ``"ok"``)."""

    status: str
    time_ms: float | None = None
    config: str = ""
    run_id: int | None = None

    @property
    def ok(self) -> bool:
        return self.status == "ok" and self.time_ms is not None and self.time_ms > 0


@dataclass(frozen=True, slots=True)
class FloorPoint:
    """One algorithm's floor, with the algorithm's own operation count (what its floor time was computed with).

    Attributes:
        algorithm: ``"direct"``, ``"winograd"`` or ``"depthwise"``.
        flops: the algorithm's FLOPs — direct: 2 per MAC that reads real input; Winograd: 2 per multiplication
            of its best F(m) (α² per tile and channel pair, transforms excluded); see
            :func:`convtune.tuner.efficiency.floors`.
        bound_bytes: the I/O lower bound of that variant (bytes).
        floor_ms: max(flops / fp32 peak, bound_bytes / copy bandwidth), in ms.
    """

    algorithm: str
    flops: float
    bound_bytes: float
    floor_ms: float

    @property
    def intensity(self) -> float:
        """FLOP/byte."""
        return self.flops / self.bound_bytes

    @property
    def flops_per_s(self) -> float:
        return self.flops / (self.floor_ms * 1e-3)


@dataclass(frozen=True, slots=True)
class ReportData:
    """What the report shows; FLOPs and bytes of the problem, ceilings of the device.

    Attributes:
        problem: the problem's key (shown as the title).
        device: the device's name.
        flops: FLOPs of the problem (the builder counts the useful ones: padding taps excluded, as the
            floor time does).
        compulsory_bytes: every used input and weight read once, every output written once.
        copy_bandwidth_bytes_per_s, fp32_peak_flops_per_s: the device's ceilings.
        trials: the history, oldest first.
        floor_ms: the bound's floor time, if known.
        bound_bytes: the lower bound's bytes (the floor point's intensity); ``None``: compulsory bytes.
        best_ms: the best time (default: the fastest ok trial).
        predicted: the trials are model predictions, not measurements.
        floors: each algorithm's floor with its own FLOPs (the roofline's floor points); empty: one floor
            point from ``floor_ms``, ``flops`` and ``bound_bytes``.
        best_algorithm: the algorithm of the best config (its point counts that algorithm's FLOPs).
    """

    problem: str
    device: str
    flops: float
    compulsory_bytes: float
    copy_bandwidth_bytes_per_s: float
    fp32_peak_flops_per_s: float
    trials: Sequence[Trial] = field(default_factory=tuple)
    floor_ms: float | None = None
    bound_bytes: float | None = None
    best_ms: float | None = None
    predicted: bool = False
    floors: Sequence[FloorPoint] = field(default_factory=tuple)
    best_algorithm: str | None = None

    @property
    def best_time_ms(self) -> float | None:
        if self.best_ms is not None and self.best_ms > 0:
            return self.best_ms
        times = [t.time_ms for t in self.trials if t.ok and t.time_ms is not None]
        return min(times) if times else None

    @property
    def efficiency(self) -> float | None:
        best = self.best_time_ms
        return self.floor_ms / best if best and self.floor_ms else None


# ---- formatting helpers -------------------------------------------------------------------------------
def _e(text: object) -> str:
    """Escape for SVG text and attribute values."""
    return html.escape(str(text), quote=True)


def _n(x: float) -> str:
    """A coordinate, short."""
    return f"{x:.1f}"


_SI = ((1e15, "P"), (1e12, "T"), (1e9, "G"), (1e6, "M"), (1e3, "k"), (1.0, ""), (1e-3, "m"), (1e-6, "µ"))


def si(value: float, unit: str = "", digits: int = 3) -> str:
    """``4.19e12, "B/s"`` -> ``"4.19 TB/s"``."""
    if value == 0 or not math.isfinite(value):
        return f"{value:g} {unit}".strip()
    for scale, prefix in _SI:
        if abs(value) >= scale * 0.9995:
            return f"{value / scale:.{digits}g} {prefix}{unit}".strip()
    return f"{value:.{digits}g} {unit}".strip()


def _ms(value: float) -> str:
    return f"{value:.4g} ms"


def _log_ticks(lo: float, hi: float) -> list[float]:
    """Tick values on a log axis: decades, or 1-2-5 steps, or 1..9 steps when the range is short."""
    if lo <= 0 or hi <= lo:
        return [lo]
    first, last = math.floor(math.log10(lo)), math.ceil(math.log10(hi))
    for mantissas in ((1,), (1, 2, 5), tuple(range(1, 10))):
        ticks = [m * 10.0 ** k for k in range(first, last + 1) for m in mantissas if lo <= m * 10.0 ** k <= hi]
        if len(ticks) >= 3 or (mantissas == (1,) and len(ticks) >= 2 and last - first > 2):
            if len(ticks) > 8:  # too many decades: every other one
                ticks = ticks[::2]
            return ticks
    return ticks or [lo, hi]


def _lin_ticks(lo: float, hi: float, count: int = 6) -> list[float]:
    span = max(hi - lo, 1e-12)
    raw = span / count
    step = 10 ** math.floor(math.log10(raw))
    for m in (1, 2, 5, 10):
        if m * step >= raw:
            step *= m
            break
    start = math.ceil(lo / step) * step
    return [start + i * step for i in range(int((hi - start) / step) + 1) if start + i * step <= hi + 1e-9]


@dataclass(frozen=True, slots=True)
class _Axes:
    """A plot area and its scales."""

    left: float
    top: float
    width: float
    height: float
    x_lo: float
    x_hi: float
    y_lo: float
    y_hi: float
    x_log: bool
    y_log: bool

    def _t(self, v: float, lo: float, hi: float, log: bool) -> float:
        if log:
            v, lo, hi = math.log10(max(v, 1e-300)), math.log10(lo), math.log10(hi)
        return (v - lo) / (hi - lo) if hi > lo else 0.5

    def x(self, v: float) -> float:
        return self.left + self._t(v, self.x_lo, self.x_hi, self.x_log) * self.width

    def y(self, v: float) -> float:
        return self.top + (1 - self._t(v, self.y_lo, self.y_hi, self.y_log)) * self.height

    @property
    def bottom(self) -> float:
        return self.top + self.height

    @property
    def right(self) -> float:
        return self.left + self.width


def _frame(ax: _Axes, x_ticks: list[float], y_ticks: list[float], x_fmt: Callable[[float], str],
           y_fmt: Callable[[float], str], x_label: str, y_label: str) -> list[str]:
    out = [f'<rect x="{_n(ax.left)}" y="{_n(ax.top)}" width="{_n(ax.width)}" height="{_n(ax.height)}" '
           f'fill="#fff" stroke="#bbb"/>']
    for t in x_ticks:
        x = ax.x(t)
        out.append(f'<line x1="{_n(x)}" y1="{_n(ax.top)}" x2="{_n(x)}" y2="{_n(ax.bottom)}" stroke="#eee"/>')
        out.append(f'<text x="{_n(x)}" y="{_n(ax.bottom + 14)}" text-anchor="middle">{_e(x_fmt(t))}</text>')
    for t in y_ticks:
        y = ax.y(t)
        out.append(f'<line x1="{_n(ax.left)}" y1="{_n(y)}" x2="{_n(ax.right)}" y2="{_n(y)}" stroke="#eee"/>')
        out.append(f'<text x="{_n(ax.left - 4)}" y="{_n(y + 4)}" text-anchor="end">{_e(y_fmt(t))}</text>')
    out.append(f'<text x="{_n(ax.left + ax.width / 2)}" y="{_n(ax.bottom + 32)}" text-anchor="middle">'
               f'{_e(x_label)}</text>')
    cy = ax.top + ax.height / 2
    out.append(f'<text x="{_n(ax.left - 52)}" y="{_n(cy)}" text-anchor="middle" '
               f'transform="rotate(-90 {_n(ax.left - 52)} {_n(cy)})">{_e(y_label)}</text>')
    return out


def _cross(x: float, y: float, r: float = 4) -> str:
    return f"M{_n(x - r)},{_n(y - r)}L{_n(x + r)},{_n(y + r)}M{_n(x - r)},{_n(y + r)}L{_n(x + r)},{_n(y - r)}"


def _legend(x: float, y: float, items: list[tuple[str, str]]) -> list[str]:
    """``items``: (SVG of the marker drawn at (0, 0), label); stacked downwards from (x, y)."""
    width = 22 + 6.2 * max(len(label) for _, label in items)
    out = [f'<g class="legend" transform="translate({_n(x)},{_n(y)})">',
           f'<rect x="-9" y="-9" width="{_n(width)}" height="{len(items) * 15 + 3}" fill="#fff" '
           'fill-opacity="0.85" stroke="#ddd"/>']
    for i, (marker, label) in enumerate(items):
        out.append(f'<g transform="translate(0,{i * 15})">{marker}<text x="14" y="4">{_e(label)}</text></g>')
    out.append("</g>")
    return out


# ---- the panels -----------------------------------------------------------------------------------------
def _convergence(data: ReportData, ax_left: float, ax_top: float, ax_w: float, ax_h: float) -> list[str]:
    out = ['<g id="convergence">',
           f'<text class="panel-title" x="{_n(ax_left)}" y="{_n(ax_top - 10)}">'
           f'Convergence: best {"predicted " if data.predicted else ""}time so far vs trial</text>']
    trials = list(data.trials)
    ok_times = [t.time_ms for t in trials if t.ok and t.time_ms is not None]
    if not trials:
        out.append(f'<rect x="{_n(ax_left)}" y="{_n(ax_top)}" width="{_n(ax_w)}" height="{_n(ax_h)}" '
                   f'fill="#fff" stroke="#bbb"/>')
        out.append(f'<text class="empty" x="{_n(ax_left + ax_w / 2)}" y="{_n(ax_top + ax_h / 2)}" '
                   'text-anchor="middle">no trials yet</text>')
        out.append("</g>")
        return out
    values = ok_times + ([data.floor_ms] if data.floor_ms else [])
    y_lo, y_hi = (min(values) / 1.25, max(values) * 1.25) if values else (0.1, 1.0)
    n = len(trials)
    ax = _Axes(ax_left, ax_top, ax_w, ax_h, 0.5, n + 0.5, y_lo, y_hi, x_log=False, y_log=True)
    x_ticks = [t for t in _lin_ticks(1, n, 8) if t == int(t)] or [1]
    out += _frame(ax, x_ticks, _log_ticks(y_lo, y_hi), lambda v: f"{v:g}", lambda v: f"{v:.3g}",
                  "trial (in order measured)", "time (ms, log)")
    # run boundaries
    out.append('<g id="run-boundaries">')
    for i in range(1, n):
        if trials[i].run_id != trials[i - 1].run_id and trials[i].run_id is not None:
            x = (ax.x(i) + ax.x(i + 1)) / 2
            out.append(f'<line class="run-boundary" x1="{_n(x)}" y1="{_n(ax.top)}" x2="{_n(x)}" '
                       f'y2="{_n(ax.bottom)}" stroke="#999" stroke-dasharray="2,3">'
                       f'<title>run {_e(trials[i].run_id)} starts</title></line>')
    out.append("</g>")
    # the floor
    if data.floor_ms:
        y = ax.y(data.floor_ms)
        out.append(f'<line id="floor-line" x1="{_n(ax.left)}" y1="{_n(y)}" x2="{_n(ax.right)}" y2="{_n(y)}" '
                   f'stroke="{GREEN}" stroke-dasharray="6,4"><title>bound floor {_e(_ms(data.floor_ms))}</title>'
                   "</line>")
    # every trial
    out.append('<g id="trials">')
    for i, t in enumerate(trials, start=1):
        if t.ok and t.time_ms is not None:
            out.append(f'<circle class="trial" cx="{_n(ax.x(i))}" cy="{_n(ax.y(t.time_ms))}" r="2.5" '
                       f'fill="{GREY}" fill-opacity="0.7"><title>#{i} {_e(_ms(t.time_ms))} {_e(t.config)}'
                       f'</title></circle>')
    out.append("</g>")
    # failed trials: red crosses on the bottom edge
    out.append('<g id="failed-trials">')
    for i, t in enumerate(trials, start=1):
        if not t.ok:
            out.append(f'<path class="failed" d="{_cross(ax.x(i), ax.bottom - 6)}" stroke="{RED}" '
                       f'stroke-width="1.8" fill="none"><title>#{i} {_e(t.status)} {_e(t.config)}</title></path>')
    out.append("</g>")
    # best so far: a step line
    points: list[tuple[float, float]] = []
    best = math.inf
    for i, t in enumerate(trials, start=1):
        if t.ok and t.time_ms is not None and t.time_ms < best:
            if points:
                points.append((ax.x(i), ax.y(best)))
            best = t.time_ms
            points.append((ax.x(i), ax.y(best)))
    if points:
        points.append((ax.x(n), ax.y(best)))
        path = " ".join(f"{_n(x)},{_n(y)}" for x, y in points)
        out.append(f'<polyline id="best-so-far" points="{path}" fill="none" stroke="{BLUE}" stroke-width="2">'
                   f'<title>best so far: {_e(_ms(best))}</title></polyline>')
    failed = sum(not t.ok for t in trials)
    items = [(f'<line x1="-5" y1="0" x2="7" y2="0" stroke="{BLUE}" stroke-width="2"/>', "best so far"),
             (f'<circle cx="1" cy="0" r="2.5" fill="{GREY}"/>', f"trial ({len(ok_times)} ok)"),
             (f'<path d="{_cross(1, 0)}" stroke="{RED}" stroke-width="1.8"/>', f"failed ({failed})")]
    if data.floor_ms:
        items.append((f'<line x1="-5" y1="0" x2="7" y2="0" stroke="{GREEN}" stroke-dasharray="4,2"/>',
                      f"bound floor {_ms(data.floor_ms)}"))
    out += _legend(ax.right - 160, ax.top + 14, items)
    out.append("</g>")
    return out


@dataclass(frozen=True, slots=True)
class RooflinePoint:
    """A marker of the roofline in data coordinates: ``intensity`` (FLOP/byte) and ``flops_per_s``.

    ``flops`` is the operation count the point was computed with: the algorithm's own (a Winograd floor
    and a Winograd best point count Winograd's multiplications, not the direct convolution's MACs).
    """

    id: str
    kind: str  # "floor" or "best"
    algorithm: str
    flops: float
    intensity: float
    flops_per_s: float
    time_ms: float


def roofline_points(data: ReportData) -> list[RooflinePoint]:
    """The floor points (lowest floor first, id ``floor-point``; the others ``floor-point-<algorithm>``) and
    the best point (id ``best-point``), each with its own algorithm's operation count.

    A floor is max(flops / peak, bound bytes / bandwidth) with that algorithm's flops and bytes, so its point
    lies on the roof. The best point counts the FLOPs of its config's algorithm (``best_algorithm``; else the
    problem's ``flops``) at the compulsory intensity; a best time no faster than that algorithm's floor puts it
    under the roof.
    """
    floors = sorted((f for f in data.floors if f.flops > 0 and f.bound_bytes > 0 and f.floor_ms > 0),
                    key=lambda f: (f.floor_ms, f.algorithm))
    if not floors and data.floor_ms and data.flops > 0:
        # no per-algorithm floors given: the floor time with the problem's FLOPs (the caller's count)
        bound_bytes = data.bound_bytes or data.compulsory_bytes
        if bound_bytes > 0:
            floors = [FloorPoint("", data.flops, bound_bytes, data.floor_ms)]
    points = [RooflinePoint("floor-point" if i == 0 else f"floor-point-{f.algorithm}", "floor", f.algorithm, f.flops,
                            f.intensity, f.flops_per_s, f.floor_ms) for i, f in enumerate(floors)]
    best_ms = data.best_time_ms
    own = next((f for f in floors if data.best_algorithm and f.algorithm == data.best_algorithm), None)
    flops = own.flops if own is not None else data.flops
    if best_ms and flops > 0 and data.compulsory_bytes > 0:
        points.append(RooflinePoint("best-point", "best", own.algorithm if own else (data.best_algorithm or ""),
                                    flops, flops / data.compulsory_bytes, flops / (best_ms * 1e-3), best_ms))
    return points


@dataclass(frozen=True, slots=True)
class RooflineLayout:
    """Everything :func:`_roofline` draws, in SVG pixels: the axes, the points, the placed labels (boxes that
    do not overlap one another, the legend or the markers), the legend's box and the efficiency gap."""

    ax: _Axes
    points: list[RooflinePoint]
    labels: list[Label]
    legend: Box
    legend_items: list[tuple[str, str]]
    bandwidth_label: tuple[Spot, float, Box] | None  # spot, rotation (degrees), the rotated text's bounding box
    gap: tuple[float, float, float] | None  # x, y of the best point, y of its floor level
    x0: float  # where the bandwidth slope enters the plot (FLOP/byte)


def _marker_box(x: float, y: float, r: float) -> Box:
    return Box(x - r, y - r, x + r, y + r)


def _legend_box(x: float, y: float, items: list[tuple[str, str]]) -> Box:
    """The rectangle :func:`_legend` draws at (x, y)."""
    width = 22 + 6.2 * max(len(label) for _, label in items)
    return Box(x - 9, y - 9, x - 9 + width, y - 9 + len(items) * 15 + 3)


def _rotated_box(spot: Spot, text: str, size: float, angle: float) -> Box:
    """The bounding box of middle-anchored ``text`` rotated by ``angle`` degrees about its anchor."""
    half_w, half_h = CHAR_EM * size * len(text) / 2, size * (ASCENT_EM + DESCENT_EM) / 2
    c, s = abs(math.cos(math.radians(angle))), abs(math.sin(math.radians(angle)))
    cy = spot.y - size * (ASCENT_EM - DESCENT_EM) / 2
    dx, dy = half_w * c + half_h * s, half_w * s + half_h * c
    return Box(spot.x - dx, cy - dy, spot.x + dx, cy + dy)


def _line_boxes(x1: float, y1: float, x2: float, y2: float, step: float = 4.0) -> list[Box]:
    """Small boxes along a line segment, ``step`` px apart (a slanted line's obstacle for label placement)."""
    n = max(int(math.hypot(x2 - x1, y2 - y1) / step), 1)
    return [_marker_box(x1 + (x2 - x1) * i / n, y1 + (y2 - y1) * i / n, 1.0) for i in range(n + 1)]


def roofline_layout(data: ReportData, ax_left: float, ax_top: float, ax_w: float, ax_h: float) -> RooflineLayout:
    """The roofline panel's geometry for ``data`` (pure: no SVG text)."""
    bw, peak = data.copy_bandwidth_bytes_per_s, data.fp32_peak_flops_per_s
    ridge = peak / bw
    points = roofline_points(data)
    xs = [ridge] + [p.intensity for p in points]
    ys = [peak] + [p.flops_per_s for p in points]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 8))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 8))
    y_lo = 10 ** math.floor(math.log10(min(min(ys) / 4, bw * x_lo)))
    y_hi = 10 ** math.ceil(math.log10(max(ys) * 2))
    y_lo = max(y_lo, y_hi / 1e8)  # at most 8 decades
    ax = _Axes(ax_left, ax_top, ax_w, ax_h, x_lo, x_hi, y_lo, y_hi, x_log=True, y_log=True)
    area = Box(ax.left, ax.top, ax.right, ax.bottom)
    x0 = max(x_lo, y_lo / bw)

    best_ms = data.best_time_ms
    items = [(f'<line x1="-5" y1="0" x2="7" y2="0" stroke="{INK}" stroke-width="2"/>', "device ceilings")]
    n_floors = sum(p.kind == "floor" for p in points)
    if n_floors:
        items.append((f'<path d="M1,-5L6,0L1,5L-4,0Z" fill="#fff" stroke="{GREEN}" stroke-width="2"/>',
                      f"bound floor {_ms(data.floor_ms)}" if n_floors == 1 and data.floor_ms
                      else "bound floors (each its own FLOPs)"))
    if best_ms:
        items.append((f'<circle cx="1" cy="0" r="5" fill="{BLUE}"/>',
                      f"best {'predicted' if data.predicted else 'measured'} {_ms(best_ms)}"))
    legend = _legend_box(ax.left + 10, ax.top + 14, items)
    markers = [_marker_box(ax.x(p.intensity), ax.y(p.flops_per_s), 8.0) for p in points]

    # the bandwidth label along the slope: the first of a few positions clear of the legend and the markers
    angle = math.degrees(math.atan2(ax.y(bw * ridge) - ax.y(bw * x0), ax.x(ridge) - ax.x(x0)))
    bw_text = f"copy {si(bw, 'B/s')}"
    # (none where the visible slope is too short for it: the line's tooltip still names the bandwidth)
    bandwidth_label: tuple[Spot, float, Box] | None = None
    for t in (0.5, 0.35, 0.65, 0.2, 0.8):
        lx = 10 ** (math.log10(x0) + t * (math.log10(ridge) - math.log10(x0)))
        spot = Spot(ax.x(lx), ax.y(bw * lx) - 6, "middle")
        box = _rotated_box(spot, bw_text, 10, angle)
        if box.inside(area) and not any(box.overlap(o) for o in (legend, *markers)):
            bandwidth_label = (spot, angle, box)
            break

    requests: list[Request] = []
    y_peak = ax.y(peak)
    # the peak's label goes last (it can go anywhere along the roof; the point labels must stay by their points):
    # right-aligned at the right end, then stepping left (over the dotted roof left of the ridge too), above the
    # roof, below it, then rows further out
    peak_text = f"fp32 peak {si(peak, 'FLOP/s')}"
    steps = int(max(ax.width - CHAR_EM * 10 * len(peak_text) - 8, 0) // 16) + 1
    peak_spots = [Spot(ax.right - 4 - 16 * k, y_peak + dy, "end") for dy in (-5, 13, -17, 25, -29, 37)
                  for k in range(steps)]
    gap = None
    best = next((p for p in points if p.kind == "best"), None)
    floors = [p for p in points if p.kind == "floor"]
    if best is not None and floors:
        # the gap to the floor of the best's own algorithm (same operation count: the ratio is the time ratio)
        target = next((f for f in floors if best.algorithm and f.algorithm == best.algorithm), floors[0])
        level = best.flops / (target.time_ms * 1e-3)
        bx, by, fy = ax.x(best.intensity), ax.y(best.flops_per_s), ax.y(level)
        gap = (bx, by, fy)
        ratio = target.time_ms / best.time_ms
        # "efficiency" is floor_ms / best (the subtitle's); a gap to another algorithm's floor says whose it is
        if data.floor_ms is None or math.isclose(target.time_ms, data.floor_ms, rel_tol=1e-3) or not target.algorithm:
            text = f"efficiency {data.efficiency if data.efficiency is not None else ratio:.1%}"
        else:
            text = f"{ratio:.1%} of the {target.algorithm} floor"
        mid = (by + fy) / 2 + 4
        requests.append(Request("efficiency-label", text, 11,
                                [Spot(bx + 9, mid, "start"), Spot(bx - 9, mid, "end"), Spot(bx + 10, by + 15, "start"),
                                 Spot(bx - 10, by + 15, "end"), Spot(bx + 10, fy - 9, "start"),
                                 Spot(bx - 10, fy - 9, "end"), Spot(bx, by + 20, "middle"), Spot(bx, by + 32, "middle"),
                                 Spot(bx + 10, by + 28, "start"), Spot(bx - 10, by + 28, "end")]))
    for f in floors:
        if f.algorithm:
            cx, cy = ax.x(f.intensity), ax.y(f.flops_per_s)
            # optional: the diamond's tooltip names its algorithm too, a crowded plot drops the label
            requests.append(Request(f"{f.id}-label", f"{f.algorithm} floor", 10,
                                    [Spot(cx + 10, cy + 4, "start"), Spot(cx - 10, cy + 4, "end"),
                                     Spot(cx, cy + 19, "middle"), Spot(cx, cy - 11, "middle"),
                                     Spot(cx + 10, cy + 16, "start"), Spot(cx - 10, cy + 16, "end")], optional=True))
    requests.append(Request("peak-label", peak_text, 10, peak_spots))
    # the solid ceilings too: a label across a line is as unreadable as one across another label
    fixed = [legend, *markers, *_line_boxes(ax.x(x0), ax.y(bw * x0), ax.x(ridge), y_peak),
             Box(ax.x(ridge), y_peak - 1, ax.right, y_peak + 1)] + ([bandwidth_label[2]] if bandwidth_label else [])
    labels = place(requests, area, obstacles=fixed)
    return RooflineLayout(ax, points, labels, legend, items, bandwidth_label, gap, x0)


def _roofline(data: ReportData, ax_left: float, ax_top: float, ax_w: float, ax_h: float) -> list[str]:
    bw, peak = data.copy_bandwidth_bytes_per_s, data.fp32_peak_flops_per_s
    ridge = peak / bw
    layout = roofline_layout(data, ax_left, ax_top, ax_w, ax_h)
    ax, x0 = layout.ax, layout.x0
    out = ['<g id="roofline">',
           f'<text class="panel-title" x="{_n(ax_left)}" y="{_n(ax_top - 10)}">Roofline ({_e(data.device)})</text>']
    out += _frame(ax, _log_ticks(ax.x_lo, ax.x_hi), _log_ticks(ax.y_lo, ax.y_hi), lambda v: f"{v:g}",
                  lambda v: si(v, ""), "arithmetic intensity (FLOP/byte, log)", "FLOP/s (log)")
    # ceilings: the bandwidth slope up to the ridge (dotted beyond), the flat peak from the ridge (dotted before)
    out.append(f'<line id="ceiling-bandwidth" x1="{_n(ax.x(x0))}" y1="{_n(ax.y(bw * x0))}" x2="{_n(ax.x(ridge))}" '
               f'y2="{_n(ax.y(peak))}" stroke="{INK}" stroke-width="2"><title>copy bandwidth {_e(si(bw, "B/s"))}'
               f'</title></line>')
    x_end = min(ax.x_hi, ax.y_hi / bw)
    out.append(f'<line x1="{_n(ax.x(ridge))}" y1="{_n(ax.y(peak))}" x2="{_n(ax.x(x_end))}" y2="{_n(ax.y(bw * x_end))}" '
               f'stroke="{INK}" stroke-opacity="0.3" stroke-dasharray="2,3"/>')
    out.append(f'<line id="ceiling-peak" x1="{_n(ax.x(ridge))}" y1="{_n(ax.y(peak))}" x2="{_n(ax.right)}" '
               f'y2="{_n(ax.y(peak))}" stroke="{INK}" stroke-width="2"><title>fp32 peak {_e(si(peak, "FLOP/s"))}'
               f'</title></line>')
    out.append(f'<line x1="{_n(ax.left)}" y1="{_n(ax.y(peak))}" x2="{_n(ax.x(ridge))}" y2="{_n(ax.y(peak))}" '
               f'stroke="{INK}" stroke-opacity="0.3" stroke-dasharray="2,3"/>')
    if layout.bandwidth_label is not None:
        spot, angle, _ = layout.bandwidth_label
        out.append(f'<text id="bandwidth-label" class="ceiling-label" x="{_n(spot.x)}" y="{_n(spot.y)}" '
                   f'text-anchor="middle" transform="rotate({angle:.1f} {_n(spot.x)} {_n(spot.y)})">'
                   f'copy {_e(si(bw, "B/s"))}</text>')
    if layout.gap is not None:
        bx, by, fy = layout.gap
        out.append(f'<line id="efficiency-gap" x1="{_n(bx)}" y1="{_n(by)}" x2="{_n(bx)}" y2="{_n(fy)}" '
                   f'stroke="{BLUE}" stroke-dasharray="3,3"/>')
    for p in layout.points:
        cx, cy = ax.x(p.intensity), ax.y(p.flops_per_s)
        what = f"{p.algorithm} " if p.algorithm else ""
        common = (f'class="{p.kind}-point" data-algorithm="{_e(p.algorithm)}" data-intensity="{p.intensity:.6g}" '
                  f'data-flops-per-s="{p.flops_per_s:.6g}"')
        tip = f"{_e(si(p.flops_per_s, 'FLOP/s'))} at {p.intensity:.3g} FLOP/B ({_e(si(p.flops, 'FLOP'))})"
        if p.kind == "floor":
            out.append(f'<path id="{_e(p.id)}" {common} d="M{_n(cx)},{_n(cy - 7)}L{_n(cx + 7)},{_n(cy)}L{_n(cx)},'
                       f'{_n(cy + 7)}L{_n(cx - 7)},{_n(cy)}Z" fill="#fff" stroke="{GREEN}" stroke-width="2"><title>'
                       f'{_e(what)}bound floor {_e(_ms(p.time_ms))}: {tip}</title></path>')
        else:
            out.append(f'<circle id="best-point" {common} cx="{_n(cx)}" cy="{_n(cy)}" r="6" fill="{BLUE}"><title>'
                       f'best {_e(_ms(p.time_ms))}: {tip}</title></circle>')
    for label in layout.labels:
        cls = "ceiling-label" if label.id == "peak-label" else "point-label"
        out.append(f'<text id="{_e(label.id)}" class="{cls}" x="{_n(label.spot.x)}" y="{_n(label.spot.y)}" '
                   f'text-anchor="{label.spot.anchor}" font-size="{label.size:g}">{_e(label.text)}</text>')
    out += _legend(layout.legend.x0 + 9, layout.legend.y0 + 9, layout.legend_items)
    out.append("</g>")
    return out


def render_report_svg(data: ReportData, *, width: int = WIDTH, height: int = HEIGHT) -> str:
    """The report of ``data`` as a standalone SVG document (UTF-8 text, every string escaped).

    Example:
        >>> svg = render_report_svg(ReportData("N=1 C=8 ...", "NVIDIA H200", 1e9, 1e6, 4.19e12, 50.9e12,
        ...                                    [Trial("ok", 0.2), Trial("wrong"), Trial("ok", 0.1)], floor_ms=0.05))
    """
    if data.copy_bandwidth_bytes_per_s <= 0 or data.fp32_peak_flops_per_s <= 0:
        raise ValueError("the device's ceilings must be > 0")
    panel_w = (width - 215) / 2
    top, panel_h = 70, height - 130
    eff = data.efficiency
    subtitle = [data.device, f"{len(data.trials)} trials"]
    if data.best_time_ms:
        subtitle.append(f"best {_ms(data.best_time_ms)}")
    if data.floor_ms:
        subtitle.append(f"floor {_ms(data.floor_ms)}")
    if eff is not None:
        subtitle.append(f"efficiency {eff:.1%}")
    if data.predicted:
        subtitle.append("model predictions, not measurements")
    parts = [
        f'<svg xmlns="http://www.w3.org/2000/svg" width="{width}" height="{height}" '
        f'viewBox="0 0 {width} {height}" font-family="sans-serif" font-size="11" fill="{INK}" role="img" '
        f'aria-label="{_e("tuning report: " + data.problem)}">',
        f"<title>{_e('convtune report: ' + data.problem + ' on ' + data.device)}</title>",
        "<style>.panel-title{font-weight:bold;font-size:12px}.empty{fill:#888;font-size:14px}"
        ".ceiling-label{font-size:10px;fill:#555}.point-label{fill:#333}</style>",
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
        f'<text id="report-title" x="20" y="24" font-size="14" font-weight="bold">{_e(data.problem)}</text>',
        f'<text id="report-subtitle" x="20" y="42" fill="#555">{_e(" · ".join(subtitle))}</text>',
    ]
    parts += _convergence(data, 80, top, panel_w, panel_h)
    parts += _roofline(data, 80 + panel_w + 95, top, panel_w, panel_h)
    parts.append(f'<text x="20" y="{height - 8}" font-size="9" fill="#777">Each point counts its algorithm\'s own '
                 "FLOPs (direct: MACs without padding taps; Winograd: its multiplications); intensity of the best "
                 "point = FLOPs / compulsory bytes, of a floor point = FLOPs / lower-bound bytes.</text>")
    parts.append("</svg>")
    return "\n".join(parts) + "\n"


# ---- from the database ---------------------------------------------------------------------------------
def machine_for(device: Device) -> MachineModel | None:
    """The preset whose name the device's name contains, with the device's stored ceilings; else ``None``."""
    name = device.name.lower()
    for key, preset in PRESETS.items():
        if key in name:
            return preset.with_ceilings(device.copy_bandwidth_bytes_per_s, device.fp32_peak_flops_per_s,
                                        device.ceilings_source)
    return None


def algorithm_floors(problem: ConvProblem, device: Device) -> list[FloorPoint]:
    """Each algorithm's floor on ``device`` (lowest first): per algorithm, the variant with the lowest floor over
    the families that run ``problem``, with that variant's own FLOPs and bound bytes; [] for an unknown device."""
    machine = machine_for(device)
    if machine is None:
        return []
    from convtune.kernels.registry import specs_for
    from convtune.tuner.efficiency import floors

    best: dict[str, FloorPoint] = {}
    for spec in specs_for(problem):
        for f in floors(problem, machine, spec):
            point = FloorPoint(spec.algorithm, float(f["flops"]), float(f["bound_bytes"]), float(f["floor_s"]) * 1e3)
            if spec.algorithm not in best or point.floor_ms < best[spec.algorithm].floor_ms:
                best[spec.algorithm] = point
    return sorted(best.values(), key=lambda f: (f.floor_ms, f.algorithm))


def algorithm_of(problem: ConvProblem, config_key: str) -> str | None:
    """The algorithm of a config key's family (``"winograd.m=4 ..."`` -> ``"winograd"``), if registered."""
    from convtune.kernels.registry import specs_for

    family = config_key.split(".", 1)[0]
    return next((spec.algorithm for spec in specs_for(problem) if spec.family == family), None)


def floor_and_bound(problem: ConvProblem, device: Device) -> tuple[float | None, float | None]:
    """The lowest floor time (ms) over the families that can run ``problem``, and that family's bound bytes."""
    floors = algorithm_floors(problem, device)
    return (floors[0].floor_ms, floors[0].bound_bytes) if floors else (None, None)


def default_device_id(session: Session, problem: Problem) -> int | None:
    """The device of the problem's best overall config (measured first), else of its latest run, else None."""
    views = repo.list_best_configs(session, problem_key=problem.key)
    overall = [v for v in views if v.scope == OVERALL_SCOPE] or views
    if overall:
        return overall[0].device_id
    runs = repo.list_runs(session, problem.id, limit=1)
    return runs[0].device_id if runs else None


def build_report(session: Session, problem_id: int, device_id: int | None = None) -> ReportData:
    """The report data of a problem on a device (default: :func:`default_device_id`).

    Trials are the device's measured rows of the problem, oldest first; when it has none, the model's
    predictions (flagged). Raises :class:`NotFound` for an unknown problem or device, or when the problem
    has never been tuned on any device.
    """
    problem_row = repo.get_problem(session, problem_id)
    if device_id is None:
        device_id = default_device_id(session, problem_row)
        if device_id is None:
            raise NotFound(f"problem {problem_id} has not been tuned on any device yet")
    device = repo.get_device(session, device_id)
    problem = ConvProblem.from_mapping(problem_row.spec)
    rows: list[Measurement] = repo.measurements_for(session, device_id=device.id, problem_id=problem_row.id)
    predicted = False
    if not rows:
        rows = repo.measurements_for(session, device_id=device.id, problem_id=problem_row.id, predicted=True)
        predicted = bool(rows)
    config_keys = repo.config_keys_by_id(session, {m.config_id for m in rows})
    trials = [Trial(m.status, m.median_ms if m.status == "ok" else None, config_keys.get(m.config_id, ""),
                    m.tuning_run_id) for m in rows]
    best = next((v for v in repo.list_best_configs(session, problem_key=problem_row.key)
                 if v.device_id == device.id and v.scope == OVERALL_SCOPE), None)
    floors = algorithm_floors(problem, device)
    floor_ms, bound_bytes = (floors[0].floor_ms, floors[0].bound_bytes) if floors else (None, None)
    if best is not None:
        floor_ms = best.floor_ms
    return ReportData(problem=problem_row.key, device=device.name, flops=float(2 * problem.macs_nonpad),
                      compulsory_bytes=float(problem.compulsory_bytes),
                      copy_bandwidth_bytes_per_s=device.copy_bandwidth_bytes_per_s,
                      fp32_peak_flops_per_s=device.fp32_peak_flops_per_s, trials=trials, floor_ms=floor_ms,
                      bound_bytes=bound_bytes, best_ms=best.time_ms if best is not None else None,
                      predicted=predicted if best is None else best.provisional, floors=floors,
                      best_algorithm=algorithm_of(problem, best.config_key) if best is not None else None)


def report_svg(session: Session, problem_id: int, device_id: int | None = None) -> str:
    """:func:`build_report` then :func:`render_report_svg`."""
    return render_report_svg(build_report(session, problem_id, device_id))
