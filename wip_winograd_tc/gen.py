"""Source of the WIP TF32 Winograd GEMM for an unfused Winograd plan (``convtune.kernels.winograd.unfused``).

The text is the shipped unfused module (the F(m) transforms, ``winograd_unfused.cu`` with its three entries for the
plan) plus ``winograd_tc_gemm.cu`` and one more entry, ``winograd_gemm_tc`` (U, V, M, Cp, Kp, Tp), so one module
holds the fp32 pipeline and the tensor-core GEMM that replaces its middle launch.

Tile parameters (:class:`TcTile`): BK output channels × BT tiles per block (the unfused plan's ``tile_k`` and
``tile_t``, so its padding of Kp and Tp holds), BC channels per stage (its ``chunk_c``: Cp), WK × WT warps, STAGES.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from convtune.kernels.winograd.unfused import WinogradUnfusedConfig, WinogradUnfusedPlan

HERE = Path(__file__).resolve().parent
ENTRY = "winograd_gemm_tc"


@dataclass(frozen=True, slots=True)
class TcTile:
    bk: int = 64
    bt: int = 128
    bc: int = 16
    wk: int = 2
    wt: int = 4
    stages: int = 3

    @property
    def threads(self) -> int:
        return 32 * self.wk * self.wt

    @property
    def smem_bytes(self) -> int:
        return 4 * self.stages * self.bc * ((self.bk + 8) + (self.bt + 8))

    def unfused_config(self, m: int) -> WinogradUnfusedConfig:
        """The unfused config with this tile's padding (thread_k/t only matter to the fp32 GEMM it replaces)."""
        return WinogradUnfusedConfig(m=m, tile_k=self.bk, tile_t=self.bt, chunk_c=self.bc, thread_k=8, thread_t=8,
                                     stages=min(self.stages, 4))

    def key(self) -> str:
        return f"bk={self.bk} bt={self.bt} bc={self.bc} wk={self.wk} wt={self.wt} stages={self.stages}"


WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads})
winograd_gemm_tc(const float* __restrict__ U, const float* __restrict__ V, float* __restrict__ Mo, int Cp, int Kp,
                 int Tp) {{
  convtune::winograd_tc_gemm_body<{bk}, {bt}, {bc}, {wk}, {wt}, {stages}>(U, V, Mo, Cp, Kp, Tp);
}}
"""


def source(pl: WinogradUnfusedPlan, tile: TcTile) -> str:
    """The plan's unfused module with the TF32 GEMM entry appended."""
    return (pl.source() + (HERE / "winograd_tc_gemm.cu").read_text()
            + WRAPPER.format(threads=tile.threads, bk=tile.bk, bt=tile.bt, bc=tile.bc, wk=tile.wk, wt=tile.wt,
                             stages=tile.stages))
