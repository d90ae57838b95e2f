"""``convtune machines``: the machine presets, their architecture and whether the kernels run on them.

A preset below sm_80 is *bounds-only*: ``convtune bounds --machine v100`` and ``--backend model`` work,
``convtune tune --backend gpu`` on such a device is refused (the kernels use ``cp.async``).
"""

from __future__ import annotations

import argparse
import json
import sys
from typing import Any

from convtune.machine import PRESETS


def add_machines_parser(sub: Any) -> None:
    p = sub.add_parser("machines", help="list the machine presets (architecture, ceilings, bounds-only mark)")
    p.add_argument("--json", action="store_true", help="print a JSON list")
    p.set_defaults(func=cmd_machines)


def machine_rows() -> list[dict[str, Any]]:
    """One dict per preset: name, GPU, arch, SMs, ceilings (bytes/s, flop/s), ``kernels`` and ``bounds_only``."""
    return [{"preset": key, "name": m.name, "arch": m.arch, "sm_count": m.sm_count,
             "copy_bandwidth_bytes_per_s": m.copy_bandwidth_bytes_per_s,
             "fp32_peak_flops_per_s": m.fp32_peak_flops_per_s, "ceilings_source": m.ceilings_source,
             "kernels": m.runs_kernels, "bounds_only": not m.runs_kernels} for key, m in PRESETS.items()]


def _out(line: str) -> None:
    sys.stdout.write(line + "\n")


def cmd_machines(args: argparse.Namespace) -> int:
    rows = machine_rows()
    if args.json:
        _out(json.dumps(rows, indent=1))
        return 0
    _out(f"{'preset':<7} {'GPU':<12} {'arch':<6} {'SMs':>4} {'copy TB/s':>9} {'fp32 TFLOP/s':>12}  use")
    for r in rows:
        use = "tune, bounds, model" if r["kernels"] else "BOUNDS ONLY (no cp.async below sm_80): bounds, model"
        _out(f"{r['preset']:<7} {r['name']:<12} {r['arch']:<6} {r['sm_count']:>4} "
             f"{r['copy_bandwidth_bytes_per_s'] / 1e12:>9.2f} {r['fp32_peak_flops_per_s'] / 1e12:>12.1f}  {use}")
    return 0
