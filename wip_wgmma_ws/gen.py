"""The WIP warp-specialised kernel's source for a plan of the shipped general wgmma families: the family text, this
body and an ``igemm_wgmma_ws_fwd`` entry with the shipped GEMM entry's arguments plus two TMA descriptors (the A
im2col map and the filters' tile map, 128 bytes each by value; unused ones may be zeros), 128 · (warpgroups + 1)
threads. ``mode``: 0 every operand by cp.async, 1 the filters by TMA, 2 both operands by TMA."""

from __future__ import annotations

from pathlib import Path

from convtune.kernels.compile import kernel_text
from convtune.kernels.igemm_wgmma import half as _half

HERE = Path(__file__).parent
ENTRY = "igemm_wgmma_ws_fwd"
TYPES = {"float32": "convtune::wg_tf32", **_half.CUDA_TYPES}
#: (producer, consumer) registers a thread per mode: the cp.async producer needs the im2col bookkeeping
REGS = {0: (144, 176), 1: (144, 176), 2: (40, 232)}

_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
igemm_wgmma_ws_fwd(const {t}* __restrict__ xt, const {t}* __restrict__ filt,
                   const __grid_constant__ convtune::TmaDesc map_a, const __grid_constant__ convtune::TmaDesc map_b,
                   {t}* __restrict__ y, float* __restrict__ ysplit, int N, int Cp, int H, int W, int K, int P, int Q,
                   int S, int SH, int SW, int PH, int PW, int DH, int DW, int KRp, int chunks_per_split) {{
  convtune::igemm_wgmma_ws_body<{t}, {targs}>(xt, filt, &map_a, &map_b, y, ysplit, N, Cp, H, W, K, P, Q, S, SH, SW,
                                             PH, PW, DH, DW, KRp, chunks_per_split);
}}
"""


def source(pl, mode: int = 0) -> str:
    """The WS entry for ``pl`` (a general plan: TF32 or 16-bit, no folded taps) in ``mode``."""
    c = pl.config
    assert getattr(c, "row_taps", 1) == 1, "folded taps are not in the WIP kernel"
    body = (HERE / "igemm_wgmma_ws.cu").read_text().replace('#include "igemm_wgmma_fwd.cu"\n', "")
    producer, consumer = REGS[mode]
    if c.warpgroups == 1 and mode == 2:
        producer, consumer = 40, 232
    targs = ", ".join(str(a) for a in (c.tile_n, c.m_blocks, c.warpgroups, c.stages, c.row_bytes, mode, producer,
                                       consumer))
    return (kernel_text("igemm_wgmma_fwd.cu") + body
            + _WRAPPER.format(threads=128 * (c.warpgroups + 1), t=TYPES[pl.problem.dtype], targs=targs))
