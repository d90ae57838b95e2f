"""Host and kernel time per call of convtune and of PyTorch's own op on the same tensors (GPU host).

Cases: direct (single launch; a large and a launch-bound shape), unfused Winograd (three launches and a
workspace), depthwise 1-D and 2-D forward, and their forward + backward. Modes:

==============  ===============================================================================================
pytorch         ``F.conv2d`` / ``F.conv1d`` (cuDNN fp32, ``allow_tf32=False``, ``cudnn.benchmark=True``)
plain           the plain functions: ``convtune.conv2d(x, w, config=...)``; the depthwise ops without autograd
                (eager calls of ``convtune.ops.torch.depthwise_conv*d`` reach the implementation directly)
op              the ``torch.library`` op through the dispatcher (``torch.ops.convtune.*``), no autograd
op+autograd     the same op on inputs that require grad (the op's registered autograd)
api+autograd    ``convtune.torch.conv2d`` / ``depthwise_conv*d`` on inputs that require grad (eager autograd.Function)
api             the same public functions without autograd (inference; forward cases only)
no-op custom op a ``torch.library.custom_op`` that launches nothing: that mechanism's floor on this host
no-op library op the same through ``torch.library.Library`` with a fake and an Autograd kernel, as the convtune ops
                are defined (:func:`convtune.ops.torch._dispatch.library_op`): their mechanism's floor
graph           a CUDA graph of one call, replayed (PyTorch's op likewise)
compile         ``torch.compile(fullgraph=True)`` of the call (PyTorch's op likewise)
==============  ===============================================================================================

Host µs per call = wall time of 200 back-to-back calls until the last returns, the median of 5 rounds that take
the modes in turn; wall µs = until the GPU is done;
kernel µs = device time of the calls' kernels and memsets from the CUDA profiler (benchmarks/torch_timing.py), in a
second pass after every case's walls (a profiler session slows the process's later launches).
Every convtune mode runs the same configuration (the dense model's best of the case's family, registered with
the resolver so that the ops use it too); outputs are checked against float64 first. The acceptance ratios of
issue 14 are computed from the measured host times: plain ≤ 1.2× PyTorch for single-launch paths, ≤ 1.5× for
multi-launch ones, the ``torch.library`` op in eager mode ≤ 2×.

    python benchmarks/call_overhead.py --out benchmarks/results/call_overhead
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import statistics
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import cuda_graph, device_info, host_and_wall_us, kernel_us, rel_error, strict_fp32

import convtune
import convtune.ops.torch as ct
from convtune.kernels.devices import device_machine
from convtune.kernels.prepared import prepare_plan
from convtune.kernels.registry import get_spec, model_fastest
from convtune.ops import resolver
from convtune.ops.torch._dispatch import library_op
from convtune.problem import ConvProblem

COMPILE_WARNINGS = ("ignore", r".*torch.jit.script_method.*")


@dataclass(frozen=True)
class Case:
    name: str
    kind: str                  # "dense", "dw1d", "dw2d"
    spec: str                  # problem key (dense, dw2d) or "B C L K" (dw1d)
    family: str | None = None  # dense: the family whose model-best config runs
    backward: bool = False


CASES = [
    Case("direct 1x1 N=32 C=256 56² K=64", "dense", "N=32 C=256 H=56 W=56 K=64 R=1 S=1", "direct"),
    Case("direct 3x3 N=1 C=512 14² K=512", "dense", "N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1", "direct"),
    Case("unfused Winograd N=1 C=512 14² K=512", "dense", "N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1",
         "winograd_unfused"),
    Case("unfused Winograd N=32 C=256 14² K=256", "dense", "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1",
         "winograd_unfused"),
    Case("depthwise 1-D fwd B=64 C=768 L=1024 K=4", "dw1d", "64 768 1024 4"),
    Case("depthwise 1-D fwd+bwd B=64 C=768 L=1024 K=4", "dw1d", "64 768 1024 4", backward=True),
    Case("depthwise 2-D fwd N=32 C=384 14² 3x3", "dw2d", "N=32 C=384 H=14 W=14 K=384 R=3 S=3 pad=1 groups=384"),
    Case("depthwise 2-D fwd+bwd N=32 C=384 14² 3x3", "dw2d", "N=32 C=384 H=14 W=14 K=384 R=3 S=3 pad=1 groups=384",
         backward=True),
    Case("depthwise 2-D fwd N=32 C=144 56² 3x3", "dw2d", "N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144"),
]


def _walls(fn: Callable[[], Any], calls: int) -> dict[str, float]:
    host, wall = host_and_wall_us(fn, calls=calls)
    return {"host_us": host, "wall_us": wall}


def _kernel(fn: Callable[[], Any]) -> dict[str, float]:
    kern, launches = kernel_us(fn)
    return {"kernel_us": kern, "launches": launches}


ROUNDS = 5


def _walls_interleaved(modes: dict[str, Callable[[], Any]], calls: int) -> dict[str, dict[str, float]]:
    """Host and wall µs of every mode, each the median of :data:`ROUNDS` rounds that visit the modes in turn: a
    drift of the host's speed (other tenants, clocks) reaches every mode alike."""
    hosts: dict[str, list[float]] = {name: [] for name in modes}
    walls: dict[str, list[float]] = {name: [] for name in modes}
    for _ in range(ROUNDS):
        for name, fn in modes.items():
            host, wall = host_and_wall_us(fn, calls=calls, repeats=1)
            hosts[name].append(host)
            walls[name].append(wall)
    return {name: {"host_us": statistics.median(hosts[name]), "wall_us": statistics.median(walls[name])}
            for name in modes}


