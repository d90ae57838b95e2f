"""How well the shipped analytic models rank the measured H200 tables, and what a held-out calibration would gain.

Evidence for issue 17 part 4 (nothing here changes a shipped model). For every family with measured rows in the
replay tables, per problem: Spearman ρ of predicted vs measured time (``median_ms`` of ``ok`` rows) and the regret
of the model's untuned choice (measured time of the config the model ranks first / best measured time of the
table's rows for that problem). Then a calibration with shapes held out: each family's model is split into its
separate time terms (:func:`terms`, built from the model modules' own functions), and per-family non-negative
weights on them are fitted by leave-one-shape-out — a direct search over a log2 grid maximizing the mean Spearman
ρ of the training problems (all units of every other shape; a shape in two tables is held out of both) — and
evaluated on the held-out shape.

    PYTHONPATH=. python benchmarks/model_calibration.py --out benchmarks/results/model_calibration
"""

from __future__ import annotations

import argparse
import datetime as dt
import itertools
import json
import math
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from convtune.kernels.config import parse_config_key
from convtune.kernels.direct import model as direct_model
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd import model as wino_model
from convtune.kernels.winograd import unfused
from convtune.machine import MachineModel
from convtune.problem import ConvProblem
from convtune.tuner.benchmark import ReplayTable

ROOT = Path(__file__).resolve().parents[1]
DEFAULT_TABLES = ("tests/data/replay_h200_space_sample.json.gz", "tests/data/replay_h200_winograd_sweep.json.gz",
                  "tests/data/replay_h200_vs_cudnn.json.gz")
SUITE = ROOT / "benchmarks" / "suites" / "public.json"
GRID = tuple(2.0 ** e for e in range(-3, 4))   # weights 1/8 .. 8; 1 (the shipped model) is on the grid
MIN_ROWS = 20
#: the warpgroup-MMA families: one model (convtune.kernels.igemm_wgmma.model), the 1×1 kernel with its own traffic
WGMMA_FAMILIES = ("igemm_wgmma", "igemm_wgmma_half", "igemm_wgmma_half_1x1")

# The separate time terms of each family's model; the first is the reference (weight fixed at 1: ρ is scale-free).
# model time = combine(terms, weights=1) reproduces spec.predict_s (checked on every row in collect()).
TERM_NAMES: dict[str, tuple[str, ...]] = {
    "direct": ("issue", "l2", "dram", "atomic", "launch", "tie"),
    "pointwise": ("issue", "l2", "dram", "atomic", "launch", "tie"),
    "winograd": ("issue", "l2", "dram", "launch"),
    "winograd_unfused": ("issue", "l2", "gemm_dram", "transforms", "launch"),
    **{fam: ("tensor", "l1", "issue", "l2", "dram", "atomic", "launch") for fam in
       ("igemm", "igemm_nhwc", "igemm_1x1", "igemm_half")},
    **{fam: ("sm", "l2", "dram", "added") for fam in WGMMA_FAMILIES},
}
# Which terms share one max() in each family's model; the rest add.
MAX_TERMS: dict[str, tuple[str, ...]] = {
    "direct": ("issue", "l2", "dram"), "pointwise": ("issue", "l2", "dram"), "winograd": ("issue", "l2", "dram"),
    "winograd_unfused": ("issue", "l2", "gemm_dram"),
    **{fam: ("tensor", "l1", "issue", "l2", "dram") for fam in ("igemm", "igemm_nhwc", "igemm_1x1", "igemm_half")},
    **{fam: ("sm", "l2", "dram") for fam in WGMMA_FAMILIES},
}


