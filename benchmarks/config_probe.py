"""Time chosen configs of one problem against cuDNN in its class, the search space's rules bypassed (GPU host).

An experiment tool: a config outside its family's space (say ``stages=3`` where the space allows 4 and 6) is derived
straight by the family's ``derive_plan`` with the machine's limits, so "would this value pay?" is answered before
the space changes. Each config is verified against float64 on a NaN-poisoned output and timed with the shared
protocol (:func:`vs_cudnn.measure_candidates`: rotating buffer sets, L2 flush), cuDNN in the problem's class through
torch on the same inputs; one table row per config with the plan's blocks, shared memory, blocks per SM and grid.

    python benchmarks/config_probe.py --problem "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16" \
        --configs "igemm_wgmma_half_1x1_resident.fwd tile_n=64 m_blocks=1 warpgroups=2 stages=3 splits=1"
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import os

from vs_cudnn import BASELINES, Operands, measure_candidates, time_cudnn

from convtune.errors import InvalidConfig
from convtune.kernels.compile import precompile
from convtune.kernels.config import parse_config_key
from convtune.kernels.launch_geometry import resident_blocks
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def derive_unchecked(problem: ConvProblem, key: str, machine: MachineModel):
    """The family's plan for config ``key`` without the space's value rules (the machine's limits still hold)."""
    config = parse_config_key(key)
    spec = get_spec(config.family)
    derive = getattr(spec.launcher, "derive_plan", None)
    return derive(problem, config, machine) if derive is not None else spec.plan(problem, config, machine)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True, help="a ConvProblem key")
    ap.add_argument("--configs", nargs="+", required=True, help="config keys")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default=None, help="write the rows as JSON here")
    args = ap.parse_args()
    problem = ConvProblem.parse(args.problem)
    machine = MachineModel.from_device()
    plans, rows = [], []
    for key in args.configs:
        try:
            plans.append(derive_unchecked(problem, key, machine))
        except InvalidConfig as exc:
            rows.append({"config": key, "status": f"invalid: {exc}"})
    precompile([pl.source() for pl in plans if hasattr(pl, "source")], machine.arch,
               Path(os.environ.get("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins")), jobs=16)
    ops = Operands(problem, machine, seed=11)
    measured = measure_candidates(plans, ops, args.reps, warmup=3)
    for pl, row in zip(plans, measured, strict=True):
        regs = row.get("regs") or pl.regs_estimate   # a row that failed to compile reports no registers
        row["blocks_per_sm"] = resident_blocks(pl.config.threads, pl.smem_bytes, regs, machine)
        row["grid"] = list(getattr(pl, "grid", ()))
    rows += measured
    baseline = BASELINES.get(problem.precision, "fp32")
    cudnn_ms = time_cudnn(ops.xs32, ops.ws32, problem, baseline, ops.flush)
    print(f"{problem.key()}  cuDNN {baseline}: {cudnn_ms * 1e3:.1f} µs")
    print("| config | status | µs | × cuDNN | smem B | blocks/SM | grid | regs |")
    print("|---|---|---|---|---|---|---|---|")
    for r in rows:
        ms = r.get("median_ms")
        print(f"| {r['config']} | {r['status']} | {ms * 1e3:.1f} | {cudnn_ms / ms:.3f} |" if ms else
              f"| {r['config']} | {r['status']} | | |", end="")
        print(f" {r.get('smem_bytes', '')} | {r.get('blocks_per_sm', '')} | {r.get('grid', '')} | {r.get('regs', '')} |"
              if ms else " | | | |")
    if args.out:
        Path(args.out).write_text(json.dumps({"problem": problem.key(), "cudnn_ms": cudnn_ms, "baseline": baseline,
                                              "rows": rows}, indent=1, default=str))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
