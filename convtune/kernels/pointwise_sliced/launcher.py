"""The sliced pointwise (1×1) forward for small GEMMs (family ``pointwise_sliced``): config, plan, analytic traffic,
model and the prepared launch.

Shapes (contiguous NCHW, float32, bfloat16 or float16 storage; bfloat16 as CuPy ``uint16`` bits): x (N, C, H, W),
w (K, C, 1, 1), y (N, K, P, Q) with P = ⌈H/SH⌉, Q = ⌈W/SW⌉ (pad 0); the filter operand wpk (C, Kp) float32,
Kp = ⌈K/4⌉·4, wpk[c][k] = w[k][c] (0 past K), made by one ``pointwise_sliced_pack_*`` launch per weight tensor. The
kernel is one GEMM of M = N·P·Q pixels × K channels over C with fp32 sums; grid (⌈M/BM⌉, ⌈K/BN⌉), one launch.
A block's SLICES thread groups each reduce every CK = SLICES·BK-channel chunk's own BK channels and add their tiles
in shared memory at the end (``pointwise_sliced_fwd.cu``), so a small M·K gets many warps per tile without the
split-C workspace, memset and conversion launches of the other GEMM families.

Global-memory traffic in elements, what the kernel requests (x and y in the storage type, wpk in fp32 words)::

    input  = ⌈K/BN⌉ · C · N·P·Q
    weight = ⌈M/BM⌉ · C · Σ_kt min(BN, Kp − kt·BN)        (fp32 words)
    output = N·K·P·Q

``tests/kernels/pointwise_sliced/test_pointwise_sliced.py`` checks it against a simulation of the copy loops.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.igemm.launcher import pack_layout, run_pack
from convtune.kernels.launch_geometry import checked_min_blocks, cuda_core_fma_s, resident_blocks
from convtune.kernels.prepared import (
    FilterLayout,
    Launch,
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

FAMILY = "pointwise_sliced"
SOURCE = "pointwise_sliced_fwd.cu"
ENTRY = "pointwise_sliced_fwd"
CUDA_TYPES = {"float32": "float", "bfloat16": "convtune::bfloat16", "float16": "convtune::half16"}
PACK_ENTRIES = {"float32": "pointwise_sliced_pack_f32", "bfloat16": "pointwise_sliced_pack_bf16",
                "float16": "pointwise_sliced_pack_f16"}
#: relative error against float64 a config must meet: fp32 sums (the pointwise family's gate) and, for 16-bit y,
#: one rounding to the dtype (the direct_half family's gates)
TOLERANCES = {"float32": 1e-5, "bfloat16": 4e-3, "float16": 6e-4}
#: bytes of dynamic shared memory a block may use without an opt-in (every GPU gives 48 KB)
MAX_SMEM_BYTES = 48 * 1024
LAUNCH_OVERHEAD_S = 3e-6
#: fraction of the fp32 FMA peak the inner loop reaches (two vector shared loads per TM·TN FMAs, the barrier)
FMA_EFFICIENCY = 0.55
#: resident warps per SM the FMA rate needs
ACTIVE_WARPS = 16
#: the L2 bandwidth the blocks' requests see, relative to DRAM copy bandwidth
L2_OVER_DRAM = 3.0
#: global-load latency a chunk's register prefetch has to cover, and the block's sum of its slices' tiles
GLOBAL_LATENCY_S = 0.6e-6


@dataclass(frozen=True, slots=True)
class PointwiseSlicedFwdConfig(KernelConfig):
    """Tunable parameters of the sliced pointwise kernel (module docstring)."""

    family = FAMILY
    direction = "fwd"

    tile_m: int = 32       # BM: output pixels (over all images) per block
    tile_n: int = 32       # BN: output channels per block
    chunk_c: int = 8       # BK: input channels per group and chunk
    slices: int = 4        # SLICES: thread groups reducing disjoint channels of every chunk
    thread_m: int = 2      # TM: pixels per thread (2 or 4)
    thread_n: int = 2      # TN: output channels per thread (2 or 4)

    @property
    def group_threads(self) -> int:
        return (self.tile_m // self.thread_m) * (self.tile_n // self.thread_n)

    @property
    def threads(self) -> int:
        return self.group_threads * self.slices

    @property
    def channels_per_chunk(self) -> int:
        return self.chunk_c * self.slices

    @property
    def accumulators(self) -> int:
        return self.thread_m * self.thread_n


def supports(problem: ConvProblem) -> bool:
    """1×1 filters, no padding, groups = 1, float32 / bfloat16 / float16 (any stride), not causal."""
    p = problem
    return (p.R == 1 and p.S == 1 and p.pad_h == 0 and p.pad_w == 0
            and p.groups == 1 and p.dtype in CUDA_TYPES and not p.causal)


def smem_bytes(config: PointwiseSlicedFwdConfig) -> int:
    """Two staging buffers of CK·(BM + BN) floats, or the slices' partial tiles if larger."""
    c = config
    staging = 2 * c.channels_per_chunk * (c.tile_m + c.tile_n)
    partials = (c.slices - 1) * c.tile_m * c.tile_n
    return 4 * max(staging, partials)


