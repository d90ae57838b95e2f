"""The tuner's final choice (``tune._finalize``): the finalists (the best three and each other family's best within
``FAMILY_FINALIST_SLACK``), re-timed cold, and hot where the operands fit in half the L2 — the hot times choose, the
cold time is stored (efficiency stays against the DRAM floor). A replayed H200 table behind a benchmarker that
answers ``retime`` as a GPU would, with hot times the test sets."""

from __future__ import annotations

import dataclasses
from types import SimpleNamespace
from typing import Any

from sqlalchemy import Engine
from tuner_samples import PROBLEM

from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.storage import queries as repo
from convtune.storage import session_scope
from convtune.tuner.benchmark import OK, DeviceInfo, ReplayBenchmarker, TrialResult
from convtune.tuner.tune import (
    FAMILY_FINALIST_SLACK,
    FINALISTS,
    MAX_FINALISTS,
    TIE_TOLERANCE,
    _finalists,
    l2_resident,
    tune,
)

H200 = MachineModel.preset("h200")


class _Gpu(ReplayBenchmarker):
    """Replayed trials, a GPU's final re-times: cold = the table's time; hot = the table's time, except that the
    last finalist runs at half the fastest cold time (the config a hot-L2 ranking would pick and a cold one not)."""

    backend = "gpu"

    def __init__(self, replay: ReplayBenchmarker, l2_bytes: int | None = None) -> None:
        self.__dict__.update(replay.__dict__)
        self.retimes: list[tuple[bool, list[str]]] = []
        self.l2_bytes = l2_bytes

    def device(self) -> DeviceInfo:
        info = super().device()
        if self.l2_bytes is None:
            return info
        return dataclasses.replace(info, machine=dataclasses.replace(info.machine, l2_bytes=self.l2_bytes))

    def retime(self, problem: ConvProblem, plans: list[Any], rounds: int = 5, hot: bool = False) -> list[TrialResult]:
        keys = [pl.config.key() for pl in plans]
        self.retimes.append((hot, keys))
        cold = [self.measure(problem, pl).median_ms for pl in plans]
        if not hot:
            return [TrialResult(OK, t) for t in cold]
        return [TrialResult(OK, 0.5 * min(cold) if i == len(plans) - 1 else t) for i, t in enumerate(cold)]


def test_where_the_operands_fit_in_l2_the_hot_re_time_chooses_and_the_cold_time_is_stored(
        sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    bench = _Gpu(replay)
    assert l2_resident(PROBLEM, bench.device().machine)   # 15.9 MB of operands, a 60 MB L2
    result = tune(PROBLEM, bench, sqlite_engine, budget_trials=12, warm_start=8)
    (cold_hot, cold_keys), (hot_hot, hot_keys) = bench.retimes
    assert (cold_hot, hot_hot) == (False, True) and cold_keys == hot_keys and len(cold_keys) > 1
    last = cold_keys[-1]
    assert result.best_config == last and result.chosen_by == "hot"
    cold_ms = bench.measure(PROBLEM, _plan_of(bench, last)).median_ms
    fastest_cold = min(bench.measure(PROBLEM, _plan_of(bench, k)).median_ms for k in cold_keys)
    assert result.time_ms == cold_ms and result.call_time_ms == 0.5 * fastest_cold
    with session_scope(sqlite_engine) as session:
        best = repo.find_best_config(session, problem_key=PROBLEM.key(), device_name=bench.device().name,
                                     backend="gpu")
        assert best is not None and (best.config_key, best.time_ms) == (last, cold_ms)


def test_where_they_do_not_the_cold_re_time_chooses(sqlite_engine: Engine, replay: ReplayBenchmarker) -> None:
    bench = _Gpu(replay, l2_bytes=8 << 20)   # an 8 MB L2: the 15.9 MB of operands stream from DRAM
    assert not l2_resident(PROBLEM, bench.device().machine)
    result = tune(PROBLEM, bench, sqlite_engine, budget_trials=12, warm_start=8)
    assert [hot for hot, _ in bench.retimes] == [False] and result.chosen_by == "cold"
    assert result.call_time_ms is None
    keys = bench.retimes[0][1]
    times = {k: bench.measure(PROBLEM, _plan_of(bench, k)).median_ms for k in keys}
    tied = [k for k, t in times.items() if t <= min(times.values()) * (1 + TIE_TOLERANCE)]
    assert (result.best_config, result.time_ms) == (min(tied), times[min(tied)])   # ties: the smallest key


def _plan_of(bench: ReplayBenchmarker, key: str) -> Any:
    from convtune.kernels.config import parse_config_key
    from convtune.kernels.registry import get_spec

    config = parse_config_key(key)
    return get_spec(config.family, config.direction).plan(PROBLEM, config, bench.device().machine)


def _rows(*rows: tuple[str, float]) -> tuple[list[Any], dict[int, str]]:
    measured = [SimpleNamespace(id=i, median_ms=ms) for i, (_, ms) in enumerate(rows)]
    return measured, {i: key for i, (key, _) in enumerate(rows)}


def test_finalists_are_the_best_three_and_each_other_family_within_the_slack() -> None:
    ranked, keys = _rows(("a.fwd x=1", 1.0), ("a.fwd x=2", 1.01), ("a.fwd x=3", 1.02), ("a.fwd x=4", 1.03),
                         ("b.fwd x=1", 1.10), ("b.fwd x=2", 1.11), ("c.fwd x=1", 1.2),
                         ("d.fwd x=1", FAMILY_FINALIST_SLACK * 1.0 + 0.01))
    chosen = [keys[m.id] for m in _finalists(ranked, keys)]
    # the fourth of family a is not a finalist; b's and c's fastest are (one each); d is past the slack
    assert chosen == ["a.fwd x=1", "a.fwd x=2", "a.fwd x=3", "b.fwd x=1", "c.fwd x=1"]


def test_finalists_stop_at_the_cap_and_keep_a_family_already_in_the_best_three() -> None:
    ranked, keys = _rows(("a.fwd x=1", 1.0), ("b.fwd x=1", 1.0), ("a.fwd x=2", 1.0),
                         *((f"f{i}.fwd x=1", 1.05) for i in range(10)))
    chosen = [keys[m.id] for m in _finalists(ranked, keys)]
    assert len(chosen) == MAX_FINALISTS and chosen[:FINALISTS] == ["a.fwd x=1", "b.fwd x=1", "a.fwd x=2"]
    assert len({k.split(".")[0] for k in chosen[FINALISTS:]}) == MAX_FINALISTS - FINALISTS


def test_l2_residency_is_half_the_l2() -> None:
    yolov3_head = ConvProblem.parse("N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16")   # 22 MB of operands
    assert l2_resident(yolov3_head, H200) and l2_resident(yolov3_head, MachineModel.preset("h100"))
    big = ConvProblem.parse("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1")                 # 208 MB in fp32
    assert not l2_resident(big, H200)
    assert l2_resident(PROBLEM, dataclasses.replace(H200, l2_bytes=2 * PROBLEM.operand_bytes))
    assert not l2_resident(PROBLEM, dataclasses.replace(H200, l2_bytes=2 * PROBLEM.operand_bytes - 2))
