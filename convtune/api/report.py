"""The report plot of one problem on one device, as hand-written SVG (no plotting library).

Two panels, side by side:

* **convergence** (left): every trial's time (grey dots, log scale) and the best time so far (a blue
  step line) against the trial number, in the order the measurements were stored (by id); failed
  trials (compile error, wrong result, timeout, ...) are red crosses on the bottom edge; the bound's
  floor time is a dashed green line; a thin vertical line marks where a new tuning run began.
* **roofline** (right): log-log arithmetic intensity (FLOP/byte) against FLOP/s; the device's
  ceilings — copy bandwidth (the slope) and fp32 peak (the flat roof) — the bound's floor point (at
  the intensity of the lower bound's bytes, the floor time's FLOP/s) and the best measured point
  (FLOPs / best time, at the intensity FLOPs / compulsory bytes). The vertical gap between the two
  points is the efficiency.

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

from convtune.errors import NotFound
from convtune.machine import PRESETS, MachineModel
from convtune.problem import ConvProblem
from convtune.storage import repository as repo
from convtune.storage.models import Device, Measurement, Problem

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


def _roofline(data: ReportData, ax_left: float, ax_top: float, ax_w: float, ax_h: float) -> list[str]:
    bw, peak = data.copy_bandwidth_bytes_per_s, data.fp32_peak_flops_per_s
    ridge = peak / bw
    out = ['<g id="roofline">',
           f'<text class="panel-title" x="{_n(ax_left)}" y="{_n(ax_top - 10)}">Roofline ({_e(data.device)})</text>']
    best_ms = data.best_time_ms
    points: list[tuple[str, float, float]] = []  # (id, intensity, flop/s)
    if data.floor_ms and data.flops > 0:
        bound_bytes = data.bound_bytes or data.compulsory_bytes
        points.append(("floor-point", data.flops / bound_bytes, data.flops / (data.floor_ms * 1e-3)))
    if best_ms and data.flops > 0 and data.compulsory_bytes > 0:
        points.append(("best-point", data.flops / data.compulsory_bytes, data.flops / (best_ms * 1e-3)))
    xs = [ridge] + [p[1] for p in points]
    ys = [peak] + [p[2] for p in points]
    x_lo = 10 ** math.floor(math.log10(min(xs) / 8))
    x_hi = 10 ** math.ceil(math.log10(max(xs) * 8))
    y_lo = 10 ** math.floor(math.log10(min(min(ys) / 4, bw * x_lo)))
    y_hi = 10 ** math.ceil(math.log10(peak * 2))
    y_lo = max(y_lo, y_hi / 1e8)  # at most 8 decades
    ax = _Axes(ax_left, ax_top, ax_w, ax_h, x_lo, x_hi, y_lo, y_hi, x_log=True, y_log=True)
    out += _frame(ax, _log_ticks(x_lo, x_hi), _log_ticks(y_lo, y_hi), lambda v: f"{v:g}", lambda v: si(v, ""),
                  "arithmetic intensity (FLOP/byte, log)", "FLOP/s (log)")
    # ceilings: the bandwidth slope up to the ridge (dotted beyond), the flat peak from the ridge (dotted before)
    x0 = max(x_lo, y_lo / bw)
    out.append(f'<line id="ceiling-bandwidth" x1="{_n(ax.x(x0))}" y1="{_n(ax.y(bw * x0))}" x2="{_n(ax.x(ridge))}" '
               f'y2="{_n(ax.y(peak))}" stroke="{INK}" stroke-width="2"><title>copy bandwidth {_e(si(bw, "B/s"))}'
               f'</title></line>')
    x_end = min(x_hi, y_hi / bw)
    out.append(f'<line x1="{_n(ax.x(ridge))}" y1="{_n(ax.y(peak))}" x2="{_n(ax.x(x_end))}" y2="{_n(ax.y(bw * x_end))}" '
               f'stroke="{INK}" stroke-opacity="0.3" stroke-dasharray="2,3"/>')
    out.append(f'<line id="ceiling-peak" x1="{_n(ax.x(ridge))}" y1="{_n(ax.y(peak))}" x2="{_n(ax.right)}" '
               f'y2="{_n(ax.y(peak))}" stroke="{INK}" stroke-width="2"><title>fp32 peak {_e(si(peak, "FLOP/s"))}'
               f'</title></line>')
    out.append(f'<line x1="{_n(ax.left)}" y1="{_n(ax.y(peak))}" x2="{_n(ax.x(ridge))}" y2="{_n(ax.y(peak))}" '
               f'stroke="{INK}" stroke-opacity="0.3" stroke-dasharray="2,3"/>')
    # ceiling labels: the peak above its line (right end), the bandwidth along the slope's lower part
    out.append(f'<text class="ceiling-label" x="{_n(ax.right - 4)}" y="{_n(ax.y(peak) - 5)}" text-anchor="end">'
               f'fp32 peak {_e(si(peak, "FLOP/s"))}</text>')
    lx = 10 ** ((math.log10(x0) + math.log10(ridge)) / 2)
    angle = math.degrees(math.atan2(ax.y(bw * ridge) - ax.y(bw * x0), ax.x(ridge) - ax.x(x0)))
    out.append(f'<text class="ceiling-label" x="{_n(ax.x(lx))}" y="{_n(ax.y(bw * lx) - 6)}" text-anchor="middle" '
               f'transform="rotate({angle:.1f} {_n(ax.x(lx))} {_n(ax.y(bw * lx) - 6)})">'
               f'copy {_e(si(bw, "B/s"))}</text>')
    for pid, x, y in points:
        cx, cy = ax.x(x), ax.y(y)
        if pid == "floor-point":
            assert data.floor_ms is not None
            out.append(f'<path id="floor-point" d="M{_n(cx)},{_n(cy - 7)}L{_n(cx + 7)},{_n(cy)}L{_n(cx)},{_n(cy + 7)}'
                       f'L{_n(cx - 7)},{_n(cy)}Z" fill="#fff" stroke="{GREEN}" stroke-width="2"><title>bound floor '
                       f'{_e(_ms(data.floor_ms))}: {_e(si(y, "FLOP/s"))} at {x:.3g} FLOP/B</title></path>')
        else:
            assert best_ms is not None
            out.append(f'<circle id="best-point" cx="{_n(cx)}" cy="{_n(cy)}" r="6" fill="{BLUE}"><title>best '
                       f'{_e(_ms(best_ms))}: {_e(si(y, "FLOP/s"))} at {x:.3g} FLOP/B</title></circle>')
    if len(points) == 2:
        (_, _, fy), (_, bx, by) = points
        eff = data.efficiency
        label = f"efficiency {eff:.1%}" if eff is not None else ""
        out.append(f'<line id="efficiency-gap" x1="{_n(ax.x(bx))}" y1="{_n(ax.y(by))}" x2="{_n(ax.x(bx))}" '
                   f'y2="{_n(ax.y(fy))}" stroke="{BLUE}" stroke-dasharray="3,3"/>')
        out.append(f'<text id="efficiency-label" x="{_n(ax.x(bx) + 9)}" y="{_n((ax.y(by) + ax.y(fy)) / 2 + 4)}">'
                   f'{_e(label)}</text>')
    items = [(f'<line x1="-5" y1="0" x2="7" y2="0" stroke="{INK}" stroke-width="2"/>', "device ceilings")]
    if data.floor_ms:
        items.append((f'<path d="M1,-5L6,0L1,5L-4,0Z" fill="#fff" stroke="{GREEN}" stroke-width="2"/>',
                      f"bound floor {_ms(data.floor_ms)}"))
    if best_ms:
        items.append((f'<circle cx="1" cy="0" r="5" fill="{BLUE}"/>',
                      f"best {'predicted' if data.predicted else 'measured'} {_ms(best_ms)}"))
    out += _legend(ax.left + 10, ax.top + 14, items)
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
        ".ceiling-label{font-size:10px;fill:#555}</style>",
        f'<rect width="{width}" height="{height}" fill="#fafafa"/>',
        f'<text id="report-title" x="20" y="24" font-size="14" font-weight="bold">{_e(data.problem)}</text>',
        f'<text id="report-subtitle" x="20" y="42" fill="#555">{_e(" · ".join(subtitle))}</text>',
    ]
    parts += _convergence(data, 80, top, panel_w, panel_h)
    parts += _roofline(data, 80 + panel_w + 95, top, panel_w, panel_h)
    parts.append(f'<text x="20" y="{height - 8}" font-size="9" fill="#777">FLOPs exclude padding taps; '
                 "intensity of the best point = FLOPs / compulsory bytes, of the floor point = FLOPs / "
                 "lower-bound bytes.</text>")
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


def floor_and_bound(problem: ConvProblem, device: Device) -> tuple[float | None, float | None]:
    """The lowest floor time (ms) over the families that can run ``problem``, and that family's bound bytes."""
    machine = machine_for(device)
    if machine is None:
        return None, None
    from convtune.kernels.registry import specs_for
    from convtune.tuner.analysis import floor_and_bound_bytes

    best: tuple[float, float] | None = None
    for spec in specs_for(problem):
        floor_s, bound_bytes = floor_and_bound_bytes(problem, machine, spec)
        if best is None or floor_s < best[0]:
            best = (floor_s, bound_bytes)
    return (best[0] * 1e3, best[1]) if best is not None else (None, None)


def default_device_id(session: Session, problem: Problem) -> int | None:
    """The device of the problem's best overall config (measured first), else of its latest run, else None."""
    views = repo.list_best_configs(session, problem_key=problem.key)
    overall = [v for v in views if v.scope == "*"] or views
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
                 if v.device_id == device.id and v.scope == "*"), None)
    floor_ms, bound_bytes = floor_and_bound(problem, device)
    if best is not None:
        floor_ms = best.floor_ms
    return ReportData(problem=problem_row.key, device=device.name, flops=float(2 * problem.macs_nonpad),
                      compulsory_bytes=float(problem.compulsory_bytes),
                      copy_bandwidth_bytes_per_s=device.copy_bandwidth_bytes_per_s,
                      fp32_peak_flops_per_s=device.fp32_peak_flops_per_s, trials=trials, floor_ms=floor_ms,
                      bound_bytes=bound_bytes, best_ms=best.time_ms if best is not None else None,
                      predicted=predicted if best is None else best.provisional)


def report_svg(session: Session, problem_id: int, device_id: int | None = None) -> str:
    """:func:`build_report` then :func:`render_report_svg`."""
    return render_report_svg(build_report(session, problem_id, device_id))
