"""History pages ``/`` and ``/problems/{id}`` through the app, on a SQLite database filled by replay tunes: the
content (best configs with efficiency, runs, jobs, problems, the inline report, the pruning summary, the
paginated trial history), escaping, well-formed HTML, 404s and bad query parameters."""

from __future__ import annotations

import re
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime
from html.parser import HTMLParser
from pathlib import Path

import pytest
from fastapi import FastAPI
from fastapi.testclient import TestClient
from sqlalchemy.orm import Session

from convtune.api import pages
from convtune.api.main import create_app
from convtune.api.settings import Settings
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope, upgrade
from convtune.storage import queries as repo
from convtune.tuner.benchmark import ReplayBenchmarker, TrialResult
from convtune.tuner.tune import tune

REPLAY = Path(__file__).resolve().parents[1] / "data" / "replay_h200_vs_cudnn.json.gz"
#: 43 of this problem's pruning survivors are in the replay table: the tune evaluates them all
TUNED = ConvProblem.parse("N=32 C=512 H=7 W=7 K=512 R=3 S=3 stride=1 pad=1")
UNTUNED = ConvProblem.parse("N=1 C=8 H=8 W=8 K=8 R=3 S=3 pad=1")
TRIALS = 43
PER_PAGE = 20  # three pages: 20, 20, 3
NASTY = "<script>alert('x')</script>"


class FlakyReplay(ReplayBenchmarker):
    """Every fifth trial comes back as a wrong result, with the error text given."""

    def __init__(self, error: str) -> None:
        super().__init__(REPLAY)
        self.calls = 0
        self.error = error

    def measure(self, problem: ConvProblem, plan: object) -> TrialResult:
        self.calls += 1
        if self.calls % 5 == 3:
            return TrialResult("wrong", rel_error=0.5, error=self.error)
        return super().measure(problem, plan)


@dataclass
class Filled:
    url: str
    problem_id: int
    untuned_id: int
    run_id: int
    h200_id: int
    other_device_id: int
    best_efficiency: float
    best_config: str
    failed: int
    stage_counts: dict[str, int]
    jobs: dict[str, int]


def fill_database(directory: Path, *, escape_probes: bool = True) -> Filled:
    """A replay tune of TUNED (with failures), an untuned problem, a provisional best on a second device, and
    jobs in several states where the jobs table exists. With ``escape_probes``, the second device's name and
    the failures' error text carry HTML that the pages must escape."""
    directory.mkdir(parents=True, exist_ok=True)
    url = f"sqlite:///{directory / 'convtune.db'}"
    upgrade(url)
    engine = make_engine(url)
    try:
        error = f"mismatch {NASTY} & more" if escape_probes else "rel. error 0.5 > 1e-05"
        result = tune(TUNED, FlakyReplay(error), engine, budget_trials=TRIALS, seed=0, patience=1000)
        with session_scope(engine) as session:
            problem = repo.find_problem(session, TUNED)
            assert problem is not None
            best = repo.get_best_config(session, problem_key=TUNED)
            untuned = repo.get_or_create_problem(session, UNTUNED)
            other = repo.get_or_create_device(
                session, name=f"Other GPU {NASTY}" if escape_probes else "NVIDIA A100", compute_capability="8.0",
                sm_count=108, driver_version=None, cuda_version=None, copy_bandwidth_bytes_per_s=2.0e12,
                fp32_peak_flops_per_s=19.5e12, ceilings_source="vendor")
            config = repo.find_config(session, best.config_key)
            assert config is not None
            repo.upsert_best_config(session, device_id=other.id, problem_id=problem.id, scope="*",
                                    config_id=config.id, measurement_id=None, time_ms=0.9, floor_ms=0.3,
                                    efficiency=1 / 3, provisional=True, tuning_run_id=None)
            failed = sum(m.status != "ok" for m in repo.measurements_for(
                session, device_id=best.device_id, problem_id=problem.id))
            jobs = _make_jobs(session, result.run_id)
            return Filled(url, problem.id, untuned.id, result.run_id, best.device_id, other.id, best.efficiency,
                          best.config_key, failed, repo.pruning_stage_counts(session, result.run_id), jobs)
    finally:
        engine.dispose()


