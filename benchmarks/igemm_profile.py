"""One igemm config on one shape, launched ``--launches`` times: a target for Nsight Compute (runs on the GPU host).

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

from convtune.kernels.config import parse_config_key
from convtune.kernels.igemm.space import plan
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
    pl = plan(problem, parse_config_key(args.config), MachineModel.preset("h200"))
    launcher = get_spec(pl.config.family).launcher   # igemm or igemm_nhwc
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(0)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.empty((problem.N, problem.K, problem.P, problem.Q), dtype=cp.float32)
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
