"""The tuner on the TF32 class by replay of H200 measurements of the six TF32 tensor-core families (igemm, igemm_nhwc,
igemm_1x1, igemm_wgmma, igemm_wgmma_1x1, igemm_wgmma_1x1_resident): ``tests/data/replay_h200_tf32.json.gz``, made by
``benchmarks/make_replay.py`` from the committed
``benchmarks/results/igemm_wgmma_h200/six_families_h200/{tf32_public,tf32_wide}/vs_cudnn_tf32.json`` (the six
families in one run per suite, 2026-12-05; the kernel sources measured there are the ones in this checkout: the
table's kernel versions are their hashes). What a CI machine can check without a GPU: the tensor-core families are
searched and their measured rows stored under the tf32 problem, the best is the fastest measured row the search
reached (or a tie with it), the floor uses the table's measured TF32 ceiling, every efficiency is at most 1, and
nothing is stored for (or served to) the strict problem."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from tuner_samples import run_measurements

from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import ReplayBenchmarker, ReplayTable
from convtune.tuner.tune import TIE_TOLERANCE, tune

TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h200_tf32.json.gz"
KINDS = {"igemm.fwd", "igemm_nhwc.fwd", "igemm_1x1.fwd", "igemm_wgmma.fwd", "igemm_wgmma_1x1.fwd",
         "igemm_wgmma_1x1_resident.fwd"}
ONE_BY_ONE = {"igemm_1x1.fwd", "igemm_wgmma_1x1.fwd", "igemm_wgmma_1x1_resident.fwd"}
#: resnet50_3x3_256_b32 and a wide-suite 5×5 layer (alexnet_conv2_b64), measured for the NCHW, NHWC and wgmma
#: families; resnet50_1x1_256_64_b32, for all six
PROBLEMS = [ConvProblem.parse("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"),
            ConvProblem.parse("N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2 math=tf32"),
            ConvProblem.parse("N=32 C=256 H=56 W=56 K=64 R=1 S=1 math=tf32")]


def kinds_for(problem: ConvProblem) -> set[str]:
    return KINDS if problem.R == problem.S == 1 else KINDS - ONE_BY_ONE


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return ReplayTable.load(TABLE_PATH)


def test_table_holds_the_measured_tensor_core_rows(table: ReplayTable) -> None:
    assert set(table.kernel_sha256) == KINDS
    assert all(sha == get_spec(kind.split(".")[0]).source_sha256() for kind, sha in table.kernel_sha256.items())
    assert table.device.machine.tf32_peak_flops_per_s > 300e12          # measured in the run, not a preset
    assert all(key.endswith("math=tf32") for key in table.problems)
    for problem in PROBLEMS:
        kinds = {config.split()[0] for config in table.problems[problem.key()]}
        assert kinds == kinds_for(problem), problem.key()


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"R{p.R}C{p.C}K{p.K}")
def test_a_tf32_problem_tunes_its_tensor_core_families_by_replay(problem: ConvProblem, table: ReplayTable,
                                                                 sqlite_engine: Engine) -> None:
    replay = ReplayBenchmarker(table)
    result = tune(problem, replay, sqlite_engine, budget_trials=24, warm_start=12, seed=0)
    assert result.best_config is not None and result.time_ms is not None
    assert result.best_config.split()[0] in kinds_for(problem)
    assert set(result.floors_ms) == {kind.split(".")[0] for kind in kinds_for(problem)}
    rows = run_measurements(sqlite_engine, result.run_id)
    recorded = table.problems[problem.key()]
    with session_scope(sqlite_engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in rows]
        assert all(repo.get_problem(session, m.problem_id).key == problem.key() for m in rows)
        assert repo.find_problem(session, problem.replace(math="ieee")) is None
    ok = [(m.median_ms, k) for m, k in zip(rows, keys, strict=True) if m.status == "ok"]
    assert ok, "no measured row reached"
    for m, k in zip(rows, keys, strict=True):
        if m.status == "ok":
            assert m.median_ms == pytest.approx(recorded[k]["median_ms"])    # the H200's number, unedited
    # the fastest measured row, or a tie within the tuner's tolerance (ties go to the smallest key)
    assert min(ok)[0] <= result.time_ms <= min(ok)[0] * (1 + TIE_TOLERANCE)
    assert (result.time_ms, result.best_config) in ok
    # the floor is the TF32 class's: the non-padding FLOPs at the table's measured TF32 peak bound it from below
    flops_floor_ms = 2 * problem.macs_nonpad / table.device.machine.tf32_peak_flops_per_s * 1e3
    assert result.floor_ms >= flops_floor_ms * (1 - 1e-9)
    assert result.efficiency is not None and 0 < result.efficiency <= 1