def _make_jobs(session: Session, run_id: int) -> dict[str, int]:
    """A finished, a running and a queued job (``{status: job id}``), moved along by the repository as a worker
    would."""
    now = datetime.now(UTC)
    jobs = {}
    for status, problem in (("finished", TUNED), ("running", TUNED), ("queued", UNTUNED)):
        job = repo.create_job(session, problem=problem, backend="replay", budget_trials=100,
                              budget_s=300.0, device_name="NVIDIA H200")
        jobs[status] = job.id
        if status == "queued":
            continue
        worker = f"worker-{status}"
        claimed = repo.claim_job(session, worker_id=worker, now=now, backends=("replay",),
                                 device_name="NVIDIA H200")
        assert claimed is not None and claimed.id == job.id
        if status == "running":
            assert repo.heartbeat(session, job.id, worker_id=worker, now=now, trials_done=40,
                                  best_time_ms=0.3, tuning_run_id=run_id)
        else:
            assert repo.finish_job(session, job.id, worker_id=worker, status="finished",
                                   trials_done=100, best_time_ms=0.3, tuning_run_id=run_id)
    return jobs


def make_app(url: str) -> FastAPI:
    """The service's app on ``url`` (no in-process worker)."""
    return create_app(Settings(database_url=url, worker_in_process=False))


@pytest.fixture(scope="module")
def filled(tmp_path_factory: pytest.TempPathFactory) -> Filled:
    return fill_database(tmp_path_factory.mktemp("pages"))


@pytest.fixture(scope="module")
def client(filled: Filled) -> Iterator[TestClient]:
    with TestClient(make_app(filled.url)) as client:
        yield client


class _Nesting(HTMLParser):
    """Checks that every non-void element is closed in order."""

    VOID = frozenset({"meta", "br", "img", "input", "link", "hr", "col", "area", "base", "source", "wbr"})

    def __init__(self) -> None:
        super().__init__()
        self.stack: list[str] = []
        self.errors: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag not in self.VOID:
            self.stack.append(tag)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        pass

    def handle_endtag(self, tag: str) -> None:
        if not self.stack or self.stack[-1] != tag:
            self.errors.append(f"</{tag}> but open: {self.stack[-3:]}")
            return
        self.stack.pop()


def assert_well_formed(html: str) -> None:
    parser = _Nesting()
    parser.feed(html)
    parser.close()
    assert not parser.errors, parser.errors[:5]
    assert parser.stack == [], parser.stack


def _rows(html: str, table_id: str) -> list[str]:
    match = re.search(rf'<table id="{table_id}">(.*?)</table>', html, re.S)
    assert match, f"no table {table_id}"
    return re.findall(r"<tr[ >].*?</tr>", match.group(1).split("<tbody>", 1)[1], re.S)


def test_index(client: TestClient, filled: Filled) -> None:
    response = client.get("/")
    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    html = response.text
    assert_well_formed(html)
    # best configs per device, efficiency against the bound, measured vs provisional
    assert "NVIDIA H200" in html and f"{filled.best_efficiency:.1%}" in html
    assert pages.h(filled.best_config) in html
    assert "provisional (model)" in html and "33.3%" in html
    # one table per device, the measured device first
    assert len(_rows(html, "best-1")) == 1 and len(_rows(html, "best-2")) == 1
    assert "measured" in _rows(html, "best-1")[0] and "provisional" in _rows(html, "best-2")[0]
    # runs, problems, links
    runs = _rows(html, "runs")
    assert len(runs) == 1 and f"#{filled.run_id}" in runs[0] and f"{TRIALS} / {TRIALS}" in runs[0]
    problems = _rows(html, "problems")
    assert len(problems) == 2
    assert f'href="/problems/{filled.problem_id}"' in html and f'href="/problems/{filled.untuned_id}"' in html
    assert "not tuned" in problems[1] and pages.h(UNTUNED.key()) in problems[1]
    # nothing from the database reaches the page unescaped
    assert NASTY not in html and pages.h(f"Other GPU {NASTY}") in html


def test_index_jobs(client: TestClient, filled: Filled) -> None:
    html = client.get("/").text
    jobs = _rows(html, "jobs")
    assert len(jobs) == 3
    by_status = {status: next(r for r in jobs if f"#{job_id}<" in r) for status, job_id in filled.jobs.items()}
    assert "40 / 100 trials" in by_status["running"] and "0.3 ms" in by_status["running"]
    assert "queued" in by_status["queued"] and "0 / 100 trials" in by_status["queued"]
    assert "100 / 100 trials" in by_status["finished"]
    # efficiency of the best so far against the floor of the problem on that device
    assert re.search(r"\d+\.\d%", by_status["running"])


