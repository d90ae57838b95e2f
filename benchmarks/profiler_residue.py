"""Does a CUDA profiler session leave launches slower for the rest of the process? (GPU host)

``user_suite.py`` used to time each entry's kernels with ``torch.profiler`` (CUPTI) and then its eager calls, entry
after entry, so every eager figure but the first was taken after a profiler session. If CUPTI stays attached after
the session (kineto keeps it when it does not tear down), every later launch pays its callbacks — more for the op
that launches more kernels and memsets per call. This probe times the same calls three times in one process:

1. eager and graph walls of every entry before any profiler session (paired rounds, convtune and cuDNN in turn),
   after one untimed pass of the same walls (the process's warm-up);
2. every entry's kernel µs by the CUDA profiler (``torch_timing.kernel_us``);
3. the walls of step 1 again.

A step-3 wall well above step 1's for the same calls is the profiler's residue.

    python benchmarks/profiler_residue.py --class bfloat16 --configs-from tests/data/replay_h200_bf16.json.gz \\
        --suite benchmarks/suites/wide.json --only alexnet_conv1_b1 zfnet_conv1_b1 --out /tmp/residue
"""

from __future__ import annotations

import argparse
import json
import sys
import warnings
from pathlib import Path
from typing import Any

import torch
from torch_timing import cuda_graph, device_info, kernel_us
from user_suite import CLASSES, _paired_walls, entry_problem, problem_calls, serve_table, table_configs

from convtune.kernels.devices import device_machine


def calls_of(entry: dict[str, Any], precision: str) -> tuple[Any, Any]:
    """(convtune's call, cuDNN's call) of one suite entry, on the tensors ``user_suite.py`` times it on."""
    p = entry_problem(entry, precision)
    return problem_calls(p, CLASSES[precision][1], seed=len(entry["name"]))[2:]


def walls(pairs: dict[str, tuple[Any, Any]], calls: int) -> dict[str, dict[str, float]]:
    out = {}
    for name, (ours, cudnn) in pairs.items():
        with warnings.catch_warnings():   # step 3 times after a profiler session on purpose
            warnings.filterwarnings("ignore", "a wall timed after a CUDA profiler session", RuntimeWarning)
            eager = _paired_walls(ours, cudnn, calls)
            graph = _paired_walls(cuda_graph(ours).replay, cuda_graph(cudnn).replay, calls)
        out[name] = {"eager_us": eager[0], "cudnn_eager_us": eager[1], "graph_us": graph[0],
                     "cudnn_graph_us": graph[1]}
    return out


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/wide.json")
    ap.add_argument("--only", nargs="+", required=True)
    ap.add_argument("--class", dest="precision", choices=tuple(CLASSES), default="bfloat16")
    ap.add_argument("--configs-from", default=None)
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--out", default="/tmp/profiler_residue")
    args = ap.parse_args(argv)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = args.precision == "tf32"
    machine = device_machine(0)
    if args.configs_from:
        serve_table(table_configs(args.configs_from, machine.name), machine.name)
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if e["name"] in args.only]
    pairs = {e["name"]: calls_of(e, args.precision) for e in entries}
    for ours, cudnn in pairs.values():   # compile, prepare, pick cuDNN's algorithm
        ours(), cudnn()
    torch.cuda.synchronize()
    # one whole untimed pass first: on the H200 (2026-12-06) the first entry a process timed read 23.2 µs before
    # the session and 19.2 after, the others 15.7–22.9 before and slower after — the process's own warm-up
    walls(pairs, args.calls)
    before = walls(pairs, args.calls)
    kernels = {}
    for name, (ours, cudnn) in pairs.items():
        us, launches = kernel_us(ours)
        kernels[name] = {"kernel_us": us, "launches": launches, "cudnn_kernel_us": kernel_us(cudnn)[0]}
    after = walls(pairs, args.calls)
    rows = [{"name": n, "before": before[n], "after": after[n]} | kernels[n] for n in pairs]
    lines = [f"# Walls before and after a CUDA profiler session ({device_info()['device']}, class {args.precision})",
             "", "µs per call; eager and graph: median of 3 paired rounds of 200 back-to-back calls.", "",
             "| entry | launches | kernel ours / cuDNN | eager before: ours / cuDNN | eager after: ours / cuDNN | "
             "graph before | graph after |", "|---|---|---|---|---|---|---|"]
    for r in rows:
        b, a = r["before"], r["after"]
        lines.append(f"| {r['name']} | {r['launches']:.1f} | {r['kernel_us']:.1f} / {r['cudnn_kernel_us']:.1f} | "
                     f"{b['eager_us']:.1f} / {b['cudnn_eager_us']:.1f} | {a['eager_us']:.1f} / "
                     f"{a['cudnn_eager_us']:.1f} | {b['graph_us']:.1f} / {b['cudnn_graph_us']:.1f} | "
                     f"{a['graph_us']:.1f} / {a['cudnn_graph_us']:.1f} |")
    text = "\n".join(lines) + "\n"
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "profiler_residue.md").write_text(text)
    (out / "profiler_residue.json").write_text(json.dumps({"meta": device_info(), "rows": rows}, indent=1))
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
