"""Can CuPy's NVRTC binding build sm_90a code (wgmma) on this host? Compiles the prototype's entries with
-arch=sm_90a, loads the cubin, prints the registers of one entry."""
import sys
import time
from pathlib import Path

import cupy as cp
from cupy.cuda import nvrtc

here = Path(__file__).parent
text = (here / "entries.cu").read_text()
# inline the quoted includes (NVRTC has no file system here)
for inc in ("igemm_wgmma_fwd.cu", "wgmma_tf32.cuh"):
    text = text.replace(f'#include "{inc}"', (here / inc).read_text())
text = text.replace('#include "wgmma_tf32.cuh"', (here / "wgmma_tf32.cuh").read_text())
start = time.time()
prog = nvrtc.createProgram(text, "wgmma.cu", [], [])
try:
    nvrtc.compileProgram(prog, ["-std=c++17", "-arch=sm_90a"])
except Exception as exc:  # noqa: BLE001
    print("compile failed:", exc, nvrtc.getProgramLog(prog)[-2000:])
    sys.exit(1)
cubin = nvrtc.getCUBIN(prog)
print(f"NVRTC sm_90a cubin {len(cubin)} bytes in {time.time() - start:.1f} s; NVRTC {nvrtc.getVersion()}")
path = Path("/tmp/nvrtc_wgmma.cubin")
path.write_bytes(cubin)
mod = cp.RawModule(path=str(path))
f = mod.get_function("wg_nhwc_128_2_1_4")
print("loaded wg_nhwc_128_2_1_4: regs", f.num_regs)
