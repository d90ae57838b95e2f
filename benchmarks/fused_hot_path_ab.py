"""A/B of the fused modules' eager hot path (GPU host): a torchvision model converted and fused, ms per eager
forward with ``FusedConv2d``'s hot path on and off (off: every call takes the general path), in alternating rounds
on the same process and tensors; also how many fused convolutions took a residual.

    python benchmarks/fused_hot_path_ab.py --model efficientnet_b0 --batch 32
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time

import torch

import convtune.ops.torch as ct
from convtune.ops.torch.fuse import FusedConv2d


def _ms(fn, forwards: int = 20) -> float:
    torch.cuda.synchronize()
    t0 = time.perf_counter()
    for _ in range(forwards):
        fn()
    torch.cuda.synchronize()
    return (time.perf_counter() - t0) / forwards * 1e3


def main(argv: list[str] | None = None) -> int:
    import torchvision

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--model", default="efficientnet_b0")
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--rounds", type=int, default=7)
    args = ap.parse_args(argv)
    torch.backends.cudnn.allow_tf32 = False
    torch.manual_seed(0)
    model = getattr(torchvision.models, args.model)(weights=None).cuda().eval().requires_grad_(False)
    x = torch.randn(args.batch, 3, 224, 224, device="cuda")
    with torch.no_grad():
        reference = model(x)
        ct.convert(model)
        fused = ct.fuse(model)
        out = fused(x)
    listed = ct.fused(fused)
    hot = FusedConv2d._fast

    def off(self, x, residual):
        return None

    times: dict[str, list[float]] = {"hot path on": [], "hot path off": []}
    with torch.no_grad():
        for _ in range(3):
            fused(x)
        for _ in range(args.rounds):
            FusedConv2d._fast = hot
            times["hot path on"].append(_ms(lambda: fused(x)))
            FusedConv2d._fast = off
            times["hot path off"].append(_ms(lambda: fused(x)))
        FusedConv2d._fast = hot
    err = float((out.double() - reference.double()).norm() / reference.double().norm())
    print(f"{args.model} b{args.batch} ({torch.cuda.get_device_name()}): {len(listed)} fused convolutions, "
          f"{sum(r for _, _, r in listed)} with a residual; output {err:.1e} from the unfused model")
    for name, values in times.items():
        print(f"{name}: {statistics.median(values):.3f} ms per eager forward (median of {args.rounds}: "
              f"{', '.join(f'{v:.3f}' for v in values)})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
