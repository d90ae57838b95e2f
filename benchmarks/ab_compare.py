"""Two ``vs_cudnn.py`` runs side by side: a kernel source before and after a change (``gpu_check.sh kernel_ab``).

Per shape and family: the fastest measured config's µs in each run, their ratio, and each run's ratio to cuDNN in
the same process (cuDNN is re-timed in each run, so ``× cuDNN`` is the figure that survives host drift between the
two runs). Shapes or families one run lacks show a dash.

    python benchmarks/ab_compare.py BEFORE/vs_cudnn.json AFTER/vs_cudnn.json [--out table.md]
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def family_best_us(path: Path) -> dict[tuple[str, str], tuple[float, float | None]]:
    """(shape, family) -> (fastest µs, cuDNN µs of that shape's run) from one ``vs_cudnn.json``."""
    out: dict[tuple[str, str], tuple[float, float | None]] = {}
    for row in json.loads(path.read_text())["results"]:
        cudnn_ms = (row.get("cudnn_ms") or {}).get(row.get("baseline", "fp32"))   # cuDNN in the run's class
        cudnn_us = 1e3 * cudnn_ms if isinstance(cudnn_ms, int | float) else None
        for family, ms in (row.get("family_best_ms") or {}).items():
            if ms:
                out[(row["name"], family)] = (1e3 * ms, cudnn_us)
    return out


def table(before: dict[tuple[str, str], Any], after: dict[tuple[str, str], Any]) -> str:
    def cell(v: float | None, fmt: str) -> str:
        return "—" if v is None else format(v, fmt)

    lines = ["| shape | family | before µs | after µs | after / before | × cuDNN before | × cuDNN after |",
             "|---|---|---|---|---|---|---|"]
    for key in sorted(set(before) | set(after)):
        b, a = before.get(key), after.get(key)
        b_us, a_us = (b[0] if b else None), (a[0] if a else None)
        ratio = a_us / b_us if a_us and b_us else None
        xb = b[1] / b[0] if b and b[1] else None
        xa = a[1] / a[0] if a and a[1] else None
        lines.append(f"| {key[0]} | {key[1]} | {cell(b_us, '.1f')} | {cell(a_us, '.1f')} | {cell(ratio, '.3f')} "
                     f"| {cell(xb, '.2f')} | {cell(xa, '.2f')} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("before", type=Path)
    ap.add_argument("after", type=Path)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args(argv)
    text = table(family_best_us(args.before), family_best_us(args.after))
    if args.out is not None:
        args.out.write_text(text)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
