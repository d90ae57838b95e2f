"""The public conv2d suite called as a user calls it: ``convtune.ops.torch.conv2d(x, w, stride, padding)`` against
``F.conv2d`` with cuDNN fp32 (``allow_tf32=False``, ``cudnn.benchmark=True``), same tensors, same run (GPU host).
``--class tf32`` runs both in TF32 (``allow_tf32=True``, PyTorch's default for convolutions: the op then serves the
tf32 problem), ``--class bfloat16`` on bfloat16 tensors (the 16-bit families against cuDNN bf16); the error gate is
then twice cuDNN's own error in the class on the same inputs (+1e-6).

Per suite entry: the config the op runs (the resolver's: the tuning database's best GPU-measured config when
``--db`` names one, e.g. the ``tune`` step's ``/tmp/convtune-tune-suite.db``, else the model's choice) and where it
came from — ``--configs-from TABLE`` serves each entry the fastest correct config a replay table (``make_replay.py``,
e.g. ``tests/data/replay_h200_bf16.json.gz``) measured for it on this device name, of the families whose kernel
version the table shares with this checkout (what tuning with ≥ the table's configs finds), shown as ``table``;
``--tune-budget-s S`` first tunes every entry into ``--db`` (S seconds for the whole suite,
``--tune-budget-trials`` per shape; shapes already tuned there are not tuned again; ``--tune-only`` stops there, so a
second run measures); the output against float64;
then three ways of calling, each for convtune and for cuDNN:

* eager: wall µs per call of 200 back-to-back calls (host and GPU time together: what a loop pays);
* graph: a CUDA graph of one call, replayed back-to-back;
  (eager and graph: the median of 3 rounds that take convtune and cuDNN in turn, so that the host's run-to-run
  spread reaches both; cuDNN is timed again next to the untuned variant);
* compile: ``torch.compile(fullgraph=True)`` of the call (``--no-compile`` skips it);

plus kernel µs per call from the CUDA profiler, in a second pass after every entry's walls (a profiler session
slows the process's later launches: ``profiler_residue.py``). Speedup = cuDNN's µs / convtune's µs per mode;
geometric means over the suite. Issue 14's targets (eager ≥ 2.0×, graph or compile ≥ 2.3×) are evaluated from
these numbers.
Writes ``user_suite.md`` and ``user_suite.json`` under ``--out``.

    python benchmarks/user_suite.py --db sqlite:////tmp/convtune-tune-suite.db --out benchmarks/results/user_suite
    python benchmarks/user_suite.py --class bfloat16 --suite benchmarks/suites/wide.json --no-compile \
        --configs-from tests/data/replay_h200_bf16.json.gz --out /tmp/user_suite_bf16

Every config the entries resolve to is compiled first, by nvcc in parallel (``--jobs``), into the cubin cache.
"""

from __future__ import annotations

import argparse
import contextlib
import datetime as dt
import json
import os
import statistics
import sys
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
import torch.nn.functional as F
from torch_timing import cuda_graph, device_info, geomean, host_and_wall_us, kernel_us, rel_error, strict_fp32

import convtune.ops.torch as ct
from convtune.kernels.compile import precompile
from convtune.kernels.devices import device_machine
from convtune.kernels.registry import get_spec, specs_for
from convtune.ops import resolver
from convtune.ops.conv2d import model_choice
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

TOLERANCE = {"direct": 1e-5, "winograd": 1e-4, "winograd_unfused": 1e-3,   # F(4) at worst (the kernel tests')
             "winograd_unfused_large": 2e-4, "winograd_unfused_1d": 5e-5}


def _wall(fn: Any, calls: int) -> float:
    return host_and_wall_us(fn, calls=calls, warmup=10, repeats=3)[1]


def _compiled_wall(fn: Any, calls: int) -> float | str:
    try:
        torch._dynamo.reset()
        with warnings.catch_warnings():
            warnings.filterwarnings("ignore", r".*torch.jit.script_method.*")
            compiled = torch.compile(fn, fullgraph=True)
            compiled()
            return _wall(compiled, calls)
    except Exception as exc:  # reported, not fatal
        return f"{type(exc).__name__}: {exc}"[:200]


#: the precision classes this benchmark runs: the problem's fields and the torch dtype of the tensors
CLASSES = {"ieee": ({}, torch.float32), "tf32": ({"math": "tf32"}, torch.float32),
           "bfloat16": ({"dtype": "bfloat16"}, torch.bfloat16)}


