"""Depthwise kernels vs PyTorch on the GPU: every 1-D variant × path (× wgrad mode) and the 2-D forwards.

Shapes: the suite's ``depthwise1d_causal`` entries (the S4ConvD paper shape B=16384 C=128 L=48 K=48 first)
and ``depthwise2d`` entries. Per (shape, variant, path, mode) up to ``--candidates`` configurations from the
variant's space (the lowest-traffic ones first, then a seeded sample) are compiled (nvcc in parallel when
available), verified once against the float64 reference (output poisoned with NaN; 1e-5 fwd/dgrad, 1e-4
wgrad) and timed with the shared protocol (``time_launches``: warm-up, median of CUDA-event timings,
rotating buffer sets > 2× L2 when a set fits in L2). The best time per row is reported, and per 1-D shape
whether naive ≥ coalesced ≥ shared ≥ warp holds on every path. 2-D: the tiled forward (``--candidates``
seeded draws) and the fast forward (``--candidates-2d``: round-robin over the register-blocking shapes
rows_per_thread × outputs_per_thread × small/large band, each group's plans by occupancy, traffic and bytes
staged per SM; items of fewer than 4 outputs last) and, on images up to 32 wide, the packed forward (every plan
of its space, or ``--candidates-packed`` model-best ones).
The warp-tiled candidates likewise go round-robin over design × lanes_per_row × outputs_per_lane.
2-D also times the input gradient and the weight gradient (both modes; ``--candidates-2d`` each) against
PyTorch's ``autograd.grad`` of ``F.conv2d`` w.r.t. x only / w only.
1-D rows of L ≤ 64 also time the fused backward (path ``bwd``: dx and dw in one pass) against PyTorch's
joint ``autograd.grad`` w.r.t. (x, w) and against the best separate dgrad + wgrad.

PyTorch runs in the same process on the same buffers: causal ``F.conv1d(x, w.flip(-1)[:, None], padding=K−1,
groups=C)[..., :L]`` forward; input gradient and weight gradient each through ``torch.autograd.grad`` of that
graph with respect to x only / w only (retain_graph); 2-D ``F.conv2d(groups=C)`` with ``cudnn.benchmark`` and
TF32 off. Copy bandwidth is measured in the same run; "% copy" is compulsory bytes / time / copy bandwidth.

Writes ``depthwise_bench.json`` (every candidate) and ``depthwise_bench.md`` under ``--out``:

    python benchmarks/depthwise_bench.py --out benchmarks/results/depthwise_h200 --candidates 12
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import os
import random
import sys
from pathlib import Path

import cupy as cp
import torch
import torch.nn.functional as F

from convtune.errors import CompileError, InvalidConfig, LaunchError
from convtune.kernels.compile import nvcc_available, precompile
from convtune.kernels.depthwise.configs import MODES, PATHS, VARIANTS_1D
from convtune.kernels.depthwise.conv1d import fused as plan1d_fused
from convtune.kernels.depthwise.conv1d import launcher
from convtune.kernels.depthwise.conv1d.traffic import (
    compulsory_bytes,
    fast_issued_macs,
    flops,
    total_traffic_bytes,
    warp_issued_macs,
)
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
from convtune.kernels.depthwise.conv2d import packed as plan2d_packed
from convtune.kernels.depthwise.conv2d import tiled as plan2d
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.kernels.depthwise.model import predict_2d_packed
from convtune.kernels.depthwise.reference import (
    dw1d_dgrad_reference,
    dw1d_fwd_reference,
    dw1d_wgrad_reference,
    dw2d_dgrad_reference,
    dw2d_fwd_reference,
    dw2d_wgrad_reference,
)
from convtune.kernels.depthwise.space import (
    enumerate_plans,
    enumerate_plans_2d,
    enumerate_plans_2d_dgrad,
    enumerate_plans_2d_fast,
    enumerate_plans_2d_packed,
    enumerate_plans_2d_wgrad,
    enumerate_plans_fused,
)
from convtune.kernels.launch_geometry import resident_blocks
from convtune.kernels.reference import relative_error
from convtune.kernels.timing import rotation_sets, time_launches
from convtune.ops.conv2d import device_machine
from convtune.problem import ConvProblem

TOLERANCE = {"fwd": 1e-5, "dgrad": 1e-5, "wgrad": 1e-4}
ALL_PATHS = (*PATHS, "bwd")   # bwd: the fused backward (dx and dw) and PyTorch's joint input+weight gradient
DEFAULT_SUITE = Path(__file__).resolve().parent / "suites" / "public.json"


def measure_copy_bandwidth(nbytes: int = 2 << 30) -> float:
    """Device-to-device copy: (bytes read + bytes written) / median time."""
    src = cp.empty(nbytes // 4, dtype=cp.float32)
    dst = cp.empty_like(src)
    timing = time_launches(lambda _i: dst.__setitem__(Ellipsis, src), warmup=2, reps=10)
    return 2 * nbytes / (timing.median_ms * 1e-3)


Shapes = list[tuple[str, ConvProblem]]


def load_shapes(path: str, only: list[str] | None) -> tuple[Shapes, Shapes]:
    """(name, problem) of the suite's depthwise1d_causal and depthwise2d entries (``only``: these names)."""
    data = json.loads(Path(path).read_text())

    def pick(name: str) -> bool:
        return not only or name in only

    one = [(s["name"], ConvProblem.from_mapping(s)) for s in data.get("depthwise1d_causal", []) if pick(s["name"])]
    two = [(s["name"], ConvProblem.from_mapping(s)) for s in data.get("depthwise2d", []) if pick(s["name"])]
    return one, two


