"""Counter-free analysis of the 1-D causal depthwise kernels (``convtune analyze``), after Babak & Schaller.

For each variant × path (× weight-gradient mode) the model's best configurations (``candidates``, default 8)
are each verified once against
the float64 reference, then timed with CUDA events (:func:`convtune.kernels.timing.time_launches`: warm-up,
median of ``reps`` with p10/p90). Each row reports

* time (median, p10–p90) and the verification's relative error;
* modelled bytes: the variant's requested global-memory traffic (:mod:`~convtune.kernels.depthwise.conv1d.traffic`,
  halo re-reads, weight reloads and wgrad partials included) — and compulsory bytes of the path;
* effective bandwidth = modelled bytes / time, and its share of the copy bandwidth measured in the same run
  (an estimate, not measured DRAM throughput: caches serve part of the modelled requests);
* arithmetic intensity = causal FLOPs / modelled bytes;
* the bound's floor = max(FLOPs / peak, lower-bound bytes / copy bandwidth) on the measured ceilings
  (lower bound: the depthwise I/O bound for fwd and dgrad, the compulsory words for wgrad) and the
  efficiency = floor / time.

Outputs under ``--out``: ``analysis.md`` (the table), ``analysis.json`` (rows, ceilings, device) and the
roofline (``roofline.png``, ``roofline.svg``: achieved GFLOP/s against arithmetic intensity, one point per
variant × path, the compulsory-traffic intensity of each path as a dotted line).

matplotlib is optional (extra ``plot``). The analysis is its table and JSON, which need nothing beyond
convtune; the plot only illustrates them. GPU hosts that run the timing often have no plotting stack, and
matplotlib with its font and image dependencies is a large install that the tuner and the service never
use. Without it the plots are skipped with a one-line note.

Everything except :func:`measure` runs without a GPU (tests build rows from synthetic timings).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

from convtune.bounds.depthwise import depthwise_lower_bound
from convtune.bounds.roofline import floor_time
from convtune.errors import InvalidConfig
from convtune.kernels.depthwise import model, space
from convtune.kernels.depthwise.configs import MODE_ATOMIC, MODE_DETERMINISTIC, MODES, PATHS, VARIANTS_1D
from convtune.kernels.depthwise.conv1d import traffic
from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

TOLERANCE = {"fwd": 1e-5, "dgrad": 1e-5, "wgrad": 1e-4}
MODE_NAMES = {MODE_DETERMINISTIC: "deterministic", MODE_ATOMIC: "atomic"}


@dataclass(frozen=True, slots=True)
class Measurement:
    """One timed (variant, path, mode) with the configuration and its modelled work."""

    variant: str
    path: str
    mode: str                 # "" for fwd/dgrad, "deterministic" or "atomic" for wgrad
    config: str
    median_ms: float
    p10_ms: float
    p90_ms: float
    modelled_bytes: int
    rel_error: float | None = None


@dataclass(frozen=True, slots=True)
class Ceilings:
    copy_bytes_per_s: float   # bytes read + written per second of a large device-to-device copy
    peak_flops_per_s: float   # fp32 (SGEMM, no TF32) measured on the device
    device: str = ""


def parse_list(text: str, allowed: Sequence[str], field: str) -> list[str]:
    """A comma-separated subset of ``allowed`` (``all`` for every one), in ``allowed``'s order.

    Raises:
        InvalidConfig: naming ``field`` for an unknown or empty entry.
    """
    items = [t.strip() for t in text.split(",") if t.strip()]
    if items == ["all"]:
        return list(allowed)
    if not items:
        raise InvalidConfig(field, f"empty: give a comma-separated list of {', '.join(allowed)} (or all)")
    for item in items:
        if item not in allowed:
            raise InvalidConfig(field, f"{item!r} is unknown: allowed {', '.join(allowed)} or all")
    return [a for a in allowed if a in items]


def check_problem(problem: ConvProblem) -> None:
    if not problem.causal:
        raise InvalidConfig("problem", f"{problem.key()}: analyze takes a 1-D causal depthwise problem "
                                       "(B=.. C=.. L=.. K=..)")
    if problem.dtype != "float32" or problem.dil_w != 1:
        raise InvalidConfig("problem", f"{problem.key()}: the depthwise kernels take float32, dilation 1")


def choose_plans(problem: ConvProblem, machine: MachineModel, variants: Sequence[str], paths: Sequence[str],
                 modes: Sequence[str] = ("deterministic", "atomic")) -> list[Depthwise1dPlan]:
    """The model's best plan per (variant, path, wgrad mode), in that order; skips what has no valid plan."""
    return [group[0] for group in candidate_groups(problem, machine, variants, paths, modes, 1)]