@torch.library.custom_op("convtune_bench::noop", mutates_args=())
def _noop_op(x: torch.Tensor) -> torch.Tensor:
    """The floor of the custom-op mechanism: a ``torch.library`` op that launches nothing (a 0-d output)."""
    return x.new_empty(())


_BENCH_LIBRARY = torch.library.Library("convtune_bench", "FRAGMENT")
#: the same no-op defined by the convtune ops' own helper (fake, Autograd kernel and all): that mechanism's floor
_noop_library = library_op("noop_library", "(Tensor x) -> Tensor", lambda x: x.new_empty(()),
                           lambda x: x.new_empty(()), lambda ctx, dy: (None,), lambda ctx, inputs, output: None,
                           library=_BENCH_LIBRARY)


def _modes_dense(case: Case, machine: Any) -> tuple[dict[str, Callable[[], Any]], float, int, str]:
    """The callables of every mode, the float64 check's relative error, the convtune launch count and the config
    key every mode runs (the ops resolve to it while :func:`_serve` says so)."""
    p = ConvProblem.parse(case.spec)
    spec = get_spec(case.family)
    best = model_fastest(p, machine, [spec])
    assert best is not None, f"no {case.family} configuration for {case.spec}"
    key = best[1].key()
    g = torch.Generator(device="cuda").manual_seed(0)
    x = torch.randn(p.N, p.C, p.H, p.W, device="cuda", generator=g)
    w = torch.randn(p.K, p.C, p.R, p.S, device="cuda", generator=g)
    xg, wg = x.clone().requires_grad_(), w.clone().requires_grad_()
    geo = (p.stride_h, p.stride_w, p.pad_h, p.pad_w, p.dil_h, p.dil_w)
    stride, pad, dil = geo[0:2], geo[2:4], geo[4:6]
    err = rel_error(convtune.conv2d(x, w, stride, pad, dil, config=key), F.conv2d(x.double(), w.double(), None,
                                                                                   stride, pad, dil))
    op = torch.ops.convtune.conv2d.default
    launches = prepare_plan(spec.plan(p, best[1], machine), 0).launches

    def pytorch() -> Any:
        return F.conv2d(x, w, None, stride, pad, dil)

    def ours() -> Any:
        return ct.conv2d(x, w, None, stride, pad, dil)

    modes = {
        "pytorch": pytorch,
        "plain": lambda: convtune.conv2d(x, w, stride, pad, dil, config=key),
        "op": lambda: op(x, w, None, *geo),
        "op+autograd": lambda: op(xg, wg, None, *geo),
        "api+autograd": lambda: ct.conv2d(xg, wg, None, stride, pad, dil),
        "ours": ours,
    }
    return modes, err, launches, key


def _serve(case: Case, machine: Any, key: str | None) -> None:
    """Have the ops resolve a dense case to the config its plain calls name (``key``; None for the depthwise
    cases); two cases of one problem name two configs, so this is said again before each case's second pass."""
    if key is not None:
        resolver.remember(ConvProblem.parse(case.spec), machine.name, key)


