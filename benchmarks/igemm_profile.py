"""One tensor-core config (any family: igemm, igemm_nhwc, igemm_half, igemm_wgmma, igemm_wgmma_half, ...) on one
shape, launched ``--launches`` times: a target for Nsight Compute (runs on the GPU host). Inputs in the problem's
storage dtype (bfloat16 as uint16 bits).

    ncu --clock-control none --kernel-name regex:igemm --launch-skip 3 --launch-count 1 \\
        --section SpeedOfLight --section WarpStateStats --section SchedulerStats \\
        python3 benchmarks/igemm_profile.py --problem "N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32" \\
        --config "igemm.fwd tile_m=128 tile_n=128 tile_k=16 warps_m=2 warps_n=2 stages=3 splits=1"

Without ncu it prints the median CUDA-event time of the launches and the TFLOP/s.
"""

from __future__ import annotations

import argparse
import statistics

import cupy as cp

from convtune.kernels import storage_arrays as storage
from convtune.kernels.config import parse_config_key
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--problem", required=True)
    ap.add_argument("--config", required=True)
    ap.add_argument("--launches", type=int, default=10)
    args = ap.parse_args()
    problem = ConvProblem.parse(args.problem)
    config = parse_config_key(args.config)
    spec = get_spec(config.family)
    pl = spec.plan(problem, config, MachineModel.preset("h200"))
    launcher = spec.launcher
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(0)
    p = problem
    x = storage.to_storage(rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32), p.dtype)
    w = storage.to_storage(rng.standard_normal((p.K, p.C, p.R, p.S), dtype=cp.float32), p.dtype)
    y = storage.empty((p.N, p.K, p.P, p.Q), p.dtype)
    filt = launcher.prepare_filters(pl, w)
    times = []
    for _ in range(args.launches):
        start, stop = cp.cuda.Event(), cp.cuda.Event()
        start.record()
        launcher.launch(pl, kernel, x, filt, y)
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    ms = statistics.median(times)
    print(f"{pl.config.key()}: {ms:.4f} ms, {2 * problem.macs / ms / 1e9:.1f} TFLOP/s (regs est {pl.regs_estimate})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
