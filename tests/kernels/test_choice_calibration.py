"""The cross-family calibration of the untuned choice (:meth:`KernelSpec.choice_s`): strict float32 problems compare
calibrated predictions, other classes the shipped ones; each family's own ranking is unchanged; and on shapes of the
H200 wide suite the choice follows the measured winner (benchmarks/results/igemm_simt_h200/family_choice)."""

from __future__ import annotations

import pytest

from convtune.kernels.registry import get_spec, model_fastest, specs_for
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
STEM = ConvProblem.parse("N=16 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3")


def test_strict_problems_compare_calibrated_predictions_other_classes_the_shipped_ones() -> None:
    simt = get_spec("igemm_simt")
    pl = next(iter(simt.enumerate_plans(STEM, H200)))
    assert simt.choice_s(pl, H200) == pytest.approx(simt.choice_scale * simt.predict_s(pl, H200)
                                                    + simt.choice_offset_s)
    assert (simt.choice_scale, simt.choice_offset_s) != (1.0, 0.0)
    tf32 = STEM.replace(math="tf32")
    pl32 = next(iter(simt.enumerate_plans(tf32, H200)))
    assert simt.choice_s(pl32, H200) == simt.predict_s(pl32, H200)
    for family in ("direct", "pointwise", "winograd", "winograd_unfused"):   # the reference and the fixed ones
        spec = get_spec(family)
        assert (spec.choice_scale, spec.choice_offset_s) == (1.0, 0.0), family


def test_a_familys_own_ranking_is_unchanged() -> None:
    simt = get_spec("igemm_simt")
    plans = list(simt.enumerate_plans(STEM, H200))
    by_model = sorted(plans, key=lambda pl: (simt.predict_s(pl, H200), pl.config.key()))
    by_choice = sorted(plans, key=lambda pl: (simt.choice_s(pl, H200), pl.config.key()))
    assert [pl.config for pl in by_model] == [pl.config for pl in by_choice]


@pytest.mark.parametrize(("text", "family"), [
    (STEM.key(), "igemm_simt"),                                          # measured 0.123 ms vs direct's 0.263
    ("N=64 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3", "igemm_simt"),   # 0.468 vs 1.042
    ("N=16 C=3 H=224 W=224 K=64 R=11 S=11 stride=4 pad=2", "igemm_simt"),  # 0.081 vs 0.245
    ("N=16 C=16 H=14 W=14 K=48 R=5 S=5 pad=2", "direct"),                   # 0.012 vs 0.020
])
def test_the_untuned_choice_follows_the_measured_winner(text: str, family: str) -> None:
    problem = ConvProblem.parse(text)
    best = model_fastest(problem, H200, specs_for(problem))
    assert best is not None and best[1].family == family


def test_the_answered_time_is_the_chosen_familys_own_model_time() -> None:
    """A calibrated time chooses; it is never answered (×0.5 could put it under the floor)."""
    best = model_fastest(STEM, H200, specs_for(STEM))
    assert best is not None
    spec = get_spec(best[1].family)
    assert best[0] == spec.predict_s(spec.plan(STEM, best[1], H200), H200)