def test_problem_page(client: TestClient, filled: Filled) -> None:
    response = client.get(f"/problems/{filled.problem_id}")
    assert response.status_code == 200
    html = response.text
    assert_well_formed(html)
    assert f'<h1 id="problem-key">{pages.h(TUNED.key())}</h1>' in html
    assert "7.399 GFLOP" in html  # the spec
    best = _rows(html, "best-configs")
    assert len(best) == 3  # H200 direct + overall, the other device's provisional overall
    assert sum(f"{filled.best_efficiency:.1%}" in r for r in best) == 2
    # the report: inline SVG, well-formed XML, with its series
    svg = re.search(r"<svg .*?</svg>", html, re.S)
    assert svg is not None
    root = ET.fromstring(svg.group(0))
    ids = {e.get("id") for e in root.iter()}
    assert {"report-svg", "best-so-far", "failed-trials", "ceiling-peak", "ceiling-bandwidth", "best-point",
            "floor-point"} <= ids
    # pruning summary of the run: the stored decisions per stage
    runs = _rows(html, "runs")
    assert len(runs) == 1 and f'id="run-{filled.run_id}"' in runs[0]
    for stage, count in filled.stage_counts.items():
        assert f"{stage} {count}" in runs[0]
    # trial history: every trial on one page of 50, numbered from 1, every fifth a failure
    trials = _rows(html, "trials")
    assert len(trials) == TRIALS and TRIALS <= pages.PAGE_SIZE
    assert "page 1 of 1" in html and 'rel="next"' not in html and 'rel="prev"' not in html
    assert re.findall(r'<td class="num">(\d+)</td>', trials[0])[0] == "1"
    assert sum('class="trial failed"' in r for r in trials) == filled.failed == TRIALS // 5 + (TRIALS % 5 >= 3)
    assert f"{TRIALS} trials on NVIDIA H200" in html and f"{filled.failed} failed" in html
    assert NASTY not in html and pages.h(f"mismatch {NASTY} & more") in html


def test_problem_page_pagination(client: TestClient, filled: Filled) -> None:
    seen = []
    for page, count in ((1, PER_PAGE), (2, PER_PAGE), (3, TRIALS - 2 * PER_PAGE)):
        html = client.get(f"/problems/{filled.problem_id}", params={"page": page, "per_page": PER_PAGE}).text
        trials = _rows(html, "trials")
        assert len(trials) == count and f"page {page} of 3" in html
        assert ('rel="prev"' in html) == (page > 1) and ('rel="next"' in html) == (page < 3)
        if page < 3:  # the links keep the page size and the device
            assert (f'href="/problems/{filled.problem_id}?device={filled.h200_id}&amp;page={page + 1}'
                    f'&amp;per_page={PER_PAGE}#trials"') in html
        numbers = [int(re.findall(r'<td class="num">(\d+)</td>', r)[0]) for r in trials]
        assert numbers == list(range((page - 1) * PER_PAGE + 1, (page - 1) * PER_PAGE + count + 1))
        seen += [re.findall(r'<td class="num">(\d+)</td>', r)[1] for r in trials]  # measurement ids
    assert len(set(seen)) == TRIALS
    # past the last page: the last page
    html = client.get(f"/problems/{filled.problem_id}", params={"page": 99, "per_page": PER_PAGE}).text
    assert "page 3 of 3" in html


def test_problem_page_other_device(client: TestClient, filled: Filled) -> None:
    html = client.get(f"/problems/{filled.problem_id}", params={"device": filled.other_device_id}).text
    assert_well_formed(html)
    assert "no trials yet" in html  # the report of a device with no measurement
    assert '<p class="muted" id="trials">' in html or "0 trials" in html
    assert f'href="/problems/{filled.problem_id}?device={filled.h200_id}"' in html  # the device switch


def test_untuned_problem(client: TestClient, filled: Filled) -> None:
    html = client.get(f"/problems/{filled.untuned_id}").text
    assert_well_formed(html)
    assert "not tuned yet" in html and "no tuning runs yet" in html


def test_not_found_and_bad_parameters(client: TestClient, filled: Filled) -> None:
    response = client.get("/problems/999999")
    assert response.status_code == 404 and response.headers["content-type"].startswith("text/html")
    assert "No problem with id 999999" in response.text
    for params in ({"page": 0}, {"page": "x"}, {"device": -1}, {"per_page": 1}, {"per_page": 10_000}):
        assert client.get(f"/problems/{filled.problem_id}", params=params).status_code == 422
    assert client.get("/problems/abc").status_code == 422


def test_report_svg_link(client: TestClient, filled: Filled) -> None:
    """The page links the API's report.svg of the device shown; it is the same plot, as an SVG document."""
    html = client.get(f"/problems/{filled.problem_id}").text
    link = re.search(r'href="(/v1/problems/\d+/report\.svg\?device_id=\d+)"', html)
    assert link is not None
    response = client.get(link.group(1).replace("&amp;", "&"))
    assert response.status_code == 200 and response.headers["content-type"].startswith("image/svg+xml")
    root = ET.fromstring(response.text)
    assert {"best-so-far", "failed-trials", "best-point", "floor-point"} <= {e.get("id") for e in root.iter()}
