"""The untuned choice on the wide suite is the one measured: the shipped models (no database) still pick, on every
conv2d entry, the config timed through the op on the H200 (``tests/data/wide_untuned_choices_h200.json``, from
``benchmarks/results/winograd_large_h200/wide_untuned``). A model or family change that moves a choice fails here
until the suite is measured again with it (``USER_SUITE_ARGS="--suite benchmarks/suites/wide.json --no-compile"
bash benchmarks/gpu_check.sh user_suite``) and this table is regenerated from that run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convtune.machine import MachineModel
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem

TABLE = json.loads((Path(__file__).parents[1] / "data" / "wide_untuned_choices_h200.json").read_text())


@pytest.mark.parametrize("entry", TABLE["choices"], ids=lambda e: e["name"])
def test_the_models_choose_what_was_measured(entry: dict) -> None:
    problem = ConvProblem.parse(entry["problem"]) if isinstance(entry["problem"], str) else ConvProblem(
        **entry["problem"])
    assert model_choice(problem, MachineModel.preset("h200")).key() == entry["config"]
