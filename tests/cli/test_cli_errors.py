"""The CLI's one error handler: each known failure is at most two lines on stderr, no traceback, and the exit
status says bad input (2), a runtime failure (1) or an interrupt (130); ``--debug`` shows the traceback."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
from fake_devices import V100_PROPS, fake_cupy

from convtune.cli import bounds, build_parser, main
from convtune.errors import DeviceUnavailable, UnsupportedDevice
from convtune.kernels.devices import kernel_machine
from convtune.machine import PRESETS, MachineModel

REPO = Path(__file__).resolve().parents[2]
PUBLIC_SUITE = REPO / "benchmarks" / "suites" / "public.json"
TINY = ["N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "pad=1"]
CLOSED_PORT_PG = "postgresql+psycopg2://postgres@127.0.0.1:1/convtune"  # port 1: nothing listens


def env() -> dict[str, str]:
    return {**os.environ, "PYTHONPATH": os.pathsep.join([str(REPO), os.environ.get("PYTHONPATH", "")])}


def run_cli(*argv: str, **kwargs) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "convtune.cli", *argv], capture_output=True, text=True,
                          timeout=300, env=env(), **kwargs)


def assert_short(err: str, *needles: str) -> str:
    """≤ 2 lines, no traceback, the ``convtune: error:`` prefix, every needle; returns the text."""
    lines = err.strip().splitlines()
    assert 1 <= len(lines) <= 2, err
    assert "Traceback" not in err, err
    assert lines[0].startswith("convtune: "), err
    for needle in needles:
        assert needle in err, (needle, err)
    return err


@pytest.fixture(autouse=True)
def _own_database(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONVTUNE_DATABASE_URL", raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))


# ---- the GPU backend where it cannot run ----------------------------------------------------------------
@pytest.mark.skipif(importlib.util.find_spec("cupy") is not None, reason="CuPy is installed here")
def test_tune_without_cupy_is_one_line(tmp_path: Path) -> None:
    done = run_cli("tune", *TINY, "--db", f"sqlite:///{tmp_path / 'c.db'}")
    assert done.returncode == 2 and done.stdout == ""
    assert_short(done.stderr, "--backend gpu", "CuPy is not installed", "--backend model")


def test_tune_without_a_gpu_is_one_line(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("convtune.cli.tune.GPU_FACTORY", "fake_devices:no_gpu_benchmarker")
    rc = main(["tune", *TINY, "--db", f"sqlite:///{tmp_path / 'c.db'}"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert_short(err, "no CUDA device 0", "cudaErrorNoDevice")


def test_tune_on_a_gpu_older_than_sm80_is_one_line(tmp_path: Path, capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr("convtune.cli.tune.GPU_FACTORY", "fake_devices:sm70_benchmarker")
    rc = main(["tune", *TINY, "--db", f"sqlite:///{tmp_path / 'c.db'}"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert_short(err, "Tesla V100", "sm_70", "sm_80+", "cp.async")


def test_the_probe_refuses_a_device_below_sm80(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(V100_PROPS))
    assert MachineModel.from_device(0).compute_capability == (7, 0)  # the bounds may still use it
    with pytest.raises(UnsupportedDevice, match=r"sm_70; convtune's kernels need sm_80\+"):
        kernel_machine(0)
    from convtune.tuner.gpu import CupyBenchmarker

    with pytest.raises(UnsupportedDevice):
        CupyBenchmarker()
    monkeypatch.setitem(sys.modules, "cupy", fake_cupy(None))
    with pytest.raises(DeviceUnavailable, match="no CUDA device 0"):
        kernel_machine(0)


def test_the_trial_worker_raises_the_childs_typed_error() -> None:
    from convtune.tuner.trial_process import SubprocessBenchmarker

    with pytest.raises(UnsupportedDevice, match="sm_70"):
        SubprocessBenchmarker("fake_devices:sm70_benchmarker", start_timeout_s=120)


# ---- bounds-only presets --------------------------------------------------------------------------------
@pytest.mark.parametrize("name", ["v100", "p100"])
def test_tune_on_a_bounds_only_preset_is_refused(name: str, capsys, tmp_path: Path) -> None:
    rc = main(["tune", *TINY, "--machine", name, "--backend", "gpu", "--db", f"sqlite:///{tmp_path / 'c.db'}"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert_short(err, "--machine", "bounds-only", "sm_80")
    assert not (tmp_path / "c.db").exists()  # refused before anything was created


def test_bounds_and_model_work_on_a_bounds_only_preset(capsys, tmp_path: Path) -> None:
    assert main(["bounds", *TINY, "--machine", "v100", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["machine"]["name"] == "Tesla V100"
    rc = main(["--quiet", "tune", *TINY, "--machine", "v100", "--backend", "model", "--budget-trials", "3",
               "--db", f"sqlite:///{tmp_path / 'm.db'}", "--json"])
    summary = json.loads(capsys.readouterr().out)
    assert rc == 0 and summary["device"] == "Tesla V100" and summary["predicted"] is True


def test_presets_are_marked_bounds_only(capsys) -> None:
    assert [k for k, m in PRESETS.items() if not m.runs_kernels] == ["v100", "p100"]
    assert main(["machines"]) == 0
    text = capsys.readouterr().out
    marked = {line.split()[0] for line in text.splitlines() if "BOUNDS ONLY" in line}
    assert marked == {"v100", "p100"}
    assert main(["machines", "--json"]) == 0
    rows = {r["preset"]: r for r in json.loads(capsys.readouterr().out)}
    assert rows["a100"]["bounds_only"] is False and rows["v100"]["bounds_only"] is True
    assert "v100 (bounds only)" in build_parser()._subparsers._group_actions[0].choices["bounds"].format_help()


# ---- databases ------------------------------------------------------------------------------------------
def test_a_malformed_database_url_is_bad_input(capsys) -> None:
    rc = main(["best", *TINY, "--db", "nonsense://"])
    out, err = capsys.readouterr()
    assert rc == 2 and out == ""
    assert_short(err, "--db", "nonsense")


def test_an_unreachable_database_is_a_runtime_failure(capsys) -> None:
    rc = main(["history", "--db", CLOSED_PORT_PG])
    _, err = capsys.readouterr()
    assert rc == 1
    assert_short(err, "database", "Connection refused")


def test_an_unreachable_database_from_a_real_process(tmp_path: Path) -> None:
    done = run_cli("best", *TINY, "--db", CLOSED_PORT_PG)
    assert done.returncode == 1 and done.stdout == ""
    assert_short(done.stderr, "cannot use the database")
    done = run_cli("best", *TINY, "--db", f"sqlite:///{tmp_path / 'no' / 'such' / 'dir.db'}")
    assert done.returncode == 1
    assert_short(done.stderr, "unable to open database file")


def test_debug_shows_the_traceback_instead(capsys) -> None:
    from sqlalchemy.exc import ArgumentError

    with pytest.raises(ArgumentError):
        main(["--debug", "best", *TINY, "--db", "nonsense://"])
    with pytest.raises(ArgumentError):  # after the sub-command too
        main(["best", *TINY, "--db", "nonsense://", "--debug"])
    done = run_cli("best", *TINY, "--db", "nonsense://", "--debug")
    assert done.returncode == 1 and "Traceback" in done.stderr and "NoSuchModuleError" in done.stderr


# ---- a closed pipe, an interrupt, the unexpected ---------------------------------------------------------
def test_a_closed_pipe_ends_quietly() -> None:
    """``convtune bounds --suite ... --json | head -1``: the reader is gone before the first write."""
    read_end, write_end = os.pipe()
    os.close(read_end)  # every write now fails with EPIPE
    try:
        done = subprocess.run([sys.executable, "-m", "convtune.cli", "bounds", "--suite", str(PUBLIC_SUITE),
                               "--json"], stdout=write_end, stderr=subprocess.PIPE, text=True, timeout=120, env=env())
    finally:
        os.close(write_end)
    assert done.stderr == "" and done.returncode == 1  # what Python itself returns on EPIPE


def test_a_closed_pipe_through_head() -> None:
    done = subprocess.run(f"'{sys.executable}' -m convtune.cli bounds --suite '{PUBLIC_SUITE}' --json | head -1",
                          shell=True, capture_output=True, text=True, timeout=120, env=env())
    assert done.stdout == "[\n" and done.stderr == ""


def test_keyboard_interrupt_is_one_line_and_exit_130(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(bounds, "bounds_report", interrupted)
    assert main(["bounds", *TINY]) == 130
    assert capsys.readouterr().err == "convtune: interrupted\n"


def test_an_unexpected_error_is_one_line_naming_it(capsys, monkeypatch: pytest.MonkeyPatch) -> None:
    def broken(*args, **kwargs):
        raise ZeroDivisionError("division by zero\nsecond line")

    monkeypatch.setattr(bounds, "bounds_report", broken)
    assert main(["bounds", *TINY]) == 1
    err = assert_short(capsys.readouterr().err, "internal error: ZeroDivisionError", "--debug")
    assert len(err.strip().splitlines()) == 1


def test_serve_checks_its_database_before_starting(capsys) -> None:
    assert main(["serve", "--db", "nonsense://", "--backend", "model", "--port", "18999"]) == 2
    assert_short(capsys.readouterr().err, "--db", "nonsense")
    assert main(["serve", "--db", CLOSED_PORT_PG, "--backend", "model", "--port", "18999"]) == 1
    assert_short(capsys.readouterr().err, "database", "Connection refused")