def entry_problem(entry: dict[str, Any], precision: str) -> ConvProblem:
    return ConvProblem.from_mapping({k: v for k, v in entry.items() if k != "name"} | CLASSES[precision][0])


def resolved(p: ConvProblem, machine: Any) -> resolver.Resolution:
    """The op's config for ``p`` (the resolver's answer, as ``convtune.ops.torch.conv2d`` asks it)."""
    return resolver.resolve(p, machine, [s.family for s in specs_for(p)], lambda: model_choice(p, machine))


def table_configs(path: str, device_name: str) -> dict[str, str]:
    """Per problem key: the fastest ``ok`` config of a replay table measured on ``device_name``, among the families
    whose recorded kernel version is this checkout's (the others are skipped, named on stderr)."""
    table = ReplayTable.load(path)
    if table.device.name != device_name:
        raise SystemExit(f"--configs-from: {path} was measured on {table.device.name!r}, not {device_name!r}")
    for kind in sorted(set(table.kernel_sha256) - table.current_kinds()):
        print(f"--configs-from: {kind} rows skipped (another kernel version than this checkout's)", file=sys.stderr)
    return table.fastest_configs()


def precompile_resolved(problems: list[ConvProblem], machine: Any, jobs: int) -> None:
    """nvcc-compile the kernel of every problem's resolved config in parallel, into the cubin cache the ops load
    from (a serial first call would compile them one by one)."""
    texts = []
    for p in problems:
        config = resolved(p, machine).config
        texts.append(get_spec(config.family, config.direction).plan(p, config, machine).source())
    cubins = Path(os.environ.setdefault("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins"))
    failed = [r for r in precompile(texts, machine.arch, cubins, jobs=jobs).values() if isinstance(r, Exception)]
    print(f"precompiled {len(set(texts))} kernels ({len(failed)} failed)", file=sys.stderr)


def round_tf32(a: torch.Tensor) -> torch.Tensor:
    """float32 -> TF32 as ``cvt.rna.tf32.f32`` rounds (nearest, ties away; 10 mantissa bits kept), as float32."""
    bits = a.contiguous().view(torch.int32)
    return ((bits + 0x1000) & ~0x1FFF).view(torch.float32)


def class_bar(precision: str, cudnn_err: float, floor_err: float | None) -> float:
    """The error a config may reach: twice cuDNN's in the class on the same inputs (+1e-6) — and, for TF32 where
    cuDNN ran an fp32 algorithm (its error under a tenth of the TF32 floor: exact TF32 operands, float64 sums),
    twice the floor (the kernel tests' rule)."""
    if precision == "tf32" and floor_err is not None and cudnn_err < 0.1 * floor_err:
        return 2 * floor_err + 1e-6
    return 2 * cudnn_err + 1e-6


def serve_table(table: dict[str, str], device_name: str) -> None:
    """Have the ops serve every table config (the resolver's ``remember``: it calls them ``service``)."""
    for key, config in table.items():
        resolver.remember(key, device_name, config)


ROUNDS = 3


def _paired_walls(ours: Any, base: Any, calls: int) -> tuple[float, float]:
    """Wall µs per call of ``ours`` and ``base``, each the median of :data:`ROUNDS` rounds that take the two in
    turn: a drift of the host's speed (other tenants, clocks) reaches both alike."""
    walls: tuple[list[float], list[float]] = ([], [])
    for _ in range(ROUNDS):
        for fn, out in ((ours, walls[0]), (base, walls[1])):
            out.append(host_and_wall_us(fn, calls=calls, warmup=10, repeats=1)[1])
    return statistics.median(walls[0]), statistics.median(walls[1])


def _time(fn: Any, calls: int, compile_too: bool, base: Any, base_graph: Any) -> dict[str, Any]:
    """eager, graph (and compile) µs per call of ``fn``; eager and graph paired with the baseline's
    (``base_eager``, ``base_graph``: ``base`` and its CUDA graph ``base_graph`` timed in the same rounds)."""
    times: dict[str, Any] = {}
    times["eager"], times["base_eager"] = _paired_walls(fn, base, calls)
    times["graph"], times["base_graph"] = _paired_walls(cuda_graph(fn).replay, base_graph.replay, calls)
    if compile_too:
        times["compile"] = _compiled_wall(fn, calls)
    return times


