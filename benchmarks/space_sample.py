"""Measure a uniform sample of the whole (unpruned) direct configuration space on the GPU host.

The shapes must share their filter geometry (R, S, strides, dilations), so one compiled kernel serves
a configuration on every shape. The sample is drawn uniformly (seeded) from the configurations valid
for all the shapes; all are compiled with nvcc in parallel (their nvcc seconds recorded), then each
is verified and timed on each shape by the tuner's own benchmarker in a restartable subprocess.
Output (same layout as vs_cudnn.json, so make_replay.py turns it into a replay table):

    python benchmarks/space_sample.py --out benchmarks/results --configs 2000

Large shapes do not fit one device call: ``--budget-s`` stops measuring when that much time has passed (the
configurations are measured in a seeded shuffled order, so a cut shape still holds a uniform sample of the space) and
``--resume`` continues from the report in ``--out``, skipping every (shape, config) it already holds. The
out-of-sample shapes of issue 17's tuner-efficiency target (5×5, never in a model fit):

    python benchmarks/space_sample.py --suite benchmarks/suites/wide.json --shapes googlenet_inc3a_5x5_b16 \
        inception_v3_mixed5b_5x5_b8 alexnet_conv2_b64 --out OUT --budget-s 540 [--resume]

Device time is scarce and nvcc runs anywhere: ``--compile-only --machine h200`` draws the same sample from the preset's
model (no GPU) and fills ``$CONVTUNE_CUBIN_DIR`` with its cubins; carry that folder to the GPU host and point
``CONVTUNE_CUBIN_DIR`` at it there, and the measuring run loads them instead of compiling (its nvcc_s then reads 0).
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

from convtune.kernels.compile import CompileError, precompile, source_hash
from convtune.kernels.direct.space import enumerate_plans
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.trial_process import SubprocessBenchmarker

DEFAULT_SHAPES = ("vgg16_conv4_2_b1", "vgg16_conv5_2_b1", "resnet50_3x3_256_b32")


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/public.json")
    ap.add_argument("--shapes", nargs="*", default=list(DEFAULT_SHAPES))
    ap.add_argument("--configs", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=20261129)
    ap.add_argument("--reps", type=int, default=15)
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--budget-s", type=float, default=None, help="stop measuring after this many seconds in all")
    ap.add_argument("--resume", action="store_true", help="continue the report in --out")
    ap.add_argument("--compile-only", action="store_true",
                    help="draw the sample from --machine's preset and fill $CONVTUNE_CUBIN_DIR; no GPU needed")
    ap.add_argument("--machine", default="h200", help="preset for --compile-only")
    args = ap.parse_args()
    started = time.perf_counter()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins")
    entries = {e["name"]: e for e in json.loads(Path(args.suite).read_text())["conv2d"]}
    problems = {name: ConvProblem.from_mapping(entries[name]) for name in args.shapes}
    geometry = {(p.R, p.S, p.stride_h, p.stride_w, p.dil_h, p.dil_w) for p in problems.values()}
    if len(geometry) != 1:
        raise SystemExit(f"shapes must share their filter geometry, got {geometry}")

    if args.compile_only:
        bench, machine = None, MachineModel.preset(args.machine)
    else:
        bench = SubprocessBenchmarker(factory_kwargs={"reps": args.reps}, timeout_s=60)
        machine = bench.device().machine
    t0 = time.perf_counter()
    plans = {name: {pl.config.key(): pl for pl in enumerate_plans(p, machine)} for name, p in problems.items()}
    common = sorted(set.intersection(*(set(v) for v in plans.values())))
    sample = sorted(random.Random(args.seed).sample(common, min(args.configs, len(common))))
    print(f"space sizes {[len(v) for v in plans.values()]}, common {len(common)}, sample {len(sample)} "
          f"({time.perf_counter() - t0:.1f} s)", file=sys.stderr)

    first = next(iter(plans.values()))
    texts = {key: first[key].source() for key in sample}
    assert all(plans[n][k].source() == texts[k] for n in plans for k in sample[:50]), "kernels differ by shape"
    t1 = time.perf_counter()
    compiled = precompile(list(texts.values()), machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]),
                          jobs=os.cpu_count() or 8)
    nvcc_s = {k: (None if isinstance(compiled[source_hash(t)], CompileError) else compiled[source_hash(t)].compile_s)
              for k, t in texts.items()}
    print(f"compiled {len(texts)} kernels in {time.perf_counter() - t1:.1f} s", file=sys.stderr)
    if bench is None:
        failed = sum(s is None for s in nvcc_s.values())
        print(f"--compile-only: {len(texts) - failed} cubins in {os.environ['CONVTUNE_CUBIN_DIR']}, {failed} failed",
              file=sys.stderr)
        return 0

    report = {"device": machine.name, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "copy_tbps": machine.copy_bandwidth_bytes_per_s / 1e12,
              "sgemm_tflops": machine.fp32_peak_flops_per_s / 1e12,
              "driver_version": bench.device().driver_version, "cuda_version": bench.device().cuda_version,
              "kernel_sha256": {"direct.fwd": get_spec("direct").source_sha256()},
              "sample": {"seed": args.seed, "configs": len(sample), "common_space": len(common),
                         "space_sizes": {n: len(v) for n, v in plans.items()}, "reps": args.reps},
              "results": []}
    earlier = {}
    if args.resume and (out / "space_sample.json").exists():
        previous = json.loads((out / "space_sample.json").read_text())
        if previous["sample"]["seed"] != args.seed or previous["kernel_sha256"] != report["kernel_sha256"]:
            raise SystemExit("--resume: the report in --out has another seed or kernel version")
        earlier = {r["name"]: r["candidates"] for r in previous["results"]}
    order = random.Random(args.seed + 1).sample(sample, len(sample))   # measured in this order: any prefix is uniform
    for name, problem in problems.items():
        t2 = time.perf_counter()
        rows = list(earlier.get(name, []))
        report["results"].append({"name": name, "problem": problem.key(), "candidates": rows})
        done = {r["config"] for r in rows}
        for key in order:
            if key in done:
                continue
            if args.budget_s is not None and time.perf_counter() - started > args.budget_s:
                break
            r = bench.measure(problem, plans[name][key]).to_dict()
            r["config"] = key
            r["nvcc_s"] = nvcc_s[key]
            rows.append(r)
            if len(rows) % 100 == 0:
                (out / "space_sample.json").write_text(json.dumps(report, indent=0))
        (out / "space_sample.json").write_text(json.dumps(report, indent=0))
        ok = [r["median_ms"] for r in rows if r["status"] == "ok"]
        if ok:
            print(f"{name}: {len(ok)}/{len(rows)} ok of {len(sample)}, best {min(ok):.4f} ms, median "
                  f"{sorted(ok)[len(ok) // 2]:.4f} ms ({time.perf_counter() - t2:.1f} s)", file=sys.stderr)
    bench.close()
    return 0


if __name__ == "__main__":
    sys.exit(main())
