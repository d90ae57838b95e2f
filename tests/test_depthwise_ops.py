"""Which plan ``convtune.torch`` runs: the database's best forward config when a database exists, else the
model's best (deterministic wgrad); chosen once and cached; convtune itself never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from convtune import depthwise_ops as ops
from convtune.kernels.depthwise.configs import MODE_DETERMINISTIC
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P1 = ConvProblem.depthwise1d(B=8, C=16, L=48, K=7)
P2 = ConvProblem.parse("N=2 C=16 H=14 W=14 K=16 R=3 S=3 pad=1 groups=16")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ops.DATABASE_URL_ENV, raising=False)
    monkeypatch.setenv("XDG_DATA_HOME", str(tmp_path / "xdg"))
    ops.clear_cache()
    yield
    ops.clear_cache()


def test_database_url_never_creates_the_default_file(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert ops.database_url() is None and not (tmp_path / "xdg").exists()
    default = tmp_path / "xdg" / "convtune" / "convtune.db"
    default.parent.mkdir(parents=True)
    default.touch()
    assert ops.database_url() == f"sqlite:///{default}"
    monkeypatch.setenv(ops.DATABASE_URL_ENV, "sqlite:///elsewhere.db")
    assert ops.database_url() == "sqlite:///elsewhere.db"


def test_an_unreadable_or_empty_database_gives_no_config(tmp_path: Path) -> None:
    from convtune.storage import upgrade

    assert ops.database_config(P1.key(), H200.name, f"sqlite:///{tmp_path / 'no_schema.db'}") is None
    url = f"sqlite:///{tmp_path / 'empty.db'}"
    upgrade(url)
    assert ops.database_config(P1.key(), H200.name, url) is None


@pytest.mark.parametrize("path", ["fwd", "dgrad", "wgrad"])
def test_model_plan_per_path(path: str) -> None:
    pl = ops.model_plan(P1, H200, path)
    assert pl.path == path and pl.problem == P1
    if path == "wgrad":
        assert pl.config.mode == MODE_DETERMINISTIC
    assert ops.choose_plan(P1, H200, path) is pl           # no database: the model's choice, cached


def test_model_plan_2d_and_its_limits() -> None:
    assert ops.model_plan(P2, H200).config.family in ops.FAMILIES_2D
    with pytest.raises(Exception, match="forward path only"):
        ops.model_plan(P2, H200, "dgrad")
    with pytest.raises(Exception, match="path"):
        ops.model_plan(P1, H200, "bwd")


def test_the_stored_forward_config_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = "depthwise1d_shared.fwd rows=2 tile_l=48 threads=64"
    monkeypatch.setattr(ops, "database_url", lambda: "sqlite:///stored.db")
    monkeypatch.setattr(ops, "database_config", lambda key, device, url: stored if key == P1.key() else None)
    assert ops.choose_plan(P1, H200, "fwd").config.key() == stored
    assert ops.choose_plan(P1, H200, "dgrad") is ops.model_plan(P1, H200, "dgrad")   # tuner stores fwd only


@pytest.mark.parametrize("stored", ["direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 "
                                    "thread_k=8 stages=2 vec=1 splits=1",
                                    "depthwise1d_fast.fwd rows=32 tile_l=48 lanes_per_row=1 stages=2 vec=4 "
                                    "blocks_per_sm=40", "not a key"], ids=["other-family", "invalid", "garbage"])
def test_a_stored_config_that_does_not_fit_falls_back_to_the_model(stored: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(ops, "database_url", lambda: "sqlite:///stored.db")
    monkeypatch.setattr(ops, "database_config", lambda key, device, url: stored)
    assert ops.choose_plan(P1, H200, "fwd") is ops.model_plan(P1, H200, "fwd")


def test_convtune_never_imports_torch() -> None:
    code = ("import sys, convtune, convtune.cli, convtune.depthwise_ops, convtune.depthwise_analysis, "
            "convtune.kernels.registry; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