def _modes_depthwise(case: Case) -> tuple[dict[str, Callable[[], Any]], float, int]:
    """As :func:`_modes_dense` for the depthwise ops; the op modes take the op's own weight layout (1-D: lag-order
    taps, made once), as a caller of ``torch.ops.convtune.*`` holds them."""
    g = torch.Generator(device="cuda").manual_seed(1)
    if case.kind == "dw1d":
        B, C, L, K = (int(v) for v in case.spec.split())
        x = torch.randn(B, C, L, device="cuda", generator=g)
        w = torch.randn(C, K, device="cuda", generator=g)
        w_op = w.flip(-1).contiguous()

        def torch_fwd(a: Any, b: Any) -> Any:
            return F.conv1d(F.pad(a, (K - 1, 0)), b[:, None, :], groups=C)

        def ours_fwd(a: Any, b: Any) -> Any:
            return ct.depthwise_conv1d(a, b)

        def op_fwd(a: Any, b: Any) -> Any:
            return torch.ops.convtune.depthwise_conv1d_fwd(a, b)
    else:
        p = ConvProblem.parse(case.spec)
        x = torch.randn(p.N, p.C, p.H, p.W, device="cuda", generator=g)
        w = torch.randn(p.C, 1, p.R, p.S, device="cuda", generator=g)
        w_op = w
        st, pd = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w)

        def torch_fwd(a: Any, b: Any) -> Any:
            return F.conv2d(a, b, None, st, pd, 1, p.C)

        def ours_fwd(a: Any, b: Any) -> Any:
            return ct.depthwise_conv2d(a, b, st, pd)

        def op_fwd(a: Any, b: Any) -> Any:
            return torch.ops.convtune.depthwise_conv2d_fwd(a, b, *st, *pd)

    err = rel_error(ours_fwd(x, w), torch_fwd(x.double(), w.double()))
    xg, wg, w_opg = (t.clone().requires_grad_() for t in (x, w, w_op))
    if not case.backward:
        modes = {"pytorch": lambda: torch_fwd(x, w), "plain": lambda: ours_fwd(x, w), "op": lambda: op_fwd(x, w_op),
                 "op+autograd": lambda: op_fwd(xg, w_opg), "api+autograd": lambda: ours_fwd(xg, wg),
                 "ours": lambda: ours_fwd(x, w)}
        return modes, err, 1
    dy = torch.randn_like(torch_fwd(x, w))

    def step(fwd: Callable[[Any, Any], Any], weight: Any) -> Callable[[], Any]:
        return lambda: torch.autograd.grad(fwd(xg, weight), (xg, weight), dy)

    modes = {"pytorch": step(torch_fwd, wg), "op+autograd": step(op_fwd, w_opg), "api+autograd": step(ours_fwd, wg),
             "ours": step(ours_fwd, wg)}
    return modes, err, 3


