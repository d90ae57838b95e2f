"""A suite's depthwise entries called as a user calls them: ``convtune.ops.torch.depthwise_conv2d`` /
``depthwise_conv1d`` against PyTorch fp32 (``F.conv2d(groups=C)``, causal ``F.conv1d``; cuDNN with
``cudnn.benchmark=True``, TF32 off) on the same tensors, in the same process (GPU host).

Per entry, two paths, each for convtune and for PyTorch:

* fwd: the forward alone;
* fwd+bwd: ``torch.autograd.grad(conv(x, w), (x, w), dy)``: the forward and both gradients, through each side's
  autograd (convtune's: its dgrad and wgrad kernels);

and three ways of timing each:

* kernel µs per call: device time of every kernel and memset the calls ran, from the CUDA profiler
  (``torch_timing.kernel_us``), in a second pass after every entry's walls (a profiler session slows the
  process's later launches);
* eager µs per call: wall time of back-to-back calls until the GPU is done (``torch_timing.host_and_wall_us``);
* graph µs per call: a CUDA graph of the calls, replayed.

L2: every call takes its own set of x, w (and dy) in turn, as many sets as make the inputs and outputs of a pass
exceed twice the L2 (at most ``MAX_SETS``), for both sides alike; so a small layer's traffic reaches DRAM as it
does inside a model, and neither side's kernel time is an L2 figure. "% copy" = compulsory bytes of the forward
(x, w, y once) / its kernel time / the copy bandwidth measured in this run (a 1 GiB device copy, profiler time).

Configs: the ops' resolver (``--db``: a tuning database's best measured config; else the time model's choice);
``--plans-from`` serves, per entry, the fastest verified forward config of ``depthwise_bench.py`` JSON reports
(the gradients always run the model's choice). Before timing, each side's output and gradients are compared with
float64 (PyTorch in double on the GPU) by relative error, convtune's outputs first poisoned (a NaN-filled block of
the output's size is freed into torch's caching allocator, which the op's output then reuses): a row over the gate
(1e-5 forward, 1e-4 gradients) is reported as wrong and not timed.

Writes ``dw_user_suite.json`` and ``dw_user_suite.md`` under ``--out`` after every entry:

    python benchmarks/dw_user_suite.py --suite benchmarks/suites/wide.json --out /tmp/dw_user_suite
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import math
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import cuda_graph, device_info, geomean, host_and_wall_us, kernel_us, rel_error, strict_fp32

import convtune.ops.torch as ct
from convtune.kernels.devices import device_machine
from convtune.ops import resolver
from convtune.problem import ConvProblem

MAX_SETS = 64
FWD_GATE = 1e-5
GRAD_GATE = 1e-4
PATHS = ("fwd", "fwd+bwd")
IMPLS = ("ours", "pytorch")


@dataclass(frozen=True)
class Entry:
    """One suite entry: ``kind`` "dw2d" (fields N C H W R S stride pad) or "dw1d" (B C L K, causal)."""

    name: str
    kind: str
    cls: str
    fields: dict[str, int]

    @property
    def problem(self) -> ConvProblem:
        """The forward problem (its ``operand_bytes``: x + w + y, what a timed call moves once)."""
        f = self.fields
        if self.kind == "dw1d":
            return ConvProblem.depthwise1d(f["B"], f["C"], f["L"], f["K"])
        return ConvProblem.from_mapping(f | {"K": f["C"], "groups": f["C"]})


def load_entries(suite: dict[str, Any], only: list[str] | None) -> list[Entry]:
    """The suite's ``depthwise2d`` and ``depthwise1d_causal`` entries (``only``: names to keep)."""
    entries = []
    for e in suite.get("depthwise2d", []):
        fields = {k: int(e[k]) for k in ("N", "C", "H", "W", "R", "S")}
        fields |= {"stride": int(e.get("stride", 1)), "pad": int(e.get("pad", 0))}
        entries.append(Entry(e["name"], "dw2d", e.get("class", ""), fields))
    for e in suite.get("depthwise1d_causal", []):
        entries.append(Entry(e["name"], "dw1d", e.get("class", ""), {k: int(e[k]) for k in ("B", "C", "L", "K")}))
    return [e for e in entries if not only or e.name in only]


