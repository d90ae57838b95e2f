"""cuDNN (through torch.nn.functional.conv2d, cudnn.benchmark on) on one shape, launched ``--launches`` times: a target
for Nsight Compute next to ``igemm_profile.py`` (runs on the GPU host). ``--problem`` as ConvProblem.parse takes it;
bfloat16 / float16 by its dtype, float32 strict or TF32 by its math.

    ncu --clock-control none --launch-skip 5 --launch-count 1 --section SpeedOfLight \\
        python3 benchmarks/cudnn_profile.py --problem "N=8 C=256 H=52 W=52 K=255 R=1 S=1 dtype=bfloat16"
"""

from __future__ import annotations

import argparse

import torch

from convtune.problem import ConvProblem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--launches", type=int, default=10)
    args = ap.parse_args()
    p = ConvProblem.parse(args.problem)
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = p.math == "tf32"
    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}.get(p.dtype, torch.float32)
    x = torch.randn(p.N, p.C, p.H, p.W, device="cuda", dtype=dtype)
    w = torch.randn(p.K, p.C, p.R, p.S, device="cuda", dtype=dtype)
    for _ in range(args.launches):
        torch.nn.functional.conv2d(x, w, stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
                                   dilation=(p.dil_h, p.dil_w))
    torch.cuda.synchronize()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