def _rank(pl) -> tuple:
    """Traffic over compulsory (to 5 %: weight reloads of a few % do not decide), issued over causal MACs (fast
    and the warp register design, to 10 %), then resident warps per SM, 16-byte copies, double buffering."""
    c = pl.config
    ratio = round(total_traffic_bytes(pl) / compulsory_bytes(pl.problem, pl.path) / 0.05)
    if pl.variant == "fast":
        fma = round(2 * fast_issued_macs(pl) / flops(pl.problem) / 0.1)
    elif pl.variant == "warp" and pl.geometry.get("register"):
        fma = round(_warp_issue(pl) / (flops(pl.problem) / 2) / 0.1)
    else:
        fma = 0
    return (ratio, fma, -pl.min_blocks * pl.threads, -getattr(c, "vec", 1), -getattr(c, "stages", 1), c.key())


def _warp_issue(pl) -> float:
    """Issue slots of the warp register design in FFMA units: issued multiply-adds, plus 4 per shuffle and per
    global load or store instruction (SHFL and LSU issue at a quarter of the FFMA rate)."""
    c, g = pl.config, pl.geometry
    v, lanes = c.outputs_per_lane, c.lanes_per_row
    dfull = (pl.ke + v - 2) // v
    dmax = dfull if g["multi"] else min(dfull, lanes - 1)
    shuffles = v * sum(1 for d in range(1, dmax + 1) if not (g["multi"] and d == lanes))
    memory = 2 * (v // 4 if g["vec4"] else v)
    return warp_issued_macs(pl) + 4 * (shuffles + memory) * pl.rows * g["nseg"] * lanes


def candidates(plans: list, k: int, seed: int, key=None) -> list:
    """The k/2 best plans by ``key`` (default :func:`_rank`), then a seeded sample of the rest."""
    ranked = sorted(plans, key=key or _rank)
    head = ranked[:max(1, k // 2)]
    rest = ranked[len(head):]
    return head + random.Random(seed).sample(rest, min(len(rest), k - len(head)))


def torch_view(a):
    return torch.from_dlpack(a)


def time_torch_1d(problem: ConvProblem, xs: list, dys: list, w) -> dict[str, float]:
    """PyTorch causal depthwise conv1d (padding K−1, cropped) per path, on the same buffers (ms)."""
    C, L, K = problem.C, problem.W, problem.S
    wt = torch_view(w).flip(-1)[:, None, :].contiguous().requires_grad_(True)   # lag order -> PyTorch order
    xt = [torch_view(x).requires_grad_(True) for x in xs]
    dyt = [torch_view(d) for d in dys]
    out: dict[str, float] = {}
    with torch.no_grad():
        out["fwd"] = time_launches(lambda i: F.conv1d(xt[i], wt, padding=K - 1, groups=C)[..., :L],
                                   sets=len(xs)).median_ms
    graphs = [F.conv1d(x, wt, padding=K - 1, groups=C)[..., :L] for x in xt]
    out["dgrad"] = time_launches(lambda i: torch.autograd.grad(graphs[i], xt[i], dyt[i], retain_graph=True),
                                 sets=len(xs)).median_ms
    out["wgrad"] = time_launches(lambda i: torch.autograd.grad(graphs[i], wt, dyt[i], retain_graph=True),
                                 sets=len(xs)).median_ms
    out["bwd"] = time_launches(lambda i: torch.autograd.grad(graphs[i], (xt[i], wt), dyt[i], retain_graph=True),
                               sets=len(xs)).median_ms
    return out


def bench_1d(name: str, problem: ConvProblem, machine, args: argparse.Namespace) -> dict:
    p = problem
    B, C, L, K = p.N, p.C, p.W, p.S
    rng = cp.random.default_rng(11)
    sets = rotation_sets(4 * 3 * B * C * L, machine.l2_bytes)
    xs = [rng.standard_normal((B, C, L), dtype=cp.float32) for _ in range(sets)]
    dys = [rng.standard_normal((B, C, L), dtype=cp.float32) for _ in range(sets)]
    outs = [cp.empty((B, C, L), dtype=cp.float32) for _ in range(sets)]
    w = rng.standard_normal((C, K), dtype=cp.float32)
    dw = cp.empty((C, K), dtype=cp.float32)
    refs = {"fwd": dw1d_fwd_reference(xs[0], w), "dgrad": dw1d_dgrad_reference(dys[0], w),
            "wgrad": dw1d_wgrad_reference(xs[0], dys[0], K)}
    torch_ms = time_torch_1d(p, xs, dys, w)
    chosen = []
    for variant in args.variants:
        for path in PATHS:
            by_mode: dict[int, list] = {}
            for pl in enumerate_plans(p, machine, variant, path):
                by_mode.setdefault(getattr(pl.config, "mode", 0), []).append(pl)
            for mode, group in sorted(by_mode.items()):
                if variant == "warp":  # every (design, lanes_per_row, outputs_per_lane) shape first
                    picks = diverse(group, args.candidates,
                                    lambda pl: (getattr(pl.config, "design", 2), pl.config.lanes_per_row,
                                                pl.config.outputs_per_lane), _rank)
                else:
                    picks = candidates(group, args.candidates, args.seed)
                chosen += [(variant, path, mode, pl) for pl in picks]
    if nvcc_available() and os.environ.get("CONVTUNE_CUBIN_DIR"):
        texts = [pl.source() for *_, pl in chosen] + [pl.reduce_source() for *_, pl in chosen if pl.deterministic]
        precompile(texts, machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]), jobs=os.cpu_count() or 8)
    rows = []
    for variant, path, mode, pl in chosen:
        row = {"variant": variant, "path": path, "mode": MODES.get(mode, ""), "config": pl.config.key(),
               "grid": pl.grid, "threads": pl.threads, "smem_bytes": pl.smem_bytes,
               "model_bytes": total_traffic_bytes(pl)}
        try:
            kernels = launcher.compile_plan(pl)
            row.update(regs=kernels.main.resources.num_regs, local_bytes=kernels.main.resources.local_bytes)
            ws = launcher.allocate_workspace(pl)
            a, b, o = {"fwd": (xs, [w] * sets, outs), "dgrad": (dys, [w] * sets, outs),
                       "wgrad": (xs, dys, [dw] * sets)}[path]
            o[0].fill(cp.nan)
            launcher.launch(pl, kernels, a[0], b[0], o[0], workspace=ws)
            err = relative_error(o[0], refs[path])
            row["rel_err"] = err
            if not err <= TOLERANCE[path]:
                row["status"] = "wrong"
                rows.append(row)
                continue
            timing = time_launches(lambda i, a=a, b=b, o=o, pl=pl, k=kernels, ws=ws:
                                   launcher.launch(pl, k, a[i], b[i], o[i], workspace=ws), sets=sets,
                                   warmup=args.warmup, reps=args.reps)
            row.update(status="ok", **timing.to_dict())
        except (CompileError, LaunchError, InvalidConfig) as exc:
            row.update(status="error", error=str(exc)[:300])
        rows.append(row)
        print(f"  {name} {variant:9s} {path:5s} {row['mode']:13s} {row.get('median_ms', float('nan')):8.4f} ms "
              f"{row['status']} {row['config']}", flush=True)
    if args.fused:
        rows += bench_fused(name, p, machine, args, xs, dys, outs, w, dw, refs)
    return {"name": name, "problem": p.key(), "kind": "depthwise1d_causal", "sets": sets, "torch_ms": torch_ms,
            "compulsory_bytes": {path: compulsory_bytes(p, path) for path in ALL_PATHS},
            "flops_causal": flops(p), "flops_dense": flops(p, "dense"), "candidates": rows}


def bench_fused(name: str, p: ConvProblem, machine, args: argparse.Namespace, xs: list, dys: list, outs: list, w,
                dw, refs: dict) -> list[dict]:
    """The fused backward (dx and dw in one pass; rows of L ≤ 64): per mode up to ``--candidates`` plans (most
    resident threads first, then a seeded sample), verified against both references, then timed."""
    rows = []
    plans = list(enumerate_plans_fused(p, machine))
    for mode in sorted({pl.config.mode for pl in plans}):
        group = [pl for pl in plans if pl.config.mode == mode]
        picks = candidates(group, args.candidates, args.seed,
                           key=lambda pl: (-pl.min_blocks * pl.threads, -pl.config.stages, pl.config.key()))
        for pl in picks:
            row = {"variant": "fused", "path": "bwd", "mode": MODES[mode], "config": pl.config.key(), "grid": pl.grid,
                   "threads": pl.threads, "smem_bytes": pl.smem_bytes,
                   "model_bytes": 4 * sum(plan1d_fused.traffic_words(pl).values())}
            try:
                kernels = plan1d_fused.compile_plan(pl)
                row.update(regs=kernels.main.resources.num_regs, local_bytes=kernels.main.resources.local_bytes)
                ws = plan1d_fused.allocate_workspace(pl)
                outs[0].fill(cp.nan)
                dw.fill(cp.nan)
                plan1d_fused.launch(pl, kernels, xs[0], dys[0], w, outs[0], dw, workspace=ws)
                err = max(relative_error(outs[0], refs["dgrad"]) / TOLERANCE["dgrad"],
                          relative_error(dw, refs["wgrad"]) / TOLERANCE["wgrad"])
                row["rel_err_over_tolerance"] = err
                if not err <= 1:
                    row["status"] = "wrong"
                else:
                    timing = time_launches(lambda i, pl=pl, k=kernels, ws=ws: plan1d_fused.launch(
                        pl, k, xs[i], dys[i], w, outs[i], dw, workspace=ws), sets=len(xs), warmup=args.warmup,
                        reps=args.reps)
                    row.update(status="ok", **timing.to_dict())
            except (CompileError, LaunchError, InvalidConfig) as exc:
                row.update(status="error", error=str(exc)[:300])
            rows.append(row)
            print(f"  {name} fused     bwd   {row['mode']:13s} {row.get('median_ms', float('nan')):8.4f} ms "
                  f"{row['status']} {row['config']}", flush=True)
    return rows


def _rank_2d_fast(pl, machine, module=plan2d_fast) -> tuple:
    """Resident threads per SM (in steps of 256, up to 1024), requested words over compulsory (to 5 %), bytes
    staged per SM (in 16 KB steps, up to 64 KB), then the key."""
    words = sum(module.traffic_words(pl).values())
    ratio = round(words / (pl.problem.input_elements + pl.problem.output_elements) / 0.05)
    blocks = resident_blocks(pl.threads, pl.smem_bytes, pl.regs_estimate, machine)
    return (-min(blocks * pl.threads, 1024) // 256, ratio, -min(blocks * pl.smem_bytes, 65536) // 16384,
            pl.config.key())


def diverse(plans: list, k: int, group, rank) -> list:
    """Up to k plans, round-robin over the groups ``group(plan)`` (the register-blocking shapes), each group's
    plans in ``rank`` order, groups ordered by (the group key's first element when it is a bool: demoted
    groups last, then) their best plan."""
    groups: dict = {}
    for pl in sorted(plans, key=lambda pl: (group(pl)[0] if isinstance(group(pl)[0], bool) else False, rank(pl))):
        groups.setdefault(group(pl), []).append(pl)
    out: list = []
    depth = 0
    while len(out) < k and any(len(g) > depth for g in groups.values()):
        out += [g[depth] for g in groups.values() if len(g) > depth][:k - len(out)]
        depth += 1
    return out


def time_torch_2d(p: ConvProblem, xs: list, dys: list, w) -> dict[str, float]:
    """PyTorch depthwise conv2d (cuDNN benchmark mode, TF32 off) per path on the same buffers (ms): forward, and
    the input / weight gradients each through ``torch.autograd.grad`` of that graph (retain_graph)."""
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    wt = torch_view(w).clone().requires_grad_(True)
    xt = [torch_view(x).requires_grad_(True) for x in xs]
    dyt = [torch_view(d) for d in dys]
    out: dict[str, float] = {}
    with torch.no_grad():
        out["fwd"] = time_launches(lambda i: F.conv2d(xt[i], wt, stride=st, padding=pad, groups=p.C),
                                   sets=len(xs)).median_ms
    graphs = [F.conv2d(x, wt, stride=st, padding=pad, groups=p.C) for x in xt]
    out["dgrad"] = time_launches(lambda i: torch.autograd.grad(graphs[i], xt[i], dyt[i], retain_graph=True),
                                 sets=len(xs)).median_ms
    out["wgrad"] = time_launches(lambda i: torch.autograd.grad(graphs[i], wt, dyt[i], retain_graph=True),
                                 sets=len(xs)).median_ms
    return out


def bench_2d(name: str, problem: ConvProblem, machine, args: argparse.Namespace) -> dict:
    """The tiled and fast forwards, the input gradient and the weight gradient (both modes) vs PyTorch."""
    p = problem
    st, pad = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)
    rng = cp.random.default_rng(12)
    sets = rotation_sets(4 * 2 * (p.input_elements + p.output_elements), machine.l2_bytes)
    xs = [rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32) for _ in range(sets)]
    dys = [rng.standard_normal((p.N, p.C, p.P, p.Q), dtype=cp.float32) for _ in range(sets)]
    ys = [cp.empty((p.N, p.C, p.P, p.Q), dtype=cp.float32) for _ in range(sets)]
    dxs = [cp.empty((p.N, p.C, p.H, p.W), dtype=cp.float32) for _ in range(sets)]
    w = rng.standard_normal((p.C, 1, p.R, p.S), dtype=cp.float32)
    dw = cp.empty((p.C, 1, p.R, p.S), dtype=cp.float32)
    torch_ms = time_torch_2d(p, xs, dys, w)
    refs = {"fwd": dw2d_fwd_reference(xs[0], w, st, pad),
            "dgrad": dw2d_dgrad_reference(dys[0], w, (p.H, p.W), st, pad),
            "wgrad": dw2d_wgrad_reference(xs[0], dys[0], (p.R, p.S), st, pad)}

    def shapes(pl) -> tuple[int, int, bool]:
        """Register-blocking shape and small (≤ 16 rows) or large band; thin items (fewer than 4 outputs) only
        for images of fewer than 64 outputs per plane."""
        c = pl.config
        thin = c.rows_per_thread * c.outputs_per_thread < 4 and p.P * p.Q >= 64
        return (thin, c.rows_per_thread, c.outputs_per_thread, c.band_h <= 16)

    chosen = []  # (variant, path, mode, module, plan)
    if "tiled" in args.variants_2d:
        plans = list(enumerate_plans_2d(p, machine))
        chosen += [("tiled", "fwd", "", plan2d, pl)
                   for pl in random.Random(args.seed).sample(plans, min(len(plans), args.candidates))]
    if "fast" in args.variants_2d:
        picks = diverse(list(enumerate_plans_2d_fast(p, machine)), args.candidates_2d, shapes,
                        lambda pl: _rank_2d_fast(pl, machine))
        chosen += [("fast", "fwd", "", plan2d_fast, pl) for pl in picks]
    if "packed" in args.variants_2d:
        plans = sorted(enumerate_plans_2d_packed(p, machine),
                       key=lambda pl: (predict_2d_packed(pl, machine).time_s, pl.config.key()))
        chosen += [("packed", "fwd", "", plan2d_packed, pl) for pl in plans[:args.candidates_packed or None]]
    if args.bwd_2d:
        picks = diverse(list(enumerate_plans_2d_dgrad(p, machine)), args.candidates_2d, shapes,
                        lambda pl: _rank_2d_fast(pl, machine, plan2d_dgrad))
        chosen += [("fast", "dgrad", "", plan2d_dgrad, pl) for pl in picks]
        wplans = list(enumerate_plans_2d_wgrad(p, machine))
        for mode in sorted(MODES):
            picks = diverse([pl for pl in wplans if pl.config.mode == mode], args.candidates_2d, shapes,
                            lambda pl: _rank_2d_fast(pl, machine, plan2d_wgrad))
            chosen += [("fast", "wgrad", MODES[mode], plan2d_wgrad, pl) for pl in picks]
    if nvcc_available() and os.environ.get("CONVTUNE_CUBIN_DIR"):
        texts = [pl.source() for *_, pl in chosen] + [pl.reduce_source() for *_, pl in chosen
                                                      if getattr(pl, "deterministic", False)]
        precompile(texts, machine.arch, Path(os.environ["CONVTUNE_CUBIN_DIR"]), jobs=os.cpu_count() or 8)
    rows = []
    for variant, path, mode, module, pl in chosen:
        row = {"variant": variant, "path": path, "mode": mode, "config": pl.config.key(), "grid": pl.grid,
               "threads": pl.threads, "smem_bytes": pl.smem_bytes,
               "model_bytes": 4 * sum(module.traffic_words(pl).values())}
        try:
            compiled = module.compile_plan(pl)
            main = getattr(compiled, "main", compiled)
            row.update(regs=main.resources.num_regs, local_bytes=main.resources.local_bytes)
            ws = module.allocate_workspace(pl) if path == "wgrad" else None
            if path == "fwd":
                def call(i, pl=pl, k=compiled, m=module):
                    m.launch(pl, k, xs[i], w, ys[i])
                out = ys[0]
            elif path == "dgrad":
                def call(i, pl=pl, k=compiled, m=module):
                    m.launch(pl, k, dys[i], w, dxs[i])
                out = dxs[0]
            else:
                def call(i, pl=pl, k=compiled, m=module, ws=ws):
                    m.launch(pl, k, xs[i], dys[i], dw, workspace=ws)
                out = dw
            out.fill(cp.nan)
            call(0)
            row["rel_err"] = err = relative_error(out, refs[path])
            if not err <= TOLERANCE[path]:
                row["status"] = "wrong"
            else:
                timing = time_launches(call, sets=sets, warmup=args.warmup, reps=args.reps)
                row.update(status="ok", **timing.to_dict())
        except (CompileError, LaunchError, InvalidConfig) as exc:
            row.update(status="error", error=str(exc)[:300])
        rows.append(row)
        print(f"  {name} {variant:6s} {path:5s} {mode:13s} {row.get('median_ms', float('nan')):8.4f} ms "
              f"{row['status']} {row['config']}", flush=True)
    return {"name": name, "problem": p.key(), "kind": "depthwise2d", "sets": sets, "torch_ms": torch_ms,
            "compulsory_bytes": {path: p.compulsory_bytes for path in PATHS}, "candidates": rows}


