"""Model-level fp32 inference: torchvision ResNet-50 (batch 32), VGG-16 (batch 1) and MobileNetV2 (batch 32),
convtune-converted and tuned, against the same model on cuDNN fp32 (``allow_tf32=False``) and on cuDNN TF32
(PyTorch's default for convolutions), same weights, same input, same run (GPU host).

Per model:

1. cuDNN fp32 strict (``cudnn.benchmark=True``): the reference output, ms per forward eager and as a CUDA graph;
2. cuDNN TF32 (``cudnn.allow_tf32=True``): the same two timings (and its output's error against fp32);
3. ``convtune.ops.torch.tune(model, x, budget_s, budget_trials)`` (GPU benchmarker, results in ``--db``; a finished
   problem is not tuned again, so a second run reuses the first's), then ``convtune.ops.torch.convert(model)``: the
   output's relative error against cuDNN fp32 (target ≤ 1e-4) and the two timings.

ms per forward = wall time of 20 back-to-back forwards (no grad, weights frozen) / 20, the median of 3; the graph
column replays a CUDA graph of one forward. The class's own baseline (cuDNN fp32, TF32 or bf16 for ``--math``
ieee, tf32, bf16) is timed again after tuning, in 5 rounds that take an unconverted copy of the model and the
converted one in turn (medians; the figure from before tuning is kept as ``<baseline>_before_tuning``).
Speedups: cuDNN's ms / convtune's ms. Targets (issue 14), against
cuDNN fp32: ResNet-50 ≥ 1.3×, VGG-16 ≥ 2.0×, MobileNetV2 ≥ 1.3×. The per-layer table (shape, family, tuned ms,
floor ms, efficiency, share of the model's convolution time) is the tuner's. Models use random weights
(``weights=None``: nothing is downloaded). Writes ``model_inference.md`` / ``.json`` under ``--out``.

``--fuse`` runs convtune's side as ``convtune.ops.torch.fuse(converted model)``: BatchNorm folded into the filters,
bias, residual add and activation (ReLU, ReLU6, SiLU, Hardswish, Hardsigmoid, Sigmoid) in one epilogue pass after
each convolution. The same folding is then also given
to cuDNN as a second baseline (``cudnn_fp32_folded``: PyTorch's own ``torch.fx.experimental.optimization.fuse``,
conv + BN folded, bias, add and activation left as PyTorch's ops), so the table separates what the folding gives
(anyone can fold) from what the fused epilogue and the kernels give.

``--math tf32`` tunes and runs convtune in the TF32 class instead (``cudnn.allow_tf32=True`` while tuning and
running, so the ops pick ``math="tf32"`` and the tensor-core family competes): the accuracy gate is then cuDNN
TF32's own error against cuDNN fp32, × 2, and the speedup that counts is against cuDNN TF32. ``--math bf16``
runs the whole forward under ``torch.autocast("cuda", bfloat16)`` for cuDNN and for convtune alike (the ops cast as
autocast does; tuned in the bfloat16 class): the gate is cuDNN bf16's error × 2, the speedup against cuDNN bf16.

    python benchmarks/model_inference.py --models resnet50 vgg16 mobilenet_v2 --budget-s 150 --budget-trials 6
"""

from __future__ import annotations

import argparse
import copy
import datetime as dt
import functools
import json
import statistics
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from torch_timing import cuda_graph, device_info, host_and_wall_us, kernel_us, rel_error

import convtune.ops.torch as ct
from convtune.ops.torch.modules import support

MODELS = {"resnet50": 32, "vgg16": 1, "mobilenet_v2": 32,
          # no issue target: SiLU / Hardswish blocks with squeeze-excitation, 5×5 depthwise (what --fuse's wider
          # activations are for)
          "efficientnet_b0": 32, "mobilenet_v3_large": 32}
TARGETS = {"resnet50": 1.3, "vgg16": 2.0, "mobilenet_v2": 1.3}
FORWARDS = 20
#: per --math: the row of the class's own baseline
BASELINE_OF = {"ieee": "cudnn_fp32", "tf32": "cudnn_tf32", "bf16": "cudnn_bf16"}


