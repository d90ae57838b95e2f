"""The package is found by rules, not a list: setuptools' finder and the package-data globs cover every source
folder; the migrations live in ``convtune/storage/migrations``, ship inside the wheel and are found from an
installed copy."""

from __future__ import annotations

import fnmatch
import os
import shutil
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_namespace_packages, find_packages

from convtune.storage.migrate import migrations_dir

ROOT = Path(__file__).resolve().parents[2]
MIGRATIONS = ROOT / "convtune" / "storage" / "migrations"
_NOT_SOURCE = shutil.ignore_patterns(".git", ".venv", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache",
                                     ".ruff_cache", ".hypothesis", "*.db", "*.db-*")
_SOURCES = (".py", ".cu", ".cuh")


def _setuptools() -> dict:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]


def _found_packages() -> set[str]:
    """What setuptools' finder makes of ``[tool.setuptools.packages.find]`` in this checkout."""
    rules = _setuptools()["packages"]["find"]
    finder = find_namespace_packages if rules.get("namespaces", True) else find_packages
    return set(finder(where=str(ROOT), include=rules.get("include", ("*",)), exclude=rules.get("exclude", ())))


def _source_folders() -> set[str]:
    """Every folder under ``convtune/`` holding a ``.py``, ``.cu`` or ``.cuh`` file, as a dotted package name."""
    return {".".join(path.relative_to(ROOT).parts) for path in [ROOT / "convtune", *(ROOT / "convtune").rglob("*")]
            if path.is_dir() and path.name != "__pycache__"
            and any(p.is_file() and p.suffix in _SOURCES for p in path.iterdir())}


def test_the_packaging_is_found_by_rules_not_listed() -> None:
    """No hand-written list of packages (a new kernel family folder must need no pyproject edit)."""
    assert set(_setuptools()["packages"]) == {"find"}  # [tool.setuptools.packages.find], not packages = [...]
    assert "package-dir" not in _setuptools()
    assert not (ROOT / "migrations").exists() and not (ROOT / "convtune" / "_migrations").exists()


def test_the_find_rules_cover_every_source_folder() -> None:
    found = _found_packages()
    missing = _source_folders() - found
    assert not missing, f"[tool.setuptools.packages.find] in pyproject.toml misses {sorted(missing)}"
    assert not any("__pycache__" in name for name in found)
    assert {"convtune.storage.migrations", "convtune.storage.migrations.versions"} <= found


def test_the_package_data_globs_cover_every_cuda_source_and_the_migration_template() -> None:
    """Each .cu/.cuh file (and script.py.mako) matches a package-data glob of its package or of a parent package,
    which is how setuptools decides what a wheel carries beside the modules."""
    package_data: dict[str, list[str]] = _setuptools()["package-data"]
    found = _found_packages()
    data = [p for p in (ROOT / "convtune").rglob("*") if p.suffix in (".cu", ".cuh") or p.name == "script.py.mako"]
    assert len(data) >= 16
    for path in data:
        parts = path.relative_to(ROOT).parts
        package = ".".join(parts[:-1])
        assert package in found, f"{path}: its folder {package} is not a package"
        covered = False
        for depth in range(1, len(parts)):
            owner, inside = ".".join(parts[:depth]), "/".join(parts[depth:])
            if any(fnmatch.fnmatch(inside, pattern) or (pattern.startswith("**/") and fnmatch.fnmatch(inside,
                   pattern[3:])) for pattern in package_data.get(owner, ())):
                covered = True
        assert covered, f"{path.relative_to(ROOT)} matches no [tool.setuptools.package-data] glob"


def test_migrations_are_found_in_the_source_checkout() -> None:
    folder = migrations_dir()
    assert folder.resolve() == MIGRATIONS.resolve()
    assert (folder / "env.py").is_file() and (folder / "script.py.mako").is_file()
    assert list((folder / "versions").glob("*.py"))
    assert (ROOT / "alembic.ini").read_text().count("script_location = %(here)s/convtune/storage/migrations\n") == 1


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
    shipped = "convtune/storage/migrations"
    assert {f"{shipped}/env.py", f"{shipped}/script.py.mako", f"{shipped}/versions/__init__.py"} <= names
    revisions = {p.name for p in (MIGRATIONS / "versions").glob("2*.py")}
    assert revisions and {f"{shipped}/versions/{name}" for name in revisions} <= names
    assert not any(name.startswith("migrations/") for name in names)  # no top-level package called migrations
    assert not any("__pycache__" in name for name in names)

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
    assert Path(package_file).is_relative_to(site) and Path(folder) == site / "convtune" / "storage" / "migrations"
