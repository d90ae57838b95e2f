"""benchmarks/split_atomics_fit.py's ``fit_report`` (shared by fold_rows_fit.py) on a small slice of the committed
tables: one row per factor value with regrets ≥ 1, the held-out line, and the shipped value restored after."""

from __future__ import annotations

import re

import pytest

from convtune.kernels.igemm import model as igemm_model
from convtune.kernels.igemm_wgmma import model as wgmma_model
from tests.benchmark_scripts import ROOT, load_benchmark


def test_fit_report_scores_each_value_and_restores_the_shipped_one(capsys: pytest.CaptureFixture[str],
                                                                   monkeypatch: pytest.MonkeyPatch) -> None:
    load_benchmark("family_choice_calibration")
    fit = load_benchmark("wgmma_model_fit")
    atomics = load_benchmark("split_atomics_fit")
    fold_rows = load_benchmark("fold_rows_fit")
    monkeypatch.chdir(ROOT)
    monkeypatch.setattr(fit, "TABLES", fit.TABLES)     # fit_report sets it: restored after the test
    monkeypatch.setattr(atomics, "TABLES", (("tests/data/replay_h100_bf16.json.gz", ("igemm_wgmma_half_n96",)),))
    monkeypatch.setattr(atomics, "REPORTS", {"H100 bf16": ("h100", ["n96_h100/n96_bfloat16/vs_cudnn_bf16.json"])})
    shipped, atomics_factor = wgmma_model.FOLD_ROW_COPY_FACTOR, igemm_model.SPLIT_ATOMICS_FACTOR

    atomics.fit_report("title", "command", (1.0, 4.0), shipped, fold_rows.set_factor)

    assert (shipped, atomics_factor) == (wgmma_model.FOLD_ROW_COPY_FACTOR, igemm_model.SPLIT_ATOMICS_FACTOR)
    out = capsys.readouterr().out
    rows = {m[0]: [float(v) for v in re.findall(r"\d+\.\d+", m[1])]
            for m in re.findall(r"^\| (1|4) \| (.*)$", out, flags=re.M)}
    assert set(rows) == {"1", "4"}
    assert all(len(values) == 4 and min(values) >= 1.0 for values in rows.values())   # two regrets, two maxima
    # [model-first regret, its max, untuned choice regret, its max]: pricing the folded rows moves the bf16 n96
    # choice off ZFNet conv1 b16's slow folded config (regret 2.10 at factor 1)
    assert rows["4"][2] < rows["1"][2] and rows["4"][3] < rows["1"][3]
    assert re.search(r"^\d+ \(family, shape\) units; shipped factor", out, flags=re.M)
    assert float(re.search(r"model-first regret (\d+\.\d+)", out)[1]) >= 1.0
