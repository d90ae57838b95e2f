"""A family is a package that registers itself: one folder plus one entry-point line, nothing else in convtune.

The toy family (``tests/kernels/toy_family``: ``convtune_toy/`` with its SPECS and .cu source, and a
``convtune_toy-0.dist-info/`` whose ``entry_points.txt`` names it in ``convtune.families``) is copied into
tmp_path and put on PYTHONPATH of a ``convtune`` subprocess, which must tune it like a built-in family.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from convtune.kernels import registry

TOY = Path(__file__).resolve().parent / "toy_family"
REPO = Path(__file__).resolve().parents[2]
PROBLEM = ["N=1", "C=8", "H=8", "W=8", "K=8", "R=3", "S=3", "pad=1"]


@pytest.fixture(scope="module")
def toy_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding the toy family package and its distribution metadata."""
    folder = tmp_path_factory.mktemp("plugin")
    for entry in TOY.iterdir():
        if entry.is_dir() and entry.name != "__pycache__":
            shutil.copytree(entry, folder / entry.name, ignore=shutil.ignore_patterns("__pycache__"))
    return folder


def _cli(toy_path: Path, *args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(toy_path), str(REPO)])}
    return subprocess.run([sys.executable, "-m", "convtune.cli", *args], env=env, capture_output=True, text=True,
                          timeout=300, check=False)


def test_an_outside_family_is_tuned_with_one_entry_point_line(toy_path: Path) -> None:
    db = f"sqlite:///{toy_path / 't.db'}"
    tuned = _cli(toy_path, "tune", *PROBLEM, "--families", "toy", "--backend", "model", "--budget-trials", "4",
                 "--db", db, "--json")
    assert tuned.returncode == 0, tuned.stderr
    summary = json.loads(tuned.stdout)
    assert summary["best_config"].startswith("toy.fwd ") and set(summary["families"]) == {"toy"}
    best = _cli(toy_path, "best", *PROBLEM, "--db", db, "--json")
    assert best.returncode == 0, best.stderr
    assert json.loads(best.stdout)["config"] == summary["best_config"]


def test_an_unknown_family_lists_the_plugin_among_the_allowed(toy_path: Path) -> None:
    refused = _cli(toy_path, "tune", *PROBLEM, "--families", "nosuch", "--backend", "model",
                   "--db", f"sqlite:///{toy_path / 'u.db'}")
    assert refused.returncode != 0
    assert "nosuch" in refused.stderr and "toy" in refused.stderr.split("allowed", 1)[1]


class _EntryPoint:
    def __init__(self, name: str, module: str) -> None:
        self.name, self.module = name, module


def test_a_broken_plugin_is_an_error_naming_it(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("gone", "convtune_no_such_family")])
    with pytest.raises(registry.FamilyPluginError, match=r"convtune_no_such_family.*'gone'.*cannot be imported"):
        registry._build()
    (tmp_path / "convtune_empty_family.py").write_text("SPECS = 'not a tuple'\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("empty", "convtune_empty_family")])
    with pytest.raises(registry.FamilyPluginError, match=r"convtune_empty_family.*must export SPECS"):
        registry._build()


def test_a_plugin_cannot_take_a_built_in_key(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    (tmp_path / "convtune_clash_family.py").write_text(
        "from convtune.kernels.direct import SPECS as SPECS\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    monkeypatch.setattr(registry, "entry_points", lambda group: [_EntryPoint("clash", "convtune_clash_family")])
    with pytest.raises(registry.FamilyPluginError, match=r"direct\.fwd, which is already registered"):
        registry._build()


def test_registry_keys_are_the_pre_layout_ones_in_order() -> None:
    """The rows recorded before the move keep their order; families added since (igemm, igemm_simt, igemm_wgmma,
    igemm_wgmma_half, igemm_wgmma_half_1x1 and its resident, ping-pong and TMA variants, igemm_wgmma_1x1 and its
    resident and TMA variants, the general kernel's 96/192-column tiles, winograd_unfused_tf32,
    winograd_unfused_large and its 3xTF32 variant, winograd_unfused_1d, direct_half, pointwise_sliced) follow them."""
    recorded = json.loads((REPO / "tests/data/pre_layout/kernel_versions.json").read_text())["registry"]
    keys = [f"{f}.{d}" for f, d in registry.REGISTRY]
    assert keys[:len(recorded)] == list(recorded)
    assert keys[len(recorded):] == ["igemm.fwd", "igemm_nhwc.fwd", "igemm_1x1.fwd", "igemm_half.fwd",
                                    "igemm_half_1x1.fwd", "igemm_simt.fwd", "igemm_wgmma.fwd",
                                    "igemm_wgmma_half.fwd", "igemm_wgmma_half_1x1.fwd",
                                    "igemm_wgmma_half_1x1_resident.fwd",
                                    "igemm_wgmma_half_1x1_pingpong.fwd", "igemm_wgmma_half_1x1_tma.fwd",
                                    "igemm_wgmma_1x1.fwd",
                                    "igemm_wgmma_1x1_resident.fwd", "igemm_wgmma_1x1_tma.fwd",
                                    "igemm_wgmma_n96.fwd", "igemm_wgmma_half_n96.fwd",
                                    "winograd_unfused_tf32.fwd", "winograd_unfused_large.fwd",
                                    "winograd_unfused_3xtf32.fwd", "winograd_unfused_1d.fwd",
                                    "direct_half.fwd", "pointwise_sliced.fwd"]


def test_every_built_in_row_comes_from_a_family_package() -> None:
    import importlib

    rows = [spec for name in registry.FAMILY_PACKAGES for spec in importlib.import_module(name).SPECS]
    assert [s.kind for s in rows] == [s.kind for s in registry.REGISTRY.values()]