def _graph_and_compile(case: Case, modes: dict[str, Callable[[], Any]],
                       calls: int) -> tuple[dict[str, dict[str, Any]], dict[str, Callable[[], Any]]]:
    """The graph and compile rows' walls of convtune (the "ours" callable) and of PyTorch, and the callables they
    timed (for the kernel pass)."""
    import warnings

    out: dict[str, dict[str, Any]] = {}
    timed: dict[str, Callable[[], Any]] = {}
    for impl in ("pytorch", "ours"):
        fn = modes[impl]
        try:
            graph = cuda_graph(fn)
            out[f"graph:{impl}"] = _walls(graph.replay, calls)
            timed[f"graph:{impl}"] = graph.replay
        except Exception as exc:  # a capture error is a result to report, not a crash
            out[f"graph:{impl}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
        try:
            torch._dynamo.reset()
            with warnings.catch_warnings():
                warnings.filterwarnings(*COMPILE_WARNINGS)
                if case.backward:
                    out[f"compile:{impl}"] = {"error": "not measured: backward runs outside the compiled forward"}
                    continue
                compiled = torch.compile(fn, fullgraph=True)
                compiled()
                out[f"compile:{impl}"] = _walls(compiled, calls)
                timed[f"compile:{impl}"] = compiled
        except Exception as exc:
            out[f"compile:{impl}"] = {"error": f"{type(exc).__name__}: {exc}"[:300]}
    return out, timed


_FLOOR_INPUT: Any = None


def run(cases: list[Case], calls: int) -> list[dict[str, Any]]:
    """Every case's walls first, then (second pass) every timed callable's kernel µs: a CUDA profiler session
    can leave CUPTI attached and slow every later launch of the process (``profiler_residue.py``), so no wall is
    taken after one. A compiled callable may compile again in the second pass (later cases reset dynamo);
    ``kernel_us`` calls it once before its profiler session."""
    global _FLOOR_INPUT
    _FLOOR_INPUT = torch.empty(1, device="cuda")
    strict_fp32()
    torch.backends.cudnn.benchmark = True
    machine = device_machine(0)
    rows, timed_of, served = [], [], []
    for case in cases:
        print(f"== {case.name}", file=sys.stderr, flush=True)
        key = None
        if case.kind == "dense":
            modes, err, launches, key = _modes_dense(case, machine)
        else:
            modes, err, launches = _modes_depthwise(case)
        _serve(case, machine, key)
        served.append(key)
        timed = {name: fn for name, fn in modes.items() if name != "ours"}
        if not case.backward:   # the public function in eager mode without autograd (inference)
            timed["api"] = modes["ours"]
        timed["no-op custom op"] = lambda: _noop_op(_FLOOR_INPUT)
        timed["no-op library op"] = lambda: _noop_library(_FLOOR_INPUT)
        results = _walls_interleaved(timed, calls)
        replayed, replay_fns = _graph_and_compile(case, modes, calls)
        results |= replayed
        timed_of.append(timed | replay_fns)
        base = results["pytorch"]["host_us"]
        for r in results.values():
            if "host_us" in r:
                r["host_vs_pytorch"] = r["host_us"] / base
        limit = 1.2 if launches == 1 else 1.5
        checks = {}
        if "plain" in results:
            checks[f"plain ≤ {limit:.1f}× pytorch"] = results["plain"]["host_vs_pytorch"] <= limit
        if "op" in results:
            checks["op ≤ 2× pytorch"] = results["op"]["host_vs_pytorch"] <= 2.0
        if case.backward:   # no plain backward function: the eager autograd path against PyTorch's, multi-launch
            checks["api+autograd ≤ 1.5× pytorch"] = results["api+autograd"]["host_vs_pytorch"] <= 1.5
        rows.append({"case": case.name, "family": case.family, "backward": case.backward, "launches": launches,
                     "rel_error_vs_float64": err, "modes": results, "checks": checks})
        resolver.forget_remembered()
    for case, row, timed, key in zip(cases, rows, timed_of, served, strict=True):
        print(f"== kernel time {case.name}", file=sys.stderr, flush=True)
        _serve(case, machine, key)
        for name, fn in timed.items():
            row["modes"][name] |= _kernel(fn)
        resolver.forget_remembered()
    return rows


def markdown(rows: list[dict[str, Any]], meta: dict[str, Any]) -> str:
    lines = [f"# Host and kernel time per call ({meta['device']}, torch {meta['torch']}, cuDNN {meta['cudnn']}, "
             f"{meta['date']})", "",
             f"{meta['calls']} back-to-back calls per figure; host µs: until the last call returns; wall µs: until "
             "the GPU is done; kernel µs: CUDA profiler (device time of the calls' kernels and memsets).", "",
             "| case | mode | host µs | wall µs | kernel µs | kernels/call | host / PyTorch's |",
             "|---|---|---|---|---|---|---|"]
    for row in rows:
        for mode, r in row["modes"].items():
            if "error" in r:
                lines.append(f"| {row['case']} | {mode} | — | — | — | — | {r['error'][:80]} |")
                continue
            lines.append(f"| {row['case']} | {mode} | {r['host_us']:.1f} | {r['wall_us']:.1f} | {r['kernel_us']:.1f} "
                         f"| {r['launches']:.1f} | {r['host_vs_pytorch']:.2f} |")
    lines += ["", "| case | convtune launches | rel. error vs float64 | acceptance |", "|---|---|---|---|"]
    for row in rows:
        checks = ", ".join(f"{k}: {'yes' if v else 'NO'}" for k, v in row["checks"].items())
        lines.append(f"| {row['case']} | {row['launches']} | {row['rel_error_vs_float64']:.1e} | {checks} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", default="benchmarks/results/call_overhead")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--only", nargs="*", help="substrings of case names")
    args = ap.parse_args(argv)
    cases = [c for c in CASES if not args.only or any(s in c.name for s in args.only)]
    rows = run(cases, args.calls)
    meta = device_info() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "calls": args.calls}
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "call_overhead.json").write_text(json.dumps({"meta": meta, "rows": rows}, indent=1))
    text = markdown(rows, meta)
    (out / "call_overhead.md").write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
