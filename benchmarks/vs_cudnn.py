"""convtune's kernel families vs cuDNN on the GPU, per conv2d entry of a suite file (runs on the GPU host).

For each shape and each family of ``--families`` that can run it (default: direct, winograd,
winograd_unfused): rank the family's valid configurations by its analytic model and take the top
``--top``; for direct and the tensor-core families also the model's best of each (tile area, tile_k, splits)
bucket (so a model
bias cannot hide a whole region). Pre-compile them all with nvcc in parallel, verify each once
against the float64 GPU reference (the family's tolerance: 1e-5 direct, 2e-5 / 1e-4 for Winograd
F(2) / F(4); output poisoned with NaN first), time each with the shared
protocol (:mod:`convtune.kernels.timing`: spin-then-events, median, rotating buffer sets larger than
2× L2), re-time the best three interleaved and pick the fastest (ties by config key). cuDNN is timed in
the same run through torch (``cudnn.benchmark=True``; fp32 with ``allow_tf32=False``, plus TF32 and
fp16 and bf16 columns) on the same rotating inputs.

``--math tf32`` runs the TF32 class: every problem with ``math="tf32"``, the tensor-core families (default
``--families igemm igemm_nhwc igemm_1x1``), the speedup against cuDNN TF32 (``allow_tf32=True``), the compute
ceiling the TF32 GEMM peak measured in this run (so floors and efficiencies use the class's ceiling), TFLOP/s as %
of that peak, and cuDNN TF32's own relative error against float64 on the same inputs next to ours.

Writes ``vs_cudnn.md`` (table) and ``vs_cudnn.json`` (every candidate measured) under ``--out`` (``vs_cudnn_tf32.*``
with ``--math tf32``).

    python benchmarks/vs_cudnn.py --suite benchmarks/suites/public.json --out benchmarks/results
    python benchmarks/vs_cudnn.py --math tf32 --top 16 --out benchmarks/results/igemm_h200
"""

from __future__ import annotations

import argparse
import dataclasses
import datetime as dt
import json
import math
import os
import statistics
import sys
import time
from collections.abc import Callable
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import cupy as cp
import torch

from convtune.bounds.direct import direct_lower_bound
from convtune.errors import CompileError, LaunchError
from convtune.kernels import storage_arrays as storage
from convtune.kernels.compile import precompile
from convtune.kernels.direct.space import ranked
from convtune.kernels.reference import conv2d_reference_gpu, relative_error
from convtune.kernels.registry import get_spec, specs_for
from convtune.kernels.timing import L2Flusher, rotation, time_launches
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.efficiency import compute_ceiling, family_choice, floor_time_s

FAMILIES = ("direct", "winograd", "winograd_unfused")
TF32_FAMILIES = ("igemm", "igemm_nhwc", "igemm_1x1")
HALF_FAMILIES = ("igemm_half", "igemm_half_1x1")
TENSOR_CORE_FAMILIES = (*TF32_FAMILIES, *HALF_FAMILIES)
#: Winograd families bucketed by (m, GEMM tile, chunk)
WINOGRAD_GEMM_FAMILIES = ("winograd_unfused_large", "winograd_unfused_1d", "winograd_unfused_3xtf32")
#: cuDNN column each precision class is compared with
BASELINES = {"float32": "fp32", "tf32": "tf32", "bfloat16": "bf16", "float16": "fp16"}


