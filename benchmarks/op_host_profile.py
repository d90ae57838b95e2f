"""Where the dense op's eager call spends host time on small layers: cProfile of back-to-back
``convtune.ops.torch.conv2d`` calls on one problem, next to ``F.conv2d``'s host µs on the same tensors (GPU host).

Per problem: host µs per call (until the last call returns) of both, launches per call (CUDA profiler), then the
op's functions by own time (cProfile, ``--top`` rows) — what a fused or leaner call path would have to remove.

    python benchmarks/op_host_profile.py --class bfloat16 --configs-from tests/data/replay_h200_bf16.json.gz \\
        --problem "N=1 C=3 H=224 W=224 K=64 R=7 S=7 stride=2 pad=3" --out /tmp/op_host_profile
"""

from __future__ import annotations

import argparse
import cProfile
import io
import pstats
import sys
from pathlib import Path
from typing import Any

import torch
from torch_timing import host_and_wall_us, kernel_us
from user_suite import problem_calls, serve_table, table_configs

from convtune.kernels.devices import device_machine
from convtune.problem import ConvProblem

DTYPES = {"tf32": torch.float32, "bfloat16": torch.bfloat16}


def _calls(spec: str, precision: str) -> tuple[Any, Any]:
    """(convtune's call, cuDNN's call) of one problem on fresh random tensors of the class."""
    p = ConvProblem.parse(spec).replace(**({"math": "tf32"} if precision == "tf32" else {"dtype": precision}))
    return problem_calls(p, DTYPES[precision], seed=0)[2:]


def profile_problems(specs: list[str], precision: str, calls: int, top: int) -> str:
    """Every problem's host and wall µs first (no CUDA profiler session before them: it can slow the process's
    later launches), then each one's kernel µs and the cProfile of the op."""
    pairs = {spec: _calls(spec, precision) for spec in specs}
    walls = {spec: [host_and_wall_us(fn, calls=calls) for fn in pair] for spec, pair in pairs.items()}
    sections = []
    for spec, pair in pairs.items():
        lines = [f"## {spec} ({precision})", ""]
        for name, fn, (host, wall) in zip(("convtune", "cuDNN"), pair, walls[spec], strict=True):
            kern, launches = kernel_us(fn)
            lines.append(f"- {name}: host {host:.1f} µs, wall {wall:.1f} µs, kernel {kern:.1f} µs, {launches:.1f} "
                         "launches per call")
        profiler = cProfile.Profile()
        torch.cuda.synchronize()
        profiler.enable()
        for _ in range(calls):
            pair[0]()
        profiler.disable()
        torch.cuda.synchronize()
        text = io.StringIO()
        pstats.Stats(profiler, stream=text).sort_stats("tottime").print_stats(top)
        lines += ["", "```", text.getvalue().strip(), "```", ""]
        sections.append("\n".join(lines))
    return "\n".join(sections)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", action="append", required=True, help="a problem key (repeatable)")
    ap.add_argument("--class", dest="precision", choices=tuple(DTYPES), default="bfloat16")
    ap.add_argument("--calls", type=int, default=500)
    ap.add_argument("--top", type=int, default=25)
    ap.add_argument("--out", default="benchmarks/results/op_host_profile")
    ap.add_argument("--configs-from", default=None, help="a replay table whose fastest measured configs the op serves")
    args = ap.parse_args(argv)
    if args.configs_from:
        machine = device_machine(0)
        serve_table(table_configs(args.configs_from, machine.name), machine.name)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    text = profile_problems(args.problem, args.precision, args.calls, args.top)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / f"op_host_profile_{args.precision}.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
