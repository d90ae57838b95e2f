"""How good is the untuned choice *across families*, and what would one scale per family's model buy?

The untuned op runs the configuration the families' models predict fastest (:func:`convtune.kernels.registry.
model_fastest`). Each family's model ranks its own configurations; across families the choice also needs their
absolute predictions to be comparable. From vs_cudnn.json reports of the same suite (every candidate measured with
the same protocol: rotating sets, L2 flush, CUDA events), per shape and family: the measured time of the family's
model-top configuration (what the untuned op would run if that family won) and its predicted time. The untuned choice
is the family with the least (scaled) prediction; its regret = that family's model-top measured time / the best
measured time of any candidate of any family on that shape.

Reported: the regret without calibration (the shipped models), and with a per-family affine calibration (scale ·
predicted + offset: a relative scale on a log2 grid and a fixed cost per launch; direct is the reference) fitted
leave-one-shape-out — a grid search minimising the geometric-mean regret over the other shapes — evaluated on the
held-out shape; and the calibration fitted on every shape. Nothing here changes a shipped model.

    python benchmarks/family_choice_calibration.py RUN1/wide/vs_cudnn.json RUN2/others/vs_cudnn.json \
        --out benchmarks/results/igemm_simt_h200/family_choice
"""

from __future__ import annotations

import argparse
import dataclasses
import itertools
import json
import math
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

GRID = tuple(2.0 ** (e / 4) for e in range(-4, 5))   # scales 1/2 .. 2 in quarter-octaves
OFFSETS_S = (0.0, 3e-6, 6e-6, 12e-6)                  # fixed costs per launch a model may miss
#: families left as shipped: direct, the reference (so the families outside the fit — fused Winograd, and the
#: tensor-core families of the other classes — keep their place against it), and the unfused Winograd path, which wins
#: its 3×3 stride-1 shapes by 2–3×
FIXED = ("direct", "winograd_unfused")


def collect(reports: list[dict[str, Any]],
            preset: str = "h200") -> dict[str, dict[str, tuple[float, float, float]]]:
    """{shape: {family: (predicted s of the model's top config, its measured ms, the family's best measured ms)}}
    over every family with a measured model-top configuration (``preset``: the card the reports were measured on)."""
    shapes: dict[str, dict[str, tuple[float, float, float]]] = {}
    for report in reports:
        machine = MachineModel.preset(preset).with_ceilings(report["copy_tbps"] * 1e12, report["sgemm_tflops"] * 1e12,
                                                            "measured in the run")
        if report.get("math") == "tf32" and report.get("class_peak_tflops"):   # the run's TF32 GEMM ceiling
            machine = dataclasses.replace(machine, tf32_peak_flops_per_s=report["class_peak_tflops"] * 1e12)
        for result in report["results"]:
            problem = ConvProblem.parse(result["problem"])
            measured = {c["config"]: c["median_ms"] for c in result["candidates"] if c.get("status") == "ok"}
            for family in {c["family"] for c in result["candidates"]}:
                spec = get_spec(family)
                ranked = sorted((spec.predict_s(pl, machine), pl.config.key())
                                for pl in spec.enumerate_plans(problem, machine))
                if not ranked or ranked[0][1] not in measured:
                    continue
                best = min(ms for key, ms in measured.items() if key.startswith(family + "."))
                shapes.setdefault(result["name"], {})[family] = (ranked[0][0], measured[ranked[0][1]], best)
    return shapes


def regret(shape: dict[str, tuple[float, float, float]], cal: dict[str, tuple[float, float]]) -> float:
    """Measured ms of the family chosen by least calibrated prediction (scale·predicted + offset) / the best measured
    ms on the shape."""
    def calibrated(f: str) -> float:
        scale, offset_s = cal.get(f, (1.0, 0.0))
        return shape[f][0] * scale + offset_s

    chosen = min(shape, key=lambda f: (calibrated(f), f))
    return shape[chosen][1] / min(best for _, _, best in shape.values())


def geomean(values: list[float]) -> float:
    return math.exp(sum(math.log(v) for v in values) / len(values))


def shipped_calibration(families: Iterable[str]) -> dict[str, tuple[float, float]]:
    """What the untuned op compares: each family's shipped (choice_scale, choice_offset_s)."""
    return {f: (get_spec(f).choice_scale, get_spec(f).choice_offset_s) for f in families}


