"""The fused convolution epilogue against what it replaces, on the GPU: correctness and kernel time.

Per activation-map shape of ResNet-50 / MobileNetV2 batch 32 and dtype (float32, bfloat16):

* correctness: ``convtune.ops.torch.bias_act(y, b, res, act)`` against the float64 formula on the same (rounded)
  inputs, relative error (max |diff| / max |ref|); y, b, res fresh normal draws; the output poisoned with NaN first;
* kernel time (CUDA profiler, µs per call) of ``bias_act`` in place and of PyTorch's sequence it replaces in a
  fused model — eval BatchNorm then ReLU / ReLU6 in place, and for the residual case BatchNorm, ``+=`` and ReLU —
  with the bandwidth each reaches (the epilogue's bytes: y read and written, the residual read).

    python benchmarks/epilogue_bench.py --out benchmarks/results/epilogue
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import torch
import torch.nn.functional as F
from torch_timing import device_info, kernel_us

import convtune.ops.torch as ct

#: (name, N, K, H, W, activation, residual)
CASES = [
    ("mnv2_expand_112", 32, 96, 112, 112, "relu6", False),
    ("mnv2_expand_56", 32, 144, 56, 56, "relu6", False),
    ("mnv2_project_28_res", 32, 32, 28, 28, "none", True),
    ("mnv2_expand_7", 32, 960, 7, 7, "relu6", False),
    ("r50_3x3_56", 32, 64, 56, 56, "relu", False),
    ("r50_out_56_res", 32, 256, 56, 56, "relu", True),
    ("r50_out_7_res", 32, 2048, 7, 7, "relu", True),
]
DTYPES = {"float32": torch.float32, "bfloat16": torch.bfloat16}


def _reference(y: torch.Tensor, b: torch.Tensor, res: torch.Tensor | None, act: str) -> torch.Tensor:
    z = y.double() + b.double().view(1, -1, 1, 1)
    if res is not None:
        z = z + res.double()
    return z.clamp_min(0) if act == "relu" else z.clamp(0, 6) if act == "relu6" else z


def _torch_sequence(bn: torch.nn.BatchNorm2d, y: torch.Tensor, res: torch.Tensor | None, act: str) -> torch.Tensor:
    z = bn(y)
    if res is not None:
        z += res
    return F.relu_(z) if act == "relu" else F.hardtanh_(z, 0.0, 6.0) if act == "relu6" else z


def run_case(name: str, N: int, K: int, H: int, W: int, act: str, residual: bool, dtype: torch.dtype) -> dict:
    g = torch.Generator(device="cuda").manual_seed(0)
    y = torch.randn(N, K, H, W, device="cuda", dtype=dtype, generator=g)
    b = torch.randn(K, device="cuda", generator=g)
    res = torch.randn(N, K, H, W, device="cuda", dtype=dtype, generator=g) if residual else None
    ref = _reference(y, b, res, act)
    out = ct.bias_act(y, b, res, act)
    y_in_place = y.clone()
    in_place = ct.bias_act(y_in_place, b, res, act, inplace=True)
    torch.cuda.synchronize()
    scale = ref.abs().max().item()
    err = max((o.double() - ref).abs().max().item() / scale for o in (out, in_place))
    finite = bool(torch.isfinite(out).all() and torch.isfinite(in_place).all())
    bn = torch.nn.BatchNorm2d(K, device="cuda", dtype=dtype).eval()
    with torch.no_grad():
        bn.running_mean.normal_()
        bn.running_var.uniform_(0.5, 2.0)
        ours_us = kernel_us(lambda: ct.bias_act(y, b, res, act, inplace=True))[0]
        torch_us, torch_kernels = kernel_us(lambda: _torch_sequence(bn, y, res, act))
    nbytes = (2 + residual) * y.numel() * y.element_size()
    return {"case": name, "dtype": str(dtype).removeprefix("torch."), "shape": [N, K, H, W], "activation": act,
            "residual": residual, "rel_error": err, "all_finite": finite, "bias_act_us": ours_us,
            "torch_us": torch_us, "torch_kernels": torch_kernels, "bias_act_GBps": nbytes / ours_us / 1e3,
            "speedup": torch_us / ours_us}


def markdown(rows: list[dict], meta: dict) -> str:
    lines = [f"# Fused epilogue vs PyTorch's BatchNorm + add + activation ({meta['device']}, torch {meta['torch']})",
             "", "Kernel µs per call (CUDA profiler); the epilogue's bytes: y read + written, the residual read.", "",
             "| case | dtype | shape | act | residual | rel. error | bias_act µs | GB/s | PyTorch µs (kernels) | × |",
             "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        lines.append(f"| {r['case']} | {r['dtype']} | {r['shape']} | {r['activation']} | {r['residual']} | "
                     f"{r['rel_error']:.1e} | {r['bias_act_us']:.1f} | {r['bias_act_GBps']:.0f} | "
                     f"{r['torch_us']:.1f} ({r['torch_kernels']:.0f}) | {r['speedup']:.2f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, default=Path("benchmarks/results/epilogue"))
    args = ap.parse_args(argv)
    rows = [run_case(*case, dtype=dtype) for dtype in DTYPES.values() for case in CASES]
    meta = device_info()
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "epilogue.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (args.out / "epilogue.md").write_text(text)
    print(text)
    tolerance = {"float32": 1e-6, "bfloat16": 2**-8}
    bad = [r["case"] for r in rows if r["rel_error"] > tolerance[r["dtype"]] or not r["all_finite"]]
    if bad:
        print(f"FAILED accuracy: {bad}", file=sys.stderr)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
