"""Direct and Winograd ranked together: per-family predicted-time pruning, the warm start (each family's best two,
then the calibrated ranking), and
the bound's family choice (floors side by side)."""

from __future__ import annotations

import pytest

from convtune.kernels.registry import specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.efficiency import family_choice, floor_time_s
from convtune.tuner.prune import PruneSettings, prune, warm_start_order

H200 = MachineModel.preset("h200")
SMALL_3X3 = ConvProblem.parse("N=2 C=16 H=12 W=12 K=16 R=3 S=3 pad=1")


def test_every_family_survives_pruning_with_its_own_best() -> None:
    result = prune(SMALL_3X3, H200, specs_for(SMALL_3X3), PruneSettings(predicted_factor=1.2))
    families = {c.spec.family for c in result.survivors}
    assert families == {"direct", "winograd", "winograd_unfused", "igemm_simt", "winograd_unfused_3xtf32"}
    for family in families:
        mine = [c.predicted_s for c in result.survivors if c.spec.family == family]
        assert max(mine) <= 1.2 * min(mine) + 1e-15
    dropped = [d for d in result.decisions if d.stage == "predicted_time"]
    assert dropped and all(d.candidate.spec.family in d.reason for d in dropped)


def test_warm_start_takes_each_familys_best_two_then_the_calibrated_ranking() -> None:
    survivors = prune(SMALL_3X3, H200, specs_for(SMALL_3X3)).survivors
    families = {c.spec.family for c in survivors}
    first = warm_start_order(survivors, 16)
    assert len(first) == 16 and len(set(first)) == 16
    heads = first[:2 * len(families)]
    for family in families:     # every family's two best predictions, in its own ranking
        assert [c for c in heads if c.spec.family == family] == [c for c in survivors if c.spec.family == family][:2]

    def calibrated(c: object) -> tuple[float, str]:
        return c.spec.choice_of(SMALL_3X3, c.predicted_s), c.key  # type: ignore[attr-defined]

    rest = first[len(heads):]
    assert rest == sorted(rest, key=calibrated)
    others = sorted((c for c in survivors if c not in heads), key=calibrated)
    assert rest == others[:len(rest)]     # after the heads, nothing better-predicted is left out
    assert warm_start_order(survivors, 0) == []
    assert len(warm_start_order(survivors, 10**6)) == len(survivors)


@pytest.mark.parametrize(("key", "favoured"), [
    ("N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1", "winograd"),
    ("N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1", "winograd"),
    ("N=32 C=256 H=56 W=56 K=64 R=1 S=1", "direct"),
    ("N=32 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3", "direct"),
])
def test_family_choice_names_the_lower_floor(key: str, favoured: str) -> None:
    problem = ConvProblem.parse(key)
    choice = family_choice(problem, H200)
    assert choice["favoured"] == favoured
    floors = choice["floors"]
    assert floors == sorted(floors, key=lambda f: (f["floor_ms"], f["algorithm"], f["variant"]))
    assert floors[0]["algorithm"] == favoured
    algorithms = {f["algorithm"] for f in floors}
    assert algorithms == ({"direct", "winograd"} if favoured == "winograd" else {"direct"})
    if favoured == "winograd":
        assert {f["variant"] for f in floors} == {"direct", "F(2x2,3x3)", "F(4x4,3x3)"}
        assert "<" in choice["reason"] and "direct floor" in choice["reason"]
        # F(4,3) does 4× fewer multiplications on these shapes: its compute floor is about 4× lower
        direct = next(f for f in floors if f["algorithm"] == "direct")
        assert floors[0]["flops"] < 0.5 * direct["flops"]


def test_family_floor_is_its_best_variant() -> None:
    problem = ConvProblem.parse("N=32 C=128 H=28 W=28 K=128 R=3 S=3 pad=1")
    by_family = {s.family: floor_time_s(problem, H200, s) for s in specs_for(problem)}
    assert by_family["winograd"] == by_family["winograd_unfused"] < by_family["direct"]
    choice = family_choice(problem, H200)
    assert choice["floors"][0]["floor_ms"] == pytest.approx(by_family["winograd"] * 1e3)