def fit(shapes: dict[str, dict[str, tuple[float, float, float]]],
        families: list[str], fitted: tuple[str, ...] | None = None,
        kept: dict[str, tuple[float, float]] | None = None) -> dict[str, tuple[float, float]]:
    """(scale, offset s) per family minimising the geometric-mean regret over ``shapes`` (ties: the calibration
    nearest the shipped models): every family but the :data:`FIXED` ones (which keep the shipped model) gets a scale
    from :data:`GRID` and an offset from :data:`OFFSETS_S` (a fixed cost per launch its model misses); with
    ``fitted``, only those families are calibrated (the rest keep the shipped models, or their ``kept`` calibration)."""
    options = []
    for f in families:
        if f in FIXED or (fitted is not None and f not in fitted):
            options.append([(f, (kept or {}).get(f, (1.0, 0.0)))])
            continue
        options.append([(f, (a, b)) for a in GRID for b in OFFSETS_S])
    best: tuple[float, float, dict[str, tuple[float, float]]] | None = None
    for combo in itertools.product(*options):
        cal = dict(combo)
        distance = sum(abs(math.log2(a)) + b * 1e6 / 4 for a, b in cal.values())
        score = (geomean([regret(s, cal) for s in shapes.values()]), distance)
        if best is None or score < best[:2]:
            best = (*score, cal)
    assert best is not None
    return best[2]


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--fit", nargs="*", default=None, help="calibrate only these families (default: all but "
                                                          f"{', '.join(FIXED)}); the others keep their shipped "
                                                          "choice calibration")
    ap.add_argument("--machine", default="h200", help="the preset of the card the reports were measured on")
    args = ap.parse_args(argv)
    fitted = tuple(args.fit) if args.fit is not None else None
    shapes = collect([json.loads(p.read_text()) for p in args.reports], args.machine)
    shapes = {k: v for k, v in shapes.items() if len(v) >= 2}
    families = sorted({f for s in shapes.values() for f in s})
    shipped = {name: regret(s, {}) for name, s in shapes.items()}
    # what the untuned op compares: each spec's choice_time (its shipped choice_scale · predicted + choice_offset_s)
    as_shipped = shipped_calibration(families)
    kept = as_shipped if fitted is not None else None
    chosen = {name: regret(s, as_shipped) for name, s in shapes.items()}
    # with --fit: the untuned op with those families left out of the choice (regret still against every family's best)
    without = {name: regret({f: v for f, v in s.items() if f not in fitted}, as_shipped)
               * min(b for f, (_, _, b) in s.items() if f not in fitted) / min(b for _, _, b in s.values())
               for name, s in shapes.items() if fitted and any(f not in fitted for f in s)} if fitted else {}
    held_out = {}
    for name in shapes:
        scales = fit({k: v for k, v in shapes.items() if k != name}, families, fitted, kept)
        held_out[name] = regret(shapes[name], scales)
    overall = fit(shapes, families, fitted, kept)
    lines = ["# Untuned choice across families: the shipped models vs a per-family calibration (held out by shape)", "",
             f"{len(shapes)} shapes with ≥ 2 families measured; families {', '.join(families)}. Regret = measured ms "
             "of the chosen family's model-top config / best measured ms on the shape.", "",
             "| shape | families (model-top ms) | shipped regret | held-out regret |", "|---|---|---|---|"]
    for name, s in shapes.items():
        cells = ", ".join(f"{f} {s[f][1]:.4f}" for f in sorted(s))
        lines.append(f"| {name} | {cells} | {shipped[name]:.2f} | {held_out[name]:.2f} |")
    lines += ["", "| | geomean regret | max regret | shapes with regret > 1.25 |", "|---|---|---|---|"]
    rows = [("shipped models", shipped), ("shipped models with their choice scales (the untuned op)", chosen),
            ("per-family calibration, held out", held_out)]
    if without:
        rows.insert(0, (f"the untuned op without {', '.join(fitted or ())}", without))
    for label, values in rows:
        v = list(values.values())
        lines.append(f"| {label} | {geomean(v):.3f} | {max(v):.2f} | {sum(x > 1.25 for x in v)} |")
    lines += ["", "Calibration fitted on every shape (predicted · scale + offset): " + ", ".join(
        f"{f} ×{a:.3g} + {b * 1e6:g} µs" for f, (a, b) in overall.items())]
    args.out.mkdir(parents=True, exist_ok=True)
    (args.out / "family_choice.md").write_text("\n".join(lines) + "\n")
    (args.out / "family_choice.json").write_text(json.dumps(
        {"shapes": shapes, "shipped": shipped, "with_choice_scales": chosen, "without_fitted": without,
         "held_out": held_out,
         "calibration": overall}, indent=1))
    print("\n".join(lines[-6:]))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
