"""Implicit-GEMM forward on the CUDA cores (strict fp32): config, resources, analytic traffic, prepared launch.

Shapes (fp32, contiguous): x (N, C, H, W); packed weights wpk (C, R, S, Kp), Kp = ⌈K/4⌉·4 — the direct family's
layout, shared with it; y (N, K, P, Q). The kernel is one GEMM of M = N·P·Q output pixels × K output channels over
the CRS = C·R·S rows of wpk, gathering the im2col rows of x on the fly. Grid: (⌈M/BM⌉, ⌈K/BN⌉, splits); one
block per BM × BN output tile and reduction slice, (BM/8)·(BN/8) threads with an 8 × 8 register tile each.

Global-memory traffic of the dataflow, in words, exactly what the kernel requests (a copy that meets padding or
the tile's tail is zero-filled and reads nothing; the weight pre-pack is a one-time cost per weight tensor and is
not included)::

    input  = ⌈K/BN⌉ · N · C · (Σ_p taps_h(p)) · (Σ_q taps_w(q))
             taps_h(p) = |{r < R : 0 ≤ p·SH − PH + r·DH < H}|,  taps_w(q) likewise over s < S
    weight = ⌈M/BM⌉ · CRS · Kp
    output = splits · N·K·P·Q stores (atomic adds when splits > 1) + N·K·P·Q for zeroing y first

``tests/kernels/igemm_simt/test_igemm_simt.py`` checks this against a simulation of the kernel's copy loops.

The kernel's compute stage and epilogue repeat ``pointwise_fwd.cu``'s on purpose: a kernel version is the hash of its
source text, and the pointwise family's is pinned by its H200 measurements, so a header shared by both would move it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.direct import launcher as _direct
from convtune.kernels.launch_geometry import checked_min_blocks
from convtune.kernels.prepared import (
    FilterLayout,
    Launch,
    Memset,
    PreparedLaunch,
    cached_prepared,
    data_pointer,
    driver,
    grid3,
    pointers,
    stream_pointer,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "igemm_simt_fwd.cu"
ENTRY = "igemm_simt_fwd"
THREAD_TILE = 8          # TM = TN: the register tile is 8 pixels × 8 output channels
MAX_COPIES = 8           # A-tile copies per thread and chunk: each keeps a pixel's corner and offset in registers


@dataclass(frozen=True, slots=True)
class IgemmSimtFwdConfig(KernelConfig):
    """Tunable parameters of the implicit-GEMM CUDA-core forward kernel (see the module docstring)."""

    family = "igemm_simt"
    direction = "fwd"

    tile_m: int = 128      # BM: output pixels (over all images) per block
    tile_n: int = 128      # BN: output channels per block
    chunk_crs: int = 8     # BK: reduction rows (c, r, s) per shared-memory stage
    stages: int = 3        # shared-memory pipeline depth (2..4)
    splits: int = 1        # reduction split across blocks (atomic adds when > 1)

    @property
    def threads(self) -> int:
        return (self.tile_m // THREAD_TILE) * (self.tile_n // THREAD_TILE)

    @property
    def accumulators(self) -> int:
        return THREAD_TILE * THREAD_TILE


def supports(problem: ConvProblem) -> bool:
    """Dense (groups = 1) float32 convolutions of any filter, stride, padding and dilation (the kernel's 32-bit
    offsets hold: a :class:`ConvProblem` has fewer than 2^31 elements per tensor)."""
    p = problem
    return p.groups == 1 and p.dtype == "float32" and not p.causal


@dataclass(frozen=True, slots=True)
class IgemmSimtFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: IgemmSimtFwdConfig
    kp: int
    m_tiles: int
    k_tiles: int
    chunks_per_split: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.m_tiles, self.k_tiles, self.config.splits)

    @property
    def blocks(self) -> int:
        return self.m_tiles * self.k_tiles * self.config.splits

    @property
    def a_copies(self) -> int:
        """4-byte A-tile copies one thread issues per chunk."""
        return a_copies(self.config)

    @property
    def b_copies(self) -> int:
        """16-byte B-tile copies one thread issues per chunk."""
        return b_copies(self.config)

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (c.tile_m, c.tile_n, c.chunk_crs, c.stages, p.R, p.S, p.stride_h, p.stride_w, p.dil_h, p.dil_w)

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        return _family_source() + _WRAPPER.format(threads=self.config.threads, min_blocks=self.min_blocks,
                                                  targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
igemm_simt_fwd(const float* __restrict__ x, const float* __restrict__ wpk, float* __restrict__ y, int N, int C,
               int H, int W, int K, int Kp, int P, int Q, int PH, int PW, int chunks_per_split) {{
  convtune::igemm_simt_fwd_body<{targs}>(x, wpk, y, N, C, H, W, K, Kp, P, Q, PH, PW, chunks_per_split);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def a_copies(config: IgemmSimtFwdConfig) -> int:
    """4-byte A copies per thread and chunk: BK·BM / threads = 64·BK / BN."""
    return -(-config.chunk_crs * config.tile_m // config.threads)


def b_copies(config: IgemmSimtFwdConfig) -> int:
    """16-byte B copies per thread and chunk: BK·BN / 4 / threads = 16·BK / BM."""
    return -(-config.chunk_crs * config.tile_n // 4 // config.threads)


def regs_estimate(config: IgemmSimtFwdConfig) -> int:
    """Registers per thread ≈ 64 accumulators + 16 operands + 3 per A copy + 40, + 2 per pixel record when a
    thread's copies meet several pixels (threads not a multiple of tile_m: the kernel's NPIX = copies).

    From ptxas on sm_90 (CUDA 13) over 7 configs: 129–161 registers, within 7 of this estimate."""
    copies = a_copies(config)
    pixels = 1 if config.threads % config.tile_m == 0 else copies
    return config.accumulators + 16 + 3 * copies + 40 + (2 * pixels if pixels > 1 else 0)


def derive_plan(problem: ConvProblem, config: IgemmSimtFwdConfig,
                machine: MachineModel | None = None) -> IgemmSimtFwdPlan:
    """The launch plan of a config that keeps the space's rules (:func:`~convtune.kernels.igemm_simt.space.plan`
    checks them first; the enumeration yields only such configs); refuses what breaks ``machine``'s limits or the
    grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    chunks = -(-p.C * p.R * p.S // c.chunk_crs)
    per_split = -(-chunks // c.splits)
    m = p.N * p.P * p.Q
    m_tiles, k_tiles = -(-m // c.tile_m), -(-p.K // c.tile_n)
    if m_tiles > 2**31 - 1 or k_tiles > 65535 or c.splits > 65535:
        raise InvalidConfig("tile_m", f"grid ({m_tiles}, {k_tiles}, {c.splits}) exceeds the CUDA grid limits")
    smem_bytes = 4 * c.stages * c.chunk_crs * (c.tile_m + c.tile_n)
    regs = regs_estimate(c)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem_bytes, regs, machine, "chunk_crs", "chunk_crs")
    return IgemmSimtFwdPlan(p, c, -(-p.K // 4) * 4, m_tiles, k_tiles, per_split, smem_bytes, regs, min_blocks)


# ---- analytic traffic ---------------------------------------------------------------------------------
def traffic_words(pl: IgemmSimtFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernel per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    return {
        "input": pl.k_tiles * (p.macs_nonpad // p.K),   # N·C·Σtaps_h·Σtaps_w real reads per output-channel tile
        "weight": pl.m_tiles * p.C * p.R * p.S * pl.kp,
        "output": out * c.splits + (out if c.splits > 1 else 0),
    }


def total_traffic_words(pl: IgemmSimtFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: IgemmSimtFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: IgemmSimtFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def filter_layout(pl: IgemmSimtFwdPlan, device: int) -> FilterLayout:
    """The direct family's packed layout wpk (C, R, S, Kp) and its packing launch (shared with direct plans)."""
    return _direct.filter_layout(pl, device)  # type: ignore[arg-type]  # reads only .problem and .kp


def prepare_plan(pl: IgemmSimtFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, filters, y); split-C zeroes y first (its atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = []
    if c.splits > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                        (p.N, p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q, p.pad_h, p.pad_w, pl.chunks_per_split)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=steps, kernels=kernels,
                          filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: IgemmSimtFwdPlan, kernel: LoadedKernel, x: Any, wpk: Any, y: Any, stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays; allocates nothing (zeroes y first when split).

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(wpk), data_pointer(y)), stream_pointer(stream))


# ---- the launcher protocol every family provides (registry.KernelSpec.launcher) ------------------------
TOLERANCE = 1e-5   # relative error against float64 a config must meet to be measured or served


def prepare_filters(pl: IgemmSimtFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: w packed to (C, R, S, Kp), as the direct family packs it."""
    return _direct.pack_weights(w)


def filters_key(pl: IgemmSimtFwdPlan) -> tuple[str, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result: the direct family's packing."""
    return ("direct",)


def tolerance(pl: IgemmSimtFwdPlan) -> float:
    return TOLERANCE
