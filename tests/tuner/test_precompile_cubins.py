"""``benchmarks/precompile_cubins.py --table`` without nvcc: the sources it would compile are the kernels of each
problem's fastest correct config of a current kernel version in a replay table (what ``user_suite.py --configs-from``
serves, both through ``ReplayTable.fastest_configs``), one per problem."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

from convtune.kernels.config import parse_config_key
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import REPLAY_FORMAT, DeviceInfo
from tests.benchmark_scripts import load_benchmark

H200 = MachineModel.preset("h200")
ONE = "N=8 C=256 H=52 W=52 K=255 R=1 S=1 stride=1 pad=0 dilation=1 dtype=bfloat16"
TWO = "N=32 C=64 H=56 W=56 K=256 R=1 S=1 stride=1 pad=0 dilation=1 dtype=bfloat16"
FAST = "igemm_wgmma_half_1x1_resident.fwd tile_n=64 m_blocks=2 warpgroups=2 stages=6 splits=1"
SLOW = "igemm_wgmma_half_1x1.fwd tile_n=64 m_blocks=1 warpgroups=2 stages=4 splits=1"
WRONG = "igemm_wgmma_half_1x1_resident.fwd tile_n=128 m_blocks=1 warpgroups=2 stages=6 splits=1"


def _row(ms: float, status: str = "ok") -> dict:
    return {"status": status, "median_ms": ms}


def _source(problem: str, key: str) -> str:
    config = parse_config_key(key)
    return get_spec(config.family).plan(ConvProblem.parse(problem), config, H200).source()


def test_table_sources_are_each_problems_fastest_correct_config(tmp_path: Path) -> None:
    script = load_benchmark("precompile_cubins")
    table = {"format": REPLAY_FORMAT, "device": DeviceInfo.from_machine(H200).to_dict(),
             "kernel_sha256": {kind: get_spec(kind.split(".")[0]).source_sha256() for kind in (FAST.split()[0],
                                                                                              SLOW.split()[0])},
             "problems": {
        ONE: {SLOW: _row(0.021), FAST: _row(0.016), WRONG: _row(0.001, "wrong")},   # a wrong row never serves
        TWO: {SLOW: _row(0.030, "compile_error")},                                  # nothing correct: nothing
    }}
    path = tmp_path / "replay.json.gz"
    path.write_bytes(gzip.compress(json.dumps(table).encode()))
    assert script.table_sources(path, H200) == [_source(ONE, FAST)]
    plain = tmp_path / "replay.json"
    table["problems"][TWO] = {SLOW: _row(0.030)}
    plain.write_text(json.dumps(table))
    assert script.table_sources(plain, H200) == [_source(ONE, FAST), _source(TWO, SLOW)]
