"""The untuned choice on the wide suite is the one measured: the shipped models (no database) still pick, on every
conv2d entry, the config timed through the op on a GPU (``tests/data/wide_untuned_choices_<preset>.json``, written by
``benchmarks/untuned_choices_table.py`` from an untuned ``user_suite.py`` run; each table names the machine preset of
its device; the ``_bf16`` and ``_tf32`` tables hold the tensor-core classes' choices, from the untuned column of
``benchmarks/class_tuned_round.sh`` runs). A model or family change that moves a choice fails here until the suite is
measured again with it (``USER_SUITE_ARGS="--suite benchmarks/suites/wide.json --no-compile" bash
benchmarks/gpu_check.sh user_suite``) and the table is regenerated from that run."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from convtune.machine import MachineModel
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem

TABLES = [json.loads(path.read_text())
          for path in sorted((Path(__file__).parents[1] / "data").glob("wide_untuned_choices_*.json"))]


def test_a_measured_table_covers_every_conv2d_entry_of_the_wide_suite() -> None:
    suite = json.loads((Path(__file__).parents[2] / "benchmarks" / "suites" / "wide.json").read_text())
    names = {entry["name"] for entry in suite["conv2d"]}
    assert any({e["name"] for e in table["choices"]} == names for table in TABLES)


@pytest.mark.parametrize(("table", "entry"), [(t, e) for t in TABLES for e in t["choices"]],
                         ids=[f"{t['preset']}-{e['name']}" for t in TABLES for e in t["choices"]])
def test_the_models_choose_what_was_measured(table: dict, entry: dict) -> None:
    problem = ConvProblem.parse(entry["problem"])
    assert model_choice(problem, MachineModel.preset(table["preset"])).key() == entry["config"]
