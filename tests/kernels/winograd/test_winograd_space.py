"""The fused Winograd kernel's configuration space."""

from __future__ import annotations

from convtune.kernels.winograd.space import enumerate_plans, grid_size, plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")


def test_space_holds_both_tile_sizes_and_only_valid_plans() -> None:
    problem = ConvProblem.parse("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1")
    plans = list(enumerate_plans(problem, H200))
    assert {pl.config.m for pl in plans} == {2, 4}
    assert 0 < len(plans) < grid_size(problem)
    assert len({pl.config for pl in plans}) == len(plans)
    for pl in plans[::25]:
        assert plan(problem, pl.config, H200) == pl
        assert pl.smem_bytes <= H200.smem_per_block_bytes


def test_space_is_empty_where_winograd_does_not_apply() -> None:
    for key in ("N=1 C=8 H=9 W=9 K=8 R=3 S=3 stride=2 pad=1", "N=1 C=8 H=9 W=9 K=8 R=1 S=1"):
        assert list(enumerate_plans(ConvProblem.parse(key), H200)) == []


def test_small_problems_get_small_blocks() -> None:
    problem = ConvProblem.parse("N=1 C=3 H=4 W=4 K=5 R=3 S=3 pad=1")  # 4 tiles of F(2), 1 of F(4); K=5
    plans = list(enumerate_plans(problem, H200))
    assert plans and all(pl.config.tile_n == 16 and pl.config.tile_k <= 8 for pl in plans)
