"""Per-entry and per-class summary of depthwise_bench.py reports against issue 17's depthwise targets.

For each suite entry: the fastest verified kernel per path (fwd, dgrad, wgrad, and the fused 1-D bwd) and PyTorch's
times from the same run (CUDA events, the bench's protocol). Forward × = PyTorch fwd / ours. Forward + backward × =
(PyTorch fwd + PyTorch's backward) / (ours fwd + our cheapest backward), where a backward is dgrad + wgrad or the fused
bwd, and PyTorch's is its joint ``autograd.grad`` where the bench timed one (1-D), else its dgrad + wgrad. "% copy" =
compulsory bytes / time / the copy bandwidth measured in that run. Targets (issue 17): 2-D forward and forward +
backward ≥ 2× PyTorch fp32 on every entry; 1-D above 100 MB ≥ 80% of copy bandwidth tuned.

    python benchmarks/depthwise_summary.py benchmarks/results/depthwise_h200/wide_v1/dw_wide_1d/depthwise_bench.json \
        benchmarks/results/depthwise_h200/wide_v1/dw_wide_2d/depthwise_bench.json --suite benchmarks/suites/wide.json \
        --out benchmarks/results/depthwise_h200/wide_v1/summary.md
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path
from statistics import geometric_mean
from typing import Any

TARGET_X = 2.0
LARGE_1D_BYTES = 100e6
TARGET_COPY_1D = 0.80


def best_by_path(candidates: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    """The fastest verified candidate per path."""
    best: dict[str, dict[str, Any]] = {}
    for c in candidates:
        timed = c.get("status") == "ok" and c.get("median_ms") is not None
        if timed and (c["path"] not in best or c["median_ms"] < best[c["path"]]["median_ms"]):
            best[c["path"]] = c
    return best


def summarise(result: dict[str, Any], copy_bytes_per_s: float, cls: str) -> dict[str, Any]:
    """One entry's row; the forward + backward fields are None in a forward-only report (``--no-bwd-2d``)."""
    best, torch_ms = best_by_path(result["candidates"]), result["torch_ms"]
    fwd_ms = best["fwd"]["median_ms"]
    compulsory = result["compulsory_bytes"]["fwd"]
    row = {"name": result["name"], "class": cls, "kind": result["kind"], "fwd_ms": fwd_ms,
           "torch_fwd_ms": torch_ms["fwd"], "fwd_x": torch_ms["fwd"] / fwd_ms, "fwd_variant": best["fwd"]["variant"],
           "fwd_bwd_ms": None, "torch_fwd_bwd_ms": None, "fwd_bwd_x": None,
           "fwd_copy": compulsory / (fwd_ms * 1e-3) / copy_bytes_per_s, "compulsory_bytes": compulsory}
    if "dgrad" in best and "wgrad" in best:
        ours_bwd_ms = best["dgrad"]["median_ms"] + best["wgrad"]["median_ms"]
        if "bwd" in best:
            ours_bwd_ms = min(ours_bwd_ms, best["bwd"]["median_ms"])
        torch_bwd_ms = torch_ms.get("bwd", torch_ms["dgrad"] + torch_ms["wgrad"])
        row |= {"fwd_bwd_ms": fwd_ms + ours_bwd_ms, "torch_fwd_bwd_ms": torch_ms["fwd"] + torch_bwd_ms,
                "fwd_bwd_x": (torch_ms["fwd"] + torch_bwd_ms) / (fwd_ms + ours_bwd_ms)}
    return row


def group_row(label: str, sel: list[dict[str, Any]]) -> str:
    """A summary line: entries, and the forward and forward + backward ratios' geomean (lowest) over the entries
    where they were measured."""
    cells = []
    for key in ("fwd_x", "fwd_bwd_x"):
        values = [r[key] for r in sel if r[key] is not None]
        cells.append(f"{geometric_mean(values):.2f} ({min(values):.2f})" if values else "—")
    return f"| {label} | {len(sel)} | {cells[0]} | {cells[1]} |"


def misses(row: dict[str, Any]) -> list[str]:
    out = []
    if row["kind"] == "depthwise2d":
        out += [f"{label} {row[key]:.2f}×" for label, key in (("fwd", "fwd_x"), ("fwd+bwd", "fwd_bwd_x"))
                if row[key] is not None and row[key] < TARGET_X]
    elif row["compulsory_bytes"] > LARGE_1D_BYTES and row["fwd_copy"] < TARGET_COPY_1D:
        out.append(f"fwd {row['fwd_copy']:.0%} of copy")
    return out


def markdown(rows: list[dict[str, Any]], sources: list[str]) -> str:
    lines = ["# Depthwise kernels vs PyTorch fp32, per entry and per class", "",
             "From " + ", ".join(f"`{s}`" for s in sources) + " (`benchmarks/depthwise_summary.py`). Kernel times by "
             "CUDA events, the bench's protocol; PyTorch in the same process on the same buffers.", "",
             "| entry | class | fwd µs ours / PyTorch | fwd × | fwd variant | fwd + bwd µs ours / PyTorch "
             "| fwd + bwd × | fwd % copy | compulsory MB | misses |", "|---|---|---|---|---|---|---|---|---|---|"]
    for r in rows:
        both = ("—", "—") if r["fwd_bwd_x"] is None else (
            f"{r['fwd_bwd_ms'] * 1e3:.1f} / {r['torch_fwd_bwd_ms'] * 1e3:.1f}", f"{r['fwd_bwd_x']:.2f}")
        lines.append(f"| {r['name']} | {r['class']} | {r['fwd_ms'] * 1e3:.1f} / {r['torch_fwd_ms'] * 1e3:.1f} | "
                     f"{r['fwd_x']:.2f} | {r['fwd_variant']} | {both[0]} | {both[1]} | {r['fwd_copy']:.0%} | "
                     f"{r['compulsory_bytes'] / 1e6:.1f} | {', '.join(misses(r)) or '—'} |")
    lines += ["", "| class | entries | fwd × geomean (lowest) | fwd + bwd × geomean (lowest) |", "|---|---|---|---|"]
    for cls in dict.fromkeys(r["class"] for r in rows):
        lines.append(group_row(cls, [r for r in rows if r["class"] == cls]))
    for kind in ("depthwise1d_causal", "depthwise2d"):
        sel = [r for r in rows if r["kind"] == kind]
        if sel:
            lines.append(group_row(f"**all {kind}**", sel))
    return "\n".join(lines) + "\n"


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("reports", nargs="+", type=Path)
    ap.add_argument("--suite", default="benchmarks/suites/wide.json")
    ap.add_argument("--out", type=Path, required=True)
    args = ap.parse_args()
    suite = json.loads(Path(args.suite).read_text())
    classes = {e["name"]: e.get("class", "")
               for key in ("depthwise2d", "depthwise1d_causal") for e in suite.get(key, [])}
    rows = []
    for path in args.reports:
        report = json.loads(path.read_text())
        rows += [summarise(r, report["copy_bandwidth_bytes_per_s"], classes.get(r["name"], "")) for r in
                 report["results"]]
    text = markdown(rows, [str(p) for p in args.reports])
    args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