def best_rows(report: dict) -> list[dict]:
    """Fastest verified candidate per (variant, path, mode)."""
    best: dict[tuple, dict] = {}
    for row in report["candidates"]:
        if row.get("status") != "ok":
            continue
        key = (row.get("variant", "tiled"), row.get("path", "fwd"), row.get("mode", ""))
        if key not in best or row["median_ms"] < best[key]["median_ms"]:
            best[key] = row
    return [best[k] for k in sorted(best, key=lambda k: (ALL_PATHS.index(k[1]), k[0], k[2]))]


def markdown(results: list[dict], copy_bw: float, device: str) -> str:
    lines = [f"# Depthwise kernels vs PyTorch ({device}, {dt.date.today()})", "",
             f"Copy bandwidth measured in this run: {copy_bw / 1e12:.2f} TB/s. \"% copy\" = compulsory bytes / time "
             "/ copy bandwidth; \"model GB/s\" = the variant's modelled bytes / time.", ""]
    for rep in results:
        lines += [f"## {rep['name']} ({rep['problem']})", "",
                  "| path | variant | mode | ms | p10–p90 ms | model GB/s | % copy | vs PyTorch | config |",
                  "|---|---|---|---|---|---|---|---|---|"]
        for path, ms in rep["torch_ms"].items():
            pct = rep["compulsory_bytes"][path] / (ms * 1e-3) / copy_bw * 100
            lines.append(f"| {path} | PyTorch | | {ms:.4f} | | | {pct:.0f} | 1.00 | |")
        for row in best_rows(rep):
            path = row.get("path", "fwd")
            ms = row["median_ms"]
            pct = rep["compulsory_bytes"][path] / (ms * 1e-3) / copy_bw * 100
            lines.append(f"| {path} | {row.get('variant', 'tiled')} | {row.get('mode', '')} | {ms:.4f} | "
                         f"{row['p10_ms']:.4f}–{row['p90_ms']:.4f} | {row['model_bytes'] / (ms * 1e-3) / 1e9:.0f} | "
                         f"{pct:.0f} | {rep['torch_ms'][path] / ms:.2f} | `{row['config']}` |")
        lines += ordering_lines(rep)
        lines.append("")
    return "\n".join(lines)