def candidate_groups(problem: ConvProblem, machine: MachineModel, variants: Sequence[str], paths: Sequence[str],
                     modes: Sequence[str] = ("deterministic", "atomic"),
                     candidates: int = 1) -> list[list[Depthwise1dPlan]]:
    """Per (variant, path, wgrad mode), in that order: the model's ``candidates`` best plans, best first.
    Timing a few per row and keeping the fastest protects the comparison of variants from one model error."""
    wanted_modes = {m for m, name in MODE_NAMES.items() if name in modes}
    out = []
    for variant in variants:
        for path in paths:
            plans = list(space.enumerate_plans(problem, machine, variant, path))
            groups = ({m: [pl for pl in plans if pl.config.mode == m] for m in sorted(wanted_modes)}  # type: ignore[attr-defined]
                      if path == "wgrad" else {0: plans})
            for group in groups.values():
                if group:
                    ranked = sorted(group, key=lambda pl: (model.predict_1d(pl, machine).time_s, pl.config.key()))
                    out.append(ranked[:max(1, candidates)])
    return out


def mode_of(pl: Depthwise1dPlan) -> str:
    return MODE_NAMES[pl.config.mode] if pl.path == "wgrad" else ""  # type: ignore[attr-defined]


def bound_bytes(problem: ConvProblem, path: str, machine: MachineModel) -> float:
    """Lower-bound bytes of one path: the depthwise I/O bound (fwd, dgrad: the same tensor sizes) at S = L2,
    the compulsory words for wgrad."""
    if path == "wgrad":
        return 4.0 * traffic.compulsory_words(problem, "wgrad")
    return 4.0 * depthwise_lower_bound(problem, machine.fast_memory_words("l2")).words


def analysis_rows(problem: ConvProblem, measurements: Sequence[Measurement], ceilings: Ceilings,
                  machine: MachineModel) -> list[dict[str, Any]]:
    """One dict per measurement (module docstring), then one ``total`` row per variant summing its paths
    (the deterministic weight gradient where both modes were timed)."""
    measured = machine.with_ceilings(ceilings.copy_bytes_per_s, ceilings.peak_flops_per_s, "measured")
    flops = float(traffic.flops(problem))
    rows: list[dict[str, Any]] = []
    for m in measurements:
        seconds = m.median_ms * 1e-3
        floor = floor_time(flops, bound_bytes(problem, m.path, machine), measured)
        eff_bw = m.modelled_bytes / seconds
        rows.append({
            "variant": m.variant, "path": m.path, "mode": m.mode, "config": m.config, "median_ms": m.median_ms,
            "p10_ms": m.p10_ms, "p90_ms": m.p90_ms, "rel_error": m.rel_error, "modelled_bytes": m.modelled_bytes,
            "compulsory_bytes": traffic.compulsory_bytes(problem, m.path), "flops": flops,
            "effective_gbps": eff_bw / 1e9, "pct_copy": 100.0 * eff_bw / ceilings.copy_bytes_per_s,
            "compulsory_pct_copy": 100.0 * traffic.compulsory_bytes(problem, m.path) / seconds
            / ceilings.copy_bytes_per_s,
            "intensity": flops / m.modelled_bytes, "gflops": flops / seconds / 1e9,
            "floor_ms": floor.time_s * 1e3, "binding": floor.binding, "efficiency": floor.time_s / seconds,
        })
    for variant in dict.fromkeys(r["variant"] for r in rows):
        mine = [r for r in rows if r["variant"] == variant]
        by_path: dict[str, dict[str, Any]] = {}
        for r in mine:
            if r["path"] not in by_path or r["mode"] == "deterministic":
                by_path[r["path"]] = r
        t = sum(r["median_ms"] for r in by_path.values())
        floor_ms = sum(r["floor_ms"] for r in by_path.values())
        rows.append({"variant": variant, "path": "total", "mode": "", "config": "+".join(by_path),
                     "median_ms": t, "p10_ms": None, "p90_ms": None, "rel_error": None,
                     "modelled_bytes": sum(r["modelled_bytes"] for r in by_path.values()),
                     "compulsory_bytes": sum(r["compulsory_bytes"] for r in by_path.values()),
                     "flops": flops * len(by_path),
                     "effective_gbps": sum(r["modelled_bytes"] for r in by_path.values()) / (t * 1e-3) / 1e9,
                     "pct_copy": 100.0 * sum(r["modelled_bytes"] for r in by_path.values()) / (t * 1e-3)
                     / ceilings.copy_bytes_per_s,
                     "compulsory_pct_copy": 100.0 * sum(r["compulsory_bytes"] for r in by_path.values())
                     / (t * 1e-3) / ceilings.copy_bytes_per_s,
                     "intensity": flops * len(by_path) / sum(r["modelled_bytes"] for r in by_path.values()),
                     "gflops": flops * len(by_path) / (t * 1e-3) / 1e9, "floor_ms": floor_ms, "binding": "",
                     "efficiency": floor_ms / t})
    return rows


