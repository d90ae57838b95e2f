"""Direct convolution forward on the CUDA cores for bfloat16 / float16 (family ``direct_half``): config, plan,
analytic traffic, model and the prepared launch.

Shapes (16-bit storage, contiguous NCHW): x (N, C, H, W), w (K, C, R, S) as given (no packing: the block converts
its KB filters to fp32 in shared memory), y (N, K, P, Q); fp32 accumulation, y rounded once (round to nearest even).
For few-channel layers with short reductions (C ≤ :data:`MAX_CHANNELS`, C·R·S ≤ :data:`MAX_REDUCTION`: 3×3 stems,
LeNet's first layer) where the tensor-core families pad C to
8–64 channels and change x's layout first. Grid (⌈Q/(TX·PT)⌉, ⌈P/TY⌉, N·⌈K/KB⌉), TX × TY threads; a thread computes
PT consecutive outputs of one row for KB output channels (``direct_half_fwd.cu`` states the loops).

Global-memory traffic in 16-bit elements, what the blocks request (each block's distinct input elements: the hull of
the rows and columns its threads read, clipped to the image, per channel; every block reads its KB filters)::

    input  = Σ_blocks C · rows(block) · cols(block)
    weight = blocks · KB · C·R·S     (filters past K read nothing: ≤)
    output = N·K·P·Q

with rows(block) = |[p0·SH − PH, (p1 − 1)·SH − PH + (R − 1)·DH] ∩ [0, H)| over the block's output rows [p0, p1), and
cols likewise. ``tests/kernels/direct_half/test_direct_half.py`` checks it against a simulation of the loads.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.launch_geometry import checked_min_blocks, cuda_core_fma_s, resident_blocks
from convtune.kernels.prepared import (
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

FAMILY = "direct_half"
SOURCE = "direct_half_fwd.cu"
ENTRY = "direct_half_fwd"
#: the most input channels the family takes: beyond, the tensor-core families' padding is small and they win
MAX_CHANNELS = 16
#: the longest reduction C·R·S it takes: on the 13 few-channel layers of benchmarks/suites/stems.json (H100) it was
#: the fastest 16-bit family on all three with C·R·S ≤ 27 (LeNet conv1, the MobileNetV2 and ENet stems: 1.09–2.1× the
#: tensor-core families' best) and on none of the ten with C·R·S ≥ 147 (7×7 and 11×11 stems, GoogLeNet's C = 16 5×5:
#: 1.2–3.3× slower), where the models' under-prediction of both sides made the untuned choice fragile
MAX_REDUCTION = 64
#: fp32 filter bytes a block may stage (the 48 KB every GPU gives without an opt-in attribute)
MAX_FILTER_BYTES = 48 * 1024
CUDA_TYPES = {"bfloat16": "convtune::bfloat16", "float16": "convtune::half16"}
#: relative error against float64 a config must meet: one rounding of y in the dtype (2^-8 bf16, 2^-11 fp16 relative,
#: about 0.4 of it in L2 norm) plus fp32 sums; the 16-bit tensor-core families' gates
TOLERANCES = {"bfloat16": 4e-3, "float16": 6e-4}
LAUNCH_OVERHEAD_S = 3e-6
#: fraction of the fp32 FMA peak the unrolled loop reaches (loads, shared broadcasts and the row loop between FMAs)
FMA_EFFICIENCY = 0.5
#: resident warps per SM the FMA rate needs (a few-block grid of 128-thread blocks on GoogLeNet's 14×14 5×5 layer ran
#: at a quarter of the rate the model gave it: 24 µs against 8.4 predicted on an H100)
ACTIVE_WARPS = 16
#: the L2 bandwidth the blocks' requests see, relative to DRAM copy bandwidth
L2_OVER_DRAM = 3.0


@dataclass(frozen=True, slots=True)
class DirectHalfFwdConfig(KernelConfig):
    """Tunable parameters of the 16-bit direct kernel (module docstring)."""

    family = FAMILY
    direction = "fwd"

    k_block: int = 16      # KB: output channels per thread (and block), a multiple of 4
    pixels: int = 2        # PT: consecutive outputs of one row per thread
    threads_x: int = 32    # TX: threads along a row
    threads_y: int = 4     # TY: output rows per block

    @property
    def threads(self) -> int:
        return self.threads_x * self.threads_y

    @property
    def accumulators(self) -> int:
        return self.k_block * self.pixels


def supports(problem: ConvProblem) -> bool:
    """bfloat16 / float16, groups = 1, not causal, C ≤ :data:`MAX_CHANNELS` and C·R·S ≤ :data:`MAX_REDUCTION`."""
    p = problem
    return (p.dtype in CUDA_TYPES and p.groups == 1 and not p.causal and p.C <= MAX_CHANNELS
            and p.C * p.R * p.S <= MAX_REDUCTION)


def span(problem: ConvProblem, config: DirectHalfFwdConfig) -> int:
    """Input elements of one row a thread reads per (c, r): (PT − 1)·SW + (S − 1)·DW + 1."""
    p = problem
    return (config.pixels - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1


@dataclass(frozen=True, slots=True)
class DirectHalfFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: DirectHalfFwdConfig
    x_tiles: int
    y_tiles: int
    k_tiles: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.x_tiles, self.y_tiles, self.problem.N * self.k_tiles)

    @property
    def blocks(self) -> int:
        return self.x_tiles * self.y_tiles * self.problem.N * self.k_tiles

    @property
    def threads(self) -> int:
        return self.config.threads

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (c.k_block, c.pixels, c.threads_x, c.threads_y, p.R, p.S, p.stride_h, p.stride_w, p.dil_h, p.dil_w)

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        c = self.config
        return _family_source() + _WRAPPER.format(threads=c.threads, min_blocks=self.min_blocks,
                                                  t=CUDA_TYPES[self.problem.dtype],
                                                  targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
direct_half_fwd(const {t}* __restrict__ x, const {t}* __restrict__ w, {t}* __restrict__ y, int C, int H, int W, int K,
                int P, int Q, int PH, int PW, int k_tiles) {{
  convtune::direct_half_fwd_body<{t}, {targs}>(x, w, y, C, H, W, K, P, Q, PH, PW, k_tiles);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def regs_estimate(problem: ConvProblem, config: DirectHalfFwdConfig) -> int:
    """Accumulators + the row's span + 4 filter values + 30 for addresses and loop control."""
    return config.accumulators + span(problem, config) + 4 + 30


