"""What a caller pays per call, measured the same way for convtune and for PyTorch (GPU host; imported by the
call-overhead, user-suite and model benchmarks).

* host µs per call: the wall time of ``calls`` back-to-back calls until the last one *returns* (the GPU queue
  holds them: 200 calls of ≤ 4 launches stay below the driver's queue depth), divided by ``calls``;
* wall µs per call: the same until the GPU has finished them all (what a training or inference loop sees: the
  larger of host and device time);
* kernel µs per call: the device time of every kernel and memset the calls ran, from the CUDA profiler
  (``torch.profiler``, CUPTI: kernels launched through ``cuLaunchKernel`` and by graph replays are recorded
  like torch's own), divided by ``calls``: the union of their intervals (:func:`busy_us`), so kernels that overlap
  count once. Until 2026-12-07 (session 21) it was the sum of their durations, which counts overlapping kernels
  twice: cuDNN bf16 on OpenPose stage-2 conv1 (C = 185, 7×7) read 5.9 ms a call against a 1.4 ms wall.

A profiler session can leave CUPTI attached to the process, and every later launch then pays its callbacks (more
for a call of more launches): take every host and wall figure of a process before its first :func:`kernel_us`
(``profiler_residue.py`` measures the effect).
"""

from __future__ import annotations

import cProfile
import io
import json
import math
import pstats
import statistics
import time
import warnings
from collections.abc import Callable
from typing import Any

import torch

CALLS = 200


#: whether this process has run a CUDA profiler session (:func:`kernel_us`): walls taken after one may be slowed
_profiled = False


def host_and_wall_us(fn: Callable[[], Any], calls: int = CALLS, warmup: int = 20,
                     repeats: int = 3) -> tuple[float, float]:
    """(host µs, wall µs) per call, the median of ``repeats`` runs of ``calls`` back-to-back calls.

    Warns (once per call site) when the process has already run a profiler session (the module docstring: take
    every wall first; a caller that times after one on purpose filters the warning)."""
    if _profiled:
        warnings.warn("a wall timed after a CUDA profiler session in this process: launches may be slowed "
                      "(take every wall before the first kernel_us)", RuntimeWarning, stacklevel=2)
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    hosts, walls = [], []
    for _ in range(repeats):
        torch.cuda.synchronize()
        t0 = time.perf_counter()
        for _ in range(calls):
            fn()
        t1 = time.perf_counter()
        torch.cuda.synchronize()
        t2 = time.perf_counter()
        hosts.append((t1 - t0) / calls * 1e6)
        walls.append((t2 - t0) / calls * 1e6)
    return statistics.median(hosts), statistics.median(walls)


def busy_us(intervals: list[tuple[float, float]]) -> float:
    """The length of the union of ``(start, end)`` intervals (µs): device time during which at least one kernel or
    memset ran. Kernels that overlap — a programmatic dependent launch that starts before its predecessor ends, or
    kernels on several streams — count once; for kernels that run one after another it is their summed duration."""
    total, reach = 0.0, -math.inf
    for start, end in sorted(intervals):
        if end > reach:
            total += end - max(start, reach)
            reach = end
    return total


def kernel_us(fn: Callable[[], Any], calls: int = 50) -> tuple[float, float]:
    """(device µs per call, kernels + memsets per call) from the CUDA profiler: the time at least one of the calls'
    kernels or memsets ran (:func:`busy_us`), per call."""
    from torch.profiler import ProfilerActivity, profile

    global _profiled
    _profiled = True
    fn()
    torch.cuda.synchronize()
    with profile(activities=[ProfilerActivity.CUDA]) as prof:
        for _ in range(calls):
            fn()
        torch.cuda.synchronize()
    spans = [(evt.time_range.start, evt.time_range.end) for evt in prof.events()
             if evt.device_type == torch.autograd.DeviceType.CUDA]
    return busy_us(spans) / calls, len(spans) / calls


def cuda_graph(fn: Callable[[], Any], warmup: int = 3) -> torch.cuda.CUDAGraph:
    """A CUDA graph of one call of ``fn`` (warmed up on a side stream first, PyTorch's recipe)."""
    side = torch.cuda.Stream()
    side.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(side):
        for _ in range(warmup):
            fn()
    torch.cuda.current_stream().wait_stream(side)
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        fn()
    torch.cuda.synchronize()
    return graph


def event_ms(fn: Callable[[], Any], reps: int = 20, warmup: int = 3) -> float:
    """Median CUDA-event time of one call (ms), each timed alone (synchronised between calls)."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(start.elapsed_time(stop))
    return statistics.median(times)


def cprofile_top(fn: Callable[[], Any], calls: int = CALLS, top: int = 25, warmup: int = 20,
                 busy: bool = False) -> str:
    """cProfile of ``calls`` back-to-back calls of ``fn`` (after ``warmup``), the ``top`` functions by own time;
    ``busy``: issued behind a ≈ 20 ms spin kernel, so every launch lands on a queue that never drains."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    if busy:
        torch.cuda._sleep(40_000_000)   # cycles: ≈ 20 ms at ~2 GHz
    prof = cProfile.Profile()
    prof.enable()
    for _ in range(calls):
        fn()
    prof.disable()
    torch.cuda.synchronize()
    text = io.StringIO()
    pstats.Stats(prof, stream=text).sort_stats("tottime").print_stats(top)
    return text.getvalue()


def write_split(out: Any, stem: str, table: str, rows: list[dict[str, Any]], profile: str, top: int) -> None:
    """A host-split benchmark's outputs under ``out``: ``{stem}.md`` (the table), ``{stem}.json`` (its rows),
    ``{stem}_profile.txt`` (the cProfile text); prints the table and the profile's first ``top`` rows."""
    (out / f"{stem}.md").write_text(table)
    (out / f"{stem}.json").write_text(json.dumps(rows, indent=1))
    (out / f"{stem}_profile.txt").write_text(profile)
    print(table)
    print("\n".join(profile.splitlines()[:top + 12]))


def geomean(values: list[float]) -> float:
    values = [v for v in values if v and v > 0 and math.isfinite(v)]
    return math.exp(sum(math.log(v) for v in values) / len(values)) if values else float("nan")


def rel_error(a: torch.Tensor, b: torch.Tensor) -> float:
    a, b = a.detach().double(), b.detach().double()
    return float((a - b).norm() / b.norm().clamp_min(1e-300))


def strict_fp32() -> None:
    """cuDNN and matmuls in true fp32 (PyTorch's default runs convolutions in TF32)."""
    torch.backends.cudnn.allow_tf32 = False
    torch.backends.cuda.matmul.allow_tf32 = False


def device_info() -> dict[str, Any]:
    return {"device": torch.cuda.get_device_name(0), "torch": torch.__version__,
            "cudnn": torch.backends.cudnn.version(), "cuda": torch.version.cuda}
