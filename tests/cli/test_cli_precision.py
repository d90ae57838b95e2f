"""Precision classes on the command line: problem strings take ``math=tf32``; ``convtune tune`` of a tf32 problem
searches every family that accepts it and stores under the tf32 key; ``convtune best`` serves a tf32 problem the
fastest of its rows and its strict twin's, a strict problem never a tf32 row; a bad ``math`` is one line on stderr
and exit status 2 (``convtune submit`` also takes ``--math``)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from best_rows import GPU_CONFIG, GPU_MS, PROBLEM, TF32_CONFIG, TF32_MS, TF32_PROBLEM, strict_and_tf32

from convtune.cli import build_parser, main
from convtune.kernels.registry import specs_for
from convtune.problem import ConvProblem
from convtune.storage import make_engine, session_scope
from convtune.storage import queries as repo

REPO = Path(__file__).resolve().parents[2]
SMALL = ["N=1", "C=16", "H=8", "W=8", "K=16", "R=3", "S=3", "pad=1"]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.mark.parametrize(("argv", "needle"), [
    (["bounds", *SMALL, "math=fp16"], "math: 'fp16' is not supported: allowed ['ieee', 'tf32']"),
    (["tune", *SMALL, "math=TF32", "--backend", "model"], "allowed ['ieee', 'tf32']"),
    (["best", *SMALL, "math=tf32", "dtype=float16"], "math: math='tf32' needs dtype='float32'"),
    (["bounds", "B=2", "C=4", "L=16", "K=3", "math=tf32"], "math: 'tf32' is invalid for a 1-D causal"),
    (["submit", *SMALL, "--dtype", "bfloat16", "--math", "tf32"], "math: math='tf32' needs dtype='float32'"),
], ids=["bounds", "tune", "best-16-bit", "causal", "submit-options"])
def test_a_bad_math_is_one_line_and_exit_2(argv: list[str], needle: str, tmp_path: Path) -> None:
    done = subprocess.run([sys.executable, "-m", "convtune.cli", *argv, *(["--db", f"sqlite:///{tmp_path / 'c.db'}"]
                                                                          if argv[0] in ("tune", "best") else [])],
                          capture_output=True, text=True, timeout=300, cwd=tmp_path,
                          env={"PYTHONPATH": str(REPO), "PATH": "/usr/bin:/bin", "HOME": str(tmp_path)})
    assert done.returncode == 2 and done.stdout == "", done.stderr
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("convtune: error: ") and needle in lines[0], done.stderr


def test_submit_rejects_an_unknown_math_option(capsys) -> None:
    with pytest.raises(SystemExit) as exc:
        build_parser().parse_args(["submit", *SMALL, "--math", "half"])
    assert exc.value.code == 2 and "--math: invalid choice: 'half'" in capsys.readouterr().err


def test_the_help_names_math() -> None:
    for command in ("tune", "best", "bounds", "submit"):
        text = io.StringIO()
        with contextlib.redirect_stdout(text), pytest.raises(SystemExit):
            main([command, "--help"])
        assert "math=tf32" in " ".join(text.getvalue().split()), command


def test_bounds_of_a_tf32_problem(capsys) -> None:
    assert main(["bounds", *SMALL, "math=tf32", "--json"]) == 0
    tf32 = json.loads(capsys.readouterr().out)
    assert main(["bounds", *SMALL, "--json"]) == 0
    strict = json.loads(capsys.readouterr().out)
    assert tf32["problem"].endswith("math=tf32") and not strict["problem"].endswith("math=tf32")
    assert tf32["compulsory_bytes"] == strict["compulsory_bytes"]     # the same data: the same bytes


def test_tune_of_a_tf32_problem_searches_every_family_that_accepts_it_and_stores_under_its_key(
        sqlite_url: str) -> None:
    rc, out, err = _run(["tune", *SMALL, "math=tf32", "--backend", "model", "--budget-trials", "12", "--db",
                         sqlite_url, "--json", "--quiet"])
    assert rc == 0, err
    summary = json.loads(out)
    problem = ConvProblem.parse(" ".join(SMALL) + " math=tf32")
    assert summary["problem"] == problem.key() and summary["precision"] == "tf32"
    assert set(summary["families"]) == {spec.family for spec in specs_for(problem)}
    engine = make_engine(sqlite_url)
    try:
        with session_scope(engine) as session:
            row = repo.find_problem(session, problem)
            assert row is not None and row.spec["math"] == "tf32"
            assert repo.count_problem_measurements(session, row.id) == summary["measured"] > 0
            assert repo.find_problem(session, problem.replace(math="ieee")) is None
    finally:
        engine.dispose()
    rc, out, _ = _run(["best", *SMALL, "--db", sqlite_url])
    assert rc == 1                                          # the strict problem: nothing of its own


def test_best_serves_by_precision_class(sqlite_url: str) -> None:
    strict_and_tf32(sqlite_url)                             # the tf32 row is the faster
    rc, out, _ = _run(["best", *PROBLEM.key().split(), "--db", sqlite_url, "--json"])
    d = json.loads(out)
    assert rc == 0 and (d["config"], d["time_ms"], d["precision"], d["others"]) == (
        GPU_CONFIG.key(), GPU_MS, "float32", [])
    rc, out, _ = _run(["best", *TF32_PROBLEM.key().split(), "--db", sqlite_url, "--json"])
    d = json.loads(out)
    assert rc == 0 and (d["config"], d["time_ms"], d["precision"]) == (TF32_CONFIG.key(), TF32_MS, "tf32")
    assert [(o["config"], o["precision"]) for o in d["others"]] == [(GPU_CONFIG.key(), "float32")]


def test_best_says_when_a_strict_row_answers_a_tf32_problem(sqlite_url: str) -> None:
    strict_and_tf32(sqlite_url, tf32_ms=3 * GPU_MS)          # the strict row is the faster
    rc, out, _ = _run(["best", *TF32_PROBLEM.key().split(), "--db", sqlite_url])
    lines = out.splitlines()
    assert rc == 0 and lines[0] == GPU_CONFIG.key()
    assert lines[2].startswith(f"  measured for {PROBLEM.key()} (float32: ") and "tunes the tf32 problem" in lines[2]
    rc, out, _ = _run(["best", *PROBLEM.key().split(), "--db", sqlite_url])
    assert rc == 0 and "measured for" not in out and TF32_CONFIG.key() not in out
