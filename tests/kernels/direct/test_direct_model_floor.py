"""The direct family's model floor (``direct_model_floor_s``) is below the model's time of every plan, so the untuned
choice may skip the family's space whenever another family's choice beats it (``model_fastest``)."""

from __future__ import annotations

import pytest

from convtune.kernels.direct import direct_model_floor_s
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")


@pytest.mark.parametrize("spec", [
    "N=1 C=64 H=14 W=14 K=64 R=3 S=3 pad=1",
    "N=16 C=32 H=28 W=28 K=32 R=3 S=3 pad=1",                   # compute-bound
    "N=1 C=512 H=1 W=1 K=512 R=3 S=3 pad=1",                     # padding-dominated: taps meet padding only
    "N=1 C=64 H=6 W=6 K=64 R=3 S=3 pad=6 dilation=6",            # dilation ≥ the map
    "N=4 C=3 H=64 W=64 K=32 R=7 S=7 stride=2 pad=3",             # stem
    "N=2 C=16 H=9 W=9 K=24 R=1 S=1 stride=3",                    # stride > kernel extent
    "N=64 C=256 H=7 W=7 K=512 R=1 S=1",                          # memory-bound 1×1
    "N=1 C=35 H=13 W=17 K=50 R=5 S=3 pad=2 math=tf32",           # odd sizes, TF32 class (same direct model)
])
def test_every_plan_takes_at_least_the_floor(spec: str) -> None:
    problem = ConvProblem.parse(spec)
    direct = get_spec("direct")
    floor = direct_model_floor_s(problem, H200)
    times = [direct.predict_s(pl, H200) for pl in direct.enumerate_plans(problem, H200)]
    assert times and floor > 0
    assert min(times) >= floor, f"a plan at {min(times):.3e} s under the floor {floor:.3e} s"