def _fmt(value: Any, spec: str) -> str:
    return "" if value is None else format(value, spec)


def markdown_table(problem: ConvProblem, rows: Sequence[dict[str, Any]], ceilings: Ceilings) -> str:
    """The report as markdown: a header with the ceilings, one table row per analysis row."""
    lines = [
        f"# Depthwise 1-D analysis: {problem.key()}",
        "",
        f"Device: {ceilings.device or 'unknown'}. Ceilings measured in this run: copy "
        f"{ceilings.copy_bytes_per_s / 1e12:.2f} TB/s, fp32 {ceilings.peak_flops_per_s / 1e12:.1f} TFLOP/s. "
        "Effective bandwidth = modelled bytes / time (an estimate: caches serve part of the modelled requests); "
        "AI = causal FLOPs / modelled bytes; floor = max(FLOPs / peak, lower-bound bytes / copy bandwidth); "
        "efficiency = floor / time.",
        "",
        "| variant | path | mode | ms | p10–p90 ms | modelled MB | eff. GB/s | % copy | compulsory % copy | "
        "AI FLOP/B | GFLOP/s | floor ms | efficiency | rel. error | config |",
        "|---|---|---|---|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        spread = f"{r['p10_ms']:.4f}–{r['p90_ms']:.4f}" if r["p10_ms"] is not None else ""
        lines.append(
            f"| {r['variant']} | {r['path']} | {r['mode']} | {r['median_ms']:.4f} | {spread} | "
            f"{r['modelled_bytes'] / 1e6:.1f} | {r['effective_gbps']:.0f} | {r['pct_copy']:.1f} | "
            f"{r['compulsory_pct_copy']:.1f} | {r['intensity']:.2f} | {r['gflops']:.0f} | {r['floor_ms']:.4f} | "
            f"{r['efficiency']:.2f} | {_fmt(r['rel_error'], '.1e')} | `{r['config']}` |")
    return "\n".join(lines) + "\n"


def plot_roofline(problem: ConvProblem, rows: Sequence[dict[str, Any]], ceilings: Ceilings,
                  paths: Sequence[Path]) -> bool:
    """Draw the roofline into each of ``paths`` (format from the suffix); False when matplotlib is missing."""
    try:
        import matplotlib

        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
    except ImportError:
        return False
    points = [r for r in rows if r["path"] != "total"]
    fig, ax = plt.subplots(figsize=(9.5, 5.0))
    bw, peak = ceilings.copy_bytes_per_s, ceilings.peak_flops_per_s
    ais = [r["intensity"] for r in points] + [peak / bw]
    lo, hi = min(ais) / 4, max(ais) * 4
    xs = [lo * (hi / lo) ** (i / 200) for i in range(201)]
    ax.plot(xs, [min(peak, x * bw) / 1e9 for x in xs], color="black", lw=1.5,
            label=f"roofline ({bw / 1e12:.2f} TB/s, {peak / 1e12:.1f} TFLOP/s)")
    markers = {"fwd": "o", "dgrad": "s", "wgrad": "^"}
    colours = {v: f"C{i}" for i, v in enumerate(VARIANTS_1D)}
    for r in points:
        label = f"{r['variant']} {r['path']}{' ' + r['mode'] if r['mode'] else ''}"
        ax.scatter(r["intensity"], r["gflops"], marker=markers.get(r["path"], "x"),
                   color=colours.get(r["variant"], "grey"), s=45, label=label,
                   facecolors="none" if r["mode"] == "atomic" else None)
    flops = float(traffic.flops(problem))
    for path in dict.fromkeys(r["path"] for r in points):
        ax.axvline(flops / traffic.compulsory_bytes(problem, path), color="grey", ls=":", lw=1)
    ax.set_xscale("log")
    ax.set_yscale("log")
    ax.set_xlabel("arithmetic intensity (causal FLOPs / modelled bytes)")
    ax.set_ylabel("achieved GFLOP/s")
    ax.set_title(f"{problem.key()} — dotted: compulsory-traffic intensity", fontsize=9)
    ax.legend(fontsize=6, loc="upper left", bbox_to_anchor=(1.01, 1.0))
    ax.grid(True, which="both", alpha=0.3)
    fig.tight_layout()
    for path in paths:
        fig.savefig(path)
    plt.close(fig)
    return True


def write_report(out_dir: Path, problem: ConvProblem, rows: Sequence[dict[str, Any]],
                 ceilings: Ceilings) -> tuple[list[Path], str | None]:
    """Write ``analysis.md``, ``analysis.json`` and the roofline; returns (files, a note when plots were skipped)."""
    out_dir.mkdir(parents=True, exist_ok=True)
    md, js = out_dir / "analysis.md", out_dir / "analysis.json"
    md.write_text(markdown_table(problem, rows, ceilings), encoding="utf-8")
    js.write_text(json.dumps({"problem": problem.key(), "ceilings": asdict(ceilings), "rows": list(rows)}, indent=1),
                  encoding="utf-8")
    plots = [out_dir / "roofline.png", out_dir / "roofline.svg"]
    if plot_roofline(problem, rows, ceilings, plots):
        return [md, js, *plots], None
    return [md, js], "roofline plots skipped: matplotlib is not installed (pip install 'convtune[plot]')"


# ---- GPU -------------------------------------------------------------------------------------------------
def device_ready() -> str | None:
    """Why no CUDA device can run the analysis, or None when one can."""
    try:
        import cupy

        if cupy.cuda.runtime.getDeviceCount() < 1:
            return "no CUDA device found"
    except Exception as exc:  # ImportError, CUDARuntimeError, a missing driver library
        return f"no usable CUDA device ({type(exc).__name__}: {exc})"
    return None


def measure(problem: ConvProblem, variants: Sequence[str], paths: Sequence[str],
            modes: Sequence[str] = ("deterministic", "atomic"), reps: int = 30,
            device_id: int = 0, candidates: int = 8) -> tuple[list[Measurement], Ceilings, MachineModel]:
    """Verify and time the model's ``candidates`` best plans of every (variant, path, mode) on the GPU and
    keep the fastest of each (module docstring)."""
    from convtune.kernels.compile import cupy_module
    from convtune.kernels.depthwise.conv1d import launcher
    from convtune.kernels.depthwise.reference import dw1d_dgrad_reference, dw1d_fwd_reference, dw1d_wgrad_reference
    from convtune.kernels.reference import relative_error
    from convtune.kernels.timing import rotation_sets, time_launches
    from convtune.tuner.gpu import measure_ceilings

    cp = cupy_module()
    cp.cuda.Device(device_id).use()
    machine = MachineModel.from_device(device_id)
    copy_bw, peak = measure_ceilings(device_id)
    ceilings = Ceilings(copy_bw, peak, machine.name)
    p = problem
    rng = cp.random.default_rng(20261129)
    tensor, weight = (p.N, p.C, p.W), (p.C, p.S)
    sets = rotation_sets(4 * 3 * p.N * p.C * p.W, machine.l2_bytes)
    xs = [rng.standard_normal(tensor, dtype=cp.float32) for _ in range(sets)]
    dys = [rng.standard_normal(tensor, dtype=cp.float32) for _ in range(sets)]
    w = rng.standard_normal(weight, dtype=cp.float32)
    out_t, out_w = cp.empty(tensor, dtype=cp.float32), cp.empty(weight, dtype=cp.float32)
    refs = {"fwd": lambda: dw1d_fwd_reference(xs[0], w), "dgrad": lambda: dw1d_dgrad_reference(dys[0], w),
            "wgrad": lambda: dw1d_wgrad_reference(xs[0], dys[0], p.S)}
    operands = {"fwd": (xs, [w] * sets, out_t), "dgrad": (dys, [w] * sets, out_t), "wgrad": (xs, dys, out_w)}
    results = []
    for path in paths:
        ref = refs[path]()
        for group in candidate_groups(problem, machine, variants, [path], modes, candidates):
            best: Measurement | None = None
            for pl in group:
                kernels = launcher.compile_plan(pl)
                workspace = launcher.allocate_workspace(pl)
                a_sets, b_sets, out = operands[path]
                out.fill(cp.nan)
                launcher.launch(pl, kernels, a_sets[0], b_sets[0], out, workspace)
                cp.cuda.get_current_stream().synchronize()
                err = relative_error(out, ref)
                if not err <= TOLERANCE[path]:
                    raise InvalidConfig("config", f"{pl.config.key()}: relative error {err:.3e} > {TOLERANCE[path]:g}")

                def launch(i: int, pl: Any = pl, k: Any = kernels, ws: Any = workspace, a: Any = a_sets,
                           b: Any = b_sets, o: Any = out) -> None:
                    launcher.launch(pl, k, a[i], b[i], o, ws)

                timing = time_launches(launch, sets=sets, warmup=5, reps=reps)
                m = Measurement(pl.variant, path, mode_of(pl), pl.config.key(), timing.median_ms, timing.p10_ms,
                                timing.p90_ms, traffic.total_traffic_bytes(pl), err)
                if best is None or m.median_ms < best.median_ms:
                    best = m
            assert best is not None
            results.append(best)
        del ref
    return results, ceilings, machine


__all__ = [
    "MODES",
    "PATHS",
    "VARIANTS_1D",
    "Ceilings",
    "Measurement",
    "analysis_rows",
    "candidate_groups",
    "choose_plans",
    "markdown_table",
    "measure",
    "plot_roofline",
    "write_report",
]
