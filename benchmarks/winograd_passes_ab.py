"""Do the unfused Winograd paths gain from passes over the batch (``images_per_pass``)? A/B on the GPU.

A pass runs the three kernels (input transform, α² GEMMs, output transform) on a few images, so that its V and M
(written by one kernel, read by the next) stay in L2 instead of a round trip to DRAM; it pays three launches a pass
and each pass's wave tail. The model (:func:`convtune.kernels.winograd.model.pass_terms`) says the launches and
the per-pass tile padding outweigh the saving on most layers; this measures it.

For each entry and family: the model's top ``--top`` one-pass configs, and each with every pass value the space
offers (``CONVTUNE_EXPERIMENTAL`` gets ``winograd_passes``), all verified against float64 first, then timed cold
(the tuner's protocol: rotating sets, L2 flush) and hot (one set, no flush); cuDNN in the class both ways. Prints a
table per entry (µs; pass / one pass ratios); JSON and markdown under ``--out``.

    python3 benchmarks/winograd_passes_ab.py --suite benchmarks/suites/wide.json --only alexnet_conv2_b64 \
        --families winograd_unfused_large winograd_unfused_3xtf32 --out /tmp/passes
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
from pathlib import Path

from protocol_ab import report_header, time_entry
from vs_cudnn import candidates

from convtune.kernels import experimental
from convtune.kernels.config import parse_config_key
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd import unfused
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


def twins(plans: list, problem: ConvProblem, machine: MachineModel) -> list:
    """Each one-pass plan, then the same config with each pass value the spaces offer for its m
    (:func:`~convtune.kernels.winograd.unfused.pass_image_choices`)."""
    out = []
    for pl in plans:
        c = pl.config
        out.append(pl)
        for images in unfused.pass_image_choices(problem, c.alpha, c.alpha, c.m, c.m):
            out.append(get_spec(c.family).plan(problem, dataclasses.replace(c, images_per_pass=images), machine))
    return out


def one_pass_key(key: str) -> tuple[str, int]:
    """(the key of the same config in one pass, its ``images_per_pass``; 0: one pass)."""
    config = parse_config_key(key)
    return dataclasses.replace(config, images_per_pass=0).key(), config.images_per_pass


def table(name: str, rows: list[dict], cudnn: dict[str, float]) -> str:
    groups: dict[str, dict[int, dict]] = {}
    for r in rows:
        if r.get("status") == "ok":
            base, images = one_pass_key(r["config"])
            groups.setdefault(base, {})[images] = r
    lines = [f"### {name}", "", f"cuDNN: cold {1e3 * cudnn['cold_ms']:.1f} µs, hot {1e3 * cudnn['hot_ms']:.1f} µs", "",
             "| config | images a pass | predicted µs | cold µs | hot µs | cold / one pass | hot / one pass |",
             "|---|---|---|---|---|---|---|"]
    for base, by_images in groups.items():
        one = by_images.get(0)
        for images in sorted(by_images):
            r = by_images[images]
            cold_x = f"{r['median_ms'] / one['median_ms']:.2f}" if one else "—"
            hot_x = f"{r['hot_ms'] / one['hot_ms']:.2f}" if one and "hot_ms" in r and "hot_ms" in one else "—"
            lines.append(f"| {'`' + base + '`' if images == 0 else ''} | {images or 'all'} | "
                         f"{r.get('predicted_us', float('nan')):.1f} | {1e3 * r['median_ms']:.1f} | "
                         f"{1e3 * r.get('hot_ms', float('nan')):.1f} | {cold_x} | {hot_x} |")
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--suite", default="benchmarks/suites/wide.json")
    ap.add_argument("--only", nargs="+", required=True, help="entry names")
    ap.add_argument("--families", nargs="+", required=True)
    ap.add_argument("--math", choices=("ieee", "tf32"), default="ieee")
    ap.add_argument("--top", type=int, default=3)
    ap.add_argument("--reps", type=int, default=30)
    ap.add_argument("--out", default="/tmp/winograd_passes_ab")
    args = ap.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    os.environ.setdefault("CONVTUNE_CUBIN_DIR", "/tmp/convtune-cubins")
    names = set(experimental.names()) | {unfused.PASSES}
    os.environ[experimental.ENV] = ",".join(sorted(names))
    machine = MachineModel.from_device()
    entries = [e for e in json.loads(Path(args.suite).read_text())["conv2d"] if e["name"] in args.only]
    report = report_header(machine, math=args.math)
    md = [f"# Unfused Winograd in passes over the batch, {machine.name}, {args.math}", ""]
    for e in entries:
        problem = ConvProblem.from_mapping(e).replace(math=args.math)
        one_pass, _ = candidates(problem, machine, 4 * args.top, 0, tuple(args.families))
        per_family: dict[str, list] = {}
        for pl in one_pass:
            if not getattr(pl.config, "images_per_pass", 0):
                per_family.setdefault(pl.config.family, []).append(pl)
        plans = twins([pl for fam in per_family.values() for pl in fam[:args.top]], problem, machine)
        result = time_entry(e["name"], problem, plans, machine, args.reps,
                            describe=lambda pl: {"passes": len(pl.passes),
                                                 "predicted_us": 1e6 * get_spec(pl.config.family).predict_s(
                                                     pl, machine)})
        report["results"].append(result)
        md.append(table(e["name"], result["candidates"], result["cudnn"]))
        (out / "winograd_passes_ab.json").write_text(json.dumps(report, indent=1, default=str))
        (out / "winograd_passes_ab.md").write_text("\n".join(md))
        print(md[-1], flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
