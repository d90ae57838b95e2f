"""Prototype check of the wgmma TF32 implicit-GEMM kernel on the GPU: layout probes, correctness vs float64 (and
cuDNN TF32's error on the same inputs), then every perf variant × splits timed against cuDNN TF32 / fp32.

    python wip_wgmma/harness.py --out $OUT/wgmma     (needs wip_wgmma/wgmma.cubin built by nvcc for sm_90a)
"""

from __future__ import annotations

import argparse
import json
import math
import sys
import time
from pathlib import Path

import cupy as cp
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).parent))
from gen_entries import name, nhwc_variants, variants  # noqa: E402

HERE = Path(__file__).parent
CORRECTNESS = [  # N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw
    (2, 13, 17, 19, 37, 3, 3, 1, 1, 1, 1, 1, 1),
    (1, 3, 64, 64, 64, 7, 7, 2, 2, 3, 3, 1, 1),
    (4, 64, 28, 28, 128, 3, 3, 1, 1, 1, 1, 1, 1),
    (3, 35, 15, 11, 50, 1, 7, 1, 1, 0, 3, 1, 1),
    (2, 32, 20, 20, 64, 3, 3, 2, 2, 2, 2, 2, 2),
    (1, 256, 14, 14, 300, 1, 1, 1, 1, 0, 0, 1, 1),
    (5, 50, 9, 9, 130, 5, 5, 1, 1, 2, 2, 1, 1),
]
PERF = {
    "deeplabv3_layer4_dil2_b8": (8, 512, 33, 33, 512, 3, 3, 1, 1, 2, 2, 2, 2),
    "deeplabv3_aspp_d6_b4": (4, 2048, 33, 33, 256, 3, 3, 1, 1, 6, 6, 6, 6),
    "alexnet_conv2_b64": (64, 64, 27, 27, 192, 5, 5, 1, 1, 2, 2, 1, 1),
    "ssd300_conf_conv4_3_b8": (8, 512, 38, 38, 84, 3, 3, 1, 1, 1, 1, 1, 1),
    "resnet50_layer4_conv2_s2_b64": (64, 512, 14, 14, 512, 3, 3, 2, 2, 1, 1, 1, 1),
    "faster_rcnn_vgg16_conv5_3_b1": (1, 512, 38, 50, 512, 3, 3, 1, 1, 1, 1, 1, 1),
    "openpose_stage2_conv1_b4": (4, 185, 46, 46, 128, 7, 7, 1, 1, 3, 3, 1, 1),
    "yolov3_head_52_b8": (8, 256, 52, 52, 255, 1, 1, 1, 1, 0, 0, 1, 1),
    "resnet50_layer3_conv2_s2_b16": (16, 256, 28, 28, 256, 3, 3, 2, 2, 1, 1, 1, 1),
    "resnet50_3x3_256_b32": (32, 256, 14, 14, 256, 3, 3, 1, 1, 1, 1, 1, 1),
    "vgg16_conv3_b32": (32, 256, 56, 56, 256, 3, 3, 1, 1, 1, 1, 1, 1),
}


def params(v):
    bn, mi, wg, st, *_ = v[1:] if v[0] == "nhwc" else v
    bm = 64 * wg * mi
    return bm, bn, 128 * wg, st * (bm + bn) * 128 + 1024


