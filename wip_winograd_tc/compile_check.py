"""nvcc on the WIP TF32 Winograd GEMM (no GPU needed): every tile of ``TILES`` for sm_80 and sm_90, no spills,
registers within the launch bounds' share (65536 / threads, at most 255). ``python wip_winograd_tc/compile_check.py``
"""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

from gen import ENTRY, TcTile, source

from convtune.kernels.compile import nvcc_compile
from convtune.kernels.winograd.unfused import derive_plan
from convtune.problem import ConvProblem

TILES = [TcTile(64, 128, 16, 2, 4, 3), TcTile(128, 128, 16, 2, 4, 3), TcTile(128, 256, 8, 2, 4, 3),
         TcTile(64, 64, 32, 2, 2, 4), TcTile(128, 64, 16, 4, 2, 2), TcTile(32, 128, 16, 1, 4, 3)]
PROBLEM = ConvProblem.parse("N=8 C=64 H=28 W=28 K=128 R=3 S=3 pad=1 math=tf32")


def main() -> int:
    failures = 0
    for arch in ("sm_80", "sm_90"):
        for tile in TILES:
            pl = derive_plan(PROBLEM, tile.unfused_config(4))
            text = source(pl, tile)
            res = nvcc_compile(text, arch).resources[ENTRY]
            limit = min(255, 65536 // tile.threads)
            ok = not res.spills and res.num_regs <= limit
            failures += not ok
            print(f"{arch} {tile.key()}: {res.num_regs} registers (limit {limit}), spills {res.spills}, "
                  f"smem {tile.smem_bytes} B {'ok' if ok else 'FAIL'}")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
