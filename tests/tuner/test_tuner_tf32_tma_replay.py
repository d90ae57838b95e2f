"""The tuner on the TMA-fed TF32 1×1 family (``igemm_wgmma_1x1_tma``) by replay of its H100 measurements.

``tests/data/replay_h100_tf32.json.gz`` was made by ``benchmarks/make_replay.py`` from the committed runs
``benchmarks/results/igemm_wgmma_h200/resident_1x1_tf32/v1/vs_cudnn_tf32.json`` (the conv1x1 suite: the four
earlier TF32 1×1-capable families), ``six_families_h100/tf32_{wide,public}/vs_cudnn_tf32.json`` (the two suites, the
six TF32 families) and ``tma_1x1_tf32_h100/conv1x1_tf32/vs_cudnn_tf32.json`` (the conv1x1 suite: the resident and
TMA 1×1 families; its rows win the clashes), all on an H100. What a CI machine can check without a GPU: the family is
searched next to the others on the TF32 problems it takes, its measured rows are stored unedited under the tf32
problem, the best is the fastest measured row the search reached (or a tie) and is this family where it measured
fastest, and every efficiency is at most 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from tuner_samples import assert_tuned_by_replay

from convtune.kernels.igemm_wgmma import tf32_1x1_tma as tma
from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h100_tf32.json.gz"
#: (problem, the family that measured fastest on it): the yolov3 52×52 head (26.1 µs against 33.3 for the best other
#: family), the Faster R-CNN RPN head at batch 1, and a ResNet-50 1×1 expansion where the resident kernel stays fastest
CASES = [
    (ConvProblem.parse("N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32"), tma.FAMILY),
    (ConvProblem.parse("N=1 C=512 H=38 W=50 K=36 R=1 S=1 math=tf32"), tma.FAMILY),
    (ConvProblem.parse("N=32 C=128 H=28 W=28 K=512 R=1 S=1 math=tf32"), "igemm_wgmma_1x1_resident"),
]


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return ReplayTable.load(TABLE_PATH)


def test_table_holds_todays_kernels(table: ReplayTable) -> None:
    assert f"{tma.FAMILY}.fwd" in table.kernel_sha256
    for kind, sha in table.kernel_sha256.items():
        assert sha == get_spec(kind.split(".")[0]).source_sha256(), kind
    assert "H100" in table.device.name and table.device.machine.tf32_peak_flops_per_s > 300e12
    assert all("math=tf32" in key for key in table.problems)


@pytest.mark.parametrize(("problem", "fastest"), CASES, ids=["yolov3_head", "rpn_bbox_b1", "r50_expand"])
def test_the_family_wins_by_replay_where_it_measured_fastest(problem: ConvProblem, fastest: str,
                                                             table: ReplayTable, sqlite_engine: Engine) -> None:
    recorded = table.problems[problem.key()]
    best_recorded = min((row["median_ms"], key) for key, row in recorded.items() if row["status"] == "ok")
    assert best_recorded[1].split(".")[0] == fastest                     # the table says so
    assert_tuned_by_replay(sqlite_engine, problem, table, {tma.FAMILY}, fastest)
