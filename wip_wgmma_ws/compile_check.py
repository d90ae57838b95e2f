"""nvcc sm_90a compile check of the WIP kernel for a few plans (registers, spills, wgmma serialisation)."""

from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).parent))
from gen import ENTRY, source

from convtune.kernels.compile import nvcc_compile
from convtune.kernels.igemm_wgmma.half import IgemmWgmmaHalfFwdConfig
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig
from convtune.kernels.igemm_wgmma.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
CASES = [
    ("N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 math=tf32", IgemmWgmmaFwdConfig(256, 1, 2, 4, 1)),
    ("N=8 C=512 H=33 W=33 K=512 R=3 S=3 pad=2 dilation=2 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(256, 1, 2, 4, 1)),
    ("N=32 C=256 H=56 W=56 K=256 R=3 S=3 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 1)),
    ("N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(128, 1, 2, 6, 2)),
    ("N=2 C=13 H=17 W=19 K=37 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(64, 1, 1, 4, 1)),         # one consumer
    ("N=2 C=13 H=17 W=19 K=37 R=3 S=3 pad=1 dtype=bfloat16", IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1, 16)),
    ("N=8 C=8 H=56 W=56 K=256 R=3 S=3 pad=1 math=tf32", IgemmWgmmaFwdConfig(256, 1, 1, 3, 1, 8)),    # direct stores
]

if __name__ == "__main__":
    for (text, config), mode in [(case, mode) for case in CASES for mode in (0, 1, 2)]:
        pl = plan(ConvProblem.parse(text), config, H200)
        result = nvcc_compile(source(pl, mode), "sm_90a")
        res = result.resources[ENTRY]
        warnings = [line for line in result.log.splitlines() if "arning" in line][:3]
        print(f"mode {mode}", config.key(), "regs", res.num_regs, "spills", res.spills, "serialized",
              "serialized" in result.log, "warnings", warnings)