def terms(family: str, pl: Any, machine: MachineModel) -> tuple[float, ...]:
    """The model's separate time terms of ``pl`` (seconds), in ``TERM_NAMES[family]`` order."""
    if family == "direct":
        d = direct_model.predict(pl, machine)
        launch = direct_model.LAUNCH_OVERHEAD_S * (2 if pl.config.splits > 1 else 1)
        return d.issue_s, d.l2_s, d.dram_s, d.atomic_s, launch, d.tie_s
    if family == "pointwise":
        from convtune.kernels.pointwise import model as pointwise_model
        d = pointwise_model.predict(pl, machine)
        launch = direct_model.LAUNCH_OVERHEAD_S * (2 if pl.config.splits > 1 else 1)
        return d.issue_s, d.l2_s, d.dram_s, d.atomic_s, launch, d.tie_s
    if family == "winograd":
        w = wino_model.predict_fused(pl, machine)
        return w.issue_s, w.l2_s, w.dram_s, direct_model.LAUNCH_OVERHEAD_S
    if family == "winograd_unfused":
        w = wino_model.predict_unfused(pl, machine)
        p, c = pl.problem, pl.config
        t = unfused.traffic_words(pl)
        bw = machine.copy_bandwidth_bytes_per_s
        transforms_s = 4 * (p.input_elements + t["v_store"] + t["m_load"] + t["output"]) / bw
        gemm_dram_s = 4 * (t["v_store"] + c.alpha ** 2 * pl.cp * pl.kp + t["m_store"]) / bw
        return w.issue_s, w.l2_s, gemm_dram_s, transforms_s, 3 * direct_model.LAUNCH_OVERHEAD_S
    if family in ("igemm", "igemm_nhwc", "igemm_1x1", "igemm_half"):
        from convtune.kernels.igemm import model as igemm_model
        g = igemm_model.predict(pl.view if family == "igemm_half" else pl, machine)   # 16-bit: the word view
        return g.tensor_s, g.l1_s, g.issue_s, g.l2_s, g.dram_s, g.atomics_s, g.added_s
    if family in WGMMA_FAMILIES:
        from convtune.kernels.igemm_wgmma import half_1x1
        from convtune.kernels.igemm_wgmma import model as wgmma_model
        from convtune.kernels.igemm_wgmma.launcher import traffic_words
        traffic = half_1x1.traffic_elements if family == "igemm_wgmma_half_1x1" else traffic_words
        wg = wgmma_model.predict(pl, machine, traffic)
        fold = wgmma_model.fold_factor(pl.config)   # scales the max: each of its terms
        return fold * wg.sm_s, fold * wg.l2_s, fold * wg.dram_s, wg.added_s
    raise ValueError(f"no term split for family {family!r}")


