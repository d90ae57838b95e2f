"""Where the host time of a depthwise forward + backward through autograd goes (GPU host).

``call_overhead.py`` reports the whole step (``torch.autograd.grad(op(x, w), (x, w), dy)``) of convtune and of
PyTorch; this splits convtune's into parts timed the same way (host µs per call of 200 back-to-back calls, until
the last returns), next to PyTorch's on the same tensors:

* the whole step, with autograd's device threads (the default) and with ``set_multithreading_enabled(False)``
  (the backward on the calling thread);
* the forward alone on inputs that require grad (the graph is built, never run);
* the gradient implementations called directly (input gradient, weight gradient);
* the floor of the mechanism: the same step through an ``autograd.Function`` whose forward and backward only
  allocate their outputs (``torch.empty``), no kernel;
* then cProfile of convtune's step on the calling thread (multithreading off: a profiler sees only its own
  thread), top functions by own time.

    python benchmarks/backward_host_split.py --out /tmp/backward_split
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import cprofile_top, host_and_wall_us, write_split

import convtune.ops.torch as ct
from convtune.ops.torch import depthwise as dw

CASES = {
    "dw2d N=32 C=384 14² 3x3": (32, 384, 14, 14, 3, 1, 1),
    "dw2d N=32 C=144 56² 3x3": (32, 144, 56, 56, 3, 1, 1),
    "dw2d N=32 C=960 7² 3x3 (MobileNetV2 last)": (32, 960, 7, 7, 3, 1, 1),
}


class _EmptyFunction(torch.autograd.Function):
    """The mechanism's floor: allocates its outputs, launches nothing."""

    @staticmethod
    def forward(ctx: Any, x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(x, w)
        return torch.empty_like(x)

    @staticmethod
    def backward(ctx: Any, dy: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        x, w = ctx.saved_tensors
        return torch.empty_like(x), torch.empty_like(w)


def _rows(name: str, N: int, C: int, H: int, R: int, stride: int, pad: int) -> list[dict[str, Any]]:
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(N, C, H, H, device="cuda", generator=g)
    w = torch.randn(C, 1, R, R, device="cuda", generator=g)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    y = F.conv2d(x, w, None, stride, pad, 1, C)
    dy = torch.randn_like(y)
    P, Q = y.shape[2:]
    geo = (stride, stride, pad, pad)

    def step(fwd: Callable[[], torch.Tensor]) -> Callable[[], Any]:
        return lambda: torch.autograd.grad(fwd(), (xg, wg), dy)

    ours = lambda: ct.depthwise_conv2d(xg, wg, stride, pad)  # noqa: E731
    theirs = lambda: F.conv2d(xg, wg, None, stride, pad, 1, C)  # noqa: E731
    parts: dict[str, Callable[[], Any]] = {
        "step pytorch": step(theirs),
        "step convtune": step(ours),
        "step no-kernel Function": step(lambda: _EmptyFunction.apply(xg, wg)),
        "forward (grad) pytorch": theirs,
        "forward (grad) convtune": ours,
        "forward (no grad) convtune": lambda: ct.depthwise_conv2d(x, w, stride, pad),
        "dgrad impl convtune": lambda: dw._dw2d_dgrad_impl(dy, w, H, H, *geo),
        "wgrad impl convtune": lambda: dw._dw2d_wgrad_impl(x, dy, R, R, *geo),
        "dgrad pytorch (conv2d_input)": lambda: torch.nn.grad.conv2d_input(x.shape, w, dy, stride, pad, groups=C),
        "torch.empty (N, C, P, Q)": lambda: torch.empty(N, C, P, Q, device="cuda"),
    }
    rows = []
    for part, fn in parts.items():
        host, wall = host_and_wall_us(fn)
        rows.append({"case": name, "part": part, "threads": "on", "host_us": host, "wall_us": wall})
    torch.autograd.set_multithreading_enabled(False)
    try:
        for part in ("step pytorch", "step convtune", "step no-kernel Function"):
            host, wall = host_and_wall_us(parts[part])
            rows.append({"case": name, "part": part, "threads": "off", "host_us": host, "wall_us": wall})
    finally:
        torch.autograd.set_multithreading_enabled(True)
    return rows


def _profile(name: str, top: int) -> str:
    N, C, H, _, R, stride, pad = CASES[name]
    x = torch.randn(N, C, H, H, device="cuda", requires_grad=True)
    w = torch.randn(C, 1, R, R, device="cuda", requires_grad=True)
    dy = torch.randn_like(F.conv2d(x.detach(), w.detach(), None, stride, pad, 1, C))
    fn = lambda: torch.autograd.grad(ct.depthwise_conv2d(x, w, stride, pad), (x, w), dy)  # noqa: E731
    torch.autograd.set_multithreading_enabled(False)
    try:
        return cprofile_top(fn, top=top)
    finally:
        torch.autograd.set_multithreading_enabled(True)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--top", type=int, default=30)
    args = ap.parse_args(argv)
    args.out.mkdir(parents=True, exist_ok=True)
    rows = [r for name, spec in CASES.items() for r in _rows(name, *spec[:3], *spec[4:])]
    lines = [f"# Depthwise forward + backward host split ({torch.cuda.get_device_name()}, torch {torch.__version__})",
             "", "| case | part | autograd threads | host µs | wall µs |", "|---|---|---|---|---|"]
    lines += [f"| {r['case']} | {r['part']} | {r['threads']} | {r['host_us']:.1f} | {r['wall_us']:.1f} |" for r in rows]
    profile = _profile(next(iter(CASES)), args.top)   # after every wall (profilers can slow later launches)
    write_split(args.out, "backward_host_split", "\n".join(lines) + "\n", rows, profile, args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
