"""A database written before the layout redesign (``tests/data/pre_layout``, by commit a71e06d) serves the same
best configs after it, and every kernel version it stored is still the current one of its family, so its
measurements stay valid (not stale) for the resolver and ``convtune export``."""

from __future__ import annotations

import gzip
import json
import shutil
from pathlib import Path

import pytest
from sqlalchemy import select

from convtune.cli import main
from convtune.kernels.registry import REGISTRY
from convtune.storage import make_engine, queries, session_scope, upgrade
from convtune.storage.models import KernelVersion

FIXTURE = Path(__file__).parents[1] / "data" / "pre_layout"


@pytest.fixture
def pre_layout_url(tmp_path: Path) -> str:
    db = tmp_path / "pre.db"
    with gzip.open(FIXTURE / "convtune.db.gz", "rb") as src, open(db, "wb") as dst:
        shutil.copyfileobj(src, dst)
    return f"sqlite:///{db}"


def test_the_same_best_configs_are_served(pre_layout_url: str) -> None:
    expected = json.loads((FIXTURE / "best_configs.json").read_text())
    engine = make_engine(pre_layout_url)
    upgrade(engine)
    rows = []
    with session_scope(engine) as session:
        for problem in queries.list_problems(session, limit=100):
            for v in queries.list_best_configs(session, problem_key=problem.key):
                rows.append(dict(problem_key=v.problem_key, device_name=v.device_name, scope=v.scope,
                                 config_key=v.config_key, time_ms=v.time_ms, floor_ms=v.floor_ms, backend=v.backend,
                                 provisional=v.provisional))
            overall = queries.find_best_config(session, problem_key=problem.key)
            assert overall is not None
            rows.append(dict(problem_key=problem.key, overall=overall.config_key, overall_backend=overall.backend))
    assert len(expected) == 12 and rows == expected


def test_the_cli_answers_best_from_it(pre_layout_url: str, capsys) -> None:
    expected = {r["problem_key"]: r["overall"] for r in json.loads((FIXTURE / "best_configs.json").read_text())
                if "overall" in r}
    for problem_key, config_key in expected.items():
        assert main(["best", *problem_key.split(), "--db", pre_layout_url, "--json"]) == 0
        assert json.loads(capsys.readouterr().out)["config"] == config_key


def test_every_stored_kernel_version_is_current(pre_layout_url: str) -> None:
    current = {(spec.family, spec.direction): spec.source_sha256() for spec in REGISTRY.values()}
    with session_scope(make_engine(pre_layout_url)) as session:
        stored = session.scalars(select(KernelVersion)).all()
    changes = json.loads((FIXTURE.parent / "kernel_changes.json").read_text())["changes"]
    changed = {c["family"]: c["previous_sha256"] for c in changes}
    assert len(stored) == 12
    for row in stored:   # current, or the version a recorded change moved on from
        expected = current[(row.family, row.direction)]
        assert row.source_sha256 in (expected, changed.get(f"{row.family}.{row.direction}")), row.family