def _ms_per_forward(fn: Any) -> float:
    return host_and_wall_us(fn, calls=FORWARDS, warmup=3, repeats=3)[1] / 1e3


def _timings(model: Any, x: Any) -> dict[str, float]:
    with torch.no_grad():
        eager = _ms_per_forward(lambda: model(x))
        graph = cuda_graph(lambda: model(x))
        return {"eager_ms": eager, "graph_ms": _ms_per_forward(graph.replay)}


PAIRED_ROUNDS = 5


def _paired_timings(x: Any, *models: Any) -> list[dict[str, float]]:
    """ms per forward of each of ``models`` (convtune's first, then its baselines), eager and graph, each the median
    of :data:`PAIRED_ROUNDS` rounds that time them in turn: a batch-32 eager forward is bound by the host, whose
    speed drifts over the minutes tuning takes (cuDNN's eager ResNet-50 bf16 forward measured 4.6–8.8 ms in runs
    whose graph replay stayed at 3.82 ms), so the baselines are timed again next to convtune rather than compared
    with a figure from before tuning."""
    with torch.no_grad():
        graphs = [cuda_graph(lambda m=model: m(x)) for model in models]
        eager: list[list[float]] = [[] for _ in models]
        graph: list[list[float]] = [[] for _ in models]
        for _ in range(PAIRED_ROUNDS):
            for i, model in enumerate(models):
                eager[i].append(host_and_wall_us(lambda m=model: m(x), calls=FORWARDS, warmup=3, repeats=1)[1] / 1e3)
                graph[i].append(host_and_wall_us(graphs[i].replay, calls=FORWARDS, warmup=3, repeats=1)[1] / 1e3)
    med = statistics.median
    return [{"eager_ms": med(e), "graph_ms": med(g)} for e, g in zip(eager, graph, strict=True)]


def _layer_kernel_ms(model: Any, x: Any, tf32: bool = False) -> list[dict[str, Any]]:
    """Per distinct convolution of ``model`` (an unconverted forward's shapes): the CUDA profiler's kernel ms per
    call of cuDNN (``F.conv2d``; TF32 allowed for both sides with ``tf32``, else strict fp32) and of convtune
    (``convtune.ops.torch.conv2d`` / ``depthwise_conv2d``, the resolver's config: the tuned one), on the same
    tensors; where the model's time goes."""
    _set_tf32(tf32)
    try:
        return _layer_rows(model, x)
    finally:
        _set_tf32(False)


def _layer_rows(model: Any, x: Any) -> list[dict[str, Any]]:
    seen: dict[tuple[Any, ...], dict[str, Any]] = {}

    def hook(module: Any, args: Any, _out: Any) -> None:
        inp = args[0]
        key = (tuple(inp.shape), tuple(module.weight.shape), module.stride, module.padding, module.dilation,
               module.groups)
        if key not in seen:
            seen[key] = {"layer": name_of[module], "count": 0, "module": module, "x": inp.detach().clone()}
        seen[key]["count"] += 1

    name_of = {m: n for n, m in model.named_modules()}
    handles = [m.register_forward_hook(hook) for m in model.modules() if type(m) is torch.nn.Conv2d]
    with torch.no_grad():
        model(x)
    for h in handles:
        h.remove()
    rows = []
    with torch.no_grad():
        for (xs, ws, stride, _pad, _dil, groups), entry in seen.items():
            m, inp = entry["module"], entry["x"]
            kind = support(m)
            cudnn_ms = kernel_us(lambda m=m, inp=inp: torch.nn.functional.conv2d(
                inp, m.weight, None, m.stride, m.padding, m.dilation, m.groups))[0] / 1e3
            if kind == "dense":
                ours = lambda m=m, inp=inp: ct.conv2d(inp, m.weight, None, m.stride, m.padding, m.dilation)  # noqa: E731
            elif kind == "depthwise":
                ours = lambda m=m, inp=inp: ct.depthwise_conv2d(inp, m.weight, m.stride, m.padding)  # noqa: E731
            else:
                ours = None
            ours_ms = kernel_us(ours)[0] / 1e3 if ours is not None else None
            rows.append({"layer": entry["layer"], "count": entry["count"], "x": list(xs), "w": list(ws),
                         "stride": list(stride), "groups": groups, "kind": kind, "cudnn_fp32_kernel_ms": cudnn_ms,
                         "convtune_kernel_ms": ours_ms})
    return rows


