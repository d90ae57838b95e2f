"""Where a converted model's eager forward spends host time: cProfile of back-to-back forwards (GPU host).

    python benchmarks/eager_profile.py --model vgg16 --batch 1 --calls 50
    python benchmarks/eager_profile.py --model resnet50 --batch 32 --bf16   # the forward under bf16 autocast
"""

from __future__ import annotations

import argparse
import contextlib
import cProfile
import pstats
import sys
import time

import torch
import torchvision

import convtune.ops.torch as ct


def _autocast(bf16: bool) -> contextlib.AbstractContextManager[object]:
    return torch.autocast("cuda", dtype=torch.bfloat16) if bf16 else contextlib.nullcontext()


def _host_wall(model: torch.nn.Module, x: torch.Tensor, calls: int) -> tuple[float, float]:
    """(host s, wall s) per forward of ``calls`` back-to-back forwards: until the last returns / the GPU is done."""
    for _ in range(3):
        model(x)
    torch.cuda.synchronize()
    start = time.perf_counter()
    for _ in range(calls):
        model(x)
    host = (time.perf_counter() - start) / calls
    torch.cuda.synchronize()
    return host, (time.perf_counter() - start) / calls


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--model", default="vgg16")
    ap.add_argument("--batch", type=int, default=1)
    ap.add_argument("--calls", type=int, default=50)
    ap.add_argument("--top", type=int, default=30)
    ap.add_argument("--bf16", action="store_true", help="every forward under torch.autocast('cuda', bfloat16)")
    args = ap.parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False
    model = getattr(torchvision.models, args.model)().cuda().eval()
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    with torch.no_grad(), _autocast(args.bf16):
        reference = model(x)
        base_host, base_wall = _host_wall(model, x, args.calls)
        ct.convert(model)
        for _ in range(3):
            out = model(x)  # compiles and caches every layer's launch
        torch.cuda.synchronize()
        rel = float((out - reference).norm() / reference.norm())
        host, wall = _host_wall(model, x, args.calls)
        profile = cProfile.Profile()
        profile.enable()
        for _ in range(args.calls):
            model(x)
        profile.disable()
        torch.cuda.synchronize()
    print(f"{args.model} b{args.batch}: convtune host {host * 1e3:.3f} ms / forward, wall {wall * 1e3:.3f} ms; "
          f"cuDNN {'bf16' if args.bf16 else 'fp32'} host {base_host * 1e3:.3f} ms, wall {base_wall * 1e3:.3f} ms; "
          f"rel err vs cuDNN {rel:.1e}")
    stats = pstats.Stats(profile, stream=sys.stdout)
    stats.sort_stats("tottime").print_stats(args.top)
    stats.sort_stats("cumulative").print_stats(args.top)
    return 0


if __name__ == "__main__":
    sys.exit(main())
