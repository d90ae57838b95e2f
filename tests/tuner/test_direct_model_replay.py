"""The direct model's tail and split-C terms, and how well it ranks the timings measured on the H200.

The tuner's pruning and warm start trust the model's order, so its rank correlation with the replay
tables in ``tests/data`` (every direct row of every problem) is checked here, and the tail and split-C
terms it needs for that are checked one by one.
"""

from __future__ import annotations

import math
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest

from convtune.kernels.config import parse_config_key
from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.kernels.direct.model import ATOMIC_WORDS, blocks_per_sm, predict
from convtune.kernels.direct.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

H200 = MachineModel.preset("h200")
DATA = Path(__file__).resolve().parents[1] / "data"
CONFIG = DirectFwdConfig(tile_h=8, tile_w=8, tile_k=64, chunk_c=8, thread_h=1, thread_w=4, thread_k=8, stages=2,
                         vec=1, splits=1)


def _images(n: int) -> ConvProblem:
    """One 8×8 output tile of 64 channels per image: CONFIG launches one block per image and split."""
    return ConvProblem.parse(f"N={n} C=64 H=8 W=8 K=64 R=3 S=3 pad=1")


def test_the_tail_is_counted_per_sm_not_per_wave() -> None:
    """One more block on each SM after a full wave costs one more block's share, not a whole wave."""
    full = plan(_images(H200.sm_count * 4), CONFIG, H200)
    bps = blocks_per_sm(full, H200)
    assert bps == 4 and full.blocks == H200.sm_count * bps
    one_more = plan(_images(H200.sm_count * (bps + 1)), CONFIG, H200)
    two_waves = plan(_images(H200.sm_count * bps * 2), CONFIG, H200)
    a, b, c = (predict(pl, H200) for pl in (full, one_more, two_waves))
    assert a.waves == 1.0 and b.waves == 1.25 and c.waves == 2.0
    assert b.issue_s == pytest.approx(a.issue_s * (bps + 1) / bps)
    assert c.issue_s == pytest.approx(a.issue_s * 2)


def test_a_partial_wave_issues_with_the_warps_it_has() -> None:
    """Fewer blocks than an SM holds: their time is their own issue work at the occupancy they reach."""
    n = H200.sm_count * 3   # three of the four resident slots; 12 warps still hide latency (>= 8)
    full, three = (predict(plan(_images(k), CONFIG, H200), H200) for k in (H200.sm_count * 4, n))
    assert three.issue_s == pytest.approx(full.issue_s * 3 / 4)
    one = predict(plan(_images(H200.sm_count), CONFIG, H200), H200)   # 4 warps: latency factor (4/8)^½
    assert one.issue_s > full.issue_s / 4 * math.sqrt(2) * 0.999


def test_split_c_adds_its_atomics() -> None:
    problem = ConvProblem.parse("N=2 C=256 H=8 W=8 K=64 R=3 S=3 pad=1")
    whole = predict(plan(problem, CONFIG, H200), H200)
    assert whole.atomic_s == 0.0
    for splits in (2, 8):
        split = predict(plan(problem, replace(CONFIG, splits=splits), H200), H200)
        adds = splits * problem.N * problem.K * problem.P * problem.Q
        assert split.atomic_s == pytest.approx(adds * ATOMIC_WORDS * 4 / H200.copy_bandwidth_bytes_per_s)
        assert split.time_s >= max(split.issue_s, split.l2_s, split.dram_s) + split.atomic_s


def _spearman(a: list[float], b: list[float]) -> float:
    ra, rb = np.argsort(np.argsort(a)), np.argsort(np.argsort(b))
    return float(np.corrcoef(ra, rb)[0, 1])


def _direct_tables() -> list[tuple[MachineModel, str, dict[str, dict]]]:
    """(the table's machine, problem key, its measured direct rows) over every replay table."""
    out = []
    for path in sorted(DATA.glob("replay_h200_*.json.gz")):
        table = ReplayTable.load(path)
        for problem, rows in table.problems.items():
            direct = {k: r for k, r in rows.items() if k.startswith("direct.fwd ") and r.get("status") == "ok"}
            if len(direct) >= 20:
                out.append((table.device.machine, problem, direct))
    return out


@pytest.mark.slow
def test_the_model_ranks_every_replayed_direct_problem() -> None:
    """Spearman correlation of predicted and measured time over each problem's measured direct configs:
    positive on every problem (the fifteen tables hold 48 to 1981 configs each), 0.6 or more on average."""
    tables = _direct_tables()
    assert len(tables) >= 15
    rhos = []
    for machine, key, rows in tables:
        problem = ConvProblem.parse(key)
        pairs = [(predict(plan(problem, parse_config_key(k), machine), machine).time_s, r["median_ms"])
                 for k, r in rows.items()]
        pairs = [(p, m) for p, m in pairs if math.isfinite(p)]
        rhos.append(_spearman([p for p, _ in pairs], [m for _, m in pairs]))
    assert min(rhos) > 0.15, rhos
    assert float(np.mean(rhos)) > 0.6, rhos
