"""``convtune best`` with a replayed and a GPU row of one problem: the GPU row is the answer, marked measured,
and the replayed row is listed flagged; replay and model runs of ``convtune tune`` without a database keep
their rows in a demo file, never in the default database."""

from __future__ import annotations

import contextlib
import io
import json
from pathlib import Path

import pytest
from best_rows import GPU_CONFIG, GPU_MS, PROBLEM, REPLAY_CONFIG, REPLAY_MS, replay_and_gpu

from convtune.cli import main
from convtune.storage.session import demo_database_path

TOKENS = PROBLEM.key().split()
REPLAY_TABLE = Path(__file__).resolve().parents[1] / "data" / "replay_h200_space_sample.json.gz"
SAMPLE = ["N=32", "C=256", "H=14", "W=14", "K=256", "R=3", "S=3", "pad=1"]  # a problem of the README's replay table


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_default_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    return tmp_path / "xdg" / "convtune"


def test_best_answers_the_gpu_row_and_flags_the_replay_row(sqlite_url: str) -> None:
    replay_and_gpu(sqlite_url)
    rc, out, _ = _run(["best", *TOKENS, "--db", sqlite_url])
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == GPU_CONFIG.key() and lines[1].endswith("; measured")
    assert len(lines) == 3 and "REPLAY (NOT MEASURED HERE)" in lines[2] and lines[2].endswith(REPLAY_CONFIG.key())
    rc, out, _ = _run(["best", *TOKENS, "--db", sqlite_url, "--json"])
    d = json.loads(out)
    assert (d["config"], d["time_ms"], d["backend"], d["measured"]) == (GPU_CONFIG.key(), GPU_MS, "gpu", True)
    assert [(o["config"], o["time_ms"], o["backend"], o["measured"]) for o in d["others"]] == [
        (REPLAY_CONFIG.key(), REPLAY_MS, "replay", False)]


def test_a_replay_only_row_is_never_shown_as_measured(sqlite_url: str) -> None:
    from best_rows import store

    store(sqlite_url, REPLAY_CONFIG, "replay", REPLAY_MS)
    rc, out, _ = _run(["best", *TOKENS, "--db", sqlite_url])
    assert rc == 0 and out.splitlines()[1].endswith("; REPLAY (NOT MEASURED HERE)")
    assert json.loads(_run(["best", *TOKENS, "--db", sqlite_url, "--json"])[1])["measured"] is False


def test_a_replay_tune_without_a_database_uses_the_demo_file(_no_default_database: Path) -> None:
    rc, out, err = _run(["tune", *SAMPLE, "--backend", "replay", "--replay", str(REPLAY_TABLE), "--budget-trials",
                         "3", "--json"])
    assert rc == 0, err
    demo = demo_database_path("replay")
    assert demo.is_file() and demo.parent == _no_default_database
    assert not (_no_default_database / "convtune.db").exists()  # the default database is never written
    notice = [line for line in err.splitlines() if "demo database" in line]
    assert len(notice) == 1 and str(demo) in notice[0] and "--db" in notice[0]
    assert json.loads(out)["backend"] == "replay"
    # the default database has nothing; `best` says where the demo's result is
    rc, _, err = _run(["best", *SAMPLE])
    assert rc == 1 and f"--db sqlite:///{demo}" in err and len(err.strip().splitlines()) == 1
    rc, out, _ = _run(["best", *SAMPLE, "--db", f"sqlite:///{demo}", "--json"])
    assert rc == 0 and (json.loads(out)["backend"], json.loads(out)["measured"]) == ("replay", False)


def test_an_explicit_database_wins_over_the_demo_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    url = f"sqlite:///{tmp_path / 'mine.db'}"
    monkeypatch.setenv("CONVTUNE_DATABASE_URL", url)
    rc, _, err = _run(["tune", *SAMPLE, "--backend", "replay", "--replay", str(REPLAY_TABLE), "--budget-trials",
                       "3"])
    assert rc == 0 and "demo database" not in err
    assert (tmp_path / "mine.db").is_file() and not demo_database_path("replay").exists()
