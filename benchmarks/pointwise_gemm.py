"""Prototype 1×1 convolution kernel (``benchmarks/prototypes/pointwise_gemm.cu``: one GEMM over every output
pixel of every image) against cuDNN fp32 and the tuned direct kernel on the 1×1 layers of ResNet-50 and
MobileNetV2, batch 32 (GPU host).

The models benchmark found these layers at 0.88× (ResNet-50) and 1.01× (MobileNetV2) of cuDNN fp32 with the
direct family, which caps the models at 1.1–1.2× (issue 14). This sweeps a small space of the prototype (block
tile BM × BN, chunk BK, pipeline stages) per layer: each config's output is checked against float64 (poisoned
output first), timed by CUDA events; the best and cuDNN (``allow_tf32=False``, ``cudnn.benchmark=True``) are then
timed by the CUDA profiler in the same run. The direct family's tuned kernel ms per layer is read from the
committed model tables (another run: for orientation only). Table: per layer and per model, weighted by how
often the layer occurs.

    python benchmarks/pointwise_gemm.py --out benchmarks/results/pointwise
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import sys
from pathlib import Path
from typing import Any

import cupy as cp
import torch
import torch.nn.functional as F
from torch_timing import device_info, event_ms, kernel_us, rel_error, strict_fp32

ROOT = Path(__file__).resolve().parents[1]
SOURCE = ROOT / "benchmarks" / "prototypes" / "pointwise_gemm.cu"
INCLUDE = ROOT / "convtune" / "kernels" / "include"
MODEL_TABLES = {"resnet50": ROOT / "benchmarks/results/delivered_h200/models_resnet50.json",
                "mobilenet_v2": ROOT / "benchmarks/results/delivered_h200/models_mobilenet_v2.json"}
TILES = [(128, 128), (128, 64), (64, 128), (64, 64), (32, 128), (128, 32), (64, 32), (32, 64)]
SPACE = [dict(BM=bm, BN=bn, BK=bk, STAGES=st) for (bm, bn), bk, st in itertools.product(TILES, [8, 16], [2, 3, 4])]
SPLITS = (1, 2, 4)
SMS = 132
TOLERANCE = 2e-5
_modules: dict[tuple[Any, ...], Any] = {}


def layers() -> list[dict[str, Any]]:
    """The distinct 1×1 layers of the committed model tables: x/w shapes, stride, count, direct-family ms."""
    rows = []
    for model, path in MODEL_TABLES.items():
        for layer in json.loads(path.read_text())["rows"][0]["layers_kernel"]:
            if layer["w"][2:] == [1, 1] and layer["groups"] == 1:
                rows.append({"model": model, "layer": layer["layer"], "count": layer["count"], "x": layer["x"],
                             "w": layer["w"], "stride": layer["stride"][0],
                             "direct_tuned_ms_other_run": layer["convtune_kernel_ms"]})
    return rows


def kernel(cfg: dict[str, int], vec: int, stride: int) -> Any:
    key = (tuple(sorted(cfg.items())), vec, stride)
    if key not in _modules:
        defines = cfg | {"VEC": vec, "SH": stride, "SW": stride}
        options = ("-std=c++17", f"-I{INCLUDE}", *(f"-D{k}={v}" for k, v in defines.items()))
        fn = cp.RawModule(code=SOURCE.read_text(), options=options).get_function("pointwise_gemm")
        smem = cfg["STAGES"] * cfg["BK"] * (cfg["BM"] + cfg["BN"]) * 4
        if smem > 48 * 1024:
            fn.max_dynamic_shared_size_bytes = smem
        _modules[key] = (fn, smem, (cfg["BM"] // 8) * (cfg["BN"] // 8))
    return _modules[key]


def run_layer(row: dict[str, Any]) -> dict[str, Any]:
    n, c, h, w = row["x"]
    k = row["w"][0]
    s = row["stride"]
    p, q = (h - 1) // s + 1, (w - 1) // s + 1
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(n, c, h, w, device="cuda", generator=g)
    wt = torch.randn(k, c, 1, 1, device="cuda", generator=g)
    kp = (k + 3) // 4 * 4
    wpk = torch.zeros(c, kp, device="cuda")
    wpk[:, :k] = wt.view(k, c).t()
    y = torch.empty(n, k, p, q, device="cuda")
    ref = F.conv2d(x.double(), wt.double(), stride=s)
    vec = 4 if s == 1 and (h * w) % 4 == 0 else 1
    stream = cp.cuda.ExternalStream(torch.cuda.current_stream().cuda_stream)
    args = (x.data_ptr(), wpk.data_ptr(), y.data_ptr(), n, c, h, w, k, kp, p, q)
    args = tuple(cp.int64(a) if i < 3 else cp.int32(a) for i, a in enumerate(args))
    sweep = []
    for cfg, splits in itertools.product(SPACE, SPLITS):
        fn, smem, threads = kernel(cfg, vec, s)
        grid = ((n * p * q + cfg["BM"] - 1) // cfg["BM"], (k + cfg["BN"] - 1) // cfg["BN"], splits)
        if splits > 1 and grid[0] * grid[1] >= 2 * SMS:
            continue  # enough tiles already: splitting only adds atomics
        chunks = (c + cfg["BK"] - 1) // cfg["BK"]
        per_split = (chunks + splits - 1) // splits
        call_args = (*args, cp.int32(per_split))

        def launch(fn: Any = fn, grid: Any = grid, threads: int = threads, smem: int = smem,
                   call_args: Any = call_args, splits: int = splits) -> None:
            if splits > 1:
                y.zero_()
            with stream:
                fn(grid, (threads,), call_args, shared_mem=smem)

        y.fill_(float("nan"))
        launch()
        torch.cuda.synchronize()
        err = rel_error(y, ref)
        if not err <= TOLERANCE:
            sweep.append({"cfg": cfg | {"splits": splits}, "error": err, "ms": None})
            continue
        sweep.append({"cfg": cfg | {"splits": splits}, "error": err, "ms": event_ms(launch, reps=10),
                      "launch": launch})
    ok = [r for r in sweep if r["ms"] is not None]
    out = {k_: v for k_, v in row.items()}
    out["vec"] = vec
    out["failed_configs"] = [r["cfg"] for r in sweep if r["ms"] is None]
    out["cudnn_fp32_kernel_ms"] = kernel_us(lambda: F.conv2d(x, wt, stride=s))[0] / 1e3
    if ok:
        best = min(ok, key=lambda r: r["ms"])
        out |= {"best_cfg": best["cfg"], "best_error": best["error"],
                "prototype_kernel_ms": kernel_us(best["launch"])[0] / 1e3}
    out["gflop"] = 2 * n * p * q * k * c / 1e9
    return out


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# 1×1 layers: prototype pointwise GEMM vs cuDNN fp32 ({meta['device']}, torch {meta['torch']}, "
             f"cuDNN {meta['cudnn']}, {meta['date']})", "",
             "Kernel ms per call by the CUDA profiler, same run; the prototype's best of "
             f"{len(SPACE)} tile configs × splits {SPLITS} (a split run includes zeroing y; checked vs float64, "
             f"rel. error ≤ {TOLERANCE:g}); direct tuned: the committed model tables (another run).", "",
             "| model | layer | × | x | K | stride | cuDNN ms | prototype ms | × cuDNN | TFLOP/s | direct tuned ms | "
             "config |", "|---|---|---|---|---|---|---|---|---|---|---|---|"]
    totals: dict[str, list[float]] = {}
    for r in rows:
        proto = r.get("prototype_kernel_ms")
        t = totals.setdefault(r["model"], [0.0, 0.0, 0.0])
        t[0] += r["count"] * r["cudnn_fp32_kernel_ms"]
        t[1] += r["count"] * (proto if proto else r["cudnn_fp32_kernel_ms"])
        t[2] += r["count"] * (r["direct_tuned_ms_other_run"] or r["cudnn_fp32_kernel_ms"])
        cfg = r.get("best_cfg") or {}
        lines.append(
            f"| {r['model']} | {r['layer']} | {r['count']} | {r['x']} | {r['w'][0]} | {r['stride']} | "
            f"{r['cudnn_fp32_kernel_ms']:.4f} | {proto if proto is None else f'{proto:.4f}'} | "
            f"{r['cudnn_fp32_kernel_ms'] / proto if proto else float('nan'):.2f} | "
            f"{r['gflop'] / proto if proto else float('nan'):.1f} | {r['direct_tuned_ms_other_run']:.4f} | "
            f"{' '.join(f'{k}={v}' for k, v in cfg.items())} |")
    lines += ["", "| model | Σ cuDNN ms | Σ prototype ms | × cuDNN | Σ direct tuned ms (other run) |",
              "|---|---|---|---|---|"]
    for model, (cud, proto, direct) in totals.items():
        lines.append(f"| {model} | {cud:.3f} | {proto:.3f} | {cud / proto:.2f} | {direct:.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/pointwise")
    args = ap.parse_args(argv)
    strict_fp32()
    torch.backends.cudnn.benchmark = True
    rows = []
    for row in layers():
        rows.append(run_layer(row))
        r = rows[-1]
        print(f"{r['model']} {r['layer']}: cuDNN {r['cudnn_fp32_kernel_ms']:.4f} ms, prototype "
              f"{r.get('prototype_kernel_ms')} ms {r.get('best_cfg')} failed {len(r['failed_configs'])}",
              file=sys.stderr, flush=True)
    meta = device_info() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds")}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "pointwise_gemm.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (out / "pointwise_gemm.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