def conv_fns(entry: Entry) -> tuple[Callable[..., Any], Callable[..., Any], tuple[int, ...], tuple[int, ...]]:
    """(convtune's forward, PyTorch's forward, x's shape, w's shape) of an entry; both take (x, w)."""
    f = entry.fields
    if entry.kind == "dw1d":
        B, C, L, K = f["B"], f["C"], f["L"], f["K"]

        def ours_1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return ct.depthwise_conv1d(x, w)

        def torch_1d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
            return F.conv1d(F.pad(x, (K - 1, 0)), w[:, None, :], groups=C)

        return ours_1d, torch_1d, (B, C, L), (C, K)
    N, C, H, W, R, S = (f[k] for k in ("N", "C", "H", "W", "R", "S"))
    stride, pad = f["stride"], f["pad"]

    def ours_2d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return ct.depthwise_conv2d(x, w, stride, pad)

    def torch_2d(x: torch.Tensor, w: torch.Tensor) -> torch.Tensor:
        return F.conv2d(x, w, None, stride, pad, 1, C)

    return ours_2d, torch_2d, (N, C, H, W), (C, 1, R, S)


def set_count(pass_bytes: int, l2_bytes: int) -> int:
    """Input sets to rotate so that one pass over them moves more than 2× the L2 (1 when a set already does)."""
    return max(1, min(MAX_SETS, math.ceil(2 * l2_bytes / max(pass_bytes, 1))))


def poisoned(fn: Callable[[], torch.Tensor], like: torch.Tensor) -> torch.Tensor:
    """``fn()`` after a NaN-filled block of ``like``'s shape, dtype and device went back to torch's caching
    allocator (the output the call allocates reuses it, so a kernel that leaves elements unwritten shows NaN, not
    an earlier result)."""
    junk = torch.full_like(like, float("nan"))
    del junk
    return fn()


def check(entry: Entry, ours: Callable[..., Any], ref: Callable[..., Any], x: torch.Tensor, w: torch.Tensor,
          dy: torch.Tensor) -> dict[str, float]:
    """Relative errors against float64 of both sides' forward (y) and gradients (dx, dw)."""
    x64, w64 = x.double().requires_grad_(), w.double().requires_grad_()
    y64 = ref(x64, w64)
    dx64, dw64 = torch.autograd.grad(y64, (x64, w64), dy.double())
    errors: dict[str, float] = {}
    for impl, fn in (("ours", ours), ("pytorch", ref)):
        y = poisoned(lambda: ours(x, w), y64.to(x.dtype)) if impl == "ours" else fn(x, w)
        xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
        dx, dw = torch.autograd.grad(fn(xg, wg), (xg, wg), dy)
        errors |= {f"{impl}_y": rel_error(y, y64), f"{impl}_dx": rel_error(dx, dx64), f"{impl}_dw": rel_error(dw, dw64)}
    return errors


def callables(ours: Callable[..., Any], ref: Callable[..., Any], xs: list[torch.Tensor], ws: list[torch.Tensor],
              dys: list[torch.Tensor]) -> dict[str, Callable[[], Any]]:
    """"{path}:{impl}" → one pass over every input set (one call per set)."""
    xgs = [x.clone().requires_grad_() for x in xs]
    wgs = [w.clone().requires_grad_() for w in ws]
    out: dict[str, Callable[[], Any]] = {}
    for impl, fn in (("ours", ours), ("pytorch", ref)):
        def fwd(fn: Callable[..., Any] = fn) -> None:
            for x, w in zip(xs, ws, strict=True):
                fn(x, w)

        def fwd_bwd(fn: Callable[..., Any] = fn) -> None:
            for x, w, dy in zip(xgs, wgs, dys, strict=True):
                torch.autograd.grad(fn(x, w), (x, w), dy)

        out[f"fwd:{impl}"], out[f"fwd+bwd:{impl}"] = fwd, fwd_bwd
    return out


