"""Winograd F(m×m,3×3) configurations vs cuDNN on the GPU, per 3×3 stride-1 conv2d entry of a suite file.

For each shape: a seeded uniform sample of ``--per-shape`` valid configurations per Winograd path (fused
kernel and unfused path, both m), pre-compiled with nvcc in parallel (a cubin depends on the config only,
so shapes share them). Each is verified once against the float64 GPU reference (output poisoned with NaN
first; the family's serving tolerance, ``launcher.tolerance``) and timed with the shared protocol
(rotating buffer sets > 2× L2, median of
CUDA-event timings). cuDNN fp32 (``allow_tf32=False``, ``cudnn.benchmark=True``) is timed in the same
run on the same inputs.

Writes ``winograd_sweep.json`` (every candidate measured) and ``winograd_sweep.md`` under ``--out``.

    python benchmarks/winograd_sweep.py --out benchmarks/results --per-shape 120
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import random
import sys
import time
from pathlib import Path

import cupy as cp

from convtune.cli.bounds import load_suite
from convtune.errors import CompileError
from convtune.kernels.compile import precompile
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd.launcher import applies
from convtune.ops.conv2d import device_machine
from convtune.problem import ConvProblem

FAMILIES = ("winograd", "winograd_unfused")
sys.path.insert(0, str(Path(__file__).resolve().parent))
from vs_cudnn import Operands, measure_candidates, time_cudnn  # noqa: E402


def suite_problems(path: str, only: list[str] | None) -> list[tuple[str, ConvProblem]]:
    """(name, problem) of every conv2d entry the Winograd family can run."""
    return [(name, p) for family, name, p in load_suite(path)
            if family == "conv2d" and (not only or name in only) and applies(p) is None]


def sample_plans(problem: ConvProblem, machine, k: int, seed: int) -> tuple[list, int]:
    """Up to ``k`` plans per Winograd path (seeded uniform sample), and the size of both spaces together."""
    rng = random.Random(seed)
    chosen, space = [], 0
    for family in FAMILIES:
        plans = list(get_spec(family).enumerate_plans(problem, machine))
        space += len(plans)
        chosen += plans if len(plans) <= k else rng.sample(plans, k)
    return chosen, space


def bench_shape(name: str, problem: ConvProblem, plans: list, machine, reps: int) -> dict:
    p = problem
    ops = Operands(p, machine, seed=11)
    rows = measure_candidates(plans, ops, reps, warmup=2, describe=lambda pl: {
        "m": pl.config.m, "threads": pl.config.threads, "regs_estimate": pl.regs_estimate})
    cudnn_ms = time_cudnn(ops.xs, ops.ws, p, "fp32", ops.flush)
    ok = sorted((r for r in rows if r["status"] == "ok"), key=lambda r: r["median_ms"])
    best = ok[0] if ok else None
    return {"name": name, "problem": p.key(), "sampled": len(plans), "verified": len(ok),
            "cudnn_fp32_ms": cudnn_ms, "best": best,
            "speedup_vs_cudnn_fp32": cudnn_ms / best["median_ms"] if best else None, "candidates": rows}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/public.json")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--per-shape", type=int, default=2000, help="configs per path and shape (default: all)")
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--seed", type=int, default=3)
    args = ap.parse_args()
    machine = device_machine(0)
    shapes = suite_problems(args.suite, args.only)
    sampled = {}
    for name, p in shapes:
        sampled[name] = sample_plans(p, machine, args.per_shape, args.seed)
    t0 = time.time()
    texts = sorted({pl.source() for plans, _ in sampled.values() for pl in plans})
    if os.environ.get("CONVTUNE_CUBIN_DIR"):
        results = precompile(texts, machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]), jobs=os.cpu_count() or 8)
        failed = sum(isinstance(r, CompileError) for r in results.values())
        print(f"nvcc: {len(texts)} sources in {time.time() - t0:.1f} s ({failed} failed)", flush=True)
    report = {"device": cp.cuda.runtime.getDeviceProperties(0)["name"].decode(),
              "date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
              "kernel_sha256": {f"{f}.fwd": get_spec(f).source_sha256() for f in FAMILIES}, "results": []}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    lines = ["| shape | space | verified | best config | ms | cuDNN fp32 ms | speedup | best fused ms |"
             " best unfused ms |",
             "|---|---|---|---|---|---|---|---|---|"]
    for name, p in shapes:
        plans, space = sampled[name]
        t1 = time.time()
        r = bench_shape(name, p, plans, machine, args.reps)
        r["space_size"] = space
        report["results"].append(r)
        by_path = {f: min((c["median_ms"] for c in r["candidates"] if c["status"] == "ok" and c["family"] == f),
                          default=float("nan")) for f in FAMILIES}
        b = r["best"]
        line = (f"| {name} | {space} | {r['verified']}/{r['sampled']} | `{b['config'] if b else '-'}` |"
                f" {b['median_ms'] if b else float('nan'):.4f} | {r['cudnn_fp32_ms']:.4f} |"
                f" {r['speedup_vs_cudnn_fp32'] or float('nan'):.2f} | {by_path['winograd']:.4f} |"
                f" {by_path['winograd_unfused']:.4f} |")
        lines.append(line)
        print(line, f"({time.time() - t1:.0f} s)", flush=True)
        (out / "winograd_sweep.json").write_text(json.dumps(report, indent=1))
    (out / "winograd_sweep.md").write_text(f"# Fused Winograd sweep — {report['device']}, {report['date']}\n\n"
                                           + "\n".join(lines) + "\n")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
