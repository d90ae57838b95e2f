"""The tuner on the ``pointwise_sliced`` family by replay of its first H100 measurements: it is searched next to
the other 1×1 families and wins where it measured fastest (the batch-1 heads, MobileNetV2's 7²/14² layers with
C ≥ 384 into K ≤ 320), and loses where it measured slower (C < K expansions).

``tests/data/replay_h100_small_gemm_{fp32,bf16}.json.gz`` were made by ``benchmarks/make_replay.py`` from the
committed run ``benchmarks/results/sliced_h100/run1/{fp32/vs_cudnn.json,bf16/vs_cudnn_bf16.json}`` (an H100:
``benchmarks/sliced_round.sh`` on ``benchmarks/suites/small_gemm_1x1.json``; fp32: pointwise_sliced, pointwise,
igemm_simt; bf16: pointwise_sliced, igemm_half, igemm_wgmma_half, the model's top 48 of each). Rows the tables do not
hold (the other families' configs) replay as failures and are never the best."""

from __future__ import annotations

import json
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

DATA = Path(__file__).resolve().parents[1] / "data"
#: family.direction -> the kernel version a recorded source change moved on from (the table's pointwise rows predate
#: the change to its non-16-byte-store epilogue; these shapes' winners are unaffected)
CHANGED = {c["family"]: c["previous_sha256"] for c in json.loads((DATA / "kernel_changes.json").read_text())["changes"]}
TABLES = {"float32": "replay_h100_small_gemm_fp32.json.gz", "bfloat16": "replay_h100_small_gemm_bf16.json.gz"}
#: (problem, the family that measured fastest on it)
CASES = [
    (ConvProblem.parse("N=1 C=1024 H=13 W=13 K=125 R=1 S=1"), "pointwise_sliced"),            # YOLOv2 head b1
    (ConvProblem.parse("N=32 C=576 H=7 W=7 K=160 R=1 S=1"), "pointwise_sliced"),              # features.14.conv.2
    (ConvProblem.parse("N=32 C=64 H=14 W=14 K=384 R=1 S=1"), "pointwise"),                    # features.8.conv.0
    (ConvProblem.parse("N=1 C=1024 H=13 W=13 K=125 R=1 S=1 dtype=bfloat16"), "pointwise_sliced"),
    (ConvProblem.parse("N=4 C=128 H=46 W=46 K=38 R=1 S=1 dtype=bfloat16"), "igemm_wgmma_half"),  # OpenPose PAF b4
]


@pytest.fixture(scope="module")
def tables() -> dict[str, ReplayTable]:
    return {dtype: ReplayTable.load(DATA / name) for dtype, name in TABLES.items()}


def test_tables_hold_todays_kernels(tables: dict[str, ReplayTable]) -> None:
    for table in tables.values():
        assert "pointwise_sliced.fwd" in table.kernel_sha256 and "H100" in table.device.name
        for kind, sha in table.kernel_sha256.items():   # today's, or the version a recorded change moved on from
            assert sha in (get_spec(kind.split(".")[0]).source_sha256(), CHANGED.get(kind)), kind


@pytest.mark.parametrize(("problem", "fastest"), CASES,
                         ids=["yolov2_fp32", "mnv2_7x7_576_160", "mnv2_14x14_64_384", "yolov2_bf16", "openpose_bf16"])
def test_the_family_wins_by_replay_where_it_measured_fastest(problem: ConvProblem, fastest: str,
                                                             tables: dict[str, ReplayTable],
                                                             sqlite_engine: Engine) -> None:
    table = tables[problem.dtype]
    recorded = table.problems[problem.key()]
    best_recorded = min((r["median_ms"], k) for k, r in recorded.items() if r.get("median_ms"))
    assert best_recorded[1].split(".")[0] == fastest                      # the table says so
    result = tune(problem, ReplayBenchmarker(table), sqlite_engine, budget_trials=40, warm_start=16, seed=0)
    assert result.best_config is not None and result.time_ms is not None
    rows = run_measurements(sqlite_engine, result.run_id)
    with session_scope(sqlite_engine) as session:
        keys = [repo.get_config(session, m.config_id).key for m in rows]
    ok = [(m.median_ms, k) for m, k in zip(rows, keys, strict=True) if m.status == "ok"]
    assert any(k.startswith("pointwise_sliced.") for _, k in ok), "the family was not searched"
    for m, k in zip(rows, keys, strict=True):
        if m.status == "ok":
            assert m.median_ms == pytest.approx(recorded[k]["median_ms"])    # the H100's number, unedited
    assert min(ok)[0] <= result.time_ms <= min(ok)[0] * (1 + TIE_TOLERANCE)
    assert result.best_config.split(".")[0] == fastest
    assert result.efficiency is not None and 0 < result.efficiency <= 1
