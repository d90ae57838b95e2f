"""The device's ceilings per precision class and its launch floor, measured (runs on the GPU host).

* GEMM peaks: ``torch.mm`` of n × n matrices (n = 8192) in fp32 with TF32 off (the strict class's ceiling), fp32
  with TF32 on, bf16 and fp16 (fp32 accumulation, cuBLAS): 2n³ / median kernel time;
* copy bandwidth: a 2 GiB device-to-device copy, (bytes read + written) / median time;
* launch floor: an empty kernel (no arguments read, one block of 32 threads) and a one-word store — the CUDA
  profiler's kernel duration (what ``convtune_kernel_ms`` and the suite tables report) and the CUDA-event time of
  one launch between two events, medians of many; also back-to-back launches per second.

Writes ``device_ceilings.json`` and ``.md`` under ``--out``.

    python benchmarks/device_ceilings.py --out benchmarks/results/ceilings_h200
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
import time
from pathlib import Path

import cupy as cp
import torch
from vs_cudnn import measure_copy_bandwidth  # benchmarks/ is on sys.path when this runs as a script

from convtune.kernels.timing import time_launches

EMPTY = r"""
extern "C" __global__ void empty_kernel() {}
extern "C" __global__ void one_store(float* out) { if (threadIdx.x == 0) out[0] = 1.0f; }
"""


def gemm_peak(dtype: torch.dtype, tf32: bool, n: int = 8192) -> float:
    torch.backends.cuda.matmul.allow_tf32 = tf32
    a = torch.randn(n, n, device="cuda", dtype=dtype)
    b = torch.randn(n, n, device="cuda", dtype=dtype)
    timing = time_launches(lambda _i: torch.mm(a, b), warmup=3, reps=15)
    torch.backends.cuda.matmul.allow_tf32 = False
    return 2 * n**3 / (timing.median_ms * 1e-3)


def profiler_kernel_us(fn, calls: int = 200) -> list[float]:
    """Each launch's device duration (µs) from the CUDA profiler (CUPTI)."""
    from torch.profiler import ProfilerActivity, profile

    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    return [e.time_range.elapsed_us() for e in prof.events() if e.device_type == torch.autograd.DeviceType.CUDA]


def event_us(fn, reps: int = 200) -> list[float]:
    """One launch between two CUDA events, ``reps`` times (includes the events' own resolution, ~0.5 µs)."""
    out = []
    for _ in range(reps):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        out.append(cp.cuda.get_elapsed_time(start, stop) * 1e3)
    return out


def launch_rate(fn, calls: int = 5000) -> float:
    """Back-to-back launches per second until the GPU has run them all."""
    fn()
    cp.cuda.Device().synchronize()
    t0 = time.perf_counter()
    for _ in range(calls):
        fn()
    cp.cuda.Device().synchronize()
    return calls / (time.perf_counter() - t0)


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/ceilings")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    module = cp.RawModule(code=EMPTY)
    empty, store = module.get_function("empty_kernel"), module.get_function("one_store")
    word = cp.zeros(1, dtype=cp.float32)
    kernels = {"empty": lambda: empty((1,), (32,), ()), "one_store": lambda: store((1,), (32,), (word,))}
    launch = {}
    for name, fn in kernels.items():
        prof = profiler_kernel_us(fn)
        ev = event_us(fn)
        launch[name] = {"profiler_median_us": statistics.median(prof), "profiler_min_us": min(prof),
                        "event_median_us": statistics.median(ev), "event_min_us": min(ev),
                        "launches_per_s": launch_rate(fn), "profiled": len(prof)}
    peaks = {"float32": gemm_peak(torch.float32, False), "tf32": gemm_peak(torch.float32, True),
             "bfloat16": gemm_peak(torch.bfloat16, False), "float16": gemm_peak(torch.float16, False)}
    report = {"device": torch.cuda.get_device_name(), "date": dt.datetime.now(dt.UTC).strftime("%Y-%m-%d %H:%M UTC"),
              "torch": torch.__version__, "cuda": torch.version.cuda,
              "copy_bandwidth_bytes_per_s": measure_copy_bandwidth(),
              "gemm_peak_flops_per_s": peaks, "launch": launch}
    (out / "device_ceilings.json").write_text(json.dumps(report, indent=1))
    lines = [f"# Ceilings and launch floor — {report['device']}", "",
             f"Measured {report['date']} · torch {report['torch']} · CUDA {report['cuda']} · "
             f"`python benchmarks/device_ceilings.py`", "",
             f"Copy bandwidth (read + write): **{report['copy_bandwidth_bytes_per_s'] / 1e12:.2f} TB/s**", "",
             "| class | GEMM n=8192, TFLOP/s |", "|---|---|"]
    lines += [f"| {k} | {v / 1e12:.1f} |" for k, v in peaks.items()]
    lines += ["", "| kernel | profiler median µs | profiler min µs | event median µs | event min µs | launches/s |",
              "|---|---|---|---|---|---|"]
    lines += [f"| {k} | {v['profiler_median_us']:.3f} | {v['profiler_min_us']:.3f} | {v['event_median_us']:.3f} |"
              f" {v['event_min_us']:.3f} | {v['launches_per_s']:.0f} |" for k, v in launch.items()]
    (out / "device_ceilings.md").write_text("\n".join(lines) + "\n")
    print("\n".join(lines))
    return 0


if __name__ == "__main__":
    sys.exit(main())