def _layer_markdown(rows: list[dict[str, Any]]) -> str:
    lines = ["| first layer | × in model | x | w | stride | cuDNN fp32 kernel ms | convtune kernel ms | × |",
             "|---|---|---|---|---|---|---|---|"]
    tot_c = tot_o = 0.0
    for r in rows:
        ours = r["convtune_kernel_ms"]
        tot_c += r["count"] * r["cudnn_fp32_kernel_ms"]
        tot_o += r["count"] * (ours if ours is not None else r["cudnn_fp32_kernel_ms"])
        ratio = f"{r['cudnn_fp32_kernel_ms'] / ours:.2f}" if ours else "—"
        lines.append(f"| {r['layer']} | {r['count']} | {r['x']} | {r['w']} | {r['stride']} | "
                     f"{r['cudnn_fp32_kernel_ms']:.4f} | {ours if ours is None else f'{ours:.4f}'} | {ratio} |")
    lines.append(f"| Σ over the model's convolutions | | | | | {tot_c:.3f} | {tot_o:.3f} | "
                 f"{tot_c / tot_o if tot_o else float('nan'):.2f} |")
    return "\n".join(lines)


def _set_tf32(on: bool) -> None:
    torch.backends.cudnn.allow_tf32 = on
    torch.backends.cuda.matmul.allow_tf32 = False   # PyTorch's default: TF32 for convolutions only


class _Autocast(torch.nn.Module):
    """``model`` under ``torch.autocast("cuda", bfloat16)``: the bf16 class's forward (PyTorch's and ours alike)."""

    def __init__(self, model: Any) -> None:
        super().__init__()
        self.model = model

    def forward(self, x: Any) -> Any:
        with torch.autocast("cuda", dtype=torch.bfloat16):
            return self.model(x).float()


