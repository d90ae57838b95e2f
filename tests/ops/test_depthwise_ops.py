"""Which plan ``convtune.ops.torch`` runs: the database's best forward config when a database exists, else the
model's best (deterministic wgrad); chosen once and cached; convtune itself never imports torch."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise.configs import MODE_DETERMINISTIC
from convtune.machine import MachineModel
from convtune.ops import depthwise as ops
from convtune.ops import resolver
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
P1 = ConvProblem.depthwise1d(B=8, C=16, L=48, K=7)
P2 = ConvProblem.parse("N=2 C=16 H=14 W=14 K=16 R=3 S=3 pad=1 groups=16")


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.delenv(ops.DATABASE_URL_ENV, raising=False)
    monkeypatch.delenv(resolver.LOOKUP_ENV, raising=False)
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
    with pytest.raises(InvalidConfig, match="path"):
        ops.model_plan(P1, H200, "bwd")
    with pytest.raises(InvalidConfig, match="no valid"):                # dilation 2: no 2-D kernel takes it
        ops.model_plan(ConvProblem.parse("N=1 C=4 H=9 W=9 K=4 R=3 S=3 pad=2 dilation=2 groups=4"), H200, "dgrad")


P2_BWD = [P2, ConvProblem.parse("N=1 C=3 H=13 W=17 K=3 R=5 S=5 stride=2 pad=2 groups=3"),
          ConvProblem.parse("N=3 C=4 H=11 W=13 K=4 R=7 S=7 stride=2 pad=3 groups=4"),
          ConvProblem.parse("N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144"),
          ConvProblem.parse("N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960")]


@pytest.mark.parametrize("problem", P2_BWD, ids=lambda p: p.key())
def test_model_plan_2d_gradients(problem: ConvProblem) -> None:
    """2-D dgrad/wgrad: the gradient model's fastest plan of the kernel's space (wgrad: deterministic only),
    cached like the forward's; the choice is the model's minimum."""
    from convtune.kernels.depthwise import space
    from convtune.kernels.depthwise.conv2d import model_bwd as model2d_bwd
    from convtune.kernels.depthwise.conv2d.dgrad import Dw2dDgradPlan
    from convtune.kernels.depthwise.conv2d.wgrad import Dw2dWgradPlan

    dgrad, wgrad = ops.model_plan(problem, H200, "dgrad"), ops.model_plan(problem, H200, "wgrad")
    assert isinstance(dgrad, Dw2dDgradPlan) and isinstance(wgrad, Dw2dWgradPlan)
    assert dgrad.problem == problem == wgrad.problem
    assert wgrad.deterministic and wgrad.config.mode == MODE_DETERMINISTIC and wgrad.workspace_words > 0
    assert ops.choose_plan(problem, H200, "dgrad") is dgrad and ops.choose_plan(problem, H200, "wgrad") is wgrad
    best = min(model2d_bwd.predict(pl, H200).time_s for pl in space.enumerate_plans_2d_dgrad(problem, H200))
    assert model2d_bwd.predict(dgrad, H200).time_s == best


def test_gradient_model_terms() -> None:
    """Finite positive times; the weight gradient's block reduction makes one-warp blocks of a large plane
    slower than bigger blocks; fp32 partials are counted at 4 bytes whatever the tensors' itemsize."""
    from convtune.kernels.depthwise.configs import Dw2dFastDgradConfig, Dw2dFastWgradConfig
    from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
    from convtune.kernels.depthwise.conv2d import model_bwd as model2d_bwd
    from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad

    p = P2_BWD[3]
    d = model2d_bwd.predict(plan2d_dgrad.plan(p, Dw2dFastDgradConfig(28, 4, 4, 1, 128), H200), H200)
    assert 0 < d.dram_s <= d.time_s < 1 and d.launches == 1
    small = model2d_bwd.predict(plan2d_wgrad.plan(p, Dw2dFastWgradConfig(1, 1, 2, 1, 32), H200), H200)
    big = model2d_bwd.predict(plan2d_wgrad.plan(p, Dw2dFastWgradConfig(28, 4, 2, 1, 128), H200), H200)
    assert big.launches == 2 and big.time_s < small.time_s and big.issue_s < small.issue_s
    from convtune.kernels.depthwise.dtypes import stream_bytes

    assert stream_bytes({"x": 10, "partials": 3, "dw": 2}, 2) == 2 * 10 + 4 * 3 + 2 * 2
    with pytest.raises(TypeError):
        model2d_bwd.predict(ops.model_plan(P1, H200), H200)


def test_the_stored_forward_config_wins(monkeypatch: pytest.MonkeyPatch) -> None:
    stored = "depthwise1d_shared.fwd rows=2 tile_l=48 threads=64"
    monkeypatch.setattr(resolver, "database_url", lambda url=None: "sqlite:///stored.db")
    monkeypatch.setattr(resolver, "measured_config_key",
                        lambda key, device, url, families: stored if key == P1.key() else None)
    assert ops.choose_plan(P1, H200, "fwd").config.key() == stored
    assert ops.choose_plan(P1, H200, "dgrad") is ops.model_plan(P1, H200, "dgrad")   # tuner stores fwd only


def test_a_stored_16bit_config_is_served_to_the_16bit_problem(monkeypatch: pytest.MonkeyPatch) -> None:
    """The tuner measures bf16 depthwise problems now: their best row reaches the op (plans in the problem's dtype);
    a key only the float32 kernels take (the shared variant) falls back to the model's 16-bit plan."""
    from convtune.kernels.registry import get_spec

    half = P1.replace(dtype="bfloat16")
    model_key = ops.model_plan(half, H200, "fwd").config.key()
    other = next(pl.config.key() for pl in get_spec("depthwise1d_fast").enumerate_plans(half, H200)
                 if pl.config.key() != model_key)   # a valid 16-bit plan the model would not pick
    for stored, served in ((other, True), ("depthwise1d_shared.fwd rows=2 tile_l=48 threads=64", False)):
        monkeypatch.setattr(resolver, "database_url", lambda url=None: "sqlite:///stored.db")
        monkeypatch.setattr(resolver, "measured_config_key",
                            lambda key, device, url, families, stored=stored: stored if key == half.key() else None)
        ops.clear_cache()
        chosen = ops.choose_plan(half, H200, "fwd")
        assert chosen.problem.dtype == "bfloat16"
        assert (chosen.config.key() == stored) is served
        if not served:
            assert chosen is ops.model_plan(half, H200, "fwd")
    ops.clear_cache()   # no stored choice outlives the patched resolver


@pytest.mark.parametrize("stored", ["direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 "
                                    "thread_k=8 stages=2 vec=1 splits=1",
                                    "depthwise1d_fast.fwd rows=32 tile_l=48 lanes_per_row=1 stages=2 vec=4 "
                                    "blocks_per_sm=40", "not a key"], ids=["other-family", "invalid", "garbage"])
def test_a_stored_config_that_does_not_fit_falls_back_to_the_model(stored: str,
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(resolver, "database_url", lambda url=None: "sqlite:///stored.db")
    monkeypatch.setattr(resolver, "measured_config_key", lambda key, device, url, families: stored)
    assert ops.choose_plan(P1, H200, "fwd") is ops.model_plan(P1, H200, "fwd")


def test_convtune_never_imports_torch() -> None:
    code = ("import sys, convtune, convtune.cli, convtune.ops.depthwise, convtune.analysis.depthwise1d, "
            "convtune.kernels.registry; assert 'torch' not in sys.modules, 'torch imported'")
    subprocess.run([sys.executable, "-c", code], check=True)
