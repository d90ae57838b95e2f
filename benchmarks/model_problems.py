"""The distinct convolution problems of torchvision models at a batch size, one ``ConvProblem`` key per line (GPU
host: one forward with hooks, :func:`convtune.ops.torch.tune_model.collect_layers`) — what
``precompile_cubins.py --problems`` takes, so a model run's kernels compile in parallel before tuning starts.

    python benchmarks/model_problems.py --models efficientnet_b0 mobilenet_v3_large --batch 32 > /tmp/problems.txt
"""

from __future__ import annotations

import argparse
import sys

import torch

from convtune.ops.torch.tune_model import collect_layers, distinct_problems


def problem_keys(name: str, batch: int) -> list[str]:
    import torchvision

    model = getattr(torchvision.models, name)(weights=None).cuda().eval().requires_grad_(False)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    return [p.key() for p in distinct_problems(collect_layers(model, x))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--batch", type=int, default=32)
    args = ap.parse_args(argv)
    keys: dict[str, None] = {}
    for name in args.models:
        keys.update(dict.fromkeys(problem_keys(name, args.batch)))
    sys.stdout.write("".join(f"{k}\n" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
