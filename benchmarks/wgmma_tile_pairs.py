"""One warpgroup over two m64 blocks against two warpgroups over one each, the same tile otherwise, on the measured
tables: per (table, family, folded taps or not, TMA or copying), the geometric mean of measured time (m_blocks=2,
warpgroups=1) / (m_blocks=1, warpgroups=2) over every config pair both measured. The wgmma model prices the two the
same, or the first lower (more resident blocks); this is what they measure. Changes nothing; prints a table.

    python benchmarks/wgmma_tile_pairs.py > benchmarks/results/igemm_wgmma_h200/tile_pairs.md
"""

from __future__ import annotations

import collections
import dataclasses
import math

from convtune.kernels.config import parse_config_key
from convtune.kernels.igemm_wgmma.launcher import folded, uses_tma
from convtune.tuner.benchmark import ReplayTable

TABLES = ("h100_tf32", "h100_bf16", "h200_tf32", "h200_bf16")


def main() -> int:
    ratios: dict[tuple[str, str, str, str], list[float]] = collections.defaultdict(list)
    for name in TABLES:
        table = ReplayTable.load(f"tests/data/replay_{name}.json.gz")
        for rows in table.problems.values():
            ok = {c: r["median_ms"] for c, r in rows.items() if r["status"] == "ok"}
            for key, ms in ok.items():
                config = parse_config_key(key)
                if getattr(config, "m_blocks", 0) != 2 or getattr(config, "warpgroups", 0) != 1:
                    continue
                twin = ok.get(dataclasses.replace(config, m_blocks=1, warpgroups=2).key())
                if twin is None:
                    continue
                # the TMA 1×1 families have no tma field: the family is TMA-fed
                feed = "TMA" if uses_tma(config) or config.family.endswith("_tma") else "copying"
                fold = "folded" if folded(config) else "unfolded"
                ratios[(name, config.family, fold, feed)].append(ms / twin)
    print("# (m_blocks=2, warpgroups=1) / (m_blocks=1, warpgroups=2), measured time, same tile otherwise\n")
    print("| table | family | taps | operands | pairs | geomean | min | max |\n|---|---|---|---|---|---|---|---|")
    for key, values in sorted(ratios.items()):
        geo = math.exp(sum(map(math.log, values)) / len(values))
        print(f"| {' | '.join(key)} | {len(values)} | {geo:.2f} | {min(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
