"""Depthwise forward in float32, float16 and bfloat16 storage vs PyTorch in the same dtype (GPU host).

For every ``depthwise1d_causal`` and ``depthwise2d`` entry of the suite and each dtype, the plan
``convtune.ops.torch`` runs (:func:`convtune.ops.depthwise.model_plan`: the time model's best; 16-bit problems take
the 16-bit kernels, fp32 sums) is compiled, checked once against a float64 reference of the same rounded inputs
(output poisoned with NaN; relative error ≤ 1e-5 fp32, 1e-3 fp16, 8e-3 bf16: twice one output rounding) and
timed by the shared protocol (``time_launches``: a spin kernel ahead of each timed launch hides host time,
rotating buffer sets > 2× L2). PyTorch runs on the same buffers in the same dtype: causal
``F.conv1d(x, w.flip(-1)[:, None], padding=K−1, groups=C)[..., :L]``, 2-D ``F.conv2d(groups=C)``
(cuDNN benchmark mode, TF32 off). "% copy" is the dtype's compulsory bytes / time / copy bandwidth of this run.

    python benchmarks/depthwise_dtypes.py --out benchmarks/results/depthwise_h200/dtypes
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import sys
from dataclasses import replace
from pathlib import Path

import cupy as cp
import torch
import torch.nn.functional as F

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise.reference import dw1d_fwd_reference, dw2d_fwd_reference
from convtune.kernels.reference import relative_error
from convtune.kernels.registry import get_spec
from convtune.kernels.timing import rotation_sets, time_launches
from convtune.ops.conv2d import device_machine
from convtune.ops.depthwise import model_plan
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parent))
from depthwise_bench import DEFAULT_SUITE, measure_copy_bandwidth

DTYPES = {"float32": torch.float32, "float16": torch.float16, "bfloat16": torch.bfloat16}
TOLERANCE = {"float32": 1e-5, "float16": 1e-3, "bfloat16": 8e-3}


def cupy_view(t: torch.Tensor):
    """The kernels' array over a torch tensor: bfloat16 as uint16 bits (CuPy has no bfloat16)."""
    if t.dtype == torch.bfloat16:
        return cp.from_dlpack(t.view(torch.int16)).view(cp.uint16)
    return cp.from_dlpack(t)


def bench(name: str, problem: ConvProblem, dtype: str, machine, reps: int) -> dict:
    p = replace(problem, dtype=dtype)
    td = DTYPES[dtype]
    one_d = p.causal
    x_shape = (p.N, p.C, p.W) if one_d else (p.N, p.C, p.H, p.W)
    y_shape = (p.N, p.C, p.Q) if one_d else (p.N, p.C, p.P, p.Q)
    w_shape = (p.C, p.S) if one_d else (p.C, 1, p.R, p.S)   # 1-D: lag order (w[c, 0] on the current sample)
    sets = rotation_sets(2 * p.itemsize_bytes * (p.input_elements + p.output_elements), machine.l2_bytes)
    g = torch.Generator(device="cuda").manual_seed(7)
    xs = [torch.randn(x_shape, device="cuda", generator=g).to(td) for _ in range(sets)]
    ys = [torch.empty(y_shape, device="cuda", dtype=td) for _ in range(sets)]
    w = torch.randn(w_shape, device="cuda", generator=g).to(td)
    row = {"name": name, "problem": problem.key(), "dtype": dtype, "sets": sets}
    try:
        pl = model_plan(p, machine, "fwd")
    except InvalidConfig as exc:  # a 16-bit shape no 16-bit kernel takes: the op runs PyTorch's
        row.update(status="no kernel", error=str(exc))
        return row
    row["config"] = pl.config.key()
    launcher = get_spec(pl.config.family).launcher  # the forward row's own launcher module
    kernel = launcher.compile_plan(pl)
    xc, yc, wc = [cupy_view(t) for t in xs], [cupy_view(t) for t in ys], cupy_view(w)

    def ours(i: int) -> None:  # 1-D and 2-D forward plans alike (w already in the kernels' order)
        launcher.launch(pl, kernel, xc[i], wc, yc[i])

    ys[0].fill_(float("nan"))
    ours(0)
    x64, w64 = cp.from_dlpack(xs[0].double()), cp.from_dlpack(w.double())   # the rounded inputs, exactly
    ref = (dw1d_fwd_reference(x64, w64) if one_d
           else dw2d_fwd_reference(x64, w64, (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)))
    row["rel_err"] = err = float(relative_error(cp.from_dlpack(ys[0].double()), ref))
    if not err <= TOLERANCE[dtype]:
        row["status"] = "wrong"
        return row
    row["ours_ms"] = time_launches(ours, sets=sets, reps=reps).median_ms
    torch.backends.cudnn.benchmark = True
    torch.backends.cudnn.allow_tf32 = False
    with torch.no_grad():
        if one_d:
            wt = w.flip(-1)[:, None, :].contiguous()
            L, K = p.W, p.S

            def theirs(i: int) -> None:
                F.conv1d(xs[i], wt, padding=K - 1, groups=p.C)[..., :L]
        else:
            def theirs(i: int) -> None:
                F.conv2d(xs[i], w, stride=(p.stride_h, p.stride_w), padding=(p.pad_h, p.pad_w), groups=p.C)
        row["torch_ms"] = time_launches(theirs, sets=sets, reps=reps).median_ms
    row["compulsory_bytes"] = p.compulsory_bytes
    row["status"] = "ok"
    return row