def measure_walls(entry: Entry, calls: int, l2_bytes: int) -> tuple[dict[str, Any], dict[str, Callable[[], Any]]]:
    """An entry's row (errors, sets, eager and graph µs per call of each path and side) and the callables its
    kernel pass times (one pass over the sets each)."""
    ours, ref, x_shape, w_shape = conv_fns(entry)
    g = torch.Generator(device="cuda").manual_seed(1)
    x0 = torch.randn(x_shape, device="cuda", generator=g)
    w0 = torch.randn(w_shape, device="cuda", generator=g)
    y0 = ref(x0, w0)
    pass_bytes = entry.problem.operand_bytes
    sets = set_count(pass_bytes, l2_bytes)
    xs = [x0] + [torch.randn(x_shape, device="cuda", generator=g) for _ in range(sets - 1)]
    ws = [w0] + [torch.randn(w_shape, device="cuda", generator=g) for _ in range(sets - 1)]
    dys = [torch.randn(y0.shape, device="cuda", generator=g) for _ in range(sets)]
    row: dict[str, Any] = {"name": entry.name, "kind": entry.kind, "class": entry.cls, "fields": entry.fields,
                           "sets": sets, "compulsory_fwd_bytes": pass_bytes}
    try:
        errors = check(entry, ours, ref, x0, w0, dys[0])
    except Exception as exc:  # an unsupported shape is a row to report, not a crash of the suite
        row["error"] = f"{type(exc).__name__}: {exc}"[:300]
        return row, {}
    row["errors"] = errors
    wrong = [k for k in ("ours_y", "ours_dx", "ours_dw")
             if not errors[k] <= (FWD_GATE if k == "ours_y" else GRAD_GATE)]
    if wrong:
        row["error"] = f"over the float64 gate: {', '.join(f'{k} {errors[k]:.2e}' for k in wrong)}"
        return row, {}
    fns = callables(ours, ref, xs, ws, dys)
    passes = max(1, calls // sets)
    walls: dict[str, dict[str, Any]] = {}
    timed: dict[str, Callable[[], Any]] = {}
    for name, fn in fns.items():
        _, wall = host_and_wall_us(fn, calls=passes, warmup=2)
        walls[f"eager:{name}"] = {"us": wall / sets}
        timed[f"kernel:{name}"] = fn
        try:
            graph = cuda_graph(fn)
            _, wall = host_and_wall_us(graph.replay, calls=passes, warmup=2)
            walls[f"graph:{name}"] = {"us": wall / sets}
        except Exception as exc:  # a capture error is a result to report
            walls[f"graph:{name}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    row["modes"] = walls
    return row, timed


def add_kernel_times(row: dict[str, Any], timed: dict[str, Callable[[], Any]], copy_bytes_per_s: float) -> None:
    """The profiler pass: kernel µs per call of each timed callable; speedups and the forward's % of copy."""
    for name, fn in timed.items():
        us, launches = kernel_us(fn, calls=max(2, 64 // row["sets"]))
        row["modes"][name] = {"us": us / row["sets"], "launches": launches / row["sets"]}
    modes = row["modes"]
    for mode in ("kernel", "eager", "graph"):
        for path in PATHS:
            ours, theirs = modes.get(f"{mode}:{path}:ours", {}), modes.get(f"{mode}:{path}:pytorch", {})
            if "us" in ours and "us" in theirs:
                row[f"speedup_{mode}_{path}"] = theirs["us"] / ours["us"]
    for impl in IMPLS:
        k = modes.get(f"kernel:fwd:{impl}", {})
        if "us" in k:
            row[f"copy_fraction_{impl}"] = row["compulsory_fwd_bytes"] / (k["us"] * 1e-6) / copy_bytes_per_s


def measure_copy_bandwidth(nbytes: int = 1 << 30) -> float:
    """Bytes moved per second (read + write) by a device-to-device copy of ``nbytes``, profiler time."""
    src = torch.empty(nbytes // 4, device="cuda")
    dst = torch.empty_like(src)
    us, _ = kernel_us(lambda: dst.copy_(src), calls=10)
    return 2 * nbytes / (us * 1e-6)


def summarize(rows: list[dict[str, Any]]) -> dict[str, Any]:
    """Geomean speedups per (kind, mode, path), and the issue-17 checks (2-D: ≥ 2× on every entry, forward and
    forward + backward, kernel time; 1-D above 100 MB: ≥ 80% of copy tuned / ≥ 65% untuned)."""
    out: dict[str, Any] = {}
    for kind in ("dw2d", "dw1d"):
        of_kind = [r for r in rows if r["kind"] == kind]
        for mode in ("kernel", "eager", "graph"):
            for path in PATHS:
                vals = [r.get(f"speedup_{mode}_{path}", float("nan")) for r in of_kind]
                finite = [v for v in vals if math.isfinite(v)]
                out[f"{kind}_{mode}_{path}"] = geomean(finite)
                out[f"{kind}_{mode}_{path}_lowest"] = min(finite) if finite else float("nan")
    big_1d = [r for r in rows if r["kind"] == "dw1d" and r["compulsory_fwd_bytes"] > 100e6]
    out["dw1d_over_100MB_copy_fraction"] = {r["name"]: r.get("copy_fraction_ours") for r in big_1d}
    return out


def _f(v: Any, fmt: str) -> str:
    return format(v, fmt) if isinstance(v, float) and math.isfinite(v) else "—"


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]) -> str:
    lines = [f"# {meta['suite']}: depthwise through convtune.ops.torch vs PyTorch fp32 ({meta['device']}, torch "
             f"{meta['torch']}, cuDNN {meta['cudnn']}, {meta['date']})", "",
             "µs per call; kernel: CUDA profiler; eager: wall of back-to-back calls until the GPU is done; graph: "
             "CUDA graph replay. Every call takes the next of `sets` input sets (a pass moves > 2× L2). Speedup = "
             f"PyTorch µs / convtune µs. % copy: forward compulsory bytes / kernel time / "
             f"{meta['copy_bytes_per_s'] / 1e12:.2f} TB/s (copy, measured in this run). Configs: {meta['configs']}.",
             "", "| entry | class | MB | sets | fwd kernel µs ours / PyTorch | × | % copy ours (PyTorch) "
             "| fwd eager × | fwd graph × | fwd+bwd kernel µs ours / PyTorch | × | fwd+bwd eager × | fwd+bwd graph × "
             "| err y / dx / dw |",
             "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        mb = r["compulsory_fwd_bytes"] / 1e6
        if "error" in r:
            lines.append(f"| {r['name']} | {r['class']} | {mb:.1f} | {r['sets']} | {r['error'][:120]} |"
                         + " |" * 9)
            continue
        e = r["errors"]

        def us(key: str, modes: dict[str, Any] = r["modes"]) -> str:
            return _f(modes.get(key, {}).get("us"), ".1f")

        lines.append(
            f"| {r['name']} | {r['class']} | {mb:.1f} | {r['sets']} | {us('kernel:fwd:ours')} / "
            f"{us('kernel:fwd:pytorch')} | {_f(r.get('speedup_kernel_fwd'), '.2f')} | "
            f"{_f(100 * r.get('copy_fraction_ours', float('nan')), '.0f')} "
            f"({_f(100 * r.get('copy_fraction_pytorch', float('nan')), '.0f')}) | "
            f"{_f(r.get('speedup_eager_fwd'), '.2f')} | {_f(r.get('speedup_graph_fwd'), '.2f')} | "
            f"{us('kernel:fwd+bwd:ours')} / {us('kernel:fwd+bwd:pytorch')} | "
            f"{_f(r.get('speedup_kernel_fwd+bwd'), '.2f')} | {_f(r.get('speedup_eager_fwd+bwd'), '.2f')} | "
            f"{_f(r.get('speedup_graph_fwd+bwd'), '.2f')} | "
            f"{e['ours_y']:.1e} / {e['ours_dx']:.1e} / {e['ours_dw']:.1e} |")
    lines += ["", "| geomean speedup (lowest) | fwd kernel | fwd eager | fwd graph | fwd+bwd kernel | fwd+bwd eager "
              "| fwd+bwd graph |", "|---|---|---|---|---|---|---|"]
    for kind, label in (("dw2d", "depthwise 2-D"), ("dw1d", "depthwise 1-D")):
        cells = [f"{_f(summary[f'{kind}_{mode}_{path}'], '.2f')} "
                 f"({_f(summary[f'{kind}_{mode}_{path}_lowest'], '.2f')})"
                 for path in PATHS for mode in ("kernel", "eager", "graph")]
        lines.append(f"| {label} | " + " | ".join(cells) + " |")
    low_fwd, low_both = summary["dw2d_kernel_fwd_lowest"], summary["dw2d_kernel_fwd+bwd_lowest"]
    verdict = {True: "met", False: "NOT met"}
    lines += ["", f"Issue 17, 2-D ≥ 2× PyTorch fp32 on every entry (kernel time): forward "
                  f"{verdict[low_fwd >= 2.0]} (lowest {_f(low_fwd, '.2f')}), forward + backward "
                  f"{verdict[low_both >= 2.0]} (lowest {_f(low_both, '.2f')})."]
    for name, frac in summary["dw1d_over_100MB_copy_fraction"].items():
        lines.append(f"1-D above 100 MB, {name}: {_f(100 * (frac or float('nan')), '.0f')}% of copy (targets: tuned "
                     "≥ 80%, untuned ≥ 65%).")
    return "\n".join(lines) + "\n"


def serve_plans(paths: list[str], device_name: str) -> int:
    """Have the ops serve each entry's fastest verified forward config of ``depthwise_bench.py`` reports (by the
    entry's problem key); returns how many entries got one."""
    best: dict[str, tuple[float, str]] = {}
    for path in paths:
        for result in json.loads(Path(path).read_text())["results"]:
            for c in result.get("candidates", []):
                ok = c.get("path") == "fwd" and c.get("status") == "ok" and c.get("median_ms")
                if ok and (result["problem"] not in best or c["median_ms"] < best[result["problem"]][0]):
                    best[result["problem"]] = (c["median_ms"], c["config"])
    for problem_key, (_, config) in best.items():
        resolver.remember(problem_key, device_name, config)
    return len(best)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/wide.json")
    ap.add_argument("--out", default="benchmarks/results/dw_user_suite")
    ap.add_argument("--calls", type=int, default=128, help="calls per wall figure (rounded to whole passes)")
    ap.add_argument("--only", nargs="*", help="entry names")
    ap.add_argument("--db", default=None, help="tuning database the ops' resolver reads")
    ap.add_argument("--plans-from", nargs="*", default=[], help="depthwise_bench.py JSON reports to serve from")
    args = ap.parse_args(argv)
    strict_fp32()
    torch.backends.cudnn.benchmark = True
    if args.db:
        resolver.use_database(args.db)
    machine = device_machine(0)
    served = serve_plans(args.plans_from, machine.name) if args.plans_from else 0
    entries = load_entries(json.loads(Path(args.suite).read_text()), args.only)
    l2_bytes = torch.cuda.get_device_properties(0).L2_cache_size
    configs = (f"{served} forward configs from {', '.join(args.plans_from)}, the rest the model's" if served
               else f"the resolver's ({args.db or 'no database'}; else the model's choice)")
    meta = device_info() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "suite": args.suite,
                            "calls": args.calls, "l2_bytes": l2_bytes, "configs": configs}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    rows: list[dict[str, Any]] = []
    timed_of: list[dict[str, Callable[[], Any]]] = []

    def write() -> str:   # after every entry: a run cut short keeps every row it measured
        summary = summarize(rows)
        (out / "dw_user_suite.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows},
                                                           indent=1, default=str))
        text = markdown(rows, summary, meta)
        (out / "dw_user_suite.md").write_text(text)
        return text

    meta["copy_bytes_per_s"] = float("nan")
    for entry in entries:   # every wall before the first profiler session
        print(f"== {entry.name}", file=sys.stderr, flush=True)
        row, timed = measure_walls(entry, args.calls, l2_bytes)
        rows.append(row)
        timed_of.append(timed)
        write()
    meta["copy_bytes_per_s"] = measure_copy_bandwidth()
    text = write()
    for row, timed in zip(rows, timed_of, strict=True):
        print(f"== kernel time {row['name']}", file=sys.stderr, flush=True)
        if timed:
            add_kernel_times(row, timed, meta["copy_bytes_per_s"])
        text = write()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
