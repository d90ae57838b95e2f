"""``convtune tune | best | history | why | db upgrade`` on replayed H200 timings, and every bad input
(one stderr line ``convtune: error: <field>: ...``, exit status 2)."""

from __future__ import annotations

import contextlib
import io
import json
import subprocess
import sys
from pathlib import Path

import pytest
from sqlalchemy import select
from tuner_samples import PROBLEM, REPLAY_PATH, TINY

from convtune.cli import main
from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.storage import make_engine, session_scope
from convtune.storage.migrate import head_revision
from convtune.storage.models import Config, PruningDecision
from convtune.tuner.prune import prune

BUDGET = 10
TOKENS = PROBLEM.key().split()
REPLAY = ["--backend", "replay", "--replay", str(REPLAY_PATH)]


def _run(argv: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        rc = main(argv)
    return rc, out.getvalue(), err.getvalue()


@pytest.fixture(autouse=True)
def _no_default_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """A command that forgot --db must not touch the user's database."""
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


@pytest.fixture(scope="module")
def tuned(tmp_path_factory: pytest.TempPathFactory) -> dict:
    """One ``convtune tune`` of PROBLEM into a new SQLite file; its exit status and output."""
    url = f"sqlite:///{tmp_path_factory.mktemp('cli') / 'convtune.db'}"
    rc, out, err = _run(["tune", *TOKENS, *REPLAY, "--db", url, "--budget-trials", str(BUDGET)])
    return {"url": url, "rc": rc, "out": out, "err": err}


@pytest.fixture
def fresh_db(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'fresh.db'}"


def _lines(text: str) -> dict[str, str]:
    return {line.split()[0]: line for line in text.splitlines() if line.strip()}


# ---- tune ----------------------------------------------------------------------------------------------
def test_tune_prints_a_summary(tuned: dict) -> None:
    assert tuned["rc"] == 0, tuned["err"]
    lines = _lines(tuned["out"])
    assert {"problem", "device", "pruning", "trials", "best", "time", "bound"} <= set(lines)
    assert PROBLEM.key() in lines["problem"]
    assert "NVIDIA H200 (backend replay)" in lines["device"] and "PREDICTED" not in lines["device"]
    assert lines["pruning"].split(maxsplit=1)[1].startswith("grid ")
    assert f"{BUDGET} ({BUDGET} measured, 0 from the database, 0 failed)" in lines["trials"]
    assert f"stop: trial budget ({BUDGET}) reached" in lines["trials"]
    assert lines["best"].split(maxsplit=1)[1].startswith("direct.fwd ")
    assert " ms " in lines["time"] and "TFLOP/s" in lines["time"]
    assert "floor" in lines["bound"] and "efficiency" in lines["bound"]
    assert "seconds" in lines and "pruning" in lines["seconds"] and "of --budget-s" in lines["seconds"]
    assert tuned["err"] == ""  # stderr is no terminal here: no progress (tests/cli/test_cli_progress.py forces it)


def test_tune_again_answers_from_the_database_as_json(tuned: dict) -> None:
    rc, out, _ = _run(["tune", *TOKENS, *REPLAY, "--db", tuned["url"], "--budget-trials", str(BUDGET), "--json"])
    assert rc == 0
    summary = json.loads(out)
    best_line = _lines(tuned["out"])["best"].split(maxsplit=1)[1]
    assert summary["best_config"] == best_line and summary["run_id"] == 1
    assert summary["trials"] == 0 and summary["measured"] == 0
    assert summary["stop_reason"] == "already tuned (stored result)"
    assert summary["backend"] == "replay" and summary["predicted"] is False
    rc, out, _ = _run(["tune", *TOKENS, *REPLAY, "--db", tuned["url"]])
    assert rc == 0 and "already tuned: answered from the database" in out


def test_tune_smoke_in_a_subprocess(tmp_path: Path) -> None:
    script = Path(sys.executable).with_name("convtune")
    command = [str(script)] if script.exists() else [sys.executable, "-c",
                                                     "import sys; from convtune.cli import main; sys.exit(main())"]
    proc = subprocess.run([*command, "tune", *TOKENS, *REPLAY, "--db", f"sqlite:///{tmp_path / 's.db'}",
                           "--budget-trials", "5", "--json"], capture_output=True, text=True, timeout=120,
                          env={"PATH": "/usr/bin:/bin", "XDG_DATA_HOME": str(tmp_path), "HOME": str(tmp_path)})
    assert proc.returncode == 0, proc.stderr
    summary = json.loads(proc.stdout)
    assert summary["problem"] == PROBLEM.key() and summary["device"] == "NVIDIA H200"
    assert summary["trials"] == summary["measured"] == 5 and summary["statuses"] == {"ok": 5}
    assert summary["stop_reason"] == "trial budget (5) reached"
    assert summary["best_config"].startswith("direct.fwd ") and summary["time_ms"] > summary["floor_ms"] > 0
    assert summary["efficiency"] == pytest.approx(summary["floor_ms"] / summary["time_ms"])
    assert summary["tflops"] > 0 and summary["gbps"] > 0 and summary["cudnn_fp32_ms"] is None
    assert summary["pruning"].startswith("grid ")


# ---- best, history -------------------------------------------------------------------------------------
def test_best_after_tune(tuned: dict) -> None:
    best = _lines(tuned["out"])["best"].split(maxsplit=1)[1]
    rc, out, err = _run(["best", *TOKENS, "--db", tuned["url"]])
    assert rc == 0 and err == ""
    first, second = out.splitlines()
    assert first == best
    assert "ms on NVIDIA H200; floor" in second and "efficiency" in second and "PROVISIONAL" not in second
    rc, out, _ = _run(["best", *TOKENS, "--db", tuned["url"], "--family", "direct", "--json"])
    view = json.loads(out)
    assert rc == 0 and view["config"] == best and view["scope"] == "direct" and view["provisional"] is False
    assert view["efficiency"] == pytest.approx(view["floor_ms"] / view["time_ms"]) and view["run_id"] == 1


def test_best_before_tune_exits_1_with_a_message(fresh_db: str) -> None:
    rc, out, err = _run(["best", *TOKENS, "--db", fresh_db])
    assert rc == 1 and out == ""
    assert err.strip() == f"no stored result for {PROBLEM.key()}: run `convtune tune {PROBLEM.key()}`"


def test_history_lists_the_run(tuned: dict) -> None:
    rc, out, _ = _run(["history", "--db", tuned["url"]])
    assert rc == 0
    header, row = out.splitlines()
    assert header.split()[:3] == ["run", "started", "backend"]
    assert row.split()[0] == "1" and "replay" in row and "finished" in row and row.endswith(PROBLEM.key())
    rc, out, _ = _run(["history", *TOKENS, "--db", tuned["url"], "--json"])
    (run,) = json.loads(out)
    assert rc == 0 and run["run"] == 1 and run["status"] == "finished" and run["trials"] == BUDGET
    assert run["stop_reason"] == f"trial budget ({BUDGET}) reached" and run["best_ms"] > 0
    rc, _, err = _run(["history", *TINY.key().split(), "--db", tuned["url"]])
    assert rc == 1 and "no tuning history" in err


# ---- why -----------------------------------------------------------------------------------------------
def test_why_prints_the_recorded_decision_of_a_pruned_config(tuned: dict) -> None:
    engine = make_engine(tuned["url"])
    try:
        with session_scope(engine) as session:
            key, reason = session.execute(
                select(Config.key, PruningDecision.reason).join(Config, Config.id == PruningDecision.config_id)
                .where(PruningDecision.stage == "traffic").limit(1)).one()
    finally:
        engine.dispose()
    rc, out, _ = _run(["why", *TOKENS, *key.split(), "--db", tuned["url"]])
    assert rc == 0
    lines = out.splitlines()
    assert lines[0] == f"traffic: {reason}"
    assert any(line.strip().startswith("traffic_ratio = ") for line in lines)
    assert lines[-1].strip() == "(run 1 on NVIDIA H200)"
    rc, out, _ = _run(["why", *TOKENS, *key.split(), "--db", tuned["url"], "--json"])
    answer = json.loads(out)
    assert answer["recorded"] is True and answer["stage"] == "traffic" and answer["config"] == key
    assert answer["numbers"]["traffic_ratio"] > 16


def test_why_rederives_infeasible_for_an_invalid_config(tuned: dict) -> None:
    config = ["direct.fwd", "tile_h=4", "tile_w=32", "tile_k=64", "chunk_c=8", "thread_h=1", "thread_w=4",
              "thread_k=3", "stages=2", "vec=1", "splits=1"]
    rc, out, _ = _run(["why", *TOKENS, *config, "--db", tuned["url"]])
    assert rc == 0 and out.startswith("infeasible: ") and "thread_k" in out.splitlines()[0]
    rc, out, _ = _run(["why", *TOKENS, *config, "--db", tuned["url"], "--json"])
    answer = json.loads(out)
    assert answer["recorded"] is False and answer["stage"] == "infeasible" and answer["machine"]


def test_why_reports_a_feasible_config_of_an_untuned_problem_as_not_recorded(fresh_db: str) -> None:
    feasible = prune(TINY, MachineModel.preset("h200"), specs_for(TINY)).survivors[0].key
    rc, out, _ = _run(["why", *TINY.key().split(), *feasible.split(), "--db", fresh_db])
    assert rc == 0 and out.startswith("not recorded: feasible") and "predicted_s = " in out


# ---- db ------------------------------------------------------------------------------------------------
def test_db_upgrade_prints_the_revision(fresh_db: str) -> None:
    for _ in range(2):  # idempotent
        rc, out, _ = _run(["db", "upgrade", "--db", fresh_db])
        assert rc == 0 and out.strip().endswith(f"at revision {head_revision()}")


# ---- bad input -----------------------------------------------------------------------------------------
CONFIG = ["direct.fwd", "tile_h=4"]
BAD_INPUT = [  # argv (given the test's tmp folder, holding other.json and broken.json.gz), the field named
    pytest.param(lambda tmp: ["tune", "N=0", *TOKENS[1:], *REPLAY], "N", id="invalid-problem"),
    pytest.param(lambda tmp: ["tune", "N=1", "C=8", *REPLAY], "H", id="missing-problem-field"),
    pytest.param(lambda tmp: ["tune", *TOKENS, "--backend", "replay"], "--replay", id="replay-without-file"),
    pytest.param(lambda tmp: ["tune", *TOKENS, "--backend", "replay", "--replay", str(tmp / "nope.json.gz")],
                 "--replay", id="missing-replay-file"),
    pytest.param(lambda tmp: ["tune", *TOKENS, "--backend", "replay", "--replay", str(tmp / "other.json")],
                 "--replay", id="not-a-replay-table"),
    pytest.param(lambda tmp: ["tune", *TOKENS, "--backend", "replay", "--replay", str(tmp / "broken.json.gz")],
                 "--replay", id="unreadable-replay-file"),
    pytest.param(lambda tmp: ["tune", *TOKENS, *REPLAY, "--budget-trials", "0"], "--budget-trials",
                 id="zero-trial-budget"),
    pytest.param(lambda tmp: ["tune", *TOKENS, *REPLAY, "--patience", "0"], "--patience", id="zero-patience"),
    pytest.param(lambda tmp: ["tune", *TOKENS, *REPLAY, "--budget-s", "0"], "--budget-s", id="zero-time-budget"),
    pytest.param(lambda tmp: ["why", *TOKENS, *CONFIG, "tile_q=4"], "tile_q", id="unknown-config-field"),
    pytest.param(lambda tmp: ["why", *TOKENS, "direct.fwd", "tile_h=x"], "tile_h", id="non-integer-config-value"),
    pytest.param(lambda tmp: ["why", *TOKENS, "nope.fwd", "tile_h=4"], "kind", id="unknown-config-kind"),
    pytest.param(lambda tmp: ["why", *CONFIG], "config", id="why-without-problem"),
    pytest.param(lambda tmp: ["best", "N=0", *TOKENS[1:]], "N", id="invalid-problem-in-best"),
]


@pytest.mark.parametrize(("argv", "field"), BAD_INPUT)
def test_bad_input_exits_2_with_one_line_naming_the_field(argv, field: str, tmp_path: Path, fresh_db: str) -> None:
    (tmp_path / "other.json").write_text('{"format": "something else"}')
    (tmp_path / "broken.json.gz").write_bytes(b"not gzip at all")
    rc, out, err = _run([*argv(tmp_path), "--db", fresh_db])
    assert rc == 2 and out == ""
    assert len(err.splitlines()) == 1, err
    assert err.startswith(f"convtune: error: {field}: "), err


def test_an_unknown_family_is_named_as_the_bad_field(fresh_db: str) -> None:
    rc, out, err = _run(["tune", *TOKENS, "--backend", "model", "--families", "nope", "--db", fresh_db])
    assert rc == 2 and out == "" and len(err.splitlines()) == 1
    assert "nope" in err
    assert err.startswith("convtune: error: --families: "), err


def test_tune_over_several_families_names_the_bound_choice_and_the_winner(fresh_db: str) -> None:
    rc, out, _ = _run(["tune", *TOKENS, "--backend", "model", "--db", fresh_db, "--budget-trials", "9"])
    assert rc == 0
    families = _lines(out)["families"]
    for family in ("direct", "winograd", "winograd_unfused", "igemm_simt", "winograd_unfused_3xtf32"):
        assert f"{family} floor" in families
    winner = _lines(out)["best"].split()[1].split(".")[0]
    assert "the bound favours winograd" in families and f"the measured winner is {winner}" in families
    rc, out, _ = _run(["tune", *TOKENS, "--backend", "model", "--db", fresh_db, "--json", "--force",
                       "--budget-trials", "9"])
    summary = json.loads(out)
    assert summary["bound_favours"] == "winograd"
    assert set(summary["families"]) == {"direct", "winograd", "winograd_unfused", "igemm_simt",
                                        "winograd_unfused_3xtf32"}
    assert all(f["floor_ms"] > 0 for f in summary["families"].values())