def measure(entry: dict[str, Any], calls: int, compile_too: bool, precision: str = "ieee",
            table: dict[str, str] | None = None, untuned_too: bool = False) -> dict[str, Any]:
    """One suite entry: cuDNN's times and the op's with the resolver's config; with ``untuned_too`` also the op's
    with the model's choice (lookups off, nothing remembered: what a user gets before tuning), fields
    ``untuned_*``, against the same cuDNN times."""
    p, x, w, ours, cudnn = _calls(entry, precision)
    machine = device_machine(0)
    st, pd, dl = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w)
    reference = F.conv2d(x.double(), w.double(), None, st, pd, dl)
    cudnn_err = rel_error(cudnn(), reference)
    floor_err = (rel_error(F.conv2d(round_tf32(x).double(), round_tf32(w).double(), None, st, pd, dl), reference)
                 if precision == "tf32" else None)
    row: dict[str, Any] = {"name": entry["name"], "problem": p.key(), "cudnn_rel_error": cudnn_err,
                           "tf32_floor_rel_error": floor_err}
    cudnn_graph = cuda_graph(cudnn)
    if compile_too:
        row["cudnn_compile_us"] = _compiled_wall(cudnn, calls)
    for prefix in ("", "untuned_") if untuned_too else ("",):
        with _variant(prefix, table, machine.name):
            found = resolved(p, machine)
            y = ours()
            if tuple(y.shape) != (p.N, p.K, p.P, p.Q):
                raise RuntimeError(f"{entry['name']}: the call ran another problem: y {tuple(y.shape)} for {p.key()}")
            err = rel_error(y, reference)
            # ieee: the family's tolerance; a class's own yardstick: cuDNN's error in the class on the same inputs
            ok = (err <= TOLERANCE.get(found.config.family, 1e-5) if precision == "ieee"
                  else err <= class_bar(precision, cudnn_err, floor_err))
            # a table's config is served through remember(): the resolver calls it "service"
            source = "table" if not prefix and table and table.get(p.key()) == found.config.key() else found.source
            row |= {f"{prefix}config": found.config.key(), f"{prefix}config_source": source,
                    f"{prefix}family": found.config.family, f"{prefix}rel_error": err, f"{prefix}rel_error_ok": ok}
            times = _time(ours, calls, compile_too, cudnn, cudnn_graph)
            for mode in ("eager", "graph"):   # cuDNN's, timed in the same rounds as this variant's
                row[f"cudnn_{prefix}{mode}_us"] = times.pop(f"base_{mode}")
            for mode, us in times.items():
                row[f"convtune_{prefix}{mode}_us"] = us
                base = row.get(f"cudnn_{prefix}{mode}_us", row.get(f"cudnn_{mode}_us"))
                if isinstance(us, float) and isinstance(base, float):
                    row[f"speedup_{prefix}{mode}"] = base / us
    return row


def add_kernel_times(row: dict[str, Any], entry: dict[str, Any], precision: str, table: dict[str, str] | None,
                     untuned_too: bool) -> None:
    """The CUDA profiler's kernel µs per call of cuDNN and of each variant :func:`measure` timed, into ``row``.

    Called after every entry's walls are taken: a profiler session can leave CUPTI attached to the process, and
    every later launch then pays its callbacks — more for the op that launches more kernels per call
    (``profiler_residue.py`` measures it), so no wall is taken after a profiler session."""
    p, _x, _w, ours, cudnn = _calls(entry, precision)
    row["cudnn_kernel_us"] = kernel_us(cudnn)[0]
    machine = device_machine(0)
    for prefix in ("", "untuned_") if untuned_too else ("",):
        if f"{prefix}config" not in row:
            continue
        with _variant(prefix, table, machine.name):
            if resolved(p, machine).config.key() != row[f"{prefix}config"]:
                raise RuntimeError(f"{entry['name']}: the {prefix or 'tuned '}config changed between the passes")
            us = row[f"convtune_{prefix}kernel_us"] = kernel_us(ours)[0]
            row[f"speedup_{prefix}kernel"] = row["cudnn_kernel_us"] / us


def _calls(entry: dict[str, Any], precision: str) -> tuple[ConvProblem, Any, Any, Any, Any]:
    """(problem, x, w, convtune's call, cuDNN's call) of a suite entry: the same random tensors at every call."""
    p = entry_problem(entry, precision)
    return (p, *problem_calls(p, CLASSES[precision][1], seed=len(entry["name"])))


