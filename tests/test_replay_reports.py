"""benchmarks/replay_reports.sh: every report its lists name is committed (tma_1x1_round.sh and gpu_check.sh make the
cards' replay tables from them)."""

from __future__ import annotations

import subprocess

from benchmark_scripts import ROOT

#: list -> reports it names
LISTS = {"H100_BF16_REPORTS": 3, "H100_TF32_REPORTS": 3, "H100_TMA_1X1_BF16": 1, "H100_TMA_1X1_TF32": 1,
         "H200_BF16_REPORTS": 3, "H200_TF32_REPORTS": 3}


def test_every_listed_report_is_committed() -> None:
    # unquoted: each list's paths on one line, whatever its line breaks
    script = ". benchmarks/replay_reports.sh && " + " && ".join(f"echo {name} ${name}" for name in LISTS)
    out = subprocess.run(["bash", "-c", script], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    lists = {line.split()[0]: line.split()[1:] for line in out.splitlines()}
    assert {name: len(paths) for name, paths in lists.items()} == LISTS
    for name, paths in lists.items():
        for path in paths:
            assert (ROOT / path).is_file() and path.endswith(".json"), f"{name}: {path}"