def measure_copy_bandwidth(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy: (bytes read + bytes written) / median time."""
    src = cp.empty(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    timing = time_launches(lambda _i: dst.__setitem__(Ellipsis, src), warmup=2, reps=10)
    return 2 * nbytes / (timing.median_ms * 1e-3)


def measure_fp32_peak(n: int = 8192, tf32: bool = False, dtype: str = "float32") -> float:
    """GEMM through torch: fp32 with TF32 off (the strict class) or on, or a 16-bit dtype: 2n³ / median time."""
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda").to(getattr(torch, dtype))
    b = torch.randn(n, n, device="cuda").to(getattr(torch, dtype))
    timing = time_launches(lambda _i: torch.mm(a, b), warmup=2, reps=10)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 / (timing.median_ms * 1e-3)


def candidates(problem: ConvProblem, machine: MachineModel, top: int, buckets: int,
               families: tuple[str, ...] = FAMILIES) -> tuple[list, int]:
    """The configurations to time (model top ``top`` per family + the bucket bests of direct, igemm_simt, the
    tensor-core families — the model's best per (tile area, tile_k or chunk_crs, splits) — and the unfused
    Winograd GEMM families of WINOGRAD_GEMM_FAMILIES — per (m, GEMM tile, chunk)) and the space size."""
    chosen, size = [], 0
    for spec in specs_for(problem, families):
        if spec.family == "direct":
            scored = ranked(problem, machine)
        else:
            scored = sorted(((spec.predict_s(pl, machine), pl) for pl in spec.enumerate_plans(problem, machine)),
                            key=lambda sp: (sp[0], sp[1].config.key()))
        size += len(scored)
        mine = [pl for _, pl in scored[:top]]
        seen = {pl.config for pl in mine}
        if spec.family in ("direct", "igemm_simt", *WINOGRAD_GEMM_FAMILIES, *TENSOR_CORE_FAMILIES):
            by_bucket: dict[tuple[int, int, int], object] = {}
            for _, pl in scored:
                c = pl.config
                if spec.family == "direct":
                    bucket = (c.tile_h * c.tile_w, c.tile_k, c.splits)
                elif spec.family in WINOGRAD_GEMM_FAMILIES:   # tile size and GEMM tile
                    bucket = (c.m, c.tile_k * c.tile_t, c.chunk_c)
                elif spec.family == "igemm_simt":   # its reduction chunk in place of a tensor-core tile_k
                    bucket = (c.tile_m * c.tile_n, c.chunk_crs, c.splits)
                else:
                    bucket = (c.tile_m * c.tile_n, c.tile_k, c.splits)
                by_bucket.setdefault(bucket, pl)
            for pl in list(by_bucket.values())[:buckets]:
                if pl.config not in seen:
                    mine.append(pl)
                    seen.add(pl.config)
        chosen += mine
    return chosen, size


def time_cudnn(xs: list, ws: list, problem: ConvProblem, mode: str, flush=None) -> float:
    """cuDNN through torch on the same rotating sets (x and w each) and the same L2 flush as our kernels."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = mode == "tf32"
    dtype = {"fp16": torch.float16, "bf16": torch.bfloat16}.get(mode, torch.float32)
    xt = [torch.from_dlpack(x).to(dtype) for x in xs]
    wt = [torch.from_dlpack(w).to(dtype) for w in ws]
    kwargs = {"stride": (problem.stride_h, problem.stride_w), "padding": (problem.pad_h, problem.pad_w),
              "dilation": (problem.dil_h, problem.dil_w)}
    for x in xt[:2]:
        torch.nn.functional.conv2d(x, wt[0], **kwargs)  # cudnn.benchmark picks its algorithm here
    torch.cuda.synchronize()
    timing = time_launches(lambda i: torch.nn.functional.conv2d(xt[i], wt[i], **kwargs), sets=len(xt), warmup=5,
                           reps=50, flush=flush)
    return timing.median_ms


class Operands:
    """Fresh normal inputs, filters and outputs in enough rotating sets to exceed 2× L2 (with an L2 flush before
    each timed launch where 16 sets do not reach it), the float64 GPU reference, and each plan's prepared filters
    of every set (shared by plans with equal ``filters_key``). A 16-bit problem's inputs are rounded to its dtype:
    ``xs``/``ws``/``ys`` hold them in storage (bfloat16 as uint16 bits), ``xs32``/``ws32`` their exact fp32 values
    (cuDNN's and the reference's inputs)."""

    def __init__(self, problem: ConvProblem, machine: MachineModel, seed: int) -> None:
        p = problem
        rng = cp.random.default_rng(seed)
        item = p.itemsize_bytes
        rot = rotation(item * (p.input_elements + p.output_elements + p.K * p.C * p.R * p.S), machine.l2_bytes)
        self.sets = rot.sets
        self.flush = L2Flusher(machine.l2_bytes) if rot.flush else None
        self.dtype = p.dtype
        self.xs = [storage.to_storage(rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32), p.dtype)
                   for _ in range(self.sets)]
        self.w = storage.to_storage(rng.standard_normal((p.K, p.C, p.R, p.S), dtype=cp.float32), p.dtype)
        self.ws = [self.w] + [self.w.copy() for _ in range(self.sets - 1)]
        self.xs32 = [storage.to_float32(x, p.dtype) for x in self.xs]
        self.w32 = storage.to_float32(self.w, p.dtype)
        self.ws32 = [self.w32] + [storage.to_float32(w, p.dtype) for w in self.ws[1:]]
        self.ys = [storage.empty((p.N, p.K, p.P, p.Q), p.dtype) for _ in range(self.sets)]
        self.ref = conv2d_reference_gpu(self.xs32[0], self.w32, stride=(p.stride_h, p.stride_w),
                                        padding=(p.pad_h, p.pad_w), dilation=(p.dil_h, p.dil_w))
        self._prepared: dict[tuple, object] = {}

    def poison(self, y: object) -> None:
        storage.poison(y, self.dtype)

    def as_float(self, y: object) -> object:
        """y in storage -> float32 values."""
        return storage.to_float32(y, self.dtype)

    def filters(self, pl: object, launcher: object) -> list:
        key = launcher.filters_key(pl)
        if key not in self._prepared:
            self._prepared[key] = [launcher.prepare_filters(pl, w) for w in self.ws]
        return self._prepared[key]


