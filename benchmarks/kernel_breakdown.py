"""Where a convolution's device time goes, kernel by kernel (runs on the GPU host).

For each problem: ``convtune.ops.torch.conv2d`` with the resolver's config (or ``--config``) and ``F.conv2d`` (cuDNN,
strict fp32: ``allow_tf32=False``, ``cudnn.benchmark=True``) on the same fresh normal tensors, ``--calls`` calls each
under the CUDA profiler; per kernel name: µs per call and share of the call's device time. Multi-launch paths (the
unfused Winograd families: input transform, GEMM, output transform) show which stage binds. Prints a markdown table
and writes ``kernel_breakdown.json`` under ``--out``.

    python benchmarks/kernel_breakdown.py "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2" --out /tmp/breakdown
"""

from __future__ import annotations

import argparse
import json
from collections import defaultdict
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import device_info, strict_fp32

import convtune.ops.torch as ct
from convtune.problem import ConvProblem


def per_kernel_us(fn: Any, calls: int) -> dict[str, float]:
    """Device µs per call of every kernel name ``fn`` launches, from the CUDA profiler (one warm-up call first)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    totals: dict[str, float] = defaultdict(float)
    for evt in prof.events():
        if evt.device_type == torch.autograd.DeviceType.CUDA:
            totals[evt.name] += evt.time_range.elapsed_us() / calls
    return dict(sorted(totals.items(), key=lambda kv: -kv[1]))


def breakdown(problem: ConvProblem, config: str | None, calls: int) -> dict[str, Any]:
    p = problem
    gen = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(p.N, p.C, p.H, p.W, device="cuda", generator=gen)
    w = torch.randn(p.K, p.C, p.R, p.S, device="cuda", generator=gen)
    stride, pad, dil = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w)
    if config is None:
        def ours() -> Any:
            return ct.conv2d(x, w, None, stride, pad, dil)
    else:
        from convtune.ops.conv2d import conv2d as plain

        def ours() -> Any:
            return plain(x, w, stride, pad, dil, config=config)
    from convtune.ops.conv2d import device_machine, model_choice

    chosen = config or model_choice(p, device_machine(0)).key()   # the op's when no database serves the problem

    def cudnn() -> Any:
        return F.conv2d(x, w, None, stride, pad, dil)

    rows = {"convtune": per_kernel_us(ours, calls), "cudnn": per_kernel_us(cudnn, calls)}
    return {"problem": p.key(), "config": chosen, "kernels_us": rows,
            "total_us": {side: sum(k.values()) for side, k in rows.items()}}


def markdown(results: list[dict[str, Any]], info: str) -> str:
    lines = [f"# Device time per kernel ({info})", ""]
    for r in results:
        lines += [f"## {r['problem']}", "", f"convtune config: `{r['config']}`", "",
                  "| side | kernel | µs per call | share |", "|---|---|---|---|"]
        for side in ("convtune", "cudnn"):
            total = r["total_us"][side]
            for name, us in r["kernels_us"][side].items():
                lines.append(f"| {side} | `{name[:90]}` | {us:.1f} | {us / total:.0%} |")
            lines.append(f"| {side} | **total** | **{total:.1f}** | |")
        lines.append("")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("problems", nargs="+", help='problem keys, e.g. "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2"')
    ap.add_argument("--config", default=None, help="a config key for every problem (default: the resolver's)")
    ap.add_argument("--calls", type=int, default=20)
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    torch.backends.cudnn.benchmark = True
    strict_fp32()
    results = [breakdown(ConvProblem.parse(key), args.config, args.calls) for key in args.problems]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "kernel_breakdown.json").write_text(json.dumps({"device": device_info(), "results": results},
                                                               indent=1))
    text = markdown(results, str(device_info()))
    (args.out / "kernel_breakdown.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