def combine(family: str, t: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Calibrated time: weighted terms (t: rows × terms; weights: combos × terms) -> combos × rows."""
    names = TERM_NAMES[family]
    w = np.atleast_2d(weights)
    scaled = w[:, None, :] * t[None, :, :]
    in_max = [i for i, n in enumerate(names) if n in MAX_TERMS[family]]
    added = [i for i, n in enumerate(names) if n not in MAX_TERMS[family]]
    return scaled[:, :, in_max].max(axis=2) + scaled[:, :, added].sum(axis=2)


def rank_rows(x: np.ndarray) -> np.ndarray:
    """Average ranks (ties share their mean rank) along the last axis of a 1-D or 2-D array."""
    a = np.atleast_2d(np.asarray(x, dtype=float))
    m, n = a.shape
    order = np.argsort(a, axis=1, kind="stable")
    s = np.take_along_axis(a, order, axis=1)
    new = np.ones((m, n), dtype=bool)
    new[:, 1:] = s[:, 1:] != s[:, :-1]
    gid = np.cumsum(new.ravel()) - 1
    pos = np.tile(np.arange(n, dtype=float), m)
    avg = (np.bincount(gid, weights=pos) / np.bincount(gid))[gid].reshape(m, n)
    ranks = np.empty_like(avg)
    np.put_along_axis(ranks, order, avg, axis=1)
    return ranks if np.ndim(x) == 2 else ranks[0]


def spearman_rows(pred: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Spearman ρ of each row of ``pred`` (combos × n) against ``measured`` (n), tie-aware."""
    rp = rank_rows(np.atleast_2d(pred))
    rm = rank_rows(measured)
    rp = rp - rp.mean(axis=1, keepdims=True)
    rm = rm - rm.mean()
    den = np.sqrt((rp ** 2).sum(axis=1) * (rm ** 2).sum())
    with np.errstate(invalid="ignore", divide="ignore"):
        return np.where(den > 0, (rp @ rm) / np.where(den > 0, den, 1.0), 0.0)


def spearman(a: Sequence[float], b: Sequence[float]) -> float:
    return float(spearman_rows(np.asarray(a, dtype=float)[None, :], np.asarray(b, dtype=float))[0])


def regret_rows(pred: np.ndarray, measured: np.ndarray) -> np.ndarray:
    """Measured time of each row's predicted-fastest config (first in key order on a tie) / best measured."""
    return measured[np.argmin(np.atleast_2d(pred), axis=1)] / measured.min()


@dataclass
class Unit:
    """One problem of one table for one family: its rows' terms and measured times (key order)."""
    family: str
    table: str
    problem: str
    name: str
    keys: list[str]
    terms: np.ndarray      # rows × terms
    measured: np.ndarray   # seconds
    dropped: int = 0       # rows the model cannot place (no resident block: infinite time)
    extra: dict[str, Any] = field(default_factory=dict)

    @property
    def cls(self) -> str:
        return f"{self.family} × {self.table}"


def suite_names() -> dict[str, str]:
    names: dict[str, str] = {}
    try:
        entries = json.loads(SUITE.read_text())["conv2d"]
    except (OSError, KeyError, ValueError):
        return names
    for e in entries:
        fields = " ".join(f"{k}={v}" for k, v in e.items() if k != "name")
        try:
            names.setdefault(ConvProblem.parse(fields).key(), e["name"])
        except Exception:   # a suite row this parser does not take: no name for it
            continue
    return names


def table_label(path: str) -> str:
    return Path(path).name.removeprefix("replay_h200_").removesuffix(".json.gz").removesuffix(".json")


def collect(tables: Sequence[str], machine: MachineModel, max_rows: int | None = None,
            min_rows: int = MIN_ROWS) -> list[Unit]:
    """Every (family, table, problem) with at least ``min_rows`` ok rows (the first ``max_rows`` in key order)."""
    names = suite_names()
    units: list[Unit] = []
    for path in tables:
        table = ReplayTable.load(ROOT / path if not Path(path).is_absolute() else path)
        for problem_key, rows in table.problems.items():
            problem = ConvProblem.parse(problem_key)
            by_family: dict[str, list[str]] = {}
            for key, row in rows.items():
                if row.get("status") == "ok" and row.get("median_ms") is not None:
                    by_family.setdefault(key.split(" ", 1)[0].rsplit(".", 1)[0], []).append(key)
            for family, keys in sorted(by_family.items()):
                if family not in TERM_NAMES:
                    continue
                keys = sorted(keys)[:max_rows] if max_rows else sorted(keys)
                spec = get_spec(family)
                kept, ts, ms, dropped = [], [], [], 0
                for key in keys:
                    pl = spec.plan(problem, parse_config_key(key), machine)
                    t = terms(family, pl, machine)
                    shipped = spec.predict_s(pl, machine)
                    if not math.isfinite(shipped) or not all(math.isfinite(v) for v in t):
                        dropped += 1
                        continue
                    recombined = float(combine(family, np.asarray([t]), np.ones(len(t)))[0, 0])
                    if not math.isclose(recombined, shipped, rel_tol=1e-9):
                        raise AssertionError(f"{family} terms do not add up to predict_s on {problem_key} {key}: "
                                             f"{recombined} vs {shipped}")
                    kept.append(key)
                    ts.append(t)
                    ms.append(rows[key]["median_ms"] * 1e-3)
                if len(kept) >= min_rows:
                    units.append(Unit(family, table_label(path), problem_key, names.get(problem_key, problem_key),
                                      kept, np.asarray(ts), np.asarray(ms), dropped))
    return units


#: terms kept at weight 1 in the search (the grid stays small: 7 terms would be 7⁶ weight vectors)
FIXED_TERMS: dict[str, tuple[str, ...]] = {fam: ("atomic", "launch") for fam in
                                           ("igemm", "igemm_nhwc", "igemm_1x1", "igemm_half")}


def weight_grid(family: str) -> np.ndarray:
    """Every weight vector of the search: the reference term at 1, the others on GRID (``FIXED_TERMS`` at 1)."""
    names = TERM_NAMES[family][1:]
    fixed = FIXED_TERMS.get(family, ())
    free = [n for n in names if n not in fixed]
    rows = []
    for w in itertools.product(GRID, repeat=len(free)):
        by_name = dict(zip(free, w, strict=True))
        rows.append((1.0, *(by_name.get(n, 1.0) for n in names)))
    return np.asarray(rows)


def score_table(units: Sequence[Unit], grid: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(ρ, regret), each combos × units: every weight vector of ``grid`` on every unit."""
    rho = np.empty((len(grid), len(units)))
    reg = np.empty((len(grid), len(units)))
    for j, u in enumerate(units):
        pred = combine(u.family, u.terms, grid)
        rho[:, j] = spearman_rows(pred, u.measured)
        reg[:, j] = regret_rows(pred, u.measured)
    return rho, reg


def fit(train_rho: np.ndarray, grid: np.ndarray) -> int:
    """Index of the weight vector with the best mean training ρ; a tie goes to the one nearest the shipped
    weights (smallest Σ|log2 w|). ``train_rho`` is combos × training units: only training units reach here."""
    mean = train_rho.mean(axis=1)
    best = mean.max()
    tied = np.flatnonzero(mean >= best - 1e-12)
    distance = np.abs(np.log2(grid[tied])).sum(axis=1)
    return int(tied[np.argmin(distance)])


def leave_one_shape_out(units: Sequence[Unit], rho: np.ndarray, grid: np.ndarray,
                        fitter: Callable[[np.ndarray, np.ndarray], int] = fit) -> dict[str, int]:
    """Per shape (problem key): the weight index fitted on the units of every *other* shape (all tables)."""
    chosen: dict[str, int] = {}
    for shape in sorted({u.problem for u in units}):
        train = [j for j, u in enumerate(units) if u.problem != shape]
        if not train:
            continue
        chosen[shape] = fitter(rho[:, train], grid)
    return chosen


def identity_index(grid: np.ndarray) -> int:
    return int(np.flatnonzero(np.all(grid == 1.0, axis=1))[0])


def analyse(units: Sequence[Unit]) -> dict[str, Any]:
    """Per family: the shipped model's and the held-out-calibrated model's ρ and regret per unit, and the fits."""
    out: dict[str, Any] = {}
    for family in sorted({u.family for u in units}):
        fu = [u for u in units if u.family == family]
        grid = weight_grid(family)
        rho, reg = score_table(fu, grid)
        base = identity_index(grid)
        chosen = leave_one_shape_out(fu, rho, grid)
        rows = []
        for j, u in enumerate(fu):
            k = chosen.get(u.problem)
            rows.append({
                "family": family, "table": u.table, "class": u.cls, "problem": u.problem, "name": u.name,
                "configs": len(u.keys), "dropped_inf": u.dropped,
                "rho_before": float(rho[base, j]), "regret_before": float(reg[base, j]),
                "rho_after": None if k is None else float(rho[k, j]),
                "regret_after": None if k is None else float(reg[k, j]),
                "weights": None if k is None else dict(zip(TERM_NAMES[family], map(float, grid[k]), strict=True)),
            })
        constant = [n for i, n in enumerate(TERM_NAMES[family])
                    if all(np.ptp(u.terms[:, i]) <= 1e-12 * max(1e-30, float(np.abs(u.terms[:, i]).max()))
                           for u in fu)]
        all_fit = fit(rho, grid)   # on every shape: what the fit leans on, not an evaluation
        out[family] = {"terms": list(TERM_NAMES[family]), "grid": list(GRID), "units": rows, "constant_terms": constant,
                       "fit_on_all_shapes": dict(zip(TERM_NAMES[family], map(float, grid[all_fit]), strict=True)),
                       "fit_on_all_shapes_train_mean_rho": float(rho[all_fit].mean()),
                       "shipped_mean_rho": float(rho[base].mean())}
    return out


def summarize(rows: Sequence[dict[str, Any]]) -> dict[str, Any]:
    def stats(key: str) -> dict[str, float]:
        v = np.asarray([r[key] for r in rows if r[key] is not None], dtype=float)
        if not len(v):
            return {}
        return {"mean": float(v.mean()), "min": float(v.min()), "max": float(v.max()),
                "geomean": float(np.exp(np.log(v).mean())) if (v > 0).all() else float("nan")}
    return {"units": len(rows), **{k: stats(k) for k in ("rho_before", "rho_after", "regret_before",
                                                          "regret_after")}}


def render(result: dict[str, Any], command: str, tables: Sequence[str]) -> str:
    fams = result["families"]
    lines = [
        "# Model calibration on the H200 replay tables (held-out shapes)",
        "",
        f"Produced by `{command}` on {result['date']} ({result['elapsed_s']:.1f} s on the CPU). Tables read: "
        + ", ".join(f"`{t}`" for t in tables) + ". Machine model: `MachineModel.preset(\"h200\")`.",
        "",
        "No shipped model is changed: this is evidence for the next step. ρ: Spearman (tie-aware) of predicted vs "
        "measured `median_ms` over a problem's `ok` rows. Regret: measured time of the config the model ranks "
        "first / best measured time among that problem's rows (1.00 = the model's untuned choice is the best "
        "measured). *Before*: the shipped model. *After*: non-negative weights on the model's separate time "
        "terms (the first term fixed at 1; the others on the grid 1/8 … 8 in powers of 2), chosen by direct search "
        "for the best mean training ρ with the problem's shape held out of the fit (leave-one-shape-out; a shape "
        "measured in two tables is held out of both).",
        "",
        "Caveats: vs_cudnn rows are ~55 tuner candidates per shape, not a uniform sample, so its regret is against "
        "those candidates; space_sample rows are 2000 uniform samples. Families without measured rows "
        f"(not evaluated): {', '.join(result['families_without_rows']) or 'none'}.",
        "",
        "## Per class (held-out)",
        "",
        "| class | problems | ρ before mean / min | ρ after mean / min | regret before mean / max "
        "| regret after mean / max |",
        "|---|---:|---:|---:|---:|---:|",
    ]
    for cls, s in result["classes"].items():
        lines.append(f"| {cls} | {s['units']} | {s['rho_before']['mean']:.3f} / {s['rho_before']['min']:.3f} "
                     f"| {s['rho_after']['mean']:.3f} / {s['rho_after']['min']:.3f} "
                     f"| {s['regret_before']['mean']:.3f} / {s['regret_before']['max']:.3f} "
                     f"| {s['regret_after']['mean']:.3f} / {s['regret_after']['max']:.3f} |")
    lines += ["", "## Per family (held-out, all tables)", "",
              "| family | problems | ρ before mean / min | ρ after mean / min | regret before mean / max "
              "| regret after mean / max | weights fitted on all shapes | shipped → fitted mean ρ (in-sample) |",
              "|---|---:|---:|---:|---:|---:|---|---:|"]
    for family, f in fams.items():
        s = result["family_summary"][family]
        w = ", ".join(f"{k} {v:g}" for k, v in f["fit_on_all_shapes"].items())
        lines.append(f"| {family} | {s['units']} | {s['rho_before']['mean']:.3f} / {s['rho_before']['min']:.3f} "
                     f"| {s['rho_after']['mean']:.3f} / {s['rho_after']['min']:.3f} "
                     f"| {s['regret_before']['mean']:.3f} / {s['regret_before']['max']:.3f} "
                     f"| {s['regret_after']['mean']:.3f} / {s['regret_after']['max']:.3f} | {w} "
                     f"| {f['shipped_mean_rho']:.3f} → {f['fit_on_all_shapes_train_mean_rho']:.3f} |")
    lines += ["", "## Findings (computed from the numbers above)", ""]
    lines += [f"* {line}" for line in result["findings"]]
    lines += ["", "## Per held-out problem", "",
              "| family | table | problem | configs | ρ before | ρ after | regret before | regret after "
              "| fitted weights |", "|---|---|---|---:|---:|---:|---:|---:|---|"]
    for family, f in fams.items():
        for r in f["units"]:
            w = ", ".join(f"{k} {v:g}" for k, v in (r["weights"] or {}).items())
            after = (f"{r['rho_after']:.3f}", f"{r['regret_after']:.3f}") if r["rho_after"] is not None else ("–",
                                                                                                               "–")
            lines.append(f"| {family} | {r['table']} | {r['name']} | {r['configs']} | {r['rho_before']:.3f} "
                         f"| {after[0]} | {r['regret_before']:.3f} | {after[1]} | {w} |")
    return "\n".join(lines) + "\n"


def findings(result: dict[str, Any]) -> list[str]:
    out = []
    for family, s in result["family_summary"].items():
        f = result["families"][family]
        rows = [r for r in f["units"] if r["rho_after"] is not None]
        d_rho = s["rho_after"]["mean"] - s["rho_before"]["mean"]
        d_reg = s["regret_after"]["mean"] - s["regret_before"]["mean"]
        better = sum(r["rho_after"] > r["rho_before"] + 1e-9 for r in rows)
        worse = sum(r["rho_after"] < r["rho_before"] - 1e-9 for r in rows)
        rbetter = sum(r["regret_after"] < r["regret_before"] - 1e-9 for r in rows)
        rworse = sum(r["regret_after"] > r["regret_before"] + 1e-9 for r in rows)
        moved = {k: v for k, v in f["fit_on_all_shapes"].items() if v != 1.0}
        fold_w: dict[str, list[float]] = {}
        for r in rows:
            for k, v in r["weights"].items():
                fold_w.setdefault(k, []).append(v)
        spread = ", ".join(f"{k} {min(v):g}–{max(v):g}" for k, v in fold_w.items() if k != f["terms"][0])
        edge = [k for k, v in f["fit_on_all_shapes"].items() if v in (GRID[0], GRID[-1])]
        const = f["constant_terms"]
        verdict = ("improves" if d_rho > 0.005 else "worsens" if d_rho < -0.005 else "leaves about unchanged")
        out.append(
            f"**{family}** ({s['units']} held-out problems): held-out calibration {verdict} mean ρ, "
            f"{s['rho_before']['mean']:.3f} → {s['rho_after']['mean']:.3f} ({d_rho:+.3f}; min "
            f"{s['rho_before']['min']:.3f} → {s['rho_after']['min']:.3f}); ρ higher on {better}, lower on {worse}. "
            f"Mean regret {s['regret_before']['mean']:.3f} → {s['regret_after']['mean']:.3f} ({d_reg:+.3f}); "
            f"lower on {rbetter}, higher on {rworse}. The fit on all shapes moves "
            + (", ".join(f"{k} ×{v:g}" for k, v in moved.items()) if moved else "no weight")
            + f" (relative to {f['terms'][0]}); per-fold weights: {spread}."
            + (f" Weights at the grid's edge (1/8 or 8): {', '.join(edge)}." if edge else "")
            + "".join(f" {k} is constant within every problem: "
                      + ("its weight only moves a floor under the max() (configs below it tie)."
                         if k in MAX_TERMS[family] else "an added constant, its weight cannot change a rank.")
                      for k in const))
    return out


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--tables", nargs="*", default=list(DEFAULT_TABLES))
    ap.add_argument("--out", default="benchmarks/results/model_calibration")
    ap.add_argument("--max-rows", type=int, default=None, help="first N ok rows (key order) per problem; tests")
    ap.add_argument("--min-rows", type=int, default=MIN_ROWS, help="problems with fewer ok rows of a family are left "
                    "out (the vs_cudnn tables hold each family's model top 16)")
    args = ap.parse_args(argv)
    start = time.perf_counter()
    machine = MachineModel.preset("h200")
    units = collect(args.tables, machine, args.max_rows, args.min_rows)
    shapes: dict[str, set[str]] = {}
    for u in units:
        shapes.setdefault(u.family, set()).add(u.problem)
    units = [u for u in units if len(shapes[u.family]) >= 2]   # a held-out fit needs another shape to train on
    families = analyse(units)
    classes: dict[str, Any] = {}
    for f in families.values():
        for r in f["units"]:
            classes.setdefault(r["class"], []).append(r)
    result: dict[str, Any] = {
        "date": dt.date.today().isoformat(), "tables": list(args.tables), "max_rows": args.max_rows,
        "families_without_rows": sorted(set(TERM_NAMES) - set(families)),
        "families": families,
        "family_summary": {fam: summarize(f["units"]) for fam, f in families.items()},
        "classes": {cls: summarize(rows) for cls, rows in sorted(classes.items())},
    }
    result["findings"] = findings(result)
    result["elapsed_s"] = time.perf_counter() - start
    command = "PYTHONPATH=. python benchmarks/model_calibration.py" + (
        "" if argv is None and len(sys.argv) == 1 else " " + " ".join(argv if argv is not None else sys.argv[1:]))
    result["command"] = command
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    (out / "model_calibration.json").write_text(json.dumps(result, indent=1) + "\n")
    (out / "model_calibration.md").write_text(render(result, command, args.tables))
    for line in result["findings"]:
        print(line)
    print(f"wrote {out}/model_calibration.md and .json in {result['elapsed_s']:.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