ORDER = ("naive", "coalesced", "shared", "warp")


def ordering_lines(report: dict) -> list[str]:
    """1-D: whether the best times keep naive ≥ coalesced ≥ shared ≥ warp on every path (and wgrad mode)."""
    if report.get("kind") != "depthwise1d_causal":
        return []
    times: dict[tuple[str, str], dict[str, float]] = {}
    for row in best_rows(report):
        times.setdefault((row["path"], row["mode"]), {})[row["variant"]] = row["median_ms"]
    out = [""]
    for (path, mode), t in times.items():
        if path == "bwd":
            separate = [min(times.get(("dgrad", ""), {}).values(), default=float("nan")),
                        min(times.get(("wgrad", mode), {}).values(), default=float("nan"))]
            out.append(f"- fused backward ({mode}) {t['fused']:.4f} ms vs the best dgrad + best wgrad ({mode}) "
                       f"{sum(separate):.4f} ms")
            continue
        present = [v for v in ORDER if v in t]
        if len(present) < 2:
            continue
        broken = [f"{a} {t[a]:.4f} < {b} {t[b]:.4f}" for a, b in itertools.pairwise(present)
                  if t[a] < t[b]]
        label = f"{path}{' ' + mode if mode else ''}"
        out.append(f"- ordering {' ≥ '.join(present)} on {label}: " + ("holds" if not broken else
                                                                       "FAILS (" + "; ".join(broken) + ")"))
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(DEFAULT_SUITE))
    ap.add_argument("--out", default="benchmarks/results/depthwise")
    ap.add_argument("--only", nargs="*", help="suite entry names to run (default: all depthwise entries)")
    ap.add_argument("--variants", nargs="*", default=list(VARIANTS_1D), choices=list(VARIANTS_1D))
    ap.add_argument("--candidates", type=int, default=8, help="configurations timed per variant × path × mode")
    ap.add_argument("--no-2d", action="store_true")
    ap.add_argument("--no-fused", dest="fused", action="store_false", help="skip the fused 1-D backward")
    ap.add_argument("--no-bwd-2d", dest="bwd_2d", action="store_false", help="skip the 2-D input/weight gradients")
    ap.add_argument("--variants-2d", nargs="*", default=["tiled", "fast", "packed"],
                    choices=["tiled", "fast", "packed"])
    ap.add_argument("--candidates-packed", type=int, default=0,
                    help="packed 2-D forward plans timed, model-best first (0: every plan of its space)")
    ap.add_argument("--candidates-2d", type=int, default=32,
                    help="fast 2-D configurations timed per shape and path (and wgrad mode)")
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--warmup", type=int, default=5)
    ap.add_argument("--seed", type=int, default=1)
    args = ap.parse_args()
    machine = device_machine(0)
    copy_bw = measure_copy_bandwidth()
    machine = machine.with_ceilings(copy_bw, machine.fp32_peak_flops_per_s, "copy measured in this run")
    one, two = load_shapes(args.suite, args.only)
    results = []
    for name, problem in one:
        print(f"{name}: {problem.key()}", flush=True)
        results.append(bench_1d(name, problem, machine, args))
        cp.get_default_memory_pool().free_all_blocks()
    if not args.no_2d:
        for name, problem in two:
            print(f"{name}: {problem.key()}", flush=True)
            results.append(bench_2d(name, problem, machine, args))
            cp.get_default_memory_pool().free_all_blocks()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    device = f"{machine.name}, torch {torch.__version__}"
    report = {"device": device, "date": str(dt.date.today()), "copy_bandwidth_bytes_per_s": copy_bw,
              "argv": sys.argv[1:], "results": results}
    (out / "depthwise_bench.json").write_text(json.dumps(report, indent=1))
    (out / "depthwise_bench.md").write_text(markdown(results, copy_bw, device))
    print(markdown(results, copy_bw, device))
    return 0


if __name__ == "__main__":
    sys.exit(main())