def run_model(name: str, batch: int, budget_s: float, budget_trials: int, db: str,
              math: str = "ieee",
              fuse: bool = False) -> tuple[dict[str, Any], Callable[[], list[dict[str, Any]]] | None]:
    """The model's row, and (fp32 classes) the per-layer kernel table to take once every model's forwards are
    timed (``main``: no forward after a profiler session)."""
    import torchvision

    torch.manual_seed(0)
    model = getattr(torchvision.models, name)(weights=None).cuda().eval().requires_grad_(False)
    x = torch.randn(batch, 3, 224, 224, device="cuda")
    torch.backends.cudnn.benchmark = True
    row: dict[str, Any] = {"model": name, "batch": batch, "math": math, "fused": fuse}
    tf32, bf16 = math == "tf32", math == "bf16"
    _set_tf32(False)
    with torch.no_grad():
        reference = model(x).clone()
    row["cudnn_fp32"] = _timings(model, x)
    _set_tf32(True)
    with torch.no_grad():
        row["cudnn_tf32_rel_error"] = rel_error(model(x), reference)
    row["cudnn_tf32"] = _timings(model, x)
    _set_tf32(tf32)
    if fuse and not (tf32 or bf16):
        # the fair control of --fuse: cuDNN with the same conv + BN folding (PyTorch's own pass)
        from torch.fx.experimental.optimization import fuse as torch_fold

        folded = torch_fold(model)
        with torch.no_grad():
            row["cudnn_fp32_folded_rel_error"] = rel_error(folded(x), reference)
        row["cudnn_fp32_folded"] = _timings(folded, x)
        _set_tf32(tf32)
    run = _Autocast(model) if bf16 else model     # the bf16 class: the whole forward under autocast
    if bf16:
        with torch.no_grad():
            row["cudnn_bf16_rel_error"] = rel_error(run(x), reference)
        row["cudnn_bf16"] = _timings(run, x)
    print(f"== tuning {name} (budget {budget_s:g} s, {budget_trials} trials per convolution)", file=sys.stderr,
          flush=True)
    tuning = ct.tune(run, x, budget_s=budget_s, budget_trials=budget_trials, db=db, show=False)
    row["tuning"] = tuning.to_dict()
    row["layer_table"] = tuning.table()
    baseline = copy.deepcopy(run)   # the class's cuDNN model, timed again in turn with the converted one
    ct.convert(model)
    row["converted"] = len(ct.converted(model))
    if fuse:
        fused = ct.fuse(model)
        row["fused_convolutions"] = len(ct.fused(fused))
        run = _Autocast(fused) if bf16 else fused
    with torch.no_grad():
        out = run(x)
    row["rel_error_vs_cudnn_fp32"] = rel_error(out, reference)
    base = BASELINE_OF[math]
    row[f"{base}_before_tuning"] = row[base]
    # the folded control (--fuse, fp32) in the same rounds: the host drifts over the tuning minutes
    controls = [folded] if "cudnn_fp32_folded" in row else []
    row["convtune"], row[base], *folded_timing = _paired_timings(x, run, baseline, *controls)
    if folded_timing:
        row["cudnn_fp32_folded_before_tuning"], row["cudnn_fp32_folded"] = row["cudnn_fp32_folded"], folded_timing[0]
    del baseline, controls
    ct.revert(model)
    # the per-convolution table times fp32 calls: not the bf16 class's
    layers = None if bf16 else functools.partial(_layer_kernel_ms, model, x, tf32)
    for base in ("cudnn_fp32", "cudnn_tf32", "cudnn_bf16", "cudnn_fp32_folded"):
        for mode in ("eager_ms", "graph_ms"):
            if base in row:
                row[f"speedup_{mode[:-3]}_vs_{base}"] = row[base][mode] / row["convtune"][mode]
    _set_tf32(False)
    row["target_vs_fp32"] = TARGETS.get(name)
    gate = 2 * row[f"cudnn_{math}_rel_error"] + 1e-6 if (tf32 or bf16) else 1e-4
    row["accuracy_gate"] = gate
    row["accuracy_ok"] = row["rel_error_vs_cudnn_fp32"] <= gate
    return row, layers


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    classes = sorted({r.get("math", "ieee") for r in rows})
    title = ", ".join({"ieee": "fp32", "tf32": "TF32", "bf16": "bf16 autocast"}[c] for c in classes) or "fp32"
    lines = [f"# Model inference, {title} ({meta['device']}, torch {meta['torch']}, cuDNN {meta['cudnn']}, "
             f"{meta['date']})", "",
             f"ms per forward (no grad): wall time of {FORWARDS} back-to-back forwards; graph: a CUDA graph of one "
             "forward replayed. convtune: converted and tuned (budget per model in the JSON).", "",
             "| model | batch | cuDNN fp32 eager / graph ms | cuDNN TF32 eager / graph ms | convtune eager / graph ms "
             "| × vs fp32 eager / graph | × vs TF32 eager / graph | rel. err vs fp32 | target vs fp32 |",
             "|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        f32, t32, ours = r["cudnn_fp32"], r["cudnn_tf32"], r["convtune"]
        best = max(r["speedup_eager_vs_cudnn_fp32"], r["speedup_graph_vs_cudnn_fp32"])
        target = r["target_vs_fp32"]
        verdict = (f"≥ {target}×: {'met' if best >= target and r['accuracy_ok'] else 'NOT met'}" if target else
                   f"none (accuracy {'ok' if r['accuracy_ok'] else 'NOT ok'})")
        lines.append(
            f"| {r['model']} | {r['batch']} | {f32['eager_ms']:.3f} / {f32['graph_ms']:.3f} | {t32['eager_ms']:.3f} / "
            f"{t32['graph_ms']:.3f} | {ours['eager_ms']:.3f} / {ours['graph_ms']:.3f} | "
            f"{r['speedup_eager_vs_cudnn_fp32']:.2f} / {r['speedup_graph_vs_cudnn_fp32']:.2f} | "
            f"{r['speedup_eager_vs_cudnn_tf32']:.2f} / {r['speedup_graph_vs_cudnn_tf32']:.2f} | "
            f"{r['rel_error_vs_cudnn_fp32']:.1e} | {verdict} |")
    for r in rows:
        if "cudnn_fp32_folded" in r:
            fo = r["cudnn_fp32_folded"]
            lines += ["", f"{r['model']}: convtune fused ({r.get('fused_convolutions')} convolutions with BN folded "
                      "and the epilogue fused) against cuDNN fp32 with the same conv + BN folding "
                      f"(`torch.fx.experimental.optimization.fuse`): cuDNN folded {fo['eager_ms']:.3f} / "
                      f"{fo['graph_ms']:.3f} ms eager / graph, **{r['speedup_eager_vs_cudnn_fp32_folded']:.2f}× / "
                      f"{r['speedup_graph_vs_cudnn_fp32_folded']:.2f}×**; its output error vs the unfolded model "
                      f"{r['cudnn_fp32_folded_rel_error']:.1e}."]
    for r in rows:
        if "cudnn_bf16" in r:
            b = r["cudnn_bf16"]
            lines += ["", f"bf16 class (the forward under `torch.autocast(\"cuda\", bfloat16)`, ours and PyTorch's): "
                      f"cuDNN bf16 {b['eager_ms']:.3f} / {b['graph_ms']:.3f} ms eager / graph, convtune "
                      f"{r['convtune']['eager_ms']:.3f} / {r['convtune']['graph_ms']:.3f} ms: "
                      f"**{r['speedup_eager_vs_cudnn_bf16']:.2f}× / {r['speedup_graph_vs_cudnn_bf16']:.2f}×** "
                      f"(target ≥ 1.0×); output error vs cuDNN fp32 {r['rel_error_vs_cudnn_fp32']:.2e} against "
                      f"cuDNN bf16's {r['cudnn_bf16_rel_error']:.2e} (gate 2× + 1e-6: "
                      f"{'ok' if r['accuracy_ok'] else 'NOT ok'})."]
    for r in rows:
        lines += ["", f"## {r['model']} (batch {r['batch']}): per-layer share", "", r["layer_table"]]
        if r.get("layers_kernel"):
            lines += ["", f"## {r['model']} (batch {r['batch']}): kernel time per distinct convolution, same run "
                      "(CUDA profiler)", "", _layer_markdown(r["layers_kernel"]).replace(
                          "cuDNN fp32", "cuDNN TF32" if r.get("math") == "tf32" else "cuDNN fp32")]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    ap.add_argument("--budget-s", type=float, default=150.0, help="tuning seconds per model (split over its "
                                                                  "distinct convolutions)")
    ap.add_argument("--budget-trials", type=int, default=6, help="trials per distinct convolution")
    ap.add_argument("--db", default="sqlite:////tmp/convtune-models.db")
    ap.add_argument("--out", default="benchmarks/results/models")
    ap.add_argument("--math", choices=("ieee", "tf32", "bf16"), default="ieee",
                    help="convtune's precision class: ieee (strict fp32), tf32 (PyTorch's default for convolutions) "
                         "or bf16 (the forward under torch.autocast bfloat16, vs cuDNN bf16)")
    ap.add_argument("--fuse", action="store_true", help="convtune's side fused (BN folded, epilogue in one pass); "
                                                         "cuDNN with the same folding reported as a second baseline")
    args = ap.parse_args(argv)
    measured = [run_model(name, MODELS[name], args.budget_s, args.budget_trials, args.db, args.math, args.fuse)
                for name in args.models]
    # the per-layer kernel tables after every model's forwards: a CUDA profiler session can slow every later
    # launch of the process (benchmarks/profiler_residue.py), and the next model's eager forwards are host-bound
    rows = []
    for row, layers in measured:
        if layers is not None:
            row["layers_kernel"] = layers()
        rows.append(row)
        print(markdown([row], device_info() | {"date": ""}), file=sys.stderr, flush=True)
    meta = device_info() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "budget_s": args.budget_s,
                            "budget_trials": args.budget_trials, "db": args.db}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model_inference.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (out / "model_inference.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