def measure_candidates(plans: list, ops: Operands, reps: int, warmup: int,
                       describe: Callable[[object], dict] = lambda pl: {}) -> list[dict]:
    """One row per plan: compile (a failure is a ``compile_error`` row), one launch on a NaN-poisoned
    output (a fault is a ``launch_error`` row), relative error against float64 (over the family's
    tolerance: ``wrong``), then the shared timing protocol (``ok`` with the timing)."""
    rows = []
    for pl in plans:
        launcher = get_spec(pl.config.family).launcher
        row = {"config": pl.config.key(), "family": pl.config.family, "smem_bytes": pl.smem_bytes,
               "blocks": pl.blocks, **describe(pl)}
        rows.append(row)
        try:
            kernel = launcher.compile_plan(pl)
        except CompileError as exc:
            row.update(status="compile_error", error=str(exc)[:300])
            continue
        row.update(regs=kernel.resources.num_regs, local_bytes=kernel.resources.local_bytes)
        f = ops.filters(pl, launcher)
        try:
            ops.poison(ops.ys[0])
            launcher.launch(pl, kernel, ops.xs[0], f[0], ops.ys[0])
            cp.cuda.get_current_stream().synchronize()
        except (LaunchError, cp.cuda.driver.CUDADriverError) as exc:
            row.update(status="launch_error", error=str(exc)[:300])
            continue
        err = relative_error(ops.as_float(ops.ys[0]), ops.ref)
        row["rel_error"] = err
        if not err <= launcher.tolerance(pl):
            row["status"] = "wrong"
            continue
        timing = time_launches(lambda i, pl=pl, kernel=kernel, la=launcher, f=f: la.launch(pl, kernel, ops.xs[i], f[i],
                                                                                           ops.ys[i]),
                               sets=ops.sets, warmup=warmup, reps=reps, flush=ops.flush)
        row.update(status="ok", **timing.to_dict())
    return rows


