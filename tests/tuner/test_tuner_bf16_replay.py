"""The tuner on the bfloat16 class by replay of H200 measurements of the six 16-bit families (igemm_half,
igemm_half_1x1, igemm_wgmma_half, igemm_wgmma_half_1x1, igemm_wgmma_half_1x1_resident, direct_half):
``tests/data/replay_h200_bf16.json.gz``, made by ``benchmarks/make_replay.py`` (its docstring has the command) from
the committed ``benchmarks/results/igemm_wgmma_h200/six_families_h200/{half_public,half_wide}`` runs (all six families
in one run per suite, 2026-12-05). The table's kernel versions are this checkout's source hashes. What a CI machine can
check without a GPU: the families are searched and their measured rows stored under the bfloat16 problem, the best is
the fastest measured row the search reached (or a tie), the floor uses the table's measured 16-bit GEMM ceiling (not
the fp32 one, which the families beat), every efficiency is at most 1, and nothing is stored for the float32 problem of
the same shape."""

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

TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h200_bf16.json.gz"
KINDS = {"igemm_half.fwd", "igemm_half_1x1.fwd", "igemm_wgmma_half.fwd", "igemm_wgmma_half_1x1.fwd",
         "igemm_wgmma_half_1x1_resident.fwd", "direct_half.fwd"}
GENERAL = {"igemm_half.fwd", "igemm_wgmma_half.fwd"}
#: resnet50_3x3_256_b32, a wide-suite strided layer (resnet50_layer4_conv2_s2_b64), resnet50_1x1_256_64_b32 (the five
#: families that take 1×1) and ResNet-50's stem at batch 32 (C = 3: igemm_half's padded workspace and the wgmma
#: family's chunks of 16 channels; C·R·S = 147, past direct_half's 64)
PROBLEMS = [ConvProblem.parse("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 dtype=bfloat16"),
            ConvProblem.parse("N=64 C=512 H=14 W=14 K=512 R=3 S=3 stride=2 pad=1 dtype=bfloat16"),
            ConvProblem.parse("N=32 C=256 H=56 W=56 K=64 R=1 S=1 dtype=bfloat16"),
            ConvProblem.parse("N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3 dtype=bfloat16")]


def kinds_for(problem: ConvProblem) -> set[str]:
    return KINDS - {"direct_half.fwd"} if problem.R == problem.S == 1 else GENERAL


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return ReplayTable.load(TABLE_PATH)


def test_table_holds_the_measured_16bit_rows(table: ReplayTable) -> None:
    assert set(table.kernel_sha256) == KINDS
    for kind, sha in table.kernel_sha256.items():
        assert sha == get_spec(kind.split(".")[0]).source_sha256(), kind
    assert table.device.machine.bf16_peak_flops_per_s > 600e12          # measured in the run, not a preset
    assert all(key.endswith("dtype=bfloat16") for key in table.problems)
    for problem in PROBLEMS:
        kinds = {config.split()[0] for config in table.problems[problem.key()]}
        assert kinds == kinds_for(problem), problem.key()


@pytest.mark.parametrize("problem", PROBLEMS, ids=lambda p: f"C{p.C}R{p.R}s{p.stride_h}")
def test_a_bf16_problem_tunes_its_tensor_core_family_by_replay(problem: ConvProblem, table: ReplayTable,
                                                               sqlite_engine: Engine) -> None:
    result = tune(problem, ReplayBenchmarker(table), sqlite_engine, budget_trials=24, warm_start=12, seed=0)
    assert result.best_config is not None and result.time_ms is not None
    assert result.best_config.split()[0] in kinds_for(problem)
    assert set(result.floors_ms) == {kind.split(".")[0] for kind in kinds_for(problem)}
    rows = run_measurements(sqlite_engine, result.run_id)
    recorded = table.problems[problem.key()]
    with session_scope(sqlite_engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in rows]
        assert all(repo.get_problem(session, m.problem_id).key == problem.key() for m in rows)
        assert repo.find_problem(session, problem.replace(dtype="float32")) is None
    ok = [(m.median_ms, k) for m, k in zip(rows, keys, strict=True) if m.status == "ok"]
    assert ok, "no measured row reached"
    for m, k in zip(rows, keys, strict=True):
        if m.status == "ok":
            assert m.median_ms == pytest.approx(recorded[k]["median_ms"])    # the H200's number, unedited
    assert min(ok)[0] <= result.time_ms <= min(ok)[0] * (1 + TIE_TOLERANCE)
    assert (result.time_ms, result.best_config) in ok
    # the floor is the 16-bit class's: the non-padding FLOPs at the table's measured bf16 peak bound it from below,
    # and the fp32 peak would not (the families run faster than the fp32 FLOPs allow where the channels fill the
    # tensor cores' reduction; the stem's 3 channels pad to 16)
    machine = table.device.machine
    assert result.floor_ms >= 2 * problem.macs_nonpad / machine.bf16_peak_flops_per_s * 1e3 * (1 - 1e-9)
    if problem.C >= 64:
        assert result.time_ms < 2 * problem.macs / machine.fp32_peak_flops_per_s * 1e3
    assert result.efficiency is not None and 0 < result.efficiency <= 1
