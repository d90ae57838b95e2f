"""A/B timing of the NHWC / 1×1 igemm kernels' two main loops (template argument PIPE of ``igemm_fwd.cu``) on the GPU.

For every shape of the given ``vs_cudnn --math tf32`` tables and its ``--top`` fastest configs of each family there
(NHWC and 1×1), each variant is compiled, checked against a float64 convolution (poisoned output, relative error)
and timed with CUDA events (median over rotating input sets), all variants of a config interleaved in one loop:

    python3 benchmarks/igemm_variants.py benchmarks/results/igemm_h200/v4_pipelined/public/tf32/vs_cudnn_tf32.json \\
        --top 4 --out $OUT/variants

Variants: ``pipe`` the double-buffered-fragment main loop, ``plain`` the plain multistage loop, each with the
``__launch_bounds__`` its register estimate gives; "the plan's loop" is what ``launcher.choose_main_loop`` picks.
Prints a markdown table; writes it and a JSON next to it. (The first run, ``v4_pipelined/variants``, also timed x
unrounded with a cvt per fragment element in the NHWC loop: since then the layout change rounds x.)
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import statistics
from pathlib import Path
from typing import Any

import cupy as cp
import torch

from convtune.kernels.compile import load_kernel, precompile
from convtune.kernels.config import parse_config_key
from convtune.kernels.igemm import launcher
from convtune.kernels.igemm import nhwc as nhwc_launcher
from convtune.kernels.igemm.space import plan
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
FAMILIES = ("igemm_nhwc", "igemm_1x1")


VARIANTS = ("pipe", "plain")


def variant_plan(pl: Any, name: str) -> Any:
    """The plan with the named main loop and the ``__launch_bounds__`` its register estimate gives."""
    c = pl.config
    pipelined = name == "pipe" and (c.tile_k // 8) % 2 == 0
    regs = launcher.regs_estimate(c, pipelined)
    min_blocks = launcher.launch_min_blocks(c.threads, pl.smem_bytes, regs, H200)
    return dataclasses.replace(pl, pipelined=pipelined, regs_estimate=regs, min_blocks=min_blocks)


def compile_variant(pl: Any) -> Any:
    text = pl.source()
    gemm = load_kernel(text, pl.entry, dynamic_smem_bytes=pl.smem_bytes)
    if pl.config.family == "igemm_nhwc":
        return nhwc_launcher.NhwcKernels(load_kernel(text, nhwc_launcher.TRANSPOSE_ENTRY), gemm)
    return gemm


def time_config(problem: ConvProblem, key: str, sets: int, reps: int) -> dict[str, Any]:
    pl = plan(problem, parse_config_key(key), H200)
    lau = get_spec(pl.config.family).launcher
    rng = cp.random.default_rng(1)
    xs = [rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32) for _ in range(sets)]
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.empty((problem.N, problem.K, problem.P, problem.Q), dtype=cp.float32)
    filt = lau.prepare_filters(pl, w)
    y64 = torch.nn.functional.conv2d(torch.as_tensor(xs[0], device="cuda").double(),
                                     torch.as_tensor(w, device="cuda").double(),
                                     stride=(problem.stride_h, problem.stride_w),
                                     padding=(problem.pad_h, problem.pad_w),
                                     dilation=(problem.dil_h, problem.dil_w))
    plans = {name: variant_plan(pl, name) for name in VARIANTS}
    kernels = {name: compile_variant(vp) for name, vp in plans.items()}
    row: dict[str, Any] = {"config": key, "regs": {}, "rel_error": {}, "ms": {}, "chosen": plan_choice(pl)}
    for name, k in kernels.items():
        y.fill(float("nan"))
        lau.launch(plans[name], k, xs[0], filt, y)
        cp.cuda.Device().synchronize()
        diff = torch.as_tensor(y, device="cuda").double() - y64
        row["rel_error"][name] = float(diff.norm() / y64.norm())
        row["regs"][name] = (k.gemm if hasattr(k, "gemm") else k).resources.num_regs
    times: dict[str, list[float]] = {name: [] for name in kernels}
    for _ in range(reps):
        for name, k in kernels.items():   # interleaved: clocks and L2 state drift alike for every variant
            for x in xs:
                start, stop = cp.cuda.Event(), cp.cuda.Event()
                start.record()
                lau.launch(plans[name], k, x, filt, y)
                stop.record()
                stop.synchronize()
                times[name].append(cp.cuda.get_elapsed_time(start, stop))
    row["ms"] = {name: statistics.median(t) for name, t in times.items()}
    return row


def plan_choice(pl: Any) -> str:
    return "pipe" if pl.pipelined else "plain"


def candidates(tables: list[Path], top: int) -> dict[str, tuple[str, list[str]]]:
    """shape name -> (problem text, the --top fastest configs of each family over the tables)."""
    out: dict[str, tuple[str, list[str]]] = {}
    for path in tables:
        for r in json.loads(path.read_text())["results"]:
            ok = sorted((c for c in r["candidates"] if c.get("status") == "ok" and c["family"] in FAMILIES),
                        key=lambda c: c["median_ms"])
            keys = out.setdefault(r["name"], (r["problem"], []))[1]
            for fam in FAMILIES:
                for c in [c for c in ok if c["family"] == fam][:top]:
                    if c["config"] not in keys:
                        keys.append(c["config"])
    return out


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("tables", nargs="+", type=Path)
    ap.add_argument("--top", type=int, default=4)
    ap.add_argument("--sets", type=int, default=3)
    ap.add_argument("--reps", type=int, default=10)
    ap.add_argument("--shapes", nargs="*", default=None, help="only these shape names")
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/igemm_variants"))
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    shapes = {name: v for name, v in candidates(args.tables, args.top).items()
              if not args.shapes or name in args.shapes}
    cubins = os.environ.get("CONVTUNE_CUBIN_DIR")
    if cubins:   # every variant's source through nvcc in parallel first (load_kernel then loads the cubins)
        texts = [variant_plan(pl, name).source() for text, keys in shapes.values() for key in keys
                 for pl in [plan(ConvProblem.parse(text), parse_config_key(key), H200)] for name in VARIANTS]
        arch = "sm_{}{}".format(*cp.cuda.Device().compute_capability)
        failed = [r for r in precompile(texts, arch, Path(cubins), jobs=os.cpu_count() or 8).values()
                  if isinstance(r, Exception)]
        print(f"precompiled {len(set(texts))} sources, {len(failed)} failed", flush=True)
    rows = []
    lines = ["| shape | config | pipe ms | plain ms | pipe ms / plain ms | the plan's loop | regs pipe/plain "
             "| max error |", "|---|---|---|---|---|---|---|---|"]
    for name, (text, keys) in shapes.items():
        problem = ConvProblem.parse(text)
        for key in keys:
            try:
                r = time_config(problem, key, args.sets, args.reps)
            except Exception as exc:  # one failing config must not lose the others' rows
                print(f"{name} {key}: {type(exc).__name__}: {exc}"[:400], flush=True)
                continue
            r["shape"] = name
            rows.append(r)
            ms = r["ms"]
            line = (f"| {name} | `{key}` | {ms['pipe']:.4f} | {ms['plain']:.4f} | {ms['pipe'] / ms['plain']:.2f} | "
                    f"{r['chosen']} | {r['regs']['pipe']}/{r['regs']['plain']} | {max(r['rel_error'].values()):.2e} |")
            lines.append(line)
            print(line, flush=True)
    (args.out / "igemm_variants.md").write_text("\n".join(lines) + "\n")
    (args.out / "igemm_variants.json").write_text(json.dumps(rows, indent=1))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
