"""benchmarks/untuned_choices_table.py --update: an untuned run of a few entries replaces the table's rows of those
entries, and is refused when it is of another preset or class, names entries the table lacks, or leaves a choice the
models moved unmeasured."""

from __future__ import annotations

import json

import pytest
from benchmark_scripts import ROOT, load_benchmark

from convtune.machine import MachineModel
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem

tables = load_benchmark("untuned_choices_table")
H100_TF32 = json.loads((ROOT / "tests" / "data" / "wide_untuned_choices_h100_tf32.json").read_text())


def _run(rows: list[dict], cls: str = "tf32", device: str = "NVIDIA H100 80GB HBM3") -> dict:
    """An untuned ``--untuned-too`` run of ``rows`` (name, problem): each measured at the shipped models' choice."""
    machine = MachineModel.preset("h100")
    return {"meta": {"class": cls, "device": device, "date": "2026-12-07T13:00:00", "suite": "n96.json",
                     "untuned_too": True},
            "rows": [{"name": r["name"], "problem": r["problem"], "untuned_config_source": "model",
                      "untuned_config": model_choice(ConvProblem.parse(r["problem"]), machine).key(),
                      "speedup_untuned_kernel": 1.25} for r in rows]}


def test_the_runs_rows_replace_the_tables_and_the_rest_stay() -> None:
    rows = H100_TF32["choices"][:2] + tables.moved_rows(H100_TF32)
    new = tables.update(H100_TF32, _run(rows), "somewhere")
    assert [r["name"] for r in new["choices"]] == [r["name"] for r in H100_TF32["choices"]]
    replaced = {r["name"] for r in rows}
    for old, row in zip(H100_TF32["choices"], new["choices"], strict=True):
        assert (row["speedup_kernel"] == 1.25) == (old["name"] in replaced)
        assert row == old or old["name"] in replaced
    assert not tables.moved_rows(new) and new["about"].startswith(H100_TF32["about"]) and "somewhere" in new["about"]


def test_superseded_rows_the_run_measured_come_back() -> None:
    """The rows moved aside until re-measured (``superseded``) return to ``choices`` with the run's figures."""
    aside, kept = H100_TF32["choices"][:4], H100_TF32["choices"][4:]
    old = {**H100_TF32, "choices": kept,
           "superseded": {"entries": [r["name"] for r in aside], "why": "a model change", "rows": aside}}
    new = tables.update(old, _run(aside[:3]), "somewhere")
    assert [r["name"] for r in new["choices"]] == [r["name"] for r in kept + aside[:3]]
    assert [r["name"] for r in new["superseded"]["rows"]] == new["superseded"]["entries"] == [aside[3]["name"]]
    assert "superseded" not in tables.update(old, _run(aside), "somewhere")


def test_a_run_that_leaves_a_moved_choice_unmeasured_is_refused() -> None:
    old = {**H100_TF32, "choices": [{**H100_TF32["choices"][0], "config": "igemm.fwd tile_m=64"},
                                    *H100_TF32["choices"][1:]]}
    with pytest.raises(SystemExit, match="did not measure: " + old["choices"][0]["name"]):
        tables.update(old, _run(old["choices"][1:2]), "somewhere")


@pytest.mark.parametrize(("cls", "device", "message"), [("bfloat16", "NVIDIA H100 80GB HBM3", "cuDNN bf16"),
                                                        ("tf32", "NVIDIA H200", "h200")])
def test_a_run_of_another_class_or_preset_is_refused(cls: str, device: str, message: str) -> None:
    with pytest.raises(SystemExit, match=message):
        tables.update(H100_TF32, _run(H100_TF32["choices"][:1], cls, device), "somewhere")


def test_a_run_of_entries_the_table_lacks_is_refused() -> None:
    stray = {**H100_TF32["choices"][0], "name": "not_in_the_suite"}
    with pytest.raises(SystemExit, match="not_in_the_suite"):
        tables.update(H100_TF32, _run([stray]), "somewhere")


def test_entries_the_table_lacks_are_left_out_when_asked() -> None:
    """``--skip-extra``: a run of a suite that also holds other suites' entries updates the table's own rows only."""
    stray = {**H100_TF32["choices"][0], "name": "not_in_the_suite"}
    new = tables.update(H100_TF32, _run([stray, H100_TF32["choices"][1]]), "somewhere", skip_extra=True)
    assert [r["name"] for r in new["choices"]] == [r["name"] for r in H100_TF32["choices"]]
    assert new["choices"][1]["speedup_kernel"] == 1.25 and new["choices"][0] == H100_TF32["choices"][0]
    assert "not_in_the_suite" not in new["about"]
