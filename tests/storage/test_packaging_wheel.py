"""Packaging: the wheel ships LICENSE, the CUDA sources, the migrations, the suites and the docs assets; every
package-data glob matches a file; the version is written once (pyproject.toml) and read back; ``--version``."""

from __future__ import annotations

import email
import importlib.metadata
import json
import shutil
import subprocess
import sys
import tomllib
import zipfile
from email.message import Message
from pathlib import Path

import pytest

import convtune
from convtune import suites
from convtune.api.docs import ASSETS
from convtune.cli import main

ROOT = Path(__file__).resolve().parents[2]
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                     ".ruff_cache", ".mypy_cache", ".hypothesis", "*.db", "*.db-*")


def _package_folder(package: str) -> Path:
    return ROOT / package.replace(".", "/")  # packages.find: every package is its folder (no package-dir mapping)


def test_every_package_data_glob_matches_a_file() -> None:
    for package, patterns in PYPROJECT["tool"]["setuptools"]["package-data"].items():
        for pattern in patterns:
            assert list(_package_folder(package).glob(pattern)), f"{package}: {pattern!r} matches nothing"


def test_the_version_is_written_once_and_read_back(monkeypatch: pytest.MonkeyPatch, capsys) -> None:
    version = PYPROJECT["project"]["version"]
    assert convtune.__version__ == version
    assert '__version__ = "' not in (ROOT / "convtune" / "__init__.py").read_text()
    # a source tree that was never installed reads pyproject.toml
    def missing(name: str) -> str:
        raise importlib.metadata.PackageNotFoundError(name)

    monkeypatch.setattr(importlib.metadata, "version", missing)
    assert convtune._version() == version
    with pytest.raises(SystemExit) as exit_info:
        main(["--version"])
    assert exit_info.value.code == 0
    assert capsys.readouterr().out.strip() == f"convtune {version}"


def test_the_license_and_the_metadata() -> None:
    text = (ROOT / "LICENSE").read_text()
    assert "Apache License" in text and "Version 2.0, January 2004" in text and "END OF TERMS AND CONDITIONS" in text
    assert text.startswith("Copyright ") and "convtune authors" in text.splitlines()[0]
    project = PYPROJECT["project"]
    assert project["license"] == "Apache-2.0" and project["license-files"] == ["LICENSE"]
    assert any(c.startswith("Programming Language :: Python :: 3.11") for c in project["classifiers"])
    assert {"Homepage", "Repository", "Issues"} <= set(project["urls"])


def test_the_suites_are_packaged_and_benchmarks_suites_still_work(capsys) -> None:
    assert "public" in suites.names()
    packaged = suites.path("public").read_bytes()
    for path in (ROOT / "benchmarks" / "suites").glob("*.json"):
        assert path.read_bytes() == suites.path(path.stem).read_bytes(), path
    assert json.loads(packaged)
    with pytest.raises(KeyError, match="no packaged suite"):
        suites.path("nothing")
    # `--suite public` is the packaged file, the same table as the checkout's path
    assert main(["bounds", "--suite", "public", "--json"]) == 0
    by_name = json.loads(capsys.readouterr().out)
    assert main(["bounds", "--suite", str(ROOT / "benchmarks" / "suites" / "public.json"), "--json"]) == 0
    assert json.loads(capsys.readouterr().out) == by_name and len(by_name) > 10


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A wheel built from a copy of the source tree (no build isolation: the venv's setuptools, no index)."""
    tmp = tmp_path_factory.mktemp("wheel")
    source = tmp / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "--no-build-isolation", "-q", "-w",
                            str(tmp / "dist"), str(source)], capture_output=True, text=True, timeout=300)
    assert build.returncode == 0, build.stdout + build.stderr
    (built,) = (tmp / "dist").glob("convtune-*.whl")
    return built


@pytest.mark.slow
def test_the_wheel_ships_license_sources_migrations_suites_and_docs_assets(wheel: Path) -> None:
    version = PYPROJECT["project"]["version"]
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        metadata: Message = email.message_from_bytes(archive.read(f"convtune-{version}.dist-info/METADATA"))
        license_text = archive.read(f"convtune-{version}.dist-info/licenses/LICENSE").decode()
    assert license_text == (ROOT / "LICENSE").read_text()
    cuda = {p.relative_to(ROOT).as_posix() for p in (ROOT / "convtune").rglob("*") if p.suffix in (".cu", ".cuh")}
    assert len(cuda) >= 15 and cuda <= names, sorted(cuda - names)
    shipped = "convtune/storage/migrations"
    versions = ROOT / shipped / "versions"
    migrations = {f"{shipped}/versions/{p.name}" for p in versions.glob("2*.py")}
    assert migrations and migrations <= names
    assert {f"{shipped}/env.py", f"{shipped}/script.py.mako", f"{shipped}/__init__.py"} <= names
    assert {f"convtune/suites/{name}.json" for name in suites.names()} <= names
    assert {f"convtune/api/static/docs/{name}" for name in ASSETS} <= names
    assert "convtune/py.typed" in names
    assert not any(n.startswith(("tests/", "benchmarks/", "migrations/")) for n in names)
    assert metadata["Version"] == version and metadata["License-Expression"] == "Apache-2.0"
    assert set(metadata.get_all("Classifier") or []) == set(PYPROJECT["project"]["classifiers"])
    assert len(metadata.get_all("Project-URL") or []) == len(PYPROJECT["project"]["urls"])
