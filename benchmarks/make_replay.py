"""Turn measurement JSON written on the GPU host into a replay table for the CPU tests.

Inputs are ``vs_cudnn.json`` (every candidate of each shape), ``space_sample.json`` (the sampled
direct space, see ``benchmarks/space_sample.py``) or ``winograd_sweep.json`` (every Winograd config of
the 3×3 stride-1 shapes). The numbers are copied, never edited. A report without measured ceilings
(the Winograd sweep) gets the H200 preset's, and says so in the table's ceilings source; a report
without kernel hashes gets those of the sources in this checkout (true only while they are unchanged
since the run: check ``git log`` of the .cu files). Rows of a family whose recorded kernel hash is not
this checkout's source hash are dropped (and counted on stdout): the table replays today's kernels only.
Later reports' rows win on a clash, so list the newest last.

    python benchmarks/make_replay.py benchmarks/results/vs_cudnn.json -o tests/data/replay_h200_vs_cudnn.json.gz
    python benchmarks/make_replay.py \
        benchmarks/results/igemm_wgmma_h200/six_families_h200/tf32_{public,wide}/vs_cudnn_tf32.json \
        -o tests/data/replay_h200_tf32.json.gz        # the TF32 class (the six TF32 families), its TF32 peak kept
    python benchmarks/make_replay.py \
        benchmarks/results/igemm_wgmma_h200/six_families_h200/half_{public,wide}/vs_cudnn_bf16.json \
        -o tests/data/replay_h200_bf16.json.gz        # the bfloat16 class (the six 16-bit families), its peak kept
    python benchmarks/make_replay.py \
        benchmarks/results/igemm_wgmma_h200/resident_1x1_tf32/v1/vs_cudnn_tf32.json \
        benchmarks/results/igemm_wgmma_h200/six_families_h100/tf32_{wide,public}/vs_cudnn_tf32.json \
        benchmarks/results/igemm_wgmma_h200/tma_1x1_tf32_h100/conv1x1_tf32/vs_cudnn_tf32.json \
        -o tests/data/replay_h100_tf32.json.gz        # the same on the H100 (and its conv1x1 runs); bf16 likewise
                                                      # (gpu_check.sh tma_1x1_calls lists the bf16 table's reports)
    (--stale REPORT=family.fwd drops a family's rows from a report measured before kernel hashes were recorded)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
from pathlib import Path

from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.tuner.benchmark import DeviceInfo, ReplayTable

FIELDS = ("status", "median_ms", "p10_ms", "p90_ms", "min_ms", "reps", "rel_error", "num_regs", "local_bytes",
          "smem_bytes", "error")


def table_from_report(report: dict, source: str, stale: frozenset[str] = frozenset()) -> ReplayTable:
    """The rows of one report; ``stale`` kinds (``family.fwd``) were measured with another version of their source
    than this checkout's (reports before kernel hashes were recorded) and are dropped like recorded mismatches."""
    preset = MachineModel.preset("h200")
    if "copy_tbps" in report:
        machine = preset.with_ceilings(report["copy_tbps"] * 1e12, report["sgemm_tflops"] * 1e12,
                                       f"measured in the run of {source}")
    else:
        machine = preset.with_ceilings(preset.copy_bandwidth_bytes_per_s, preset.fp32_peak_flops_per_s,
                                       f"H200 preset ceilings ({source} did not measure them)")
    if report.get("math") == "tf32" and report.get("class_peak_tflops"):   # the TF32 GEMM peak of the same run
        machine = dataclasses.replace(machine, tf32_peak_flops_per_s=report["class_peak_tflops"] * 1e12)
    if report.get("dtype", "float32") != "float32" and report.get("class_peak_tflops"):   # the 16-bit GEMM peak
        machine = dataclasses.replace(machine, bf16_peak_flops_per_s=report["class_peak_tflops"] * 1e12)
    device = DeviceInfo(report["device"], report.get("compute_capability", "9.0"), machine.sm_count,
                        report.get("driver_version"), report.get("cuda_version"), machine)
    kinds = {c["config"].split()[0] for r in report["results"] for c in r["candidates"]}
    sha = report.get("kernel_sha256") or {kind: get_spec(*kind.split(".")).source_sha256() for kind in sorted(kinds)}
    stale = set(stale) | {kind for kind, digest in sha.items() if digest != get_spec(*kind.split(".")).source_sha256()}
    for kind in sorted(stale):   # a replay table holds only rows of the sources in this checkout
        dropped = sum(c["config"].split()[0] == kind for r in report["results"] for c in r["candidates"])
        print(f"{source}: {dropped} rows of {kind} dropped (measured with another version than this checkout's "
              f"{get_spec(*kind.split('.')).source_sha256()[:12]})")
    table = ReplayTable(device, {k: v for k, v in sha.items() if k not in stale}, {}, f"{source} ({report['date']})")
    for result in report["results"]:
        rows = table.problems.setdefault(result["problem"], {})
        for cand in result["candidates"]:
            if cand["config"].split()[0] in stale:
                continue
            row = {k: cand[k] for k in FIELDS if k in cand and cand[k] is not None}
            if "sets" in cand or "rotation_sets" in cand:
                row["rotation_sets"] = cand.get("rotation_sets", cand.get("sets"))
            if cand.get("nvcc_s") is not None:  # space_sample.json: the config's own nvcc seconds
                row["compile_s"] = cand["nvcc_s"]
            rows[cand["config"]] = row
    return table


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("-o", "--out", type=Path, required=True)
    ap.add_argument("--stale", action="append", default=[], metavar="REPORT=KIND",
                    help="drop KIND's rows (e.g. igemm_half.fwd) from REPORT: measured before its source changed")
    args = ap.parse_args()
    stale: dict[Path, set[str]] = {}
    for item in args.stale:
        path, _, kind = item.rpartition("=")
        stale.setdefault(Path(path).resolve(), set()).add(kind)
    table = None
    for path in args.reports:
        part = table_from_report(json.loads(path.read_text()), path.name,
                                 frozenset(stale.get(path.resolve(), set())))
        if table is None:
            table = part
        else:
            table.merge(part)
            table.source += f"; {part.source}"
    assert table is not None
    table.save(args.out)
    print(f"{args.out}: {sum(len(v) for v in table.problems.values())} rows, {len(table.problems)} problems")


if __name__ == "__main__":
    main()
