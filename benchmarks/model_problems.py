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


def problem_keys(name: str, batch: int, autocast_bf16: bool = False) -> list[str]:
    """The model's distinct problems (inside ``torch.autocast("cuda", bfloat16)``: the bfloat16 class's)."""
    import contextlib

    import torchvision

    model = getattr(torchvision.models, name)(weights=None).cuda().eval().requires_grad_(False)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    region = torch.autocast("cuda", torch.bfloat16) if autocast_bf16 else contextlib.nullcontext()
    with region:
        return [p.key() for p in distinct_problems(collect_layers(model, x))]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--models", nargs="+", required=True)
    ap.add_argument("--batch", type=int, default=32)
    ap.add_argument("--math", default="ieee", choices=("ieee", "tf32", "bf16"),
                    help="bf16: the layers as they run under torch.autocast (model_inference.py --math bf16)")
    args = ap.parse_args(argv)
    keys: dict[str, None] = {}
    for name in args.models:
        keys.update(dict.fromkeys(problem_keys(name, args.batch, args.math == "bf16")))
    sys.stdout.write("".join(f"{k}\n" for k in keys))
    return 0


if __name__ == "__main__":
    sys.exit(main())