def markdown(rows: list[dict], copy_bw: float, device: str) -> str:
    lines = [f"# Depthwise forward by storage dtype ({device}, torch {torch.__version__}, {dt.date.today()})", "",
             f"Copy bandwidth in this run: {copy_bw / 1e12:.2f} TB/s. Configs: the time model's best (what "
             "`convtune.ops.torch` runs without a tuning database). PyTorch in the same dtype on the same buffers.", "",
             "| entry | dtype | PyTorch ms | ours ms | speedup | % copy | rel. error | config |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        if r["status"] != "ok":
            lines.append(f"| {r['name']} | {r['dtype']} | | | | | {r.get('rel_err', float('nan')):.1e} "
                         f"{r['status'].upper()} | `{r.get('config', '')}` |")
            continue
        pct = r["compulsory_bytes"] / (r["ours_ms"] * 1e-3) / copy_bw * 100
        lines.append(f"| {r['name']} | {r['dtype']} | {r['torch_ms']:.4f} | {r['ours_ms']:.4f} | "
                     f"{r['torch_ms'] / r['ours_ms']:.2f} | {pct:.0f} | {r['rel_err']:.1e} | `{r['config']}` |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--suite", default=str(DEFAULT_SUITE))
    ap.add_argument("--out", default="benchmarks/results/depthwise_dtypes")
    ap.add_argument("--dtypes", nargs="*", default=list(DTYPES), choices=list(DTYPES))
    ap.add_argument("--reps", type=int, default=30)
    args = ap.parse_args()
    data = json.loads(Path(args.suite).read_text())
    entries = [(s["name"], ConvProblem.from_mapping(s)) for kind in ("depthwise1d_causal", "depthwise2d")
               for s in data.get(kind, [])]
    machine = device_machine(0)
    copy_bw = measure_copy_bandwidth()
    rows = []
    for name, problem in entries:
        for dtype in args.dtypes:
            row = bench(name, problem, dtype, machine, args.reps)
            rows.append(row)
            print(f"{name:28s} {dtype:9s} torch {row.get('torch_ms', float('nan')):8.4f} ms  ours "
                  f"{row.get('ours_ms', float('nan')):8.4f} ms  err {row.get('rel_err', float('nan')):.1e} "
                  f"{row['status']}", flush=True)
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "depthwise_dtypes.json").write_text(json.dumps({"copy_bandwidth": copy_bw, "rows": rows}, indent=1))
    text = markdown(rows, copy_bw, torch.cuda.get_device_name())
    (out / "depthwise_dtypes.md").write_text(text)
    print(text)
    return 0 if all(r["status"] in ("ok", "no kernel") for r in rows) else 1


if __name__ == "__main__":
    raise SystemExit(main())
