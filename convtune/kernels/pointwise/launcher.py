"""Pointwise (1×1) convolution forward: config, resources, analytic traffic, and the prepared launch.

Shapes (fp32, contiguous): x (N, C, H, W); packed weights wpk (C, 1, 1, Kp), Kp = ⌈K/4⌉·4 — the direct
family's layout, shared with it; y (N, K, P, Q), P = ⌈H/SH⌉, Q = ⌈W/SW⌉ (pad 0, 1×1 filters: dilation is
irrelevant). The kernel is one GEMM of M = N·P·Q output pixels × K output channels over C. Grid:
(⌈M/BM⌉, ⌈K/BN⌉, splits); one block per BM × BN output tile and reduction slice, (BM/8)·(BN/8) threads with
an 8 × 8 register tile each.

Global-memory traffic of the dataflow, in words, exactly what the kernel requests (zero-filled tail copies
read nothing; the weight pre-pack is a one-time cost per weight tensor and is not included)::

    input  = ⌈K/BN⌉ · C · N·P·Q
    weight = ⌈M/BM⌉ · C · Σ_kt min(BN, Kp − kt·BN)
    output = splits · N·K·P·Q stores (atomic adds when splits > 1) + N·K·P·Q for zeroing y first

``tests/kernels/pointwise/test_pointwise.py`` checks this against a simulation of the kernel's copy loops.
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

SOURCE = "pointwise_fwd.cu"
ENTRY = "pointwise_fwd"
THREAD_TILE = 8          # TM = TN: the register tile is 8 pixels × 8 output channels
MAX_COPIES = 16          # A-tile copies per thread and chunk: more spill the per-copy offsets kept in registers


@dataclass(frozen=True, slots=True)
class PointwiseFwdConfig(KernelConfig):
    """Tunable parameters of the pointwise forward kernel (see the module docstring)."""

    family = "pointwise"
    direction = "fwd"

    tile_m: int = 128      # BM: output pixels (over all images) per block
    tile_n: int = 128      # BN: output channels per block
    chunk_c: int = 8       # BK: input channels per shared-memory stage
    stages: int = 3        # shared-memory pipeline depth (2..4)
    splits: int = 1        # input-channel reduction split across blocks (atomic adds when > 1)

    @property
    def threads(self) -> int:
        return (self.tile_m // THREAD_TILE) * (self.tile_n // THREAD_TILE)

    @property
    def accumulators(self) -> int:
        return THREAD_TILE * THREAD_TILE


def supports(problem: ConvProblem) -> bool:
    """1×1 filters, no padding, groups = 1, float32 (any stride)."""
    p = problem
    return (p.R == 1 and p.S == 1 and p.pad_h == 0 and p.pad_w == 0 and p.groups == 1 and p.dtype == "float32"
            and not p.causal)


def copy_width(problem: ConvProblem) -> int:
    """4 (16-byte pixel copies) for stride 1 and P·Q % 4 == 0 (a segment stays inside one image), else 1."""
    p = problem
    return 4 if p.stride_h == 1 and p.stride_w == 1 and (p.H * p.W) % 4 == 0 else 1


@dataclass(frozen=True, slots=True)
class PointwiseFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: PointwiseFwdConfig
    vec: int
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
        """A-tile copies one thread issues per chunk."""
        c = self.config
        return -(-c.chunk_c * c.tile_m // self.vec // c.threads)

    @property
    def b_copies(self) -> int:
        """16-byte B-tile copies one thread issues per chunk."""
        c = self.config
        return -(-c.chunk_c * c.tile_n // 4 // c.threads)

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (c.tile_m, c.tile_n, c.chunk_c, c.stages, self.vec, p.stride_h, p.stride_w)

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        return _family_source() + _WRAPPER.format(threads=self.config.threads, min_blocks=self.min_blocks,
                                                  targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
pointwise_fwd(const float* __restrict__ x, const float* __restrict__ wpk, float* __restrict__ y, int N, int C, int H,
              int W, int K, int Kp, int P, int Q, int chunks_per_split) {{
  convtune::pointwise_fwd_body<{targs}>(x, wpk, y, N, C, H, W, K, Kp, P, Q, chunks_per_split);
}}
"""


@cache
def _family_source() -> str:

    return kernel_text(SOURCE)


def regs_estimate(config: PointwiseFwdConfig, vec: int) -> int:
    """Registers per thread ≈ 64 accumulators + 16 operands + 3 per A copy (its 64-bit offset, flag) + 40.

    From ptxas on sm_90 (CUDA 13): 122–145 registers for one or two copies per thread, 191 for 16."""
    copies = -(-config.chunk_c * config.tile_m // vec // config.threads)
    return config.accumulators + 16 + 3 * copies + 40


def derive_plan(problem: ConvProblem, config: PointwiseFwdConfig,
                machine: MachineModel | None = None) -> PointwiseFwdPlan:
    """The launch plan of a config that keeps the space's rules (:func:`plan` checks them first; the
    enumeration yields only such configs); refuses what breaks ``machine``'s limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    vec = copy_width(p)
    chunks = -(-p.C // c.chunk_c)
    per_split = -(-chunks // c.splits)
    m = p.N * p.P * p.Q
    m_tiles, k_tiles = -(-m // c.tile_m), -(-p.K // c.tile_n)
    if m_tiles > 2**31 - 1 or k_tiles > 65535 or c.splits > 65535:
        raise InvalidConfig("tile_m", f"grid ({m_tiles}, {k_tiles}, {c.splits}) exceeds the CUDA grid limits")
    smem_bytes = 4 * c.stages * c.chunk_c * (c.tile_m + c.tile_n)
    regs = regs_estimate(c, vec)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem_bytes, regs, machine, "chunk_c", "chunk_c")
    return PointwiseFwdPlan(p, c, vec, -(-p.K // 4) * 4, m_tiles, k_tiles, per_split, smem_bytes, regs, min_blocks)


# ---- analytic traffic ---------------------------------------------------------------------------------
def traffic_words(pl: PointwiseFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernel per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    return {
        "input": pl.k_tiles * p.C * p.N * p.P * p.Q,
        "weight": pl.m_tiles * p.C * min(pl.kp, pl.k_tiles * c.tile_n),
        "output": out * c.splits + (out if c.splits > 1 else 0),
    }


def total_traffic_words(pl: PointwiseFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: PointwiseFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: PointwiseFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def filter_layout(pl: PointwiseFwdPlan, device: int) -> FilterLayout:
    """The direct family's packed layout wpk (C, 1, 1, Kp) and its packing launch (shared with direct plans)."""
    return _direct.filter_layout(pl, device)  # type: ignore[arg-type]  # reads only .problem and .kp


def prepare_plan(pl: PointwiseFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, filters, y); split-C zeroes y first (its atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = []
    if c.splits > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                        (p.N, p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q, pl.chunks_per_split)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=steps, kernels=kernels,
                          filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: PointwiseFwdPlan, kernel: LoadedKernel, x: Any, wpk: Any, y: Any, stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays; allocates nothing (zeroes y first when split).

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(wpk), data_pointer(y)), stream_pointer(stream))


# ---- the launcher protocol every family provides (registry.KernelSpec.launcher) ------------------------
TOLERANCE = 1e-5   # relative error against float64 a config must meet to be measured or served


def prepare_filters(pl: PointwiseFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: w packed to (C, 1, 1, Kp), as the direct family packs it."""
    return _direct.pack_weights(w)


def filters_key(pl: PointwiseFwdPlan) -> tuple[str, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result: the direct family's packing."""
    return ("direct",)


def tolerance(pl: PointwiseFwdPlan) -> float:
    return TOLERANCE
