"""The pure-Python part of a cache hit, measured without a GPU: the call paths of ``convtune.conv2d``,
``convtune.ops.torch.conv2d`` and the depthwise ops on CPU tensors "on device 0", with the driver call replaced by a
no-op (tests/fake_gpu.py's seams) — so the figure is everything a hit does except ``cuLaunchKernel`` itself and
the CUDA caching allocator (``torch.empty`` on the CPU stands in for it). Printed beside the same machine's
``torch.empty`` and a no-op ``torch.library`` custom op for scale. A development aid: the GPU figures come from
benchmarks/call_overhead.py.

    PYTHONPATH=. python benchmarks/host_path_cpu.py
"""

from __future__ import annotations

import statistics
import sys
import time
from pathlib import Path
from typing import Any

import pytest
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))


def per_call_us(fn: Any, calls: int = 20000, repeats: int = 5) -> float:
    for _ in range(500):
        fn()
    runs = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        runs.append((time.perf_counter() - t0) / calls * 1e6)
    return statistics.median(runs)


def main() -> int:
    from fake_gpu import install_fake_gpu

    import convtune
    import convtune.ops.torch as ct
    from convtune.kernels import prepared

    with pytest.MonkeyPatch.context() as mp:
        install_fake_gpu(mp)
        noop = prepared.Driver(lambda *a: None, lambda *a: None, lambda: 0, prepared.driver().use_device,
                               (RuntimeError,))
        mp.setattr(prepared, "_driver", noop)
        x, w, b = torch.randn(1, 64, 14, 14), torch.randn(64, 64, 3, 3), torch.randn(64)
        key = ("direct.fwd tile_h=4 tile_w=32 tile_k=64 chunk_c=8 thread_h=1 thread_w=4 thread_k=8 stages=2 vec=1 "
               "splits=1")
        unfused = "winograd_unfused.fwd m=4 tile_k=64 tile_t=128 chunk_c=8 thread_k=8 thread_t=8 stages=3"
        x1, w1 = torch.randn(4, 32, 64), torch.randn(32, 4)
        x2, w2 = torch.randn(4, 32, 14, 14), torch.randn(32, 1, 3, 3)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        block = torch.nn.Sequential(torch.nn.Conv2d(64, 64, 3, padding=1, bias=False), torch.nn.BatchNorm2d(64),
                                    torch.nn.ReLU()).eval()
        fused = ct.fuse(block)
        y0 = torch.randn(1, 64, 14, 14)
        rows = [
            ("convtune.conv2d hit (direct, 1 launch)", lambda: convtune.conv2d(x, w, 1, 1, config=key)),
            ("convtune.conv2d hit (unfused, 3 launches + workspace)", lambda: convtune.conv2d(x, w, 1, 1,
                                                                                          config=unfused)),
            ("convtune.ops.torch.conv2d eager, no grad (+bias)", lambda: ct.conv2d(x, w, b, 1, 1)),
            ("convtune.ops.torch.conv2d eager, no grad", lambda: ct.conv2d(x, w, None, 1, 1)),
            ("convtune.ops.torch.conv2d eager, autograd.Function", lambda: ct.conv2d(xg, wg, None, 1, 1)),
            ("convtune.ops.torch.depthwise_conv1d eager, no grad", lambda: ct.depthwise_conv1d(x1, w1)),
            ("convtune.ops.torch.depthwise_conv2d eager, no grad", lambda: ct.depthwise_conv2d(x2, w2, 1, 1)),
            ("convtune.ops.torch.bias_act eager, in place", lambda: ct.bias_act(y0, b, None, "relu", inplace=True)),
            ("conv → BN → ReLU as ct.fuse runs it (FusedConv2d, no grad)", torch.no_grad()(lambda: fused(x))),
            ("the same as PyTorch modules on the CPU (for scale: real CPU kernels)", torch.no_grad()(lambda: block(x))),
        ]
        print("| call | µs per call (CPU, launch stubbed) |\n|---|---|")
        for name, fn in rows:
            print(f"| {name} | {per_call_us(fn):.2f} |")
    y_shape = (1, 64, 14, 14)
    print(f"| torch.empty{y_shape} on the CPU (for scale) | {per_call_us(lambda: torch.empty(y_shape)):.2f} |")

    @torch.library.custom_op("convtune_bench::noop", mutates_args=())
    def noop_op(a: torch.Tensor) -> torch.Tensor:
        return torch.empty_like(a)

    print(f"| a no-op torch.library custom op (for scale) | {per_call_us(lambda: noop_op(x), calls=5000):.2f} |")
    return 0


if __name__ == "__main__":
    sys.exit(main())
