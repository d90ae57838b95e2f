"""The tuner on the CUDA-core implicit-GEMM family (igemm_simt) by replay of H200 measurements:
``tests/data/replay_h200_igemm_simt.json.gz``, made by ``benchmarks/make_replay.py`` from the committed
``benchmarks/results/igemm_simt_h200/run1/wide/vs_cudnn.json`` (the family's model top and bucket bests on every
wide-suite shape; the table's kernel version is the hash of the source in this checkout). What a CI machine can check
without a GPU: the family is searched and its measured rows stored, every time is the H200's number unedited, the
best is the fastest measured row the search reached (or a tie), its efficiency against the strict fp32 floor is at
most 1, and the model's ranking of the family's measured configs is positive on every problem."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np
import pytest
from sqlalchemy import Engine
from tuner_samples import run_measurements

from convtune.kernels.config import parse_config_key
from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.tune import TIE_TOLERANCE, tune

TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h200_igemm_simt.json.gz"
#: a 7×7 stride-2 stem (resnet50_conv1_b16), a 3×3 stride-2 layer (resnet50_layer3_conv2_s2_b16), a 7×1 layer
PROBLEMS = [ConvProblem.parse("N=16 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3"),
            ConvProblem.parse("N=16 C=256 H=28 W=28 K=256 R=3 S=3 stride=2 pad=1"),
            ConvProblem.parse("N=16 C=160 H=17 W=17 K=192 R=7 S=1 pad_h=3 pad_w=0")]


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return ReplayTable.load(TABLE_PATH)


def test_table_holds_the_families_measured_rows(table: ReplayTable) -> None:
    assert set(table.kernel_sha256) == {"igemm_simt.fwd"}
    assert table.kernel_sha256["igemm_simt.fwd"] == get_spec("igemm_simt").source_sha256()
    assert len(table.problems) == 43
    for problem in PROBLEMS:
        assert problem.key() in table.problems, problem.key()


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"{p.R}x{p.S}s{p.stride_h}")
def test_a_problem_tunes_the_family_by_replay(problem: ConvProblem, table: ReplayTable, sqlite_engine: Engine) -> None:
    result = tune(problem, ReplayBenchmarker(table), sqlite_engine, budget_trials=24, warm_start=12, seed=0,
                  families=["igemm_simt"])
    assert result.best_config is not None and result.time_ms is not None
    assert result.best_config.startswith("igemm_simt.fwd ")
    rows = run_measurements(sqlite_engine, result.run_id)
    recorded = table.problems[problem.key()]
    with session_scope(sqlite_engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in rows]
    ok = [(m.median_ms, k) for m, k in zip(rows, keys, strict=True) if m.status == "ok"]
    assert ok, "no measured row reached"
    for m, k in zip(rows, keys, strict=True):
        if m.status == "ok":
            assert m.median_ms == pytest.approx(recorded[k]["median_ms"])    # the H200's number, unedited
    assert min(ok)[0] <= result.time_ms <= min(ok)[0] * (1 + TIE_TOLERANCE)
    assert result.efficiency is not None and 0 < result.efficiency <= 1


def test_the_model_ranks_the_measured_configs_of_every_problem(table: ReplayTable) -> None:
    """Spearman ρ of predicted vs measured time over each problem's measured configs (10–11 each): positive on
    average and on most problems — the untuned choice's regret is what it buys (≤ 1.29 on this table)."""
    spec = get_spec("igemm_simt")
    machine = table.device.machine
    rhos, regrets = [], []
    for key, rows in table.problems.items():
        problem = ConvProblem.parse(key)
        pairs = [(spec.predict_s(spec.plan(problem, parse_config_key(k), machine), machine), r["median_ms"])
                 for k, r in rows.items() if r.get("status") == "ok"]
        pairs = [(p, m) for p, m in pairs if math.isfinite(p)]
        if len(pairs) < 5:
            continue
        pred, meas = np.array([p for p, _ in pairs]), np.array([m for _, m in pairs])
        rhos.append(float(np.corrcoef(np.argsort(np.argsort(pred)), np.argsort(np.argsort(meas)))[0, 1]))
        regrets.append(meas[int(np.argmin(pred))] / meas.min())
    assert len(rhos) >= 40
    assert float(np.mean(rhos)) > 0.2, rhos
    assert max(regrets) < 1.35 and float(np.exp(np.mean(np.log(regrets)))) < 1.12, regrets