def copies(config: PointwiseSlicedFwdConfig) -> tuple[int, int]:
    """(x, wpk) elements a thread copies per chunk: CK / (THREADS / BM) and CK / (THREADS / BN)."""
    c = config
    return (c.channels_per_chunk * c.tile_m // c.threads, c.channels_per_chunk * c.tile_n // c.threads)


def regs_estimate(config: PointwiseSlicedFwdConfig) -> int:
    """Accumulators + both prefetch registers of a chunk + TM + TN operands + 52 for addresses and loop control."""
    a, b = copies(config)
    return config.accumulators + a + b + config.thread_m + config.thread_n + 52


@dataclass(frozen=True, slots=True)
class PointwiseSlicedFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: PointwiseSlicedFwdConfig
    kp: int
    m_tiles: int
    k_tiles: int
    chunks: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.m_tiles, self.k_tiles, 1)

    @property
    def blocks(self) -> int:
        return self.m_tiles * self.k_tiles

    @property
    def threads(self) -> int:
        return self.config.threads

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (c.tile_m, c.tile_n, c.chunk_c, c.slices, c.thread_m, c.thread_n, p.stride_h, p.stride_w)

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        return _family_source() + _WRAPPER.format(threads=self.config.threads, min_blocks=self.min_blocks,
                                                  t=CUDA_TYPES[self.problem.dtype],
                                                  targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
pointwise_sliced_fwd(const {t}* __restrict__ x, const float* __restrict__ wpk, {t}* __restrict__ y, int N, int C,
                     int H, int W, int K, int Kp, int P, int Q) {{
  convtune::pointwise_sliced_body<{t}, {targs}>(x, wpk, y, N, C, H, W, K, Kp, P, Q);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def derive_plan(problem: ConvProblem, config: PointwiseSlicedFwdConfig,
                machine: MachineModel | None = None) -> PointwiseSlicedFwdPlan:
    """The launch plan of a config that keeps the space's rules; refuses what breaks the grid's, the shared-memory
    budget's or ``machine``'s limits.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs 1×1 convolutions without padding, groups=1, float32 / "
                                       f"bfloat16 / float16, not causal; got {p.key()}")
    m = p.N * p.P * p.Q
    m_tiles, k_tiles = -(-m // c.tile_m), -(-p.K // c.tile_n)
    if m_tiles > 2**31 - 1 or k_tiles > 65535:
        raise InvalidConfig("tile_m" if m_tiles > 2**31 - 1 else "tile_n",
                            f"grid ({m_tiles}, {k_tiles}) exceeds the CUDA grid limits")
    smem = smem_bytes(c)
    if smem > MAX_SMEM_BYTES:
        raise InvalidConfig("chunk_c", f"{smem} B of shared memory (two chunks of CK·(BM + BN) floats, or the "
                                       f"slices' partial tiles) exceed {MAX_SMEM_BYTES} B")
    regs = regs_estimate(c)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem, regs, machine, "chunk_c", "chunk_c")
    return PointwiseSlicedFwdPlan(p, c, -(-p.K // 4) * 4, m_tiles, k_tiles, -(-p.C // c.channels_per_chunk), smem,
                                  regs, min_blocks)


# ---- analytic traffic and model ----------------------------------------------------------------------------
def traffic_elements(pl: PointwiseSlicedFwdPlan) -> dict[str, int]:
    """Elements the kernel requests (module docstring; weights in fp32 words)."""
    p, c = pl.problem, pl.config
    return {
        "input": pl.k_tiles * p.C * p.N * p.P * p.Q,
        "weight": pl.m_tiles * p.C * min(pl.kp, pl.k_tiles * c.tile_n),
        "output": p.output_elements,
    }


def traffic_bytes(pl: PointwiseSlicedFwdPlan) -> int:
    t, size = traffic_elements(pl), pl.problem.itemsize_bytes
    return size * (t["input"] + t["output"]) + 4 * t["weight"]


def total_traffic_words(pl: PointwiseSlicedFwdPlan) -> int:
    """The requested bytes in 4-byte words (the registry's ``traffic_words``)."""
    return -(-traffic_bytes(pl) // 4)


def onchip_words(pl: PointwiseSlicedFwdPlan) -> int:
    """Fast memory one block holds: its shared memory and the accumulator registers, in 4-byte words."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


def tile_efficiency(pl: PointwiseSlicedFwdPlan) -> float:
    """Useful / computed MACs: tiles overhang M and K, chunks overhang C."""
    p, c = pl.problem, pl.config
    computed = pl.m_tiles * c.tile_m * pl.k_tiles * c.tile_n * pl.chunks * c.channels_per_chunk
    return p.N * p.P * p.Q * p.K * p.C / computed


def predict_s(pl: PointwiseSlicedFwdPlan, machine: MachineModel) -> float:
    """Model time: max(FMA time of the computed MACs at ``FMA_EFFICIENCY`` of the fp32 peak over the SMs the grid
    fills, scaled down below ``ACTIVE_WARPS`` resident warps per SM; the requested bytes at ``L2_OVER_DRAM`` × copy
    bandwidth; compulsory bytes at copy bandwidth) + one global latency per chunk the busiest SM's blocks wait
    unhidden + a launch."""
    p, c = pl.problem, pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return math.inf
    macs = p.N * p.K * p.P * p.Q * p.C / tile_efficiency(pl)
    fma_s, waves, warps = cuda_core_fma_s(macs, pl.blocks, c.threads, bps, FMA_EFFICIENCY, ACTIVE_WARPS, machine)
    latency_s = waves * pl.chunks * GLOBAL_LATENCY_S / max(1.0, warps / 4)
    l2_s = traffic_bytes(pl) / (L2_OVER_DRAM * machine.copy_bandwidth_bytes_per_s)
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    return max(fma_s + latency_s, l2_s, dram_s) + LAUNCH_OVERHEAD_S


# ---- launching -------------------------------------------------------------------------------------------
def compile_plan(pl: PointwiseSlicedFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def filter_layout(pl: PointwiseSlicedFwdPlan, device: int) -> FilterLayout:
    """wpk (C, Kp) float32 and its ``pointwise_sliced_pack_*`` launch: operands (w, filters)."""
    p = pl.problem
    entry = PACK_ENTRIES[p.dtype]
    return pack_layout(pl, device, f"wpk (C, Kp={pl.kp}) float32", (FAMILY, entry, pl.kp), p.C * pl.kp, entry,
                       (p.K, pl.kp, p.C), _family_source())


def prepare_plan(pl: PointwiseSlicedFwdPlan, device: int = 0,
                 kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch, no workspace, no memset."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.N, p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def prepare_filters(pl: PointwiseSlicedFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: wpk (C, Kp) float32 made from w (K, C, 1, 1) on the GPU."""
    cp = cupy_module()
    return run_pack(filter_layout(pl, cp.cuda.Device().id), w)


def filters_key(pl: PointwiseSlicedFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the layout depends on K and the dtype)."""
    return (FAMILY, PACK_ENTRIES[pl.problem.dtype], pl.kp)


def launch(pl: PointwiseSlicedFwdPlan, kernel: LoadedKernel, x: Any, filters: Any, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous CuPy arrays (16-bit as their bits); allocates nothing.

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters), data_pointer(y)), stream_pointer(stream))


def tolerance(pl: PointwiseSlicedFwdPlan) -> float:
    return TOLERANCES[pl.problem.dtype]
