"""One device call for the WIP TF32 Winograd GEMM (``python3 wip_winograd_tc/check.py --out $OUT/wino_tc``).

1. Correctness, per problem × tile × m ∈ {2, 4}: the shipped unfused pipeline (fp32 input transform, U, fp32 output
   transform) with its GEMM launch replaced by ``winograd_gemm_tc``; y poisoned with NaN first; fresh normal inputs;
   relative L2 error against the float64 convolution, next to cuDNN TF32's (``allow_tf32=True``) and the fp32
   unfused pipeline's on the same inputs. The issue's gate: ours ≤ 2 × cuDNN TF32's + 1e-6.
2. Speed, per timing problem: CUDA-event medians (the same buffers every launch, ours and cuDNN's alike: L2-warm
   where a problem fits in L2 — a first look, not the benchmarks' protocol) of the fp32 unfused pipeline and of the
   TF32 one with the same padding, GEMM alone and whole, for each tile; cuDNN TF32 and fp32 (``cudnn.benchmark``)
   on the same tensors.

Writes ``check.json`` and a table ``check.md`` under ``--out``; prints the table.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import cupy as cp
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen import ENTRY, TcTile, source

from convtune.kernels.compile import load_kernel
from convtune.kernels.prepared import Launch, PreparedLaunch, data_pointer, grid3, pointers
from convtune.kernels.reference import conv2d_reference_gpu, relative_error
from convtune.kernels.timing import time_launches
from convtune.kernels.winograd import unfused
from convtune.problem import ConvProblem

P = ConvProblem.parse
CORRECTNESS = [P("N=2 C=13 H=17 W=19 K=37 R=3 S=3 pad=1 math=tf32"), P("N=1 C=3 H=5 W=5 K=5 R=3 S=3 pad=2 math=tf32"),
               P("N=4 C=64 H=28 W=28 K=128 R=3 S=3 pad=1 math=tf32"), P("N=1 C=100 H=9 W=9 K=300 R=3 S=3 math=tf32"),
               P("N=3 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32")]
TIMING = {"resnet50_3x3_64_b32": P("N=32 C=64 H=56 W=56 K=64 R=3 S=3 pad=1 math=tf32"),
          "resnet50_3x3_256_b32": P("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32"),
          "vgg16_conv3_2_b32": P("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32"),
          "vgg16_conv4_2_b1": P("N=1 C=512 H=28 W=28 K=512 R=3 S=3 pad=1 math=tf32"),
          "vgg16_conv2_2_b32": P("N=32 C=128 H=112 W=112 K=128 R=3 S=3 pad=1 math=tf32")}
TILES = [TcTile(64, 128, 16, 2, 4, 3), TcTile(128, 128, 16, 2, 4, 3), TcTile(128, 256, 8, 2, 4, 3),
         TcTile(64, 64, 32, 2, 2, 4), TcTile(128, 64, 16, 4, 2, 2)]


def pipelines(problem: ConvProblem, tile: TcTile,
              m: int) -> tuple[PreparedLaunch, PreparedLaunch, unfused.WinogradUnfusedPlan]:
    """(the fp32 unfused pipeline, the same with the TF32 GEMM) of one padding."""
    pl = unfused.derive_plan(problem.replace(math="ieee"), tile.unfused_config(m))
    kernels = unfused.compile_plan(pl)
    fp32 = unfused.prepare_plan(pl, kernels=kernels)
    tc = load_kernel(source(pl, tile), ENTRY, dynamic_smem_bytes=tile.smem_bytes)
    steps = list(fp32.steps)
    steps[1] = Launch(tc, grid3(pl.grid), (tile.threads, 1, 1), tile.smem_bytes,
                      pointers(1, (3, 0), (3, unfused.m_offset_bytes(pl))), (pl.cp, pl.kp, pl.tp))
    tf32 = PreparedLaunch(plan=pl, device=fp32.device, operands=fp32.operands, steps=steps, kernels=kernels,
                          workspace_bytes=pl.workspace_bytes, output_shape=(problem.N, problem.K, problem.P, problem.Q),
                          kind="winograd_unfused_tc.fwd")
    return fp32, tf32, pl


def gemm_only(prepared: PreparedLaunch) -> PreparedLaunch:
    return PreparedLaunch(plan=prepared.plan, device=prepared.device, operands=prepared.operands,
                          steps=[prepared.steps[1]], kernels=prepared.kernels, kind=prepared.kind)


def run(prepared: PreparedLaunch, x, u, y, work) -> None:
    prepared((data_pointer(x), data_pointer(u), data_pointer(y), data_pointer(work)),
             cp.cuda.get_current_stream().ptr)


def cudnn(x, w, p: ConvProblem, tf32: bool):
    torch.backends.cudnn.allow_tf32 = tf32
    torch.backends.cudnn.benchmark = True
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    return lambda: torch.nn.functional.conv2d(xt, wt, padding=(p.pad_h, p.pad_w))


def correctness(records: list) -> None:
    rng = np.random.default_rng(20261204)
    for problem in CORRECTNESS:
        x = cp.asarray(rng.standard_normal((problem.N, problem.C, problem.H, problem.W)), dtype=cp.float32)
        w = cp.asarray(rng.standard_normal((problem.K, problem.C, 3, 3)), dtype=cp.float32)
        ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
        cudnn_err = relative_error(cp.asarray(cudnn(x, w, problem, True)()), ref)
        for m in (2, 4):
            for tile in TILES:
                row = {"problem": problem.key(), "m": m, "tile": tile.key()}
                try:
                    fp32, tf32, pl = pipelines(problem, tile, m)
                    u = unfused.transform_filters(w, m, pl.cp, pl.kp)
                    work = cp.empty(pl.workspace_bytes // 4, dtype=cp.float32)
                    errors = {}
                    for name, prepared in (("fp32", fp32), ("tf32", tf32)):
                        y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
                        run(prepared, x, u, y, work)
                        cp.cuda.get_current_stream().synchronize()
                        errors[name] = relative_error(y, ref)
                    row |= {"fp32_unfused_error": errors["fp32"], "error": errors["tf32"],
                            "cudnn_tf32_error": cudnn_err,
                            "ok": bool(np.isfinite(errors["tf32"]) and errors["tf32"] <= 2 * cudnn_err + 1e-6)}
                except Exception as exc:   # one tile's compile or launch error: recorded, the others still run
                    row |= {"ok": False, "exception": f"{type(exc).__name__}: {exc}"[:400]}
                records.append(row)
                print(row, flush=True)


def timing(records: list) -> None:
    rng = np.random.default_rng(5)
    for name, problem in TIMING.items():
        x = cp.asarray(rng.standard_normal((problem.N, problem.C, problem.H, problem.W)), dtype=cp.float32)
        w = cp.asarray(rng.standard_normal((problem.K, problem.C, 3, 3)), dtype=cp.float32)
        base = {"shape": name, "problem": problem.key()}
        for label, tf32 in (("cudnn_tf32_ms", True), ("cudnn_fp32_ms", False)):
            f = cudnn(x, w, problem, tf32)
            base[label] = time_launches(lambda _i, f=f: f(), warmup=5, reps=30).median_ms
        y = cp.empty((problem.N, problem.K, problem.P, problem.Q), dtype=cp.float32)
        for m in (4, 2):
            for tile in TILES:
                row = dict(base, m=m, tile=tile.key())
                try:
                    fp32, tc, pl = pipelines(problem, tile, m)
                    u = unfused.transform_filters(w, m, pl.cp, pl.kp)
                    work = cp.empty(pl.workspace_bytes // 4, dtype=cp.float32)
                    for label, prepared in (("fp32_pipeline_ms", fp32), ("tf32_pipeline_ms", tc),
                                            ("fp32_gemm_ms", gemm_only(fp32)), ("tf32_gemm_ms", gemm_only(tc))):
                        args = (prepared, x, u, y, work)
                        row[label] = time_launches(lambda _i, a=args: run(*a), warmup=3, reps=20).median_ms
                    row["speedup_vs_cudnn_tf32"] = base["cudnn_tf32_ms"] / row["tf32_pipeline_ms"]
                except Exception as exc:
                    row["exception"] = f"{type(exc).__name__}: {exc}"[:400]
                records.append(row)
                print(row, flush=True)


def table(corr: list, perf: list) -> str:
    lines = ["| check | result |", "|---|---|",
             f"| correctness | {sum(r.get('ok', False) for r in corr)} / {len(corr)} within 2× cuDNN TF32's error |"]
    lines += ["", "| shape | m | tile | TF32 pipeline ms | fp32 pipeline ms | TF32 GEMM ms | fp32 GEMM ms "
              "| cuDNN TF32 ms | × cuDNN TF32 |", "|---|---|---|---|---|---|---|---|---|"]
    for r in perf:
        if "exception" in r:
            lines.append(f"| {r['shape']} | {r['m']} | {r['tile']} | {r['exception'][:80]} | | | | | |")
            continue
        lines.append(f"| {r['shape']} | {r['m']} | `{r['tile']}` | {r['tf32_pipeline_ms']:.4f} | "
                     f"{r['fp32_pipeline_ms']:.4f} | {r['tf32_gemm_ms']:.4f} | {r['fp32_gemm_ms']:.4f} | "
                     f"{r['cudnn_tf32_ms']:.4f} | {r['speedup_vs_cudnn_tf32']:.2f} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--skip-timing", action="store_true")
    args = ap.parse_args()
    args.out.mkdir(parents=True, exist_ok=True)
    corr: list = []
    perf: list = []
    correctness(corr)
    if not args.skip_timing:
        timing(perf)
    (args.out / "check.json").write_text(json.dumps({"correctness": corr, "timing": perf}, indent=1))
    text = table(corr, perf)
    (args.out / "check.md").write_text(text)
    print(text)
    return 0 if all(r.get("ok") for r in corr) else 1


if __name__ == "__main__":
    sys.exit(main())
