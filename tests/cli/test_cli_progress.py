"""Progress on stderr (tqdm): pruning stage counts, trials with the best so far, jobs of the service waited
for; off when stderr is not a terminal or with --quiet / --no-progress, and never in --json's stdout."""

from __future__ import annotations

import argparse
import io
import json
from pathlib import Path
from typing import Any

import pytest

from convtune.cli import main, progress, service
from convtune.cli.progress import JobsProgress, TuneProgress, progress_enabled, pruning_line
from convtune.cli.service import wait_for_jobs
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope
from convtune.storage import queries as repo
from convtune.storage.migrate import upgrade
from convtune.tuner.benchmark import ModelBenchmarker
from convtune.tuner.tune import tune

TINY = ["N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "pad=1"]


class Tty(io.StringIO):
    def isatty(self) -> bool:
        return True


@pytest.fixture(autouse=True)
def _own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


def test_progress_only_on_a_terminal_and_not_when_quiet() -> None:
    assert progress_enabled(None, io.StringIO()) is False
    assert progress_enabled(None, Tty()) is True
    assert progress_enabled(argparse.Namespace(no_progress=True), Tty()) is False
    assert progress_enabled(argparse.Namespace(quiet=True, no_progress=False), Tty()) is False


def test_pruning_line_names_every_stage() -> None:
    line = pruning_line({"grid": 12_345, "feasible": 2_000, "traffic": 1_234, "predicted_time": 56}, 3.25)
    assert line == "pruning: 12,345 configs → 2,000 feasible → 1,234 after bounds → 56 after model (3.2 s)"


def test_tune_progress_shows_the_stage_counts_and_the_trials(tmp_path: Path) -> None:
    engine = make_engine(f"sqlite:///{tmp_path / 'p.db'}")
    upgrade(engine)
    out = io.StringIO()
    bar = TuneProgress(True, file=out)
    problem = ConvProblem.parse(" ".join(TINY))
    result = tune(problem, ModelBenchmarker(MachineModel.preset("h200")), engine, families=["direct"],
                  budget_trials=5, warm_start=2, progress=bar.trial, prune_progress=bar.prune)
    bar.close()
    with session_scope(engine) as session:
        run = repo.get_run(session, result.run_id)
        grid, stages = run.space_size, dict(run.stage_survivors)
    text = out.getvalue()
    assert (f"pruning: {grid:,} configs → {stages['feasible']:,} feasible → {stages['traffic']:,} after bounds → "
            f"{stages['predicted_time']:,} after model") in text
    assert "trials" in text and "5/5" in text
    assert f"best {result.time_ms:.4f} ms" in text and "efficiency" in text
    engine.dispose()


def test_disabled_progress_writes_nothing() -> None:
    out = io.StringIO()
    bar = TuneProgress(False, file=out)
    bar.prune("grid", 10)
    bar.prune("predicted_time", 1)
    bar.close()
    assert out.getvalue() == ""


def test_tune_json_with_progress_forced_on(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "progress_enabled", lambda args=None, stream=None: True)
    rc = main(["tune", *TINY, "--backend", "model", "--budget-trials", "4", "--db", f"sqlite:///{tmp_path / 't.db'}",
               "--json"])
    out, err = capsys.readouterr()
    summary = json.loads(out)  # stdout is only the JSON
    assert rc == 0 and summary["trials"] == 4
    assert "pruning: " in err and "after model" in err and "4/4" in err
    assert summary["pruning_s"] >= 0 and summary["search_s"] >= 0 and summary["stop_code"] == "budget_trials"


def test_no_progress_when_stderr_is_not_a_terminal(tmp_path: Path, capsys) -> None:
    rc = main(["tune", *TINY, "--backend", "model", "--budget-trials", "3", "--db", f"sqlite:///{tmp_path / 't.db'}"])
    out, err = capsys.readouterr()
    assert rc == 0 and err == "" and "pruning     grid" in out and "seconds     pruning" in out


# ---- jobs of the service ------------------------------------------------------------------------------------
def _job(job_id: int, status: str, trials: int, budget: int = 10) -> dict[str, Any]:
    return {"id": job_id, "status": status, "trials_done": trials, "budget_trials": budget,
            "problem": {"key": "k"}, "best_time_ms": None, "efficiency": None, "batch_id": 5}


class FakeTime:
    """``sleep`` moves ``clock``: waiting without waiting."""

    def __init__(self) -> None:
        self.now, self.slept = 0.0, []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.slept.append(seconds)
        self.now += seconds


def test_wait_for_jobs_shows_jobs_done_and_each_running_jobs_trials() -> None:
    answers = iter([[_job(7, "running", 4), _job(8, "queued", 0), _job(9, "finished", 10)],
                    [_job(7, "finished", 10), _job(8, "running", 3), _job(9, "finished", 10)],
                    [_job(7, "finished", 10), _job(8, "failed", 3), _job(9, "finished", 10)]])
    out, t = io.StringIO(), FakeTime()
    bar = JobsProgress(True, 3, file=out)
    jobs = wait_for_jobs(lambda: next(answers), bar, None, 2.0, sleep=t.sleep, clock=t.clock)
    bar.close("done")
    text = out.getvalue()
    assert [j["status"] for j in jobs] == ["finished", "failed", "finished"] and t.slept == [2.0, 2.0]
    assert "1/3" in text and "job 7 4/10" in text and "1 queued" in text
    assert "2/3" in text and "job 8 3/10" in text and "3/3" in text and text.rstrip().endswith("done")


def test_wait_for_jobs_gives_up_after_the_wait() -> None:
    t = FakeTime()
    jobs = wait_for_jobs(lambda: [_job(1, "running", 2)], JobsProgress(False, 1), 5.0, 2.0, sleep=t.sleep,
                         clock=t.clock)
    assert jobs[0]["status"] == "running" and t.slept == [2.0, 2.0, 1.0] and t.now == 5.0


def _fake_server(monkeypatch: pytest.MonkeyPatch, answers: dict[tuple[str, str], list[Any]]) -> list[str]:
    """``service.request`` answering from ``answers[(method, path)]`` in turn; returns the calls made."""
    calls: list[str] = []

    def request(args: Any, method: str, path: str, **kwargs: Any) -> tuple[int, Any]:
        calls.append(f"{method} {path}")
        queue = answers[(method, path)]
        return queue.pop(0) if len(queue) > 1 else queue[0]

    monkeypatch.setattr(service, "request", request)
    return calls


def test_batch_watch_polls_until_every_job_ended(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "progress_enabled", lambda args=None, stream=None: True)
    batch = {"id": 5, "name": None, "status": "queued", "jobs": [_job(1, "queued", 0), _job(2, "queued", 0)]}
    calls = _fake_server(monkeypatch, {
        ("POST", "/v1/batches"): [(202, batch)],
        ("GET", "/v1/batches/5"): [(200, {**batch, "status": "running", "jobs": [_job(1, "running", 6),
                                                                                 _job(2, "queued", 0)]}),
                                   (200, {**batch, "status": "finished", "jobs": [_job(1, "finished", 10),
                                                                                  _job(2, "finished", 10)]})]})
    rc = main(["batch", "--preset", "resnet18", "--watch", "--poll-s", "0.001", "--json"])
    out, err = capsys.readouterr()
    assert rc == 0 and json.loads(out)["status"] == "finished"
    assert calls == ["POST /v1/batches", "GET /v1/batches/5", "GET /v1/batches/5"]
    assert "batch 5" in err and "job 1 6/10" in err and "2/2" in err


def test_batch_wait_exits_1_when_a_job_failed(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    batch = {"id": 6, "name": None, "status": "queued", "jobs": [_job(1, "queued", 0)]}
    _fake_server(monkeypatch, {("POST", "/v1/batches"): [(202, batch)],
                               ("GET", "/v1/batches/6"): [(200, {**batch, "status": "failed",
                                                                 "jobs": [_job(1, "failed", 2) | {
                                                                     "stop_reason": "error"}]})]})
    rc = main(["batch", "--preset", "resnet18", "--wait", "60", "--poll-s", "0.001"])
    out, err = capsys.readouterr()
    assert rc == 1 and "failed" in out and err == ""  # not a terminal: no progress
    assert "stop: error" in out  # the jobs table says why each ended job stopped


def test_submit_wait_polls_the_job_then_prints_the_result(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(progress, "progress_enabled", lambda args=None, stream=None: True)
    queued = {"problem": {"key": "k", "id": 1}, "job": _job(3, "queued", 0), "config": None, "note": "queued"}
    done = {"problem": {"key": "k", "id": 1}, "job": _job(3, "finished", 10), "device": "NVIDIA H200",
            "run_id": 4, "predicted": False, "config": {"key": "direct.fwd tile_h=1"}, "time_ms": 0.5,
            "tflops": 1.0, "gbps": 2.0, "floor_ms": 0.25, "efficiency": 0.5}
    calls = _fake_server(monkeypatch, {
        ("POST", "/v1/tune"): [(202, queued), (200, done)],
        ("GET", "/v1/jobs/3"): [(200, _job(3, "running", 5)), (200, _job(3, "finished", 10))]})
    rc = main(["submit", *TINY, "--wait", "60", "--poll-s", "0.001"])
    out, err = capsys.readouterr()
    assert rc == 0 and "result    measured on NVIDIA H200" in out and "direct.fwd tile_h=1" in out
    assert calls == ["POST /v1/tune", "GET /v1/jobs/3", "GET /v1/jobs/3", "POST /v1/tune"]
    assert "job 3" in err and "5/10" in err
