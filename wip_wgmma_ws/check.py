"""Device check of the WIP warp-specialised wgmma GEMM (GPU host, sm_90): correctness against float64 and against
the shipped kernel on the same workspace, then GEMM-only CUDA-event times of both on the layers the shipped kernel
loses (the configs it was tuned to in unified_v2, and the same tiles with more stages).

The shipped launch runs first (layout change, GEMM): it leaves x channels-last in the workspace, which the WIP GEMM
then reads; y is poisoned with NaN before the WIP launch (an output never written makes the error inf). Splits: TF32
only (the WIP kernel adds into y, zeroed).

    python3 wip_wgmma_ws/check.py --out $OUT/ws        (one device call; ~2 minutes with compiles)
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
from functools import partial
from pathlib import Path

import cupy as cp
import numpy as np

sys.path.insert(0, str(Path(__file__).parent))
import tma
from gen import ENTRY, source

from convtune.kernels import storage_arrays as storage
from convtune.kernels.compile import load_kernel
from convtune.kernels.config import parse_config_key
from convtune.kernels.igemm_wgmma import half, launcher
from convtune.kernels.igemm_wgmma.space import plan
from convtune.kernels.reference import conv2d_reference_gpu, relative_error
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
CORRECTNESS = [   # (problem, config key): tails in M and K, odd C, strides, dilation, padding, splits (TF32)
    ("N=2 C=13 H=17 W=19 K=37 R=3 S=3 pad=1 math=tf32", "igemm_wgmma.fwd tile_n=64 m_blocks=1 warpgroups=1 stages=4"),
    ("N=3 C=35 H=15 W=11 K=130 R=1 S=7 pad_w=3 math=tf32",
     "igemm_wgmma.fwd tile_n=128 m_blocks=2 warpgroups=2 stages=4"),
    ("N=2 C=64 H=20 W=20 K=64 R=3 S=3 stride=2 pad=2 dilation=2 math=tf32",
     "igemm_wgmma.fwd tile_n=256 m_blocks=1 warpgroups=2 stages=4 splits=3"),
    ("N=1 C=100 H=9 W=9 K=300 R=5 S=5 pad=2 math=tf32", "igemm_wgmma.fwd tile_n=128 m_blocks=1 warpgroups=2 stages=6 "
     "splits=5 chunk=16"),
    ("N=2 C=13 H=17 W=19 K=37 R=3 S=3 pad=1 dtype=bfloat16", "igemm_wgmma_half.fwd tile_n=64 m_blocks=1 warpgroups=1 "
     "stages=4 chunk=16"),
    ("N=4 C=64 H=28 W=28 K=128 R=3 S=3 pad=1 dtype=bfloat16", "igemm_wgmma_half.fwd tile_n=128 m_blocks=2 "
     "warpgroups=2 stages=4"),
    ("N=2 C=50 H=33 W=33 K=77 R=3 S=3 pad=6 dilation=6 dtype=float16", "igemm_wgmma_half.fwd tile_n=256 m_blocks=1 "
     "warpgroups=2 stages=4 chunk=32"),
]
#: the shapes below 0.8× in unified_v2 with the shipped kernel's tuned config there
PERF_SHAPES = {
    "vgg16_conv3_2_b32": "N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1",
    "deeplabv3_layer4_dil2_b8": "N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2",
    "alexnet_conv2_b64": "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2",
    "deeplabv3_aspp_d6_b4": "N=4 C=2048 H=33 W=33 K=256 R=3 S=3 pad=6 dilation=6",
    "resnet50_3x3_256_b32": "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1",
    "ssd300_conf_conv4_3_b8": "N=8 C=512 H=38 W=38 K=84 R=3 S=3 pad=1",
    "resnet50_layer4_conv2_s2_b64": "N=64 C=512 H=14 W=14 K=512 R=3 S=3 stride=2 pad=1",
}
RESULTS = Path(__file__).resolve().parents[1] / "benchmarks/results/igemm_wgmma_h200/unified_v2"


def _family(config):   # the shipped launcher of the config's family
    return launcher if config.family == "igemm_wgmma" else half


def _inputs(p: ConvProblem, seed: int):
    rng = cp.random.default_rng(seed)
    x = rng.standard_normal((p.N, p.C, p.H, p.W), dtype=cp.float32)
    w = rng.standard_normal((p.K, p.C, p.R, p.S), dtype=cp.float32)
    xs, ws = storage.to_storage(x, p.dtype), storage.to_storage(w, p.dtype)
    return xs, ws, storage.to_float32(xs, p.dtype), storage.to_float32(ws, p.dtype)


MODES = (0, 1, 2)   # gen.source: 0 every operand by cp.async, 1 the filters by TMA, 2 both by TMA


def _maps(pl, filters, mode: int):
    """The (A, B) descriptors of ``mode`` (zeros where the mode copies by cp.async)."""
    a = tma.im2col_map(pl, filters.work) if mode == 2 else tma.zeros()
    b = tma.tile_map(pl, filters.filt) if mode >= 1 else tma.zeros()
    return a, b


def _ws_launch(pl, kernel, filters, y, ysplit, maps) -> None:
    ints = [np.int32(v) for v in launcher.gemm_arguments(pl)]
    kernel.function(pl.grid, (128 * (pl.config.warpgroups + 1), 1, 1),
                    (filters.work, filters.filt, *maps, y, ysplit, *ints), shared_mem=pl.smem_bytes)


def _shipped_gemm(pl, kernels, filters, y, ysplit) -> None:
    """The shipped GEMM alone on the workspace the layout change left (splits add into ysplit, fp32)."""
    ints = [np.int32(v) for v in launcher.gemm_arguments(pl)]
    args = (filters.work, filters.filt, y) if pl.problem.dtype == "float32" else (filters.work, filters.filt, y, ysplit)
    kernels.gemm.function(pl.grid, (pl.config.threads, 1, 1), (*args, *ints), shared_mem=pl.smem_bytes)


def _event_ms(fn, reps: int = 30) -> float:
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    return statistics.median(times[5:])


def correctness() -> list[dict]:
    rows = []
    for i, (text, key) in enumerate(CORRECTNESS):
        p, config = ConvProblem.parse(text), parse_config_key(key)
        pl = plan(p, config, H200)
        family = _family(config)
        kernels = family.compile_plan(pl)
        x, w, x32, w32 = _inputs(p, i)
        filters = family.prepare_filters(pl, w)
        shape = (p.N, p.K, p.P, p.Q)
        y_shipped = storage.empty(shape, p.dtype)
        storage.poison(y_shipped, p.dtype)
        family.launch(pl, kernels, x, filters, y_shipped)            # also leaves x channels-last in the workspace
        cp.cuda.Device().synchronize()
        ref = conv2d_reference_gpu(x32, w32, stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w),
                                   dilation=(p.dil_h, p.dil_w))
        shipped = relative_error(storage.to_float32(y_shipped, p.dtype), ref)
        for mode in MODES:
            row = {"problem": text, "config": key, "mode": mode, "shipped_rel_error": shipped}
            try:
                ws = load_kernel(source(pl, mode), ENTRY, dynamic_smem_bytes=pl.smem_bytes)
                y = storage.empty(shape, p.dtype)
                if pl.splits_launched > 1:
                    y.fill(0)   # the WIP kernel's split adds into y (TF32)
                else:
                    storage.poison(y, p.dtype)
                _ws_launch(pl, ws, filters, y, y, _maps(pl, filters, mode))
                cp.cuda.Device().synchronize()
                ours = relative_error(storage.to_float32(y, p.dtype), ref)      # inf where an output stayed NaN
                row |= {"rel_error": ours, "regs": ws.resources.num_regs, "ok": ours <= 2 * shipped + 1e-6}
            except Exception as exc:   # an encode or launch error of one mode: recorded, the others still run
                row |= {"error": repr(exc)[:300], "ok": False}
            rows.append(row)
            print(row, flush=True)
    return rows


def perf(modes) -> list[dict]:
    rows = []
    for klass, suffix, report in (("tf32", "math=tf32", "wide/tf32/vs_cudnn_tf32.json"),
                                  ("bf16", "dtype=bfloat16", "half_wide/half/vs_cudnn_bf16.json")):
        tuned = {}
        for path in (RESULTS / report, RESULTS / report.replace("wide", "public", 1)):
            for r in json.loads(path.read_text())["results"]:
                tuned[r["name"]] = r["best"]["config"]
        for name, shape in PERF_SHAPES.items():
            p = ConvProblem.parse(f"{shape} {suffix}")
            key = tuned.get(name, "")
            if not key.startswith(("igemm_wgmma.", "igemm_wgmma_half.")):   # another family won: a common tile
                key = ("igemm_wgmma.fwd" if klass == "tf32" else "igemm_wgmma_half.fwd") + \
                    " tile_n=256 m_blocks=1 warpgroups=2 stages=4"
            config = parse_config_key(key)
            for stages in sorted({config.stages, 4, 6}):
                c = config.__class__(**(config.to_dict() | {"stages": stages}))
                try:
                    pl = plan(p, c, H200)
                except Exception as exc:
                    rows.append({"class": klass, "shape": name, "config": c.key(), "error": str(exc)[:200]})
                    continue
                family = _family(c)
                kernels = family.compile_plan(pl)
                x, w, _, _ = _inputs(p, 0)
                filters = family.prepare_filters(pl, w)
                y = storage.empty((p.N, p.K, p.P, p.Q), p.dtype)
                ysplit = y if p.dtype == "float32" else cp.empty((p.N, p.K, p.P, p.Q), cp.float32)
                family.launch(pl, kernels, x, filters, y)
                shipped_ms = _event_ms(partial(_shipped_gemm, pl, kernels, filters, y, ysplit))
                row = {"class": klass, "shape": name, "config": c.key(), "shipped_gemm_ms": shipped_ms}
                for mode in modes:
                    try:
                        ws = load_kernel(source(pl, mode), ENTRY, dynamic_smem_bytes=pl.smem_bytes)
                        ws_ms = _event_ms(partial(_ws_launch, pl, ws, filters, y, ysplit, _maps(pl, filters, mode)))
                        row[f"mode{mode}_ms"], row[f"mode{mode}_speedup"] = ws_ms, shipped_ms / ws_ms
                    except Exception as exc:
                        row[f"mode{mode}_error"] = repr(exc)[:200]
                rows.append(row)
                print(row, flush=True)
    return rows


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    result = {"correctness": correctness()}
    (args.out / "ws_check.json").write_text(json.dumps(result, indent=1))
    correct = [m for m in MODES if all(r["ok"] for r in result["correctness"] if r["mode"] == m)]
    print("correct modes:", correct, flush=True)
    result["perf"] = perf(correct)
    (args.out / "ws_check.json").write_text(json.dumps(result, indent=1))
    return 0 if correct == list(MODES) else 1


if __name__ == "__main__":
    sys.exit(main())
