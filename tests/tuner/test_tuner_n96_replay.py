"""The tuner on the 96/192-column tile families (``igemm_wgmma_n96``, ``igemm_wgmma_half_n96``) by replay of their H100
measurements.

``tests/data/replay_h100_tf32.json.gz`` and ``replay_h100_bf16.json.gz`` were made by ``benchmarks/make_replay.py``
from each class's committed H100 runs (``benchmarks/replay_reports.sh`` lists them) and
``benchmarks/results/igemm_wgmma_h200/n96_h100/n96_{tf32,bfloat16}`` (``benchmarks/suites/n96.json``: the general
family of the class and the new one, 16 model-top configs each; its rows win the clashes). What a CI machine can check
without a GPU: the family is searched next to the others, its measured rows are stored unedited, the best is the
fastest measured row the search reached (or a tie) and is this family where it measured fastest, every efficiency at
most 1."""

from __future__ import annotations

from pathlib import Path

import pytest
from sqlalchemy import Engine
from tuner_samples import assert_tuned_by_replay

from convtune.kernels.igemm_wgmma import n96
from convtune.kernels.registry import get_spec
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

DATA = Path(__file__).resolve().parents[1] / "data"
ALEXNET_CONV2 = "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2"
#: (table, problem, the family searched, the family that measured fastest): AlexNet conv2 in both classes (TF32 107.2
#: against 168.8 µs for the general tiles; bf16 68.0 against 98.7), ZFNet conv1 at batch 16 (K = 96), and an
#: Inception-v3 3×1 layer (K = 384) where the general family's 64-wide tiles stay fastest
CASES = [
    ("replay_h100_tf32.json.gz", f"{ALEXNET_CONV2} math=tf32", n96.FAMILY, n96.FAMILY),
    ("replay_h100_bf16.json.gz", f"{ALEXNET_CONV2} dtype=bfloat16", n96.HALF_FAMILY, n96.HALF_FAMILY),
    ("replay_h100_tf32.json.gz", "N=16 C=3 H=224 W=224 K=96 R=7 S=7 stride=2 pad=1 math=tf32", n96.FAMILY, n96.FAMILY),
    ("replay_h100_tf32.json.gz", "N=8 C=384 H=8 W=8 K=384 R=3 S=1 pad_h=1 pad_w=0 math=tf32", n96.FAMILY,
     "igemm_wgmma"),
]


@pytest.fixture(scope="module")
def tables() -> dict[str, ReplayTable]:
    return {name: ReplayTable.load(DATA / name) for name in ("replay_h100_tf32.json.gz", "replay_h100_bf16.json.gz")}


def test_tables_hold_todays_kernels(tables: dict[str, ReplayTable]) -> None:
    for name, family in (("replay_h100_tf32.json.gz", n96.FAMILY), ("replay_h100_bf16.json.gz", n96.HALF_FAMILY)):
        table = tables[name]
        assert f"{family}.fwd" in table.kernel_sha256 and "H100" in table.device.name
        for kind, sha in table.kernel_sha256.items():
            assert sha == get_spec(kind.split(".")[0]).source_sha256(), kind


@pytest.mark.parametrize(("name", "text", "searched", "fastest"), CASES,
                         ids=["alexnet_conv2_tf32", "alexnet_conv2_bf16", "zfnet_conv1_b16_tf32", "mixed7b_3x1_tf32"])
def test_the_family_wins_by_replay_where_it_measured_fastest(name: str, text: str, searched: str, fastest: str,
                                                             tables: dict[str, ReplayTable],
                                                             sqlite_engine: Engine) -> None:
    table, problem = tables[name], ConvProblem.parse(text)
    recorded = table.problems[problem.key()]
    best_recorded = min((row["median_ms"], key) for key, row in recorded.items() if row["status"] == "ok")
    assert best_recorded[1].split(".")[0] == fastest                     # the table says so
    assert_tuned_by_replay(sqlite_engine, problem, table, {searched}, fastest)