def derive_plan(problem: ConvProblem, config: DirectHalfFwdConfig,
                machine: MachineModel | None = None) -> DirectHalfFwdPlan:
    """The launch plan of a config that keeps the space's rules; refuses what breaks the grid's or ``machine``'s
    limits.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    if not supports(p):
        raise InvalidConfig("problem", f"{FAMILY} runs bfloat16 / float16 convolutions with C ≤ {MAX_CHANNELS} and "
                                       f"C·R·S ≤ {MAX_REDUCTION}, groups=1, not causal; got {p.key()}")
    x_tiles, y_tiles, k_tiles = -(-p.Q // (c.threads_x * c.pixels)), -(-p.P // c.threads_y), -(-p.K // c.k_block)
    if y_tiles > 65535 or p.N * k_tiles > 65535:
        raise InvalidConfig("threads_y" if y_tiles > 65535 else "k_block",
                            f"grid ({x_tiles}, {y_tiles}, {p.N * k_tiles}) exceeds the CUDA grid limits")
    smem = 4 * c.k_block * p.C * p.R * p.S
    if smem > MAX_FILTER_BYTES:
        raise InvalidConfig("k_block", f"{smem} B of fp32 filters (KB·C·R·S·4) exceed {MAX_FILTER_BYTES} B: lower "
                                       f"k_block")
    regs = regs_estimate(p, c)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem, regs, machine, "k_block", "pixels")
    return DirectHalfFwdPlan(p, c, x_tiles, y_tiles, k_tiles, smem, regs, min_blocks)


# ---- analytic traffic and model ----------------------------------------------------------------------------
def _hull(first_out: int, last_out: int, stride: int, pad: int, taps: int, dil: int, size: int) -> int:
    """Input positions in the hull of what outputs first_out..last_out read along one axis, clipped to [0, size)."""
    lo = max(0, first_out * stride - pad)
    hi = min(size - 1, last_out * stride - pad + (taps - 1) * dil)
    return max(0, hi - lo + 1)


def _axis_sum(outputs: int, per_tile: int, stride: int, pad: int, taps: int, dil: int, size: int) -> int:
    """Σ over the tiles of one axis of the hull each tile's outputs read."""
    return sum(_hull(t * per_tile, min(outputs, (t + 1) * per_tile) - 1, stride, pad, taps, dil, size)
               for t in range(-(-outputs // per_tile)))


def traffic_elements(pl: DirectHalfFwdPlan) -> dict[str, int]:
    """Elements (2 bytes) the blocks request (module docstring)."""
    p, c = pl.problem, pl.config
    rows = _axis_sum(p.P, c.threads_y, p.stride_h, p.pad_h, p.R, p.dil_h, p.H)
    cols = _axis_sum(p.Q, c.threads_x * c.pixels, p.stride_w, p.pad_w, p.S, p.dil_w, p.W)
    return {
        "input": p.N * pl.k_tiles * p.C * rows * cols,
        "weight": pl.blocks * c.k_block * p.C * p.R * p.S,
        "output": p.output_elements,
    }


def total_traffic_elements(pl: DirectHalfFwdPlan) -> int:
    return sum(traffic_elements(pl).values())


def onchip_elements(pl: DirectHalfFwdPlan) -> int:
    """Fast memory one block holds, in 2-byte elements: its fp32 filters and the accumulator registers."""
    return 2 * (pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads)


def tile_efficiency(pl: DirectHalfFwdPlan) -> float:
    """Useful / computed MACs: row tiles and channel tiles overhang P, Q and K."""
    p, c = pl.problem, pl.config
    computed = pl.x_tiles * c.threads_x * c.pixels * pl.y_tiles * c.threads_y * pl.k_tiles * c.k_block
    return p.P * p.Q * p.K / computed


def predict_s(pl: DirectHalfFwdPlan, machine: MachineModel) -> float:
    """Model time: max(FMA time of the computed MACs at ``FMA_EFFICIENCY`` of the fp32 peak over the SMs the grid
    fills, scaled down below ``ACTIVE_WARPS`` resident warps per SM; the requested bytes at ``L2_OVER_DRAM`` × copy
    bandwidth; compulsory bytes at copy bandwidth) + a launch."""
    p, c = pl.problem, pl.config
    bps = resident_blocks(c.threads, pl.smem_bytes, pl.regs_estimate, machine)
    if bps == 0:
        return math.inf
    # a thread's FMAs form KB·PT chains between loads: below ACTIVE_WARPS warps an SM cannot hide their latency
    macs = p.N * p.K * p.P * p.Q * p.C * p.R * p.S / tile_efficiency(pl)
    fma_s, _, _ = cuda_core_fma_s(macs, pl.blocks, c.threads, bps, FMA_EFFICIENCY, ACTIVE_WARPS, machine)
    l2_s = 2 * total_traffic_elements(pl) / (L2_OVER_DRAM * machine.copy_bandwidth_bytes_per_s)
    dram_s = p.compulsory_bytes / machine.copy_bandwidth_bytes_per_s
    return max(fma_s, l2_s, dram_s) + LAUNCH_OVERHEAD_S


# ---- launching -------------------------------------------------------------------------------------------
def compile_plan(pl: DirectHalfFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def prepare_plan(pl: DirectHalfFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """Operands (x, filters, y): one launch; the filters are w itself (no packing)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels, grid3(pl.grid), (c.threads_x, c.threads_y, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.C, p.H, p.W, p.K, p.P, p.Q, p.pad_h, p.pad_w, pl.k_tiles))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          output_shape=(p.N, p.K, p.P, p.Q))


def prepare_filters(pl: DirectHalfFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: w (K, C, R, S) itself, contiguous 16-bit (bfloat16 as uint16 bits)."""
    return cupy_module().ascontiguousarray(w)


def filters_key(pl: DirectHalfFwdPlan) -> tuple[str, ...]:
    """Every plan takes w as it is."""
    return (FAMILY,)


def launch(pl: DirectHalfFwdPlan, kernel: LoadedKernel, x: Any, filters: Any, y: Any,
           stream: Any | None = None) -> None:
    """Run the kernel on contiguous 16-bit CuPy arrays; allocates nothing.

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(filters), data_pointer(y)), stream_pointer(stream))


def tolerance(pl: DirectHalfFwdPlan) -> float:
    return TOLERANCES[pl.problem.dtype]