def problem_calls(p: ConvProblem, dtype: torch.dtype, seed: int) -> tuple[Any, Any, Any, Any]:
    """(x, w, convtune's call ``ct.conv2d``, cuDNN's call ``F.conv2d``) of a problem on random normal tensors of
    ``dtype`` drawn from ``seed`` (x (N, C, H, W), w (K, C, R, S))."""
    g = torch.Generator(device="cuda").manual_seed(seed)
    x = torch.randn(p.N, p.C, p.H, p.W, device="cuda", generator=g).to(dtype)
    w = torch.randn(p.K, p.C, p.R, p.S, device="cuda", generator=g).to(dtype)
    # every geometry field of the problem: a call without the dilation runs another problem than the one resolved
    st, pd, dl = (p.stride_h, p.stride_w), (p.pad_h, p.pad_w), (p.dil_h, p.dil_w)
    return x, w, lambda: ct.conv2d(x, w, None, st, pd, dl), lambda: F.conv2d(x, w, None, st, pd, dl)


@contextlib.contextmanager
def _variant(prefix: str, table: dict[str, str] | None, device_name: str) -> Iterator[None]:
    """The resolver set for a variant: ``""`` as it is (the table served), ``"untuned_"`` the model's choice
    (lookups off, nothing remembered), restored after."""
    if not prefix:
        yield
        return
    resolver.forget_remembered()
    resolver.set_lookup(False)
    try:
        yield
    finally:
        resolver.set_lookup(None)
        serve_table(table or {}, device_name)


#: per class: the baseline's name and how it runs
BASELINES = {"ieee": ("cuDNN fp32", "with allow_tf32=False"), "tf32": ("cuDNN TF32", "with allow_tf32=True"),
             "bfloat16": ("cuDNN bf16", "on bfloat16 tensors")}


