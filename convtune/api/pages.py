"""History pages: server-side HTML, no JavaScript, no external resources.

* ``GET /`` — queue figures, the latest jobs and their progress, the latest tuning runs, the best
  configuration of every tuned problem per device with its efficiency against the bound's floor, and
  every problem, each linked to its page.
* ``GET /problems/{id}`` — the problem's shape and size, its best configurations per device and scope,
  its jobs, the report plot (convergence and roofline, inline SVG), the pruning summary of each run,
  and the trial history (every measurement, oldest first, ``?page=N``, ``?per_page=`` 50; ``?device=ID``
  picks the device when several tuned it).

Every string from the database goes through :func:`html.escape`. The router has no prefix; the app
includes it beside the ``/v1`` routers.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from datetime import UTC, datetime
from html import escape
from typing import Annotated

from fastapi import APIRouter, Path, Query
from fastapi.responses import HTMLResponse
from sqlalchemy.orm import Session

from convtune.api.deps import DbDep, ReaderDep
from convtune.api.params import MAX_ID
from convtune.api.report import (
    BLUE,
    GREEN,
    RED,
    build_report,
    floor_and_bound,
    render_report_svg,
)
from convtune.errors import ConvtuneError, NotFound
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage.models import Device, Job, Measurement, Problem, TuningRun
from convtune.storage.queries.results import BestConfigView
from convtune.vocabulary import OVERALL_SCOPE

router = APIRouter(tags=["pages"], include_in_schema=False)

PAGE_SIZE = 50
#: jobs and runs shown on the index page
RECENT = 50

CSS = f"""
body{{font-family:system-ui,-apple-system,"Segoe UI",sans-serif;margin:0;color:#222;background:#f6f7f9}}
header{{background:#1d2733;color:#fff;padding:10px 24px;display:flex;gap:24px;align-items:baseline}}
header a{{color:#cfe0ff;text-decoration:none}} header .brand{{font-weight:bold;font-size:18px;color:#fff}}
main{{padding:8px 24px 40px;max-width:1400px}}
h1{{font-size:20px;margin:16px 0 4px;font-family:ui-monospace,monospace}} h2{{font-size:16px;margin:26px 0 8px}}
table{{border-collapse:collapse;background:#fff;font-size:13px;margin:4px 0}}
th,td{{border:1px solid #dde1e6;padding:3px 8px;text-align:left;vertical-align:top}}
th{{background:#eef1f5;font-weight:600}} td.num{{text-align:right;font-variant-numeric:tabular-nums}}
code,.key{{font-family:ui-monospace,monospace;font-size:12px}}
a{{color:{BLUE}}} .muted{{color:#777}} .small{{font-size:12px}}
.badge{{display:inline-block;padding:0 6px;border-radius:8px;font-size:12px;background:#e3e7ec}}
.st-ok,.st-finished{{background:#dcf1e1;color:{GREEN}}} .st-running{{background:#dbe7fb;color:{BLUE}}}
.st-queued{{background:#fff3cd;color:#7a5b00}} .st-cancelled{{background:#eee;color:#555}}
.st-failed,.st-bad{{background:#fbe0e0;color:{RED}}} .st-provisional{{background:#fff3cd;color:#7a5b00}}
.bar{{display:inline-block;width:80px;height:9px;background:#e6e9ee;border-radius:4px;vertical-align:middle;
margin-right:6px;overflow:hidden}} .bar>span{{display:block;height:100%;background:{BLUE}}}
.bar.eff>span{{background:{GREEN}}}
.report{{background:#fff;border:1px solid #dde1e6;display:inline-block;margin:4px 0}}
.report svg{{display:block;max-width:100%;height:auto}}
nav.pages{{margin:6px 0;font-size:13px}} nav.pages a,nav.pages span{{margin-right:10px}}
dl.spec{{display:grid;grid-template-columns:max-content auto;gap:2px 14px;font-size:13px;margin:6px 0}}
dl.spec dt{{color:#555}} dl.spec dd{{margin:0}}
"""


# ---- small HTML helpers ----------------------------------------------------------------------------------
def h(value: object) -> str:
    """Escaped text (``None`` -> an en dash)."""
    return "–" if value is None else escape(str(value), quote=True)


def _page(title: str, body: str, status_code: int = 200) -> HTMLResponse:
    html = (f'<!DOCTYPE html>\n<html lang="en"><head><meta charset="utf-8">'
            f'<meta name="viewport" content="width=device-width, initial-scale=1">'
            f"<title>{h(title)} · convtune</title><style>{CSS}</style></head><body>"
            '<header><a class="brand" href="/">convtune</a><a href="/">history</a>'
            '<a href="/docs">API docs</a><a href="/v1/problems">/v1/problems</a></header>'
            f"<main>{body}</main></body></html>\n")
    return HTMLResponse(html, status_code=status_code)


def _table(headers: Sequence[str], rows: Iterable[str], *, table_id: str = "", empty: str = "none yet") -> str:
    rows = list(rows)
    attr = f' id="{h(table_id)}"' if table_id else ""
    if not rows:
        return f'<p class="muted"{attr}>{h(empty)}</p>'
    head = "".join(f"<th>{h(x)}</th>" for x in headers)
    return f"<table{attr}><thead><tr>{head}</tr></thead><tbody>{''.join(rows)}</tbody></table>"


def _tr(*cells: str, cls: str = "") -> str:
    attr = f' class="{h(cls)}"' if cls else ""
    return f"<tr{attr}>{''.join(cells)}</tr>"


def _td(html: str, cls: str = "") -> str:
    """A cell of already-escaped HTML."""
    return f'<td class="{cls}">{html}</td>' if cls else f"<td>{html}</td>"


def _num(value: float | None, fmt: str = "{:.4g}") -> str:
    return _td("–" if value is None or not math.isfinite(value) else h(fmt.format(value)), "num")


def _badge(text: str, kind: str | None = None) -> str:
    return f'<span class="badge st-{h(kind or text)}">{h(text)}</span>'


def _bar(fraction: float | None, label: str, cls: str = "") -> str:
    if fraction is None or not math.isfinite(fraction):
        return "–"
    width = max(0.0, min(1.0, fraction)) * 100
    return f'<span class="bar {cls}"><span style="width:{width:.1f}%"></span></span>{h(label)}'


def _eff(efficiency: float | None) -> str:
    return _bar(efficiency, f"{efficiency:.1%}" if efficiency is not None else "", "eff")


def _when(value: datetime | None) -> str:
    return "–" if value is None else h(value.strftime("%Y-%m-%d %H:%M:%S UTC"))


def _problem_link(problem_id: int, key: str) -> str:
    return f'<a class="key problem-link" href="/problems/{int(problem_id)}">{h(key)}</a>'


def _short_config(key: str) -> str:
    """``direct.fwd tile_h=8 ...`` -> the key, shown whole (it is what the API answers) in a code span."""
    return f'<code class="config">{h(key)}</code>'


def _tflops(flops: float, time_ms: float | None) -> float | None:
    return flops / (time_ms * 1e-3) / 1e12 if time_ms else None


class _Lookup:
    """Per-request caches of rows the tables refer to by id."""

    def __init__(self, session: Session) -> None:
        self.session = session
        self.devices: dict[int, Device] = {d.id: d for d in repo.list_devices(session)}
        self._problems: dict[int, Problem] = {}
        self._floors: dict[tuple[int, int], float | None] = {}

    def problem(self, problem_id: int) -> Problem | None:
        if problem_id not in self._problems:
            try:
                self._problems[problem_id] = repo.get_problem(self.session, problem_id)
            except NotFound:
                return None
        return self._problems[problem_id]

    def device_by_name(self, name: str | None) -> Device | None:
        matches = [d for d in self.devices.values() if d.name == name]
        return max(matches, key=lambda d: d.id) if matches else None

    def floor_ms(self, problem: Problem, device: Device | None) -> float | None:
        """The overall floor time of a problem on a device: the stored best's, else computed from the bound."""
        if device is None:
            return None
        cache_key = (problem.id, device.id)
        if cache_key not in self._floors:
            best = next((v for v in repo.list_best_configs(self.session, problem_key=problem.key)
                         if v.device_id == device.id and v.scope == OVERALL_SCOPE), None)
            if best is not None:
                self._floors[cache_key] = best.floor_ms
            else:
                try:
                    self._floors[cache_key] = floor_and_bound(ConvProblem.from_mapping(problem.spec), device)[0]
                except ConvtuneError:
                    self._floors[cache_key] = None
        return self._floors[cache_key]


# ---- sections -------------------------------------------------------------------------------------------
def _jobs_section(lookup: _Lookup, jobs: Sequence[Job], *, show_problem: bool = True) -> str:
    headers = ["job", *(["problem"] if show_problem else []), "device", "backend", "status", "progress",
               "best so far", "efficiency", "batch", "created", "updated"]
    rows = []
    for job in jobs:
        problem = lookup.problem(job.problem_id)
        device = lookup.device_by_name(job.device_name)
        run = repo.find_run(lookup.session, job.tuning_run_id) if job.tuning_run_id is not None else None
        if device is None and run is not None:
            device = lookup.devices.get(run.device_id)
        floor = lookup.floor_ms(problem, device) if problem is not None else None
        best = job.best_time_ms
        eff = floor / best if floor and best else None
        budget = job.budget_trials or 0
        done = job.trials_done or 0
        progress = _bar(done / budget if budget else None, f"{done} / {budget} trials")
        if job.cancel_requested and job.status == "running":
            progress += " " + _badge("cancelling", "cancelled")
        status = _badge(job.status)
        if job.error:
            status += f' <span class="small muted" title="{h(job.error)}">{h(str(job.error)[:60])}</span>'
        cells = [_td(f"#{int(job.id)}")]
        if show_problem:
            cells.append(_td(_problem_link(job.problem_id, problem.key) if problem is not None else h(job.problem_id)))
        cells += [_td(h(job.device_name or "any")), _td(h(job.backend)), _td(status), _td(progress),
                  _td(h(f"{best:.4g} ms") if best else "–", "num"), _td(_eff(eff)),
                  _td(h(job.batch_id) if job.batch_id is not None else "–"),
                  _td(_when(job.created_at)), _td(_when(job.updated_at))]
        rows.append(_tr(*cells, cls=f"job job-{h(job.status)}"))
    return _table(headers, rows, table_id="jobs", empty="no jobs yet")


def _runs_table(lookup: _Lookup, runs: Sequence[TuningRun], *, show_problem: bool = True,
                table_id: str = "runs") -> str:
    headers = ["run", *(["problem"] if show_problem else []), "device", "backend", "status", "trials",
               "stop reason", "started", "finished"]
    rows = []
    for run in runs:
        problem = lookup.problem(run.problem_id)
        device = lookup.devices.get(run.device_id)
        budget = run.budget_trials or 0
        trials = _bar(run.trials_done / budget if budget else None, f"{run.trials_done} / {budget}")
        cells = [_td(f'<a href="/problems/{int(run.problem_id)}#run-{int(run.id)}">#{int(run.id)}</a>')]
        if show_problem:
            cells.append(_td(_problem_link(run.problem_id, problem.key) if problem is not None else h(run.problem_id)))
        cells += [_td(h(device.name if device else run.device_id)), _td(h(run.backend)), _td(_badge(run.status)),
                  _td(trials), _td(h(run.stop_reason)), _td(_when(run.started_at)), _td(_when(run.finished_at))]
        rows.append(_tr(*cells, cls="run"))
    return _table(headers, rows, table_id=table_id, empty="no tuning runs yet")


def _best_rows(views: Sequence[BestConfigView], flops: dict[int, float], *, show_problem: bool, show_device: bool,
               compulsory: dict[int, float]) -> list[str]:
    rows = []
    for v in views:
        cells = []
        if show_problem:
            cells.append(_td(_problem_link(v.problem_id, v.problem_key)))
        if show_device:
            cells.append(_td(h(f"{v.device_name} (sm {v.compute_capability})")))
        cells.append(_td(h("overall" if v.scope == OVERALL_SCOPE else v.scope)))
        cells.append(_td(_short_config(v.config_key)))
        cells.append(_num(v.time_ms, "{:.4g} ms"))
        cells.append(_num(_tflops(flops.get(v.problem_id, 0.0), v.time_ms), "{:.2f}"))
        gbps = compulsory.get(v.problem_id, 0.0) / (v.time_ms * 1e-3) / 1e9 if v.time_ms else None
        cells.append(_num(gbps, "{:.0f}"))
        cells.append(_num(v.floor_ms, "{:.4g} ms"))
        cells.append(_td(_eff(v.efficiency), "eff-cell"))
        # only a GPU row of this device name is "measured"; a replayed or predicted row says what it is
        cells.append(_td(_badge("measured", "ok") if v.measured_here else _badge(v.provenance, "provisional")))
        run = (f'<a href="/problems/{int(v.problem_id)}#run-{int(v.tuning_run_id)}">#{int(v.tuning_run_id)}</a>'
               if v.tuning_run_id is not None else "–")
        cells.append(_td(run))
        rows.append(_tr(*cells, cls="best"))
    return rows


_BEST_HEADERS = ["scope", "config", "time", "TFLOP/s", "GB/s", "floor", "efficiency vs bound", "kind", "run"]


# ---- GET / ------------------------------------------------------------------------------------------------
@router.get("/", response_class=HTMLResponse, summary="History: jobs, best configs per device, problems")
async def index(db: DbDep, caller: ReaderDep) -> HTMLResponse:
    def work(session: Session) -> HTMLResponse:
        caller.reader(session)
        return _index(session)

    return await db.run(work)


def _index(session: Session) -> HTMLResponse:
    lookup = _Lookup(session)
    parts = ["<h1>Tuning history</h1>"]
    stats = _queue_summary(session)
    if stats:
        parts.append(f'<p class="muted small" id="queue-stats">{stats}</p>')

    parts.append("<h2>Jobs</h2>")
    parts.append(_jobs_section(lookup, repo.list_jobs(session, limit=RECENT)))
    parts.append("<h2>Latest tuning runs</h2>")
    parts.append(_runs_table(lookup, repo.list_runs(session, limit=RECENT)))

    problems = _all_problems(session)
    for p in problems:
        lookup._problems[p.id] = p
    flops = {p.id: float(p.flops) for p in problems}
    compulsory = {p.id: float(p.compulsory_bytes) for p in problems}
    by_device: dict[tuple[str, str], list[BestConfigView]] = {}
    tuned: set[int] = set()
    for p in problems:
        for view in repo.list_best_configs(session, problem_key=p.key):
            if view.scope == OVERALL_SCOPE:
                by_device.setdefault((view.device_name, view.compute_capability), []).append(view)
                tuned.add(p.id)
    parts.append('<h2>Best configurations per device</h2><section id="best-configs">')
    if not by_device:
        parts.append('<p class="muted">nothing tuned yet</p>')
    # devices with measured results first, then by name
    ordered = sorted(by_device.items(), key=lambda item: (not any(v.measured_here for v in item[1]), item[0]))
    for n, ((device_name, cc), views) in enumerate(ordered, start=1):
        effs = [v.efficiency for v in views if v.measured_here]
        mean = f" · mean efficiency {sum(effs) / len(effs):.1%} over {len(effs)} measured" if effs else ""
        parts.append(f'<h3 class="device">{h(device_name)} <span class="muted small">sm {h(cc)} · '
                     f"{len(views)} problems{h(mean)}</span></h3>")
        rows = _best_rows(views, flops, show_problem=True, show_device=False, compulsory=compulsory)
        parts.append(_table(["problem", *_BEST_HEADERS], rows, table_id=f"best-{n}"))
    parts.append("</section>")

    parts.append("<h2>Problems</h2>")
    rows = []
    for p in problems:
        rows.append(_tr(_td(str(int(p.id))), _td(_problem_link(p.id, p.key)),
                        _num(p.flops / 1e9, "{:.3g}"), _num(p.compulsory_bytes / 1e6, "{:.3g}"),
                        _td(_badge("tuned", "ok") if p.id in tuned else _badge("not tuned", "queued"))))
    parts.append(_table(["id", "problem", "GFLOP", "compulsory MB", ""], rows, table_id="problems",
                        empty="no problems yet: POST /v1/tune a shape"))
    return _page("history", "\n".join(parts))


def _all_problems(session: Session, page: int = 500) -> list[Problem]:
    problems: list[Problem] = []
    while True:
        chunk = repo.list_problems(session, limit=page, offset=len(problems))
        problems += chunk
        if len(chunk) < page:
            return problems


def _queue_summary(session: Session) -> str:
    """One line of queue figures (``repository.queue_stats``)."""
    stats = repo.queue_stats(session, now=datetime.now(UTC))
    parts = []
    by_status = stats.get("jobs_by_status")
    if isinstance(by_status, dict):
        parts.append("jobs: " + (", ".join(f"{k} {v}" for k, v in by_status.items() if v) or "none"))
    for name, value in stats.items():
        if name == "jobs_by_status":
            continue
        text = f"{value:.2f}" if isinstance(value, float) else str(value)
        parts.append(f"{name.replace('_', ' ').replace(' per s', '/s')}: {text}")
    return h(" · ".join(parts))


# ---- GET /problems/{id} -------------------------------------------------------------------------------------
@router.get("/problems/{problem_id}", response_class=HTMLResponse, summary="One problem: best configs, report, trials")
async def problem_page(problem_id: Annotated[int, Path(ge=1, le=MAX_ID)], db: DbDep, caller: ReaderDep,
                       page: Annotated[int, Query(ge=1, le=1_000_000)] = 1,
                       device: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
                       per_page: Annotated[int, Query(ge=5, le=500)] = PAGE_SIZE) -> HTMLResponse:
    def work(session: Session) -> HTMLResponse:
        caller.reader(session)
        return _problem_page(session, problem_id, page, device, per_page)

    return await db.run(work)


def _problem_page(session: Session, problem_id: int, page: int, device: int | None, per_page: int) -> HTMLResponse:
    try:
        problem = repo.get_problem(session, problem_id)
    except NotFound:
        return _page("not found", f'<h1>Not found</h1><p id="not-found">No problem with id {int(problem_id)}. '
                                  '<a href="/">Back to the history</a>.</p>', status_code=404)
    lookup = _Lookup(session)
    lookup._problems[problem.id] = problem
    conv = ConvProblem.from_mapping(problem.spec)
    views = repo.list_best_configs(session, problem_key=problem.key)
    runs = repo.list_runs(session, problem.id, limit=1000)
    # the device: asked for, else the best overall one's, else the latest run's
    device_ids = sorted({v.device_id for v in views} | {r.device_id for r in runs})
    if device is None or device not in lookup.devices:
        overall = [v for v in views if v.scope == OVERALL_SCOPE] or list(views)
        device = overall[0].device_id if overall else (runs[0].device_id if runs else None)
    dev = lookup.devices.get(device) if device is not None else None

    parts = [f'<h1 id="problem-key">{h(problem.key)}</h1>', _spec(problem, conv)]

    parts.append("<h2>Best configurations</h2>")
    rows = _best_rows(views, {problem.id: float(problem.flops)}, show_problem=False, show_device=True,
                      compulsory={problem.id: float(problem.compulsory_bytes)})
    parts.append(_table(["device", *_BEST_HEADERS], rows, table_id="best-configs", empty="not tuned yet"))

    jobs = repo.list_jobs(session, problem_id=problem.id, limit=RECENT)
    if jobs:
        parts.append("<h2>Jobs</h2>")
        parts.append(_jobs_section(lookup, jobs, show_problem=False))

    if len(device_ids) > 1:
        links = " · ".join(
            (f"<b>{h(lookup.devices[i].name)} #{i}</b>" if i == device else
             f'<a href="/problems/{int(problem.id)}?device={i}">{h(lookup.devices[i].name)} #{i}</a>')
            for i in device_ids if i in lookup.devices)
        parts.append(f'<p class="small">device: {links}</p>')

    parts.append("<h2>Report</h2>")
    if dev is None:
        parts.append('<p class="muted" id="report">not tuned on any device yet</p>')
    else:
        svg = render_report_svg(build_report(session, problem.id, dev.id))
        svg = svg.replace("<svg ", '<svg id="report-svg" ', 1)
        parts.append(f'<div class="report" id="report">{svg}</div>'
                     f'<p class="small"><a href="/v1/problems/{int(problem.id)}/report.svg?device_id={dev.id}">'
                     "report.svg</a></p>")

    parts.append("<h2>Tuning runs and pruning</h2>")
    parts.append(_pruning(lookup, runs))

    parts.append("<h2>Trial history</h2>")
    if dev is None:
        parts.append('<p class="muted" id="trials">no trials yet</p>')
    else:
        parts.append(_trials(session, problem, dev, lookup.floor_ms(problem, dev), page, per_page))
    return _page(problem.key, "\n".join(parts))


def _spec(problem: Problem, conv: ConvProblem) -> str:
    items = [("shape", f"N={conv.N} C={conv.C} H={conv.H} W={conv.W} → K={conv.K} P={conv.P} Q={conv.Q}"),
             ("filter", f"R={conv.R} S={conv.S} stride={conv.stride_h}×{conv.stride_w} "
                        f"pad={conv.pad_h}×{conv.pad_w} dilation={conv.dil_h}×{conv.dil_w} groups={conv.groups}"
                        + (" causal" if conv.causal else "")),
             ("dtype", conv.dtype),
             ("precision", conv.precision + (" (TF32 tensor cores; strict float32 configs serve it too)"
                                             if conv.precision == "tf32" else "")),
             ("FLOPs", f"{problem.flops / 1e9:.4g} GFLOP ({2 * conv.macs_nonpad / 1e9:.4g} without padding taps)"),
             ("compulsory bytes", f"{problem.compulsory_bytes / 1e6:.4g} MB "
                                  f"(intensity {problem.flops / max(problem.compulsory_bytes, 1):.1f} FLOP/B)"),
             ("problem id", f"{problem.id} · API: /v1/problems/{problem.id}"),
             ("first seen", problem.created_at.strftime("%Y-%m-%d %H:%M:%S UTC") if problem.created_at else "–")]
    return '<dl class="spec" id="spec">' + "".join(f"<dt>{h(k)}</dt><dd>{h(v)}</dd>" for k, v in items) + "</dl>"


_STAGE_ORDER = ("infeasible", "traffic", "predicted_time", "kept")


def _pruning(lookup: _Lookup, runs: Sequence[TuningRun]) -> str:
    if not runs:
        return '<p class="muted" id="runs">no tuning runs yet</p>'
    rows = []
    for run in runs:
        device = lookup.devices.get(run.device_id)
        counts = repo.pruning_stage_counts(lookup.session, run.id)
        survivors = run.stage_survivors or {}
        decided = " · ".join(f"{stage} {counts[stage]}" for stage in _STAGE_ORDER if stage in counts)
        funnel = " → ".join(f"{k} {v}" for k, v in survivors.items())
        space = f"space {run.space_size}" if run.space_size is not None else ""
        pruning_s = f"{run.pruning_s:.2f} s" if run.pruning_s is not None else "–"
        budget = run.budget_trials or 0
        rows.append(_tr(
            _td(f'<span id="run-{int(run.id)}">#{int(run.id)}</span>'),
            _td(h(device.name if device else run.device_id)), _td(h(run.backend)), _td(h(run.sampler)),
            _td(_badge(run.status)),
            _td(_bar(run.trials_done / budget if budget else None, f"{run.trials_done} / {budget}")),
            _td(h(run.stop_reason)),
            _td(f'<span class="small">{h(space)}{"<br>" if space and funnel else ""}{h(funnel)}</span>'),
            _td(f'<span class="small">{h(decided) or "–"}</span>'), _td(h(pruning_s), "num"),
            _td(_when(run.started_at)), _td(_when(run.finished_at)), cls="run"))
    return _table(["run", "device", "backend", "sampler", "status", "trials", "stop reason", "pruning funnel",
                   "decisions stored", "pruning", "started", "finished"], rows, table_id="runs")


def _trials(session: Session, problem: Problem, device: Device, floor_ms: float | None, page: int,
            per_page: int = PAGE_SIZE) -> str:
    rows: list[Measurement] = repo.measurements_for(session, device_id=device.id, problem_id=problem.id)
    predicted = False
    if not rows:
        rows = repo.measurements_for(session, device_id=device.id, problem_id=problem.id, predicted=True)
        predicted = bool(rows)
    total = len(rows)
    pages = max(1, math.ceil(total / per_page))
    page = min(page, pages)
    start = (page - 1) * per_page
    shown = rows[start:start + per_page]
    keys = repo.config_keys_by_id(session, {m.config_id for m in shown})
    ok_times = [m.median_ms for m in rows if m.status == "ok" and m.median_ms]
    fastest = min(ok_times) if ok_times else None
    flops = float(problem.flops)  # the API's TFLOP/s: dense FLOPs (padding taps included)
    out = [f'<p class="small muted">{total} trials on {h(device.name)}'
           f"{' (model predictions, not measurements)' if predicted else ''}, oldest first; "
           f"{sum(m.status != 'ok' for m in rows)} failed; efficiency = floor "
           f"{h(f'{floor_ms:.4g} ms') if floor_ms else '–'} / time.</p>"]
    nav = _pager(problem.id, device.id, page, pages, per_page)
    out.append(nav)
    body = []
    running_best = math.inf
    for m in rows[:start]:
        if m.status == "ok" and m.median_ms:
            running_best = min(running_best, m.median_ms)
    for i, m in enumerate(shown, start=start + 1):
        ok = m.status == "ok" and m.median_ms is not None
        improved = ok and m.median_ms is not None and m.median_ms < running_best
        if ok and m.median_ms is not None:
            running_best = min(running_best, m.median_ms)
        spread = (f"{m.p10_ms:.4g}–{m.p90_ms:.4g}" if m.p10_ms is not None and m.p90_ms is not None else "–")
        status = _badge(m.status, "ok" if ok else "bad")
        if m.median_ms is not None and m.median_ms == fastest:
            status += " " + _badge("fastest", "finished")
        elif improved:
            status += ' <span class="small muted">new best</span>'
        error = f'<span class="small" title="{h(m.error)}">{h((m.error or "")[:80])}</span>' if m.error else ""
        body.append(_tr(
            _td(str(i), "num"), _td(str(int(m.id)), "num"),
            _td(f'<a href="#run-{int(m.tuning_run_id)}">#{int(m.tuning_run_id)}</a>' if m.tuning_run_id else "–"),
            _td(_short_config(keys.get(m.config_id, str(m.config_id)))), _td(status),
            _num(m.median_ms if ok else None, "{:.4g}"), _td(h(spread), "num"),
            _num(_tflops(flops, m.median_ms) if ok else None, "{:.2f}"),
            _td(_eff(floor_ms / m.median_ms if ok and floor_ms and m.median_ms else None)),
            _num(m.num_regs, "{:d}"), _num(m.smem_bytes / 1024 if m.smem_bytes is not None else None, "{:.1f}"),
            _td(error), cls="trial" + ("" if ok else " failed")))
    out.append(_table(["#", "measurement", "run", "config", "status", "median ms", "p10–p90 ms", "TFLOP/s",
                       "efficiency", "regs", "smem KiB", "error"], body, table_id="trials", empty="no trials yet"))
    out.append(nav)
    return "\n".join(out)


def _pager(problem_id: int, device_id: int, page: int, pages: int, per_page: int) -> str:
    def link(p: int, text: str, rel: str) -> str:
        size = f"&amp;per_page={int(per_page)}" if per_page != PAGE_SIZE else ""
        href = f"/problems/{int(problem_id)}?device={int(device_id)}&amp;page={p}{size}#trials"
        return f'<a rel="{rel}" href="{href}">{text}</a>'

    parts = [link(page - 1, "« previous", "prev") if page > 1 else '<span class="muted">« previous</span>',
             f'<span class="page-of">page {page} of {pages}</span>',
             link(page + 1, "next »", "next") if page < pages else '<span class="muted">next »</span>']
    return f'<nav class="pages">{"".join(parts)}</nav>'