class Runner:
    def __init__(self, cubin: Path) -> None:
        self.module = cp.RawModule(path=str(cubin))
        self.pack = self.module.get_function("wg_pack")
        self.fns = {}

    def fn(self, v):
        if v not in self.fns:
            f = self.module.get_function(name(v))
            f.max_dynamic_shared_size_bytes = params(v)[3]
            self.fns[v] = f
        return self.fns[v]

    def make_filters(self, w, prob):
        N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw = prob
        krp = (C * R * S + 31) // 32 * 32
        filt = cp.empty(K * krp + 4 * krp, dtype=cp.float32)
        total = K * krp + krp
        self.pack(((total + 255) // 256,), (256,), (w, filt, cp.int32(K), cp.int32(C), cp.int32(R), cp.int32(S),
                                                     cp.int32(H), cp.int32(W), cp.int32(dh), cp.int32(dw),
                                                     cp.int32(krp)))
        return filt, krp

    def nhwc_operands(self, x, w, prob):
        """(xt, filt, KRp): the channels-last TF32 copy of x and the (r, s, c)-ordered filters."""
        N, C, H, W, K, R, S, *_ = prob
        cp_ = (C + 31) // 32 * 32
        xt = cp.empty(N * H * W * cp_, dtype=cp.float32)
        self.transform_into(x, xt, prob)
        krp = R * S * cp_
        filt = cp.empty(K * krp, dtype=cp.float32)
        self.module.get_function("wg_nhwc_pack")(((K * krp + 255) // 256,), (256,),
                                                 (w, filt, cp.int32(K), cp.int32(C), cp.int32(R), cp.int32(S),
                                                  cp.int32(cp_)))
        return xt, filt, krp

    def transform_into(self, x, xt, prob):
        N, C, H, W, *_ = prob
        cp_ = (C + 31) // 32 * 32
        self.module.get_function("wg_transform")(((H * W + 31) // 32, cp_ // 32, N), (256,),
                                                 (x, xt, cp.int32(C), cp.int32(H * W), cp.int32(cp_)))

    def launch_nhwc(self, v, xt, filt, y, prob, krp, splits):
        N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw = prob
        P, Q = out_shape(prob)[2:]
        bm, bn, threads, smem = params(v)
        chunks = krp // 32
        cps = math.ceil(chunks / splits)
        gz = math.ceil(chunks / cps)
        if gz > 1:
            y.fill(0)
        grid = (math.ceil(N * P * Q / bm), math.ceil(K / bn), gz)
        cp_ = (C + 31) // 32 * 32
        self.fn(v)(grid, (threads,), (xt, filt, y, *(cp.int32(a) for a in (N, cp_, H, W, K, P, Q, S, sh, sw, ph, pw,
                                                                            dh, dw, krp, cps))), shared_mem=smem)
        return gz

    def launch(self, v, x, filt, y, prob, krp, splits):
        N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw = prob
        P = (H + 2 * ph - dh * (R - 1) - 1) // sh + 1
        Q = (W + 2 * pw - dw * (S - 1) - 1) // sw + 1
        bm, bn, threads, smem = params(v)
        chunks = krp // 32
        cps = math.ceil(chunks / splits)
        gz = math.ceil(chunks / cps)
        if gz > 1:
            y.fill(0)
        grid = (math.ceil(N * P * Q / bm), math.ceil(K / bn), gz)
        self.fn(v)(grid, (threads,), (x, filt, y, *(cp.int32(a) for a in (N, C, H, W, K, P, Q, sh, sw, ph, pw, krp,
                                                                           cps))), shared_mem=smem)
        return gz


def out_shape(prob):
    N, C, H, W, K, R, S, sh, sw, ph, pw, dh, dw = prob
    return (N, K, (H + 2 * ph - dh * (R - 1) - 1) // sh + 1, (W + 2 * pw - dw * (S - 1) - 1) // sw + 1)


def torch_conv(x, w, prob, dtype=None):
    *_, sh, sw, ph, pw, dh, dw = prob
    if dtype is not None:
        x, w = x.to(dtype), w.to(dtype)
    return F.conv2d(x, w, None, (sh, sw), (ph, pw), (dh, dw))


def rel(a, b):
    return float((a.double() - b).norm() / b.norm())


def check(runner, log):
    rows = []
    g = torch.Generator(device="cuda").manual_seed(7)
    torch.backends.cudnn.allow_tf32 = True
    for prob in CORRECTNESS:
        N, C, H, W, K, R, S, *_ = prob
        xt = torch.randn(N, C, H, W, device="cuda", generator=g)
        wt = torch.randn(K, C, R, S, device="cuda", generator=g)
        ref = torch_conv(xt, wt, prob, torch.float64)
        cudnn_err = rel(torch_conv(xt, wt, prob), ref)
        x, w = cp.from_dlpack(xt), cp.from_dlpack(wt)
        xn, filt, krp = runner.nhwc_operands(x, w, prob)
        for v in nhwc_variants():
            for splits in (1, 3):
                y = cp.full(out_shape(prob), cp.nan, dtype=cp.float32)
                runner.launch_nhwc(v, xn, filt, y, prob, krp, splits)
                cp.cuda.runtime.deviceSynchronize()
                err = rel(torch.from_dlpack(y), ref)
                ok = math.isfinite(err) and err <= 1e-3
                rows.append({"prob": prob, "variant": name(v), "splits": splits, "err": err, "cudnn_tf32_err": cudnn_err,
                             "ok": ok})
                if not ok or v == nhwc_variants()[0]:
                    print(f"{prob} {name(v)} splits={splits}: err {err:.2e} (cuDNN TF32 {cudnn_err:.2e}) "
                          f"{'ok' if ok else 'FAIL'}", file=log, flush=True)
    return rows


def time_fn(fn, reps=20):
    start, stop = cp.cuda.Event(), cp.cuda.Event()
    fn()
    times = []
    for _ in range(reps):
        start.record()
        fn()
        stop.record()
        stop.synchronize()
        times.append(cp.cuda.get_elapsed_time(start, stop))
    times.sort()
    return times[len(times) // 2]


def time_torch(fn, reps=20):
    for _ in range(3):
        fn()
    torch.cuda.synchronize()
    times = []
    for _ in range(reps):
        a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        a.record()
        fn()
        b.record()
        b.synchronize()
        times.append(a.elapsed_time(b))
    times.sort()
    return times[len(times) // 2]


def perf(runner, good, log, budget_s):
    torch.backends.cudnn.benchmark = True
    rows = []
    start = time.time()
    for label, prob in PERF.items():
        N, C, H, W, K, R, S, *_ = prob
        P, Q = out_shape(prob)[2:]
        flop = 2.0 * N * K * P * Q * C * R * S
        xt = torch.randn(N, C, H, W, device="cuda")
        wt = torch.randn(K, C, R, S, device="cuda")
        torch.backends.cudnn.allow_tf32 = True
        t_tf32 = time_torch(lambda: torch_conv(xt, wt, prob))
        torch.backends.cudnn.allow_tf32 = False
        t_fp32 = time_torch(lambda: torch_conv(xt, wt, prob))
        torch.backends.cudnn.allow_tf32 = True
        x, w = cp.from_dlpack(xt), cp.from_dlpack(wt)
        xn, filt, krp = runner.nhwc_operands(x, w, prob)
        y = cp.zeros(out_shape(prob), dtype=cp.float32)
        best = None
        t_transform = time_fn(lambda: runner.transform_into(x, xn, prob))
        for v in good:
            for splits in (1, 2, 4, 8):
                if time.time() - start > budget_s:
                    break
                try:
                    t = time_fn(lambda: runner.launch_nhwc(v, xn, filt, y, prob, krp, splits))
                except Exception as exc:  # noqa: BLE001
                    print(f"{label} {name(v)} s{splits}: {exc}", file=log)
                    continue
                if best is None or t < best[0]:
                    best = (t, name(v), splits)
        ref = torch_conv(xt, wt, prob, torch.float64)
        y.fill(cp.nan)
        bv = next(v for v in good if name(v) == best[1])
        runner.transform_into(x, xn, prob)
        runner.launch_nhwc(bv, xn, filt, y, prob, krp, best[2])
        err = rel(torch.from_dlpack(y), ref)
        kernel_ms = best[0]
        t_call = time_fn(lambda: (runner.transform_into(x, xn, prob),
                                  runner.launch_nhwc(bv, xn, filt, y, prob, krp, best[2])))
        best = (t_call, best[1], best[2])
        row = {"shape": label, "best": best[1], "splits": best[2], "ms": best[0], "kernel_ms": kernel_ms,
               "transform_ms": t_transform, "tflops": flop / best[0] / 1e9,
               "cudnn_tf32_ms": t_tf32, "cudnn_fp32_ms": t_fp32, "vs_tf32": t_tf32 / best[0],
               "vs_fp32": t_fp32 / best[0], "err": err}
        rows.append(row)
        print(f"{label:30s} {best[1]:20s} s{best[2]} k{kernel_ms*1e3:6.1f}+t{t_transform*1e3:5.1f} {best[0]*1e3:7.1f} us {row['tflops']:6.1f} TF/s | cuDNN TF32 "
              f"{t_tf32*1e3:8.1f} us ({row['vs_tf32']:.2f}x) fp32 {t_fp32*1e3:8.1f} us ({row['vs_fp32']:.2f}x) err {err:.1e}",
              flush=True)
        print(json.dumps(row), file=log, flush=True)
    return rows


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--out", default="/tmp/wgmma")
    ap.add_argument("--perf-budget-s", type=float, default=150)
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    runner = Runner(HERE / "wgmma.cubin")
    with open(out / "log.txt", "w") as log:
        rows = check(runner, log)
        (out / "correctness.json").write_text(json.dumps(rows, indent=1))
        per_variant = {}
        for r in rows:
            per_variant.setdefault(r["variant"], []).append(r["ok"])
        for v, oks in per_variant.items():
            print(f"{v:34s} {sum(oks)}/{len(oks)} correct", flush=True)
        good = [v for v in nhwc_variants() if all(per_variant[name(v)])]
        if not good:
            print("no correct perf variant: skipping timing")
            return 1
        prow = perf(runner, good, log, args.perf_budget_s)
        (out / "perf.json").write_text(json.dumps(prow, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
