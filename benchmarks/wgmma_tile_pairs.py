"""One warpgroup over two m64 blocks against two warpgroups over one each, the same tile otherwise, on the measured
tables: per (table, family, folded taps or not, TMA or copying), the geometric mean of measured time (m_blocks=2,
warpgroups=1) / (m_blocks=1, warpgroups=2) over every config pair both measured. The wgmma model prices the two the
same, or the first lower (more resident blocks); this is what they measure. Changes nothing; prints a table.

    python benchmarks/wgmma_tile_pairs.py > benchmarks/results/igemm_wgmma_h200/tile_pairs.md
"""

from __future__ import annotations

import collections
import math

from convtune.tuner.benchmark import ReplayTable

TABLES = ("h100_tf32", "h100_bf16", "h200_tf32", "h200_bf16")


def main() -> int:
    ratios: dict[tuple[str, str, str, str], list[float]] = collections.defaultdict(list)
    for name in TABLES:
        table = ReplayTable.load(f"tests/data/replay_{name}.json.gz")
        for rows in table.problems.values():
            ok = {c: r["median_ms"] for c, r in rows.items() if r["status"] == "ok"}
            for config, ms in ok.items():
                if "m_blocks=2" not in config or "warpgroups=1" not in config:
                    continue
                twin = ok.get(config.replace("m_blocks=2", "m_blocks=1").replace("warpgroups=1", "warpgroups=2"))
                if twin is None:
                    continue
                fold = "folded" if "row_taps=" in config and "row_taps=1 " not in config + " " else "unfolded"
                family = config.split(".")[0]
                feed = "TMA" if "tma=1" in config or family.endswith("_tma") else "copying"
                ratios[(name, family, fold, feed)].append(ms / twin)
    print("# (m_blocks=2, warpgroups=1) / (m_blocks=1, warpgroups=2), measured time, same tile otherwise\n")
    print("| table | family | taps | operands | pairs | geomean | min | max |\n|---|---|---|---|---|---|---|---|")
    for key, values in sorted(ratios.items()):
        geo = math.exp(sum(map(math.log, values)) / len(values))
        print(f"| {' | '.join(key)} | {len(values)} | {geo:.2f} | {min(values):.2f} | {max(values):.2f} |")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
