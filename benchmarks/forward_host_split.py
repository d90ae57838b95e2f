"""Where the host time of a single-launch forward goes, with the GPU idle and with it busy (GPU host).

``call_overhead.py`` times 200 back-to-back calls until the last returns. When the kernel is shorter than the
host's call the GPU drains the queue between launches; when it is longer the launches queue up. This times the
same calls both ways — "idle": as ``call_overhead.py`` does; "busy": behind a ``torch.cuda._sleep`` spin kernel
long enough to cover every call, so each launch lands on a non-empty queue — and splits convtune's call into
its layers, each timed the same way (host µs per call, median of 3 × 200 calls):

* PyTorch's ``F.conv2d`` on the same tensors;
* convtune's plain function (``convtune.ops.torch.depthwise_conv2d``, ``convtune.conv2d`` for the dense case);
* its cached runner ``run(x, w)`` (allocation + launch);
* the prepared launch alone (``prepared(pointers, stream)`` into a preallocated output);
* ``torch.empty`` of the output, the stream lookup;

then cProfile of the plain function (busy), top functions by own time.

    python benchmarks/forward_host_split.py --out /tmp/forward_split
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import cprofile_top, write_split

import convtune
import convtune.ops.torch as ct
from convtune.ops.conv2d import runner as dense_runner
from convtune.ops.conv2d import torch_stream_getter
from convtune.ops.torch import depthwise as dw

CALLS = 200
#: (name, kind, N, C, H, K, R, stride, pad): depthwise rows have K = C
CASES = [
    ("dw2d N=32 C=384 14² 3x3", "dw2d", 32, 384, 14, 384, 3, 1, 1),
    ("dw2d N=32 C=144 56² 3x3", "dw2d", 32, 144, 56, 144, 3, 1, 1),
    ("direct 1x1 N=32 C=256 56² K=64", "dense", 32, 256, 56, 64, 1, 1, 0),
    ("direct 1x1 N=8 C=64 14² K=64 (short kernel)", "dense", 8, 64, 14, 64, 1, 1, 0),
]


def _host_us(fn: Callable[[], Any], busy: bool, calls: int = CALLS, repeats: int = 3) -> float:
    """Host µs per call of ``calls`` back-to-back calls (median of ``repeats``); ``busy``: behind a spin kernel
    of ≈ 20 ms, so the queue never drains while the calls are issued."""
    for _ in range(20):
        fn()
    torch.cuda.synchronize()
    hosts = []
    for _ in range(repeats):
        torch.cuda.synchronize()
        if busy:
            torch.cuda._sleep(40_000_000)   # cycles: ≈ 20 ms at ~2 GHz, longer than 200 calls of ≤ 100 µs
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        hosts.append((time.perf_counter() - t0) / calls * 1e6)
        torch.cuda.synchronize()
    return statistics.median(hosts)


def _parts(kind: str, N: int, C: int, H: int, K: int, R: int, stride: int, pad: int) -> dict[str, Callable[[], Any]]:
    """The timed callables of one case (all on the same fresh random tensors)."""
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, C, H, H, device="cuda", generator=g)
    groups = C if kind == "dw2d" else 1
    w = torch.randn(K, C // groups, R, R, device="cuda", generator=g)
    y = F.conv2d(x, w, None, stride, pad, 1, groups)
    out = torch.empty_like(y)
    stream_of = torch_stream_getter(torch)
    if kind == "dw2d":
        geo = (stride, stride, pad, pad)
        plain = lambda: ct.depthwise_conv2d(x, w, stride, pad)  # noqa: E731
        run = dw._fwd2_run(x, w, geo)
        problem = dw._problem_2d(x, N, C, H, H, R, R, *geo)
        prepared = dw._prepared(problem, 0, "fwd")
    else:
        plain = lambda: convtune.conv2d(x, w, stride, pad)  # noqa: E731
        run = dense_runner(x, w, stride, pad)
        prepared = None
    parts: dict[str, Callable[[], Any]] = {
        "F.conv2d (PyTorch)": lambda: F.conv2d(x, w, None, stride, pad, 1, groups),
        "plain function": plain,
        "runner run(x, w)": lambda: run(x, w),
        "torch.empty (output)": lambda: torch.empty(y.shape, device="cuda"),
        "stream lookup": lambda: stream_of(0),
    }
    if prepared is not None and not prepared.workspace_bytes:
        px, pw, po = x.data_ptr(), w.data_ptr(), out.data_ptr()
        parts["prepared launch alone"] = lambda: prepared((px, pw, po), stream_of(0))
    return parts


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--top", type=int, default=25)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    torch.backends.cudnn.allow_tf32 = False
    rows, all_parts = [], {}
    for name, *spec in CASES:
        parts = all_parts[name] = _parts(*spec)   # type: ignore[arg-type]
        for part, fn in parts.items():
            rows.append({"case": name, "part": part, "idle_host_us": _host_us(fn, busy=False),
                         "busy_host_us": _host_us(fn, busy=True)})
    lines = [f"# Single-launch forward host split ({torch.cuda.get_device_name()}, torch {torch.__version__})", "",
             "host µs per call of 200 back-to-back calls; busy: behind a spin kernel (the queue never drains)", "",
             "| case | part | idle host µs | busy host µs |", "|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['part']} | {r['idle_host_us']:.1f} | {r['busy_host_us']:.1f} |" for r in rows]
    profile = cprofile_top(all_parts[CASES[0][0]]["plain function"], top=args.top, busy=True)
    write_split(args.out, "forward_host_split", "\n".join(lines) + "\n", rows, profile, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
