"""Cold-L2 vs hot-L2 timing of the same configs: does the tuner's protocol rank them as the op's calls do?

The tuner times every launch with its operands out of L2 (rotating sets past 2× L2, or a flush:
``convtune.kernels.timing``); a network's call, and the op benchmarks' back-to-back calls, often find their input in
L2 (a 22 MB layer on a 50 MB L2). Where the two protocols rank configs differently the tuner stores a config that
loses through the op (issue 18: yolov3_head_52_b8 bf16 on the H200, tuned 0.68× against untuned 0.89×).

For each entry: the model's top ``--top`` configs of each family (as ``vs_cudnn.py`` picks them), verified against
float64, then timed cold (the tuner's protocol) and hot (one buffer set, no flush, back to back); cuDNN in the class
both ways on the same inputs. Prints one table per entry (µs, rank under each protocol); JSON under ``--out``.

    python3 benchmarks/protocol_ab.py --dtype bfloat16 --only yolov3_head_52_b8 --suite benchmarks/suites/wide.json \
        --families igemm_wgmma_half_1x1_resident igemm_wgmma_half_1x1_tma --out /tmp/protocol
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Callable
from pathlib import Path

import cupy as cp
import torch
from vs_cudnn import BASELINES, Operands, candidates, measure_candidates, time_cudnn

from convtune.kernels.compile import precompile
from convtune.kernels.registry import get_spec
from convtune.kernels.timing import time_launches
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def hot_ms(rows: list[dict], plans: list, ops: Operands, reps: int) -> None:
    """Adds ``hot_ms`` to every verified row: buffer set 0 only, no flush (its operands stay in L2)."""
    by_key = {pl.config.key(): pl for pl in plans}
    for row in rows:
        if row.get("status") != "ok":
            continue
        pl = by_key[row["config"]]
        la = get_spec(pl.config.family).launcher
        kernel, f = la.compile_plan(pl), ops.filters(pl, la)
        t = time_launches(lambda _i, pl=pl, k=kernel, la=la, f=f: la.launch(pl, k, ops.xs[0], f[0], ops.ys[0]),
                          sets=1, warmup=5, reps=reps)
        row["hot_ms"] = t.median_ms


def table(name: str, rows: list[dict], cudnn: dict[str, float]) -> str:
    ok = [r for r in rows if r.get("status") == "ok" and "hot_ms" in r]
    hot_rank = {r["config"]: i + 1 for i, r in enumerate(sorted(ok, key=lambda r: r["hot_ms"]))}
    lines = [f"### {name}", "", f"cuDNN: cold {1e3 * cudnn['cold_ms']:.1f} µs, hot {1e3 * cudnn['hot_ms']:.1f} µs", "",
             "| rank cold | rank hot | config | cold µs | hot µs | hot / cold |", "|---|---|---|---|---|---|"]
    for i, r in enumerate(sorted(ok, key=lambda r: r["median_ms"])):
        lines.append(f"| {i + 1} | {hot_rank[r['config']]} | `{r['config']}` | {1e3 * r['median_ms']:.1f} | "
                     f"{1e3 * r['hot_ms']:.1f} | {r['hot_ms'] / r['median_ms']:.2f} |")
    return "\n".join(lines) + "\n"


def time_entry(name: str, problem: ConvProblem, plans: list, machine: MachineModel, reps: int,
               describe: Callable[[object], dict] = lambda pl: {}) -> dict:
    """Compile ``plans``, verify each against float64 and time it cold and hot (:func:`hot_ms`), cuDNN in the class
    both ways on the same inputs: the entry's report row (``candidates``: one row per plan, ``describe``'s fields
    added)."""
    precompile([pl.source() for pl in plans], machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]),
               jobs=os.cpu_count() or 8)
    ops = Operands(problem, machine, seed=7)
    rows = measure_candidates(plans, ops, reps, warmup=3, describe=describe)
    hot_ms(rows, plans, ops, reps)
    mode = BASELINES[problem.precision]
    cudnn = {"cold_ms": time_cudnn(ops.xs32, ops.ws32, problem, mode, ops.flush),
             "hot_ms": time_cudnn(ops.xs32[:1], ops.ws32[:1], problem, mode)}
    return {"name": name, "problem": problem.key(), "rotation_sets": ops.sets, "flushed": ops.flush is not None,
            "cudnn": cudnn, "candidates": rows}


def report_header(machine: MachineModel, **fields: str) -> dict:
    """The versions every report of these A/B scripts starts with."""
    return {"device": machine.name, "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(),
            "cupy": cp.__version__, **fields, "results": []}


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/wide.json")
    ap.add_argument("--only", nargs="+", required=True, help="entry names")
    ap.add_argument("--families", nargs="+", required=True)
    ap.add_argument("--math", choices=("ieee", "tf32"), default="ieee")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32")
    ap.add_argument("--top", type=int, default=8)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default="/tmp/protocol_ab")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins")
    machine = MachineModel.from_device()
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if e["name"] in args.only]
    report = report_header(machine, math=args.math, dtype=args.dtype)
    md = [f"# Cold vs hot L2 timing, {machine.name}, {args.math} {args.dtype}", ""]
    for e in entries:
        problem = ConvProblem.from_mapping(e).replace(math=args.math, dtype=args.dtype)
        plans, _ = candidates(problem, machine, args.top, 0, tuple(args.families))
        result = time_entry(e["name"], problem, plans, machine, args.reps)
        report["results"].append(result)
        md.append(table(e["name"], result["candidates"], result["cudnn"]))
        (out / "protocol_ab.json").write_text(json.dumps(report, indent=1, default=str))
        (out / "protocol_ab.md").write_text("\n".join(md))
        print(md[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
