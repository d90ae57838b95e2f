"""The tuner on three newer 16-bit families by replay of their H100 measurements: the persistent 1×1 kernels
(``igemm_wgmma_half_1x1_resident`` and its TMA-fed, warp-specialised sibling ``igemm_wgmma_half_1x1_tma``) on the 1×1
layers and the CUDA-core direct kernel (``direct_half``) on the stems.

``tests/data/replay_h100_bf16_1x1_stems.json.gz`` was made by ``benchmarks/make_replay.py`` from the committed runs
``benchmarks/results/igemm_wgmma_h200/resident_1x1/v3_scale_d/vs_cudnn_bf16.json`` (the 14 1×1 shapes of
``benchmarks/suites/conv1x1.json``: both 1×1 families and the general wgmma one),
``benchmarks/results/igemm_wgmma_h200/direct_half_stems/vs_cudnn_bf16.json`` (the 13 few-channel layers of
``benchmarks/suites/stems.json``: direct_half, igemm_wgmma_half, igemm_half) and
``benchmarks/results/igemm_wgmma_h200/tma_1x1_h100/conv1x1_bf16/vs_cudnn_bf16.json`` (the conv1x1 suite again: the
resident and TMA 1×1 families; its rows win the clashes), all on an H100 (the device tool gave no H200). What a CI
machine can check without a GPU: the new families are searched next to the others, their measured rows are stored
under the bfloat16 problem, the best is the fastest measured row the search reached (or a tie) and is the new family
where it measured fastest, and every efficiency is at most 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from tuner_samples import assert_tuned_by_replay

from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

TABLE_PATH = Path(__file__).resolve().parents[1] / "data" / "replay_h100_bf16_1x1_stems.json.gz"
NEW = {"igemm_wgmma_half_1x1_resident.fwd", "igemm_wgmma_half_1x1_tma.fwd", "direct_half.fwd"}
#: (problem, the family that measured fastest on it): the yolov3 52×52 head and a ResNet-50 reduction (the TMA 1×1
#: kernel), a MobileNetV2 expansion (the resident 1×1 kernel: C = 24 is no multiple of 64, which TMA boxes need),
#: LeNet conv1 and the MobileNetV2 stem (direct_half: C·R·S = 25 and 27)
CASES = [
    (ConvProblem.parse("N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16"), "igemm_wgmma_half_1x1_tma"),
    (ConvProblem.parse("N=32 C=512 H=28 W=28 K=128 R=1 S=1 dtype=bfloat16"), "igemm_wgmma_half_1x1_tma"),
    (ConvProblem.parse("N=32 C=24 H=56 W=56 K=144 R=1 S=1 dtype=bfloat16"), "igemm_wgmma_half_1x1_resident"),
    (ConvProblem.parse("N=64 C=1 H=28 W=28 K=20 R=5 S=5 dtype=bfloat16"), "direct_half"),
    (ConvProblem.parse("N=64 C=3 H=224 W=224 K=32 R=3 S=3 stride=2 pad=1 dtype=bfloat16"), "direct_half"),
]


@pytest.fixture(scope="module")
def table() -> ReplayTable:
    return ReplayTable.load(TABLE_PATH)


def test_table_holds_todays_kernels(table: ReplayTable) -> None:
    assert set(table.kernel_sha256) >= NEW
    for kind, sha in table.kernel_sha256.items():
        assert sha == get_spec(kind.split(".")[0]).source_sha256(), kind
    assert "H100" in table.device.name and table.device.machine.bf16_peak_flops_per_s > 600e12
    assert all(key.endswith("dtype=bfloat16") for key in table.problems)


@pytest.mark.parametrize(("problem", "fastest"), CASES,
                         ids=["yolov3_head", "r50_reduce", "mnv2_expand", "lenet_conv1", "mnv2_stem"])
def test_the_new_family_wins_by_replay_where_it_measured_fastest(problem: ConvProblem, fastest: str,
                                                                 table: ReplayTable, sqlite_engine: Engine) -> None:
    recorded = table.problems[problem.key()]
    best_recorded = min(recorded.items(), key=lambda kv: kv[1]["median_ms"])
    assert best_recorded[0].split(".")[0] == fastest                     # the table says so
    assert_tuned_by_replay(sqlite_engine, problem, table, {fastest}, fastest)