def bench_problem(name: str, problem: ConvProblem, machine: MachineModel, args: argparse.Namespace,
                  plans: list, space_size: int) -> dict:
    ops = Operands(problem, machine, seed=7)
    xs, ys, sets = ops.xs, ops.ys, ops.sets
    filters = ops.filters
    results = measure_candidates(plans, ops, args.reps, warmup=3)
    ok = sorted((r for r in results if r["status"] == "ok"), key=lambda r: (r["median_ms"], r["config"]))
    if not ok:
        return {"name": name, "problem": problem.key(), "error": "no configuration verified", "candidates": results}
    # Re-time the best three interleaved (A B C A B C ...) so clock drift hits them alike.
    finalists = [next(pl for pl in plans if pl.config.key() == r["config"]) for r in ok[:3]]
    launchers = [get_spec(pl.config.family).launcher for pl in finalists]
    kernels = [la.compile_plan(pl) for la, pl in zip(launchers, finalists, strict=True)]
    samples: dict[str, list[float]] = {pl.config.key(): [] for pl in finalists}
    for _round in range(args.final_rounds):
        for pl, kernel, la in zip(finalists, kernels, launchers, strict=True):
            f = filters(pl, la)
            t = time_launches(lambda i, pl=pl, kernel=kernel, la=la, f=f: la.launch(pl, kernel, xs[i], f[i], ys[i]),
                              sets=sets, warmup=1, reps=10, flush=ops.flush)
            samples[pl.config.key()].append(t.median_ms)
    final = sorted(((statistics.median(v), k) for k, v in samples.items()))
    best_ms, best_key = final[0]
    best_row = next(r for r in ok if r["config"] == best_key)
    cudnn = {mode: time_cudnn(ops.xs32, ops.ws32, problem, mode, ops.flush)
             for mode in ("fp32", "tf32", "fp16", "bf16")}
    baseline = BASELINES.get(problem.precision, "fp32")
    lb = direct_lower_bound(problem, machine.fast_memory_words("l2"))
    best_spec = get_spec(best_key.split()[0].split(".")[0])
    floor_s = floor_time_s(problem, machine, best_spec)   # the winning family's algorithm's floor
    family_best = {fam: min((r["median_ms"] for r in ok if r["family"] == fam), default=None)
                   for fam in dict.fromkeys(r["family"] for r in results)}
    best_s = best_ms * 1e-3
    return {
        "name": name, "problem": problem.key(), "space_size": space_size, "timed": len(plans),
        "verified": len(ok), "rotation_sets": sets,
        "best": {"config": best_key, "ms": best_ms, "tflops": problem.flops / best_s / 1e12,
                 "gbps": problem.compulsory_bytes / best_s / 1e9, "regs": best_row.get("regs"),
                 "rel_error": best_row["rel_error"]},
        "cudnn_ms": cudnn, "speedup_vs_cudnn_fp32": cudnn["fp32"] / best_ms, "baseline": baseline,
        "speedup_vs_baseline": cudnn[baseline] / best_ms, "cudnn_rel_error": cudnn_error(ops, problem),
        "pct_of_compute_ceiling": 100 * problem.flops / best_s / compute_ceiling(machine, problem.precision),
        "floor_ms": floor_s * 1e3, "efficiency": floor_s / best_s, "bound_bytes": lb.bytes,
        "bound_binding_term": lb.binding_term, "final_medians_ms": {k: v for v, k in final},
        "family_best_ms": family_best, "family_choice": family_choice(problem, machine),
        "candidates": results,
    }


def cudnn_error(ops: Operands, problem: ConvProblem) -> float:
    """cuDNN's relative error against float64 on set 0, in the problem's class (TF32 on for tf32 problems; 16-bit
    problems in their dtype, on the same rounded inputs)."""
    torch.backends.cudnn.allow_tf32 = problem.math == "tf32"
    dtype = getattr(torch, problem.dtype)
    y = torch.nn.functional.conv2d(torch.from_dlpack(ops.xs32[0]).to(dtype), torch.from_dlpack(ops.w32).to(dtype),
                                   stride=(problem.stride_h, problem.stride_w), padding=(problem.pad_h, problem.pad_w),
                                   dilation=(problem.dil_h, problem.dil_w))
    torch.cuda.synchronize()
    return relative_error(cp.from_dlpack(y.float().contiguous()), ops.ref)


