"""The migrations ship inside the wheel as ``convtune._migrations`` and are found from an installed copy."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest

from convtune.storage.migrate import migrations_dir

ROOT = Path(__file__).resolve().parents[2]
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                     ".ruff_cache", ".hypothesis", "*.db", "*.db-*")


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def test_every_package_folder_is_listed_in_pyproject() -> None:
    """setuptools cannot mix ``packages.find`` with the migrations mapping, so packages are listed by hand."""
    listed = set(_setuptools()["packages"])
    on_disk = {".".join(path.relative_to(ROOT).parts) for path in (ROOT / "convtune").rglob("*")
               if path.is_dir() and path.name != "__pycache__" and any(path.glob("*.py*"))}
    on_disk |= {"convtune._migrations", "convtune._migrations.versions"}
    assert on_disk <= listed, (f"add {sorted(on_disk - listed)} to [tool.setuptools] packages in pyproject.toml, "
                               "or the wheel will not contain them")


def test_listed_packages_exist() -> None:
    package_dir = _setuptools()["package-dir"]
    for package in _setuptools()["packages"]:
        mapped = next((folder + package[len(name):].replace(".", "/") for name, folder in package_dir.items()
                       if package == name or package.startswith(name + ".")), package.replace(".", "/"))
        assert (ROOT / mapped).is_dir(), f"{package} -> {mapped} does not exist"


def test_migrations_are_found_in_the_source_checkout() -> None:
    folder = migrations_dir()
    assert folder.resolve() == (ROOT / "migrations").resolve()
    assert (folder / "env.py").is_file() and (folder / "script.py.mako").is_file()
    assert list((folder / "versions").glob("*.py"))


@pytest.mark.slow
def test_a_built_wheel_ships_the_migrations_and_upgrades_from_them(tmp_path: Path) -> None:
    source = tmp_path / "src"
    shutil.copytree(ROOT, source, ignore=_NOT_SOURCE)
    build = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path / "dist"),
                            str(source)], capture_output=True, text=True, timeout=300)
    if build.returncode and "No matching distribution found for setuptools" in build.stderr + build.stdout:
        pytest.skip("building a wheel needs setuptools from a package index, which is unreachable here")
    assert build.returncode == 0, build.stdout + build.stderr
    (wheel,) = (tmp_path / "dist").glob("convtune-*.whl")
    names = set(zipfile.ZipFile(wheel).namelist())
    assert {"convtune/_migrations/env.py", "convtune/_migrations/script.py.mako",
            "convtune/_migrations/versions/__init__.py"} <= names
    revisions = {p.name for p in (ROOT / "migrations" / "versions").glob("2*.py")}
    assert {f"convtune/_migrations/versions/{name}" for name in revisions} <= names
    assert not any(name.startswith("migrations/") for name in names)  # no top-level package called migrations

    # a pure-Python wheel unpacked onto sys.path is what an installation puts in site-packages
    site = tmp_path / "site"
    zipfile.ZipFile(wheel).extractall(site)
    script = (
        "import convtune, sys\n"
        "from convtune.storage import upgrade, check, current_revision, head_revision\n"
        "from convtune.storage.migrate import migrations_dir\n"
        "url = sys.argv[1]\n"
        "upgrade(url); check(url)\n"
        "assert current_revision(url) == head_revision()\n"
        "print(convtune.__file__); print(migrations_dir())\n"
    )
    env = {**os.environ, "PYTHONPATH": str(site)}
    run = subprocess.run([sys.executable, "-c", script, f"sqlite:///{tmp_path / 'wheel.db'}"], cwd=tmp_path,
                         env=env, capture_output=True, text=True, timeout=120)
    assert run.returncode == 0, run.stdout + run.stderr
    package_file, folder = run.stdout.split()
    assert Path(package_file).is_relative_to(site) and Path(folder) == site / "convtune" / "_migrations"