def markdown(rows: list[dict[str, Any]], summary: dict[str, Any], meta: dict[str, Any]) -> str:
    def f(v: Any, fmt: str = ".1f") -> str:
        return format(v, fmt) if isinstance(v, float) else "—"

    precision = meta.get("class", "ieee")
    table = f"the fastest measured in {meta['configs_from']} (table), else " if meta.get("configs_from") else ""
    lines = [f"# {meta.get('suite', 'the public conv2d suite')} as a user calls it ({meta['device']}, torch "
             f"{meta['torch']}, cuDNN {meta['cudnn']}, {meta['date']})", "",
             "µs per call: wall time of back-to-back calls (eager; a CUDA graph of one call replayed; torch.compile); "
             f"kernel: CUDA profiler. {' '.join(BASELINES[precision])}. Speedup = cuDNN / convtune. Configs: "
             f"{table}the resolver's (database, else the model's choice)"
             + ("; untuned: the model's choice (lookups off)." if meta.get("untuned_too") else ".")]
    for prefix, title in (("", "configs as resolved"), ("untuned_", "untuned (the model's choice)")):
        if not any(f"{prefix}config" in r for r in rows):
            continue
        lines += ["", f"## {title}", "",
                  "| shape | family (config from) | rel. err (cuDNN's) | eager µs ours / cuDNN | ×  | graph µs ours / "
                  "cuDNN | × | compile µs ours / cuDNN | × | kernel µs ours / cuDNN | × |",
                  "|---|---|---|---|---|---|---|---|---|---|---|"]
        for r in rows:
            if f"{prefix}config" not in r:
                continue
            cells = [f"{r['name']}", f"{r[prefix + 'family']} ({r[prefix + 'config_source']})",
                     f"{r[prefix + 'rel_error']:.1e} ({f(r.get('cudnn_rel_error'), '.1e')})"
                     + ("" if r[prefix + "rel_error_ok"] else " **over the gate**")]
            for mode in ("eager", "graph", "compile", "kernel"):
                base = r.get(f"cudnn_{prefix}{mode}_us", r.get(f"cudnn_{mode}_us"))
                cells += [f"{f(r.get(f'convtune_{prefix}{mode}_us'))} / {f(base)}",
                          f(r.get(f"speedup_{prefix}{mode}"), ".2f")]
            lines.append("| " + " | ".join(cells) + " |")
        lowest = {mode: min((r[f"speedup_{prefix}{mode}"] for r in rows if f"speedup_{prefix}{mode}" in r),
                            default=float("nan")) for mode in ("eager", "graph", "kernel")}
        lines += ["", "| geomean speedup (lowest) | eager | graph | compile | kernel |", "|---|---|---|---|---|",
                  f"| convtune {title} vs {BASELINES[precision][0]} | "
                  f"{f(summary[prefix + 'eager'], '.2f')} ({f(lowest['eager'], '.2f')}) | "
                  f"{f(summary[prefix + 'graph'], '.2f')} ({f(lowest['graph'], '.2f')}) | "
                  f"{f(summary[prefix + 'compile'], '.2f')} | "
                  f"{f(summary[prefix + 'kernel'], '.2f')} ({f(lowest['kernel'], '.2f')}) |"]
    if precision == "ieee":
        best_replay = max(summary["graph"], summary.get("compile") or 0)
        lines += ["", f"Targets (issue 14): eager ≥ 2.0×: {'met' if summary['eager'] >= 2.0 else 'NOT met'}; graph or "
                      f"compile ≥ 2.3×: {'met' if best_replay >= 2.3 else 'NOT met'}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/public.json")
    ap.add_argument("--db", default=None, help="tuning database the op's resolver reads (default: the resolver's)")
    ap.add_argument("--out", default="benchmarks/results/user_suite")
    ap.add_argument("--calls", type=int, default=200)
    ap.add_argument("--no-compile", action="store_true")
    ap.add_argument("--tune-budget-s", type=float, default=0.0, help="tune the suite into --db first (0: no)")
    ap.add_argument("--tune-budget-trials", type=int, default=40)
    ap.add_argument("--tune-only", action="store_true",
                    help="stop after tuning into --db (a later run measures: one device call each)")
    ap.add_argument("--only", nargs="*")
    ap.add_argument("--configs-from", default=None, help="a replay table whose fastest measured configs the op serves")
    ap.add_argument("--untuned-too", action="store_true",
                    help="also time the op with the model's choice (lookups off), against the same cuDNN times")
    ap.add_argument("--jobs", type=int, default=os.cpu_count() or 8, help="parallel nvcc compiles")
    ap.add_argument("--class", dest="precision", choices=tuple(CLASSES), default="ieee",
                    help="precision class of both sides: ieee (strict fp32), tf32, bfloat16")
    args = ap.parse_args(argv)
    strict_fp32()
    if args.precision == "tf32":   # PyTorch's default for convolutions: the op reads the same flag
        torch.backends.cudnn.allow_tf32 = True
    torch.backends.cudnn.benchmark = True
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if not args.only or e["name"] in args.only]
    if args.tune_budget_s > 0:
        from convtune.ops.torch.tune_model import tune_problems

        db = args.db or "sqlite:////tmp/convtune-user-suite.db"
        problems = [ConvProblem.from_mapping({k: v for k, v in e.items() if k != "name"} | CLASSES[args.precision][0])
                    for e in entries]
        tune_problems(problems, args.tune_budget_s, args.tune_budget_trials, patience=30, db=db)
        args.db = db
        if args.tune_only:
            return 0
    if args.db:
        resolver.use_database(args.db)
    machine = device_machine(0)
    table = table_configs(args.configs_from, machine.name) if args.configs_from else {}
    serve_table(table, machine.name)
    problems = [entry_problem(e, args.precision) for e in entries]
    precompile_resolved(problems, machine, args.jobs)
    if args.untuned_too:   # the model's choices too
        resolver.forget_remembered()
        resolver.set_lookup(False)
        precompile_resolved(problems, machine, args.jobs)
        resolver.set_lookup(None)
        serve_table(table, machine.name)
    rows: list[dict] = []
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    meta = device_info() | {"date": dt.datetime.now(dt.UTC).isoformat(timespec="seconds"), "db": args.db,
                            "calls": args.calls, "shapes": len(entries), "class": args.precision,
                            "configs_from": args.configs_from, "untuned_too": args.untuned_too,
                            "suite": args.suite}
    text = ""

    def write() -> str:   # after every shape: a run cut short by a time limit keeps every row it measured
        summary = {f"{prefix}{mode}": geomean([r.get(f"speedup_{prefix}{mode}", float("nan")) for r in rows])
                   for prefix in ("", "untuned_") for mode in ("eager", "graph", "compile", "kernel")}
        (out / "user_suite.json").write_text(json.dumps({"meta": meta, "summary": summary, "rows": rows}, indent=1))
        text = markdown(rows, summary, meta)
        (out / "user_suite.md").write_text(text)
        return text

    for entry in entries:   # walls first, no profiler session before any of them (add_kernel_times)
        print(f"== {entry['name']}", file=sys.stderr, flush=True)
        rows.append(measure(entry, args.calls, not args.no_compile, args.precision, table, args.untuned_too))
        text = write()
    for entry, row in zip(entries, rows, strict=True):
        print(f"== kernel time {entry['name']}", file=sys.stderr, flush=True)
        add_kernel_times(row, entry, args.precision, table, args.untuned_too)
        text = write()
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