def markdown(report: dict) -> str:
    lines = [f"# convtune kernels vs cuDNN — {report['device']}", "",
             f"Measured {report['date']} · torch {report['torch']} · cuDNN {report['cudnn']} · CuPy {report['cupy']}"
             f" · copy {report['copy_tbps']:.2f} TB/s"
             f" · SGEMM {report['sgemm_tflops']:.1f} TFLOP/s (measured in this run)",
             "",
             "Times are medians of CUDA-event timings over rotating input sets (> 2× L2). cuDNN fp32 has"
             " `allow_tf32=False`; speedup = cuDNN fp32 / ours. GB/s = compulsory bytes / time. Floor ="
             " the winning family's floor, max(FLOPs / SGEMM rate, DRAM lower bound / copy bandwidth);"
             " efficiency = floor / ours. Per-family columns: the best timed config of that family.", "",
             "| shape | best config | ms | TFLOP/s | cuDNN fp32 ms | speedup | GB/s | floor ms | efficiency |"
             " cuDNN TF32 ms | cuDNN fp16 ms | direct ms | fused Winograd ms | unfused Winograd ms |"
             " bound favours | timed / space |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    speedups, vgg = [], []
    for r in report["results"]:
        if "best" not in r:
            lines.append(f"| {r['name']} | {r.get('error')} | | | | | | | | | | | | | | |")
            continue
        b, c = r["best"], r["cudnn_ms"]
        cfg = b["config"].replace(".fwd ", " ").replace("tile_", "t").replace("thread_", "p")
        fam = {k: (f"{v:.4f}" if v is not None else "—") for k, v in r.get("family_best_ms", {}).items()}
        lines.append(f"| {r['name']} | `{cfg}` | {b['ms']:.4f} | {b['tflops']:.1f} | {c['fp32']:.4f} |"
                     f" {r['speedup_vs_cudnn_fp32']:.2f} | {b['gbps']:.0f} | {r['floor_ms']:.4f} |"
                     f" {r['efficiency']:.2f} | {c['tf32']:.4f} | {c['fp16']:.4f} | {fam.get('direct', '—')} |"
                     f" {fam.get('winograd', '—')} | {fam.get('winograd_unfused', '—')} |"
                     f" {r.get('family_choice', {}).get('favoured', '—')} | {r['timed']} / {r['space_size']} |")
        speedups.append(r["speedup_vs_cudnn_fp32"])
        if r["name"].startswith("vgg16_") and r["name"].endswith("_b1"):
            vgg.append(r["speedup_vs_cudnn_fp32"])
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        lines += ["", f"Geometric-mean speedup over cuDNN fp32: **{geo:.2f}** ({len(speedups)} shapes)."]
    if vgg:
        lines.append(f"vgg16_*_b1: min speedup {min(vgg):.2f}, geometric mean "
                     f"{math.exp(sum(map(math.log, vgg)) / len(vgg)):.2f}.")
    return "\n".join(lines) + "\n"


def markdown_class(report: dict) -> str:
    """The table of a tensor-core class run (``--math tf32``, ``--dtype bfloat16|float16``): speedup against cuDNN
    in the same class."""
    base = report.get("baseline", "tf32")
    label = base.upper() if base == "tf32" else base
    lines = [f"# convtune tensor-core kernels vs cuDNN {label} — {report['device']}", "",
             f"Measured {report['date']} · torch {report['torch']} · cuDNN {report['cudnn']} · CuPy {report['cupy']}"
             f" · copy {report['copy_tbps']:.2f} TB/s · {label} GEMM {report['class_peak_tflops']:.1f} TFLOP/s"
             f" (n=8192, measured in this run: the compute ceiling of the floors)", "",
             "Kernel times: medians of CUDA-event timings over rotating input sets (> 2× L2, or an L2 flush before each"
             f" launch), ours and cuDNN's alike; cuDNN with `cudnn.benchmark=True`. speedup = cuDNN {label} / ours."
             f" % peak = TFLOP/s / the {label} GEMM peak. Errors: ‖y − y64‖ / ‖y64‖ on the same inputs. Floor ="
             f" max(FLOPs / {label} peak, DRAM lower bound / copy bandwidth, on-chip, launch); efficiency = floor /"
             " ours.", "",
             f"| shape | best config | ms | TFLOP/s | % peak | cuDNN {label} ms | speedup | cuDNN fp32 ms |"
             f" cuDNN {'bf16' if base == 'tf32' else 'tf32'} ms | our error | cuDNN {label} error | floor ms |"
             " efficiency | timed / space |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    other = "bf16" if base == "tf32" else "tf32"
    speedups = []
    for r in report["results"]:
        if "best" not in r:
            lines.append(f"| {r['name']} | {r.get('error')} |" + " |" * 12)
            continue
        b, c = r["best"], r["cudnn_ms"]
        cfg = b["config"].replace(".fwd ", " ").replace("tile_", "t").replace("warps_", "w")
        lines.append(f"| {r['name']} | `{cfg}` | {b['ms']:.4f} | {b['tflops']:.1f} |"
                     f" {r['pct_of_compute_ceiling']:.0f} | {c[base]:.4f} | {r['speedup_vs_baseline']:.2f} |"
                     f" {c['fp32']:.4f} | {c[other]:.4f} | {b['rel_error']:.2e} | {r['cudnn_rel_error']:.2e} |"
                     f" {r['floor_ms']:.4f} | {r['efficiency']:.2f} | {r['timed']} / {r['space_size']} |")
        speedups.append(r["speedup_vs_baseline"])
    if speedups:
        geo = math.exp(sum(map(math.log, speedups)) / len(speedups))
        lines += ["", f"Geometric-mean speedup over cuDNN {label}: **{geo:.2f}** ({len(speedups)} shapes), lowest "
                      f"{min(speedups):.2f}."]
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/public.json")
    ap.add_argument("--out", default="benchmarks/results")
    ap.add_argument("--only", nargs="*", help="entry names to run (default: every conv2d entry)")
    ap.add_argument("--top", type=int, default=40, help="configs per family taken from the top of its model ranking")
    ap.add_argument("--families", nargs="*", default=None,
                    help=f"kernel families to time (default: {' '.join(FAMILIES)}; igemm with --math tf32)")
    ap.add_argument("--math", choices=("ieee", "tf32"), default="ieee",
                    help="the precision class: ieee (strict fp32, vs cuDNN fp32) or tf32 (vs cuDNN TF32)")
    ap.add_argument("--dtype", choices=("float32", "bfloat16", "float16"), default="float32",
                    help="storage dtype: a 16-bit one runs its class (the igemm_half family) vs cuDNN in that dtype")
    ap.add_argument("--buckets", type=int, default=24, help="extra configs: the model's best per bucket")
    ap.add_argument("--reps", type=int, default=20)
    ap.add_argument("--final-rounds", type=int, default=5)
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 8)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins")

    start = time.perf_counter()
    tf32, half = args.math == "tf32", args.dtype != "float32"
    if half and tf32:
        ap.error("--math tf32 needs --dtype float32")
    if args.families is None:
        args.families = list(TF32_FAMILIES if tf32 else HALF_FAMILIES if half else FAMILIES)
    bandwidth, peak = measure_copy_bandwidth(), measure_fp32_peak()
    machine = MachineModel.from_device().with_ceilings(bandwidth, peak, "measured in this run")
    machine = dataclasses.replace(machine, tf32_peak_flops_per_s=measure_fp32_peak(tf32=True)) if tf32 else machine
    if half:   # the 16-bit ceiling: the larger of the bf16 and fp16 GEMM peaks keeps every floor a floor
        machine = dataclasses.replace(machine, bf16_peak_flops_per_s=max(
            measure_fp32_peak(dtype="bfloat16"), measure_fp32_peak(dtype="float16")))
    class_peak = machine.tf32_peak_flops_per_s if tf32 else machine.bf16_peak_flops_per_s if half else peak
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if not args.only or e["name"] in args.only]
    problems = [ConvProblem.from_mapping(e).replace(math=args.math, dtype=args.dtype) for e in entries]
    with ProcessPoolExecutor(max_workers=min(len(problems), args.jobs) or 1) as pool:  # planning is pure Python
        planned = list(pool.map(candidates, problems, [machine] * len(problems), [args.top] * len(problems),
                                [args.buckets] * len(problems), [tuple(args.families)] * len(problems)))
    work = [(e["name"], p, plans, size) for e, p, (plans, size) in zip(entries, problems, planned, strict=True)]
    texts = [pl.source() for _, _, plans, _ in work for pl in plans]
    t0 = time.perf_counter()
    precompile(texts, machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]), jobs=args.jobs)
    print(f"precompiled {len(set(texts))} kernels in {time.perf_counter() - t0:.1f} s "
          f"(planning took {t0 - start:.1f} s)", file=sys.stderr)
    report = {
        "device": machine.name, "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
        "torch": torch.__version__, "cudnn": torch.backends.cudnn.version(), "cupy": cp.__version__,
        "copy_tbps": bandwidth / 1e12, "sgemm_tflops": peak / 1e12, "class_peak_tflops": class_peak / 1e12,
        "math": args.math, "dtype": args.dtype, "baseline": BASELINES[problems[0].precision] if problems else "fp32",
        # the kernel versions measured (make_replay.py keeps only rows whose version is the checkout's)
        "kernel_sha256": {f"{f}.fwd": get_spec(f).source_sha256() for f in args.families},
        "results": [],
    }
    stem, render = (("vs_cudnn_tf32", markdown_class) if tf32 else (f"vs_cudnn_{BASELINES[args.dtype]}", markdown_class)
                    if half else ("vs_cudnn", markdown))
    for name, problem, plans, size in work:
        t1 = time.perf_counter()
        r = bench_problem(name, problem, machine, args, plans, size)
        report["results"].append(r)
        # written after every shape: a fault in a later one (it kills the CUDA context) loses nothing
        (out / f"{stem}.json").write_text(json.dumps(report, indent=1))
        (out / f"{stem}.md").write_text(render(report))
        summary = (f"{r['best']['ms']:.4f} ms vs cuDNN {r['baseline']} {r['cudnn_ms'][r['baseline']]:.4f} ms "
                   f"-> {r['speedup_vs_baseline']:.2f}x") if "best" in r else r.get("error")
        print(f"{name}: {summary} ({time.perf_counter() - t1:.1f} s)", file=sys.stderr)
    print(render(report))
    return 0


if __name__ == "__main__":
    sys.exit(main())
