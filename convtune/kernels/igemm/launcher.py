"""Implicit-GEMM forward on tensor cores (TF32): config, resources, analytic traffic, and the prepared launch.

Shapes (fp32 storage, contiguous): x (N, C, H, W); y (N, K, P, Q); the filter operand ``filt``, made once per
weight tensor by the ``igemm_pack`` launch: the weights as TF32-rounded B tiles in mma-fragment order over
KRp × Kp8 (KRp = ⌈C·R·S/64⌉·64, Kp8 = ⌈K/8⌉·8, zero outside), then the gather table (one int4 per reduction row:
input offset and (dh, dw) of tap (c, r, s)); ``igemm_fwd.cu`` states both layouts and the dataflow. The kernel is
one GEMM of M = N·P·Q output pixels × K output channels over KR = C·R·S, its A operand gathered from x on the fly.
Grid: (⌈M/BM⌉, ⌈K/BN⌉, splits); (WM·WN) warps, each owning a (BM/WM) × (BN/WN) tile of 16 × 8 mma tiles.

Global-memory traffic of the dataflow, in words, exactly what the kernel requests (zero-filled padding and tail
copies read nothing; the filter pack is a one-time cost per weight tensor and is not included). With
KRc = ⌈KR/BK⌉·BK, the reduction rows the chunks cover (rows past KR are zero in ``filt`` and read)::

    input  = ⌈K/BN⌉ · Σ_{n,p,q,c,r,s} [x tap in range] = ⌈K/BN⌉ · macs_nonpad / K
    weight = ⌈M/BM⌉ · KRc · Σ_nt min(BN, Kp8 − nt·BN)
    table  = ⌈M/BM⌉ · ⌈K/BN⌉ · KRc · 4   (each block reads each row's entry; its threads share it through L1)
    output = splits · N·K·P·Q stores (atomic adds when splits > 1) + N·K·P·Q for zeroing y first

Every block gathers its own A tile, so the input term is the non-padding MACs over K, once per channel tile.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.launch_geometry import resident_blocks, round_regs
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

SOURCE = "igemm_fwd.cu"
ENTRY = "igemm_fwd"
NHWC_ENTRY = "igemm_nhwc_fwd"
WARP = 32
MMA_M, MMA_N, MMA_K = 16, 8, 8   # mma.sync.m16n8k8 TF32
KR_ALIGN = 64                    # reduction rows of ``filt`` and the table: a multiple of every tile_k
K_ALIGN = 8                      # output channels of ``filt``: whole 8-wide B tiles
SMEM_PAD_1X1 = 8                 # floats of padding per A row of the 1×1 variant (conflict-free fragment reads)
PACK_ENTRY = "igemm_pack"
CHANNELS_LAST_FAMILY = "igemm_nhwc"
POINTWISE_FAMILY = "igemm_1x1"
#: family -> (entry, kernel body template) of the variants sharing this launcher's plan, filters and arguments
VARIANTS = {"igemm": ("igemm_fwd", "igemm_fwd_body"), CHANNELS_LAST_FAMILY: ("igemm_nhwc_fwd", "igemm_nhwc_body"),
            POINTWISE_FAMILY: ("igemm_1x1_fwd", "igemm_1x1_body")}
PACK_THREADS = 256
MIN_COMPUTE_CAPABILITY = (8, 0)  # mma.sync TF32 and cp.async: Ampere and newer
REGISTER_FILE_WORDS = 65536      # 32-bit registers per SM from sm_80 on (the main-loop choice without a machine)


@dataclass(frozen=True, slots=True)
class IgemmFwdConfig(KernelConfig):
    """Tunable parameters of the implicit-GEMM tensor-core forward kernel (see the module docstring)."""

    family = "igemm"
    direction = "fwd"

    tile_m: int = 128      # BM: output pixels (over all images) per block
    tile_n: int = 128      # BN: output channels per block
    tile_k: int = 16       # BK: reduction (C·R·S) elements per shared-memory stage
    warps_m: int = 2       # WM: warps along the pixels
    warps_n: int = 2       # WN: warps along the channels
    stages: int = 3        # shared-memory pipeline depth (2..5)
    splits: int = 1        # reduction split across blocks (atomic adds when > 1)

    @property
    def threads(self) -> int:
        return WARP * self.warps_m * self.warps_n

    @property
    def mma_tiles(self) -> tuple[int, int]:
        """(MI, NI): 16 × 8 mma tiles per warp along the pixels and the channels."""
        return self.tile_m // self.warps_m // MMA_M, self.tile_n // self.warps_n // MMA_N

    @property
    def accumulators(self) -> int:
        mi, ni = self.mma_tiles
        return 4 * mi * ni


def reduction_length(problem: ConvProblem) -> int:
    """KR = C·R·S, the GEMM's reduction."""
    return problem.C * problem.R * problem.S


def supports(problem: ConvProblem) -> bool:
    """Float32 storage with TF32 arithmetic allowed (``math="tf32"``), groups = 1, not causal."""
    p = problem
    return p.dtype == "float32" and p.math == "tf32" and p.groups == 1 and not p.causal


def padded_reduction(problem: ConvProblem) -> int:
    """KRp = ⌈C·R·S/64⌉·64: the reduction rows of the packed weights and the gather table."""
    return -(-reduction_length(problem) // KR_ALIGN) * KR_ALIGN


def padded_channels(problem: ConvProblem) -> int:
    """Kp8 = ⌈K/8⌉·8: the output channels of the packed weights."""
    return -(-problem.K // K_ALIGN) * K_ALIGN


def filter_words(problem: ConvProblem) -> int:
    """Words of the filter operand: KRp·Kp8 packed weights + 4·KRp table words."""
    krp = padded_reduction(problem)
    return krp * padded_channels(problem) + 4 * krp


@dataclass(frozen=True, slots=True)
class IgemmFwdPlan:
    """Everything derived from (problem, config): launch geometry, resources."""

    problem: ConvProblem
    config: IgemmFwdConfig
    kp8: int
    krp: int
    m_tiles: int
    n_tiles: int
    chunks_per_split: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int
    pipelined: bool = False   # NHWC / 1×1: the double-buffered-fragment main loop (else the plain loop)

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.m_tiles, self.n_tiles, self.config.splits)

    @property
    def blocks(self) -> int:
        return self.m_tiles * self.n_tiles * self.config.splits

    @property
    def threads(self) -> int:
        return self.config.threads

    @property
    def chunks(self) -> int:
        """⌈C·R·S / BK⌉ reduction chunks over all splits."""
        return -(-reduction_length(self.problem) // self.config.tile_k)

    @property
    def channels_last(self) -> bool:
        """The NHWC variant (:mod:`convtune.kernels.igemm.nhwc`): reduction order (r, s, c), 16-byte A copies."""
        return self.config.family == CHANNELS_LAST_FAMILY

    @property
    def pointwise(self) -> bool:
        """The 1×1 variant (:mod:`convtune.kernels.igemm.pointwise`): 16-byte A copies of 4 pixels from NCHW x."""
        return self.config.family == POINTWISE_FAMILY

    @property
    def entry(self) -> str:
        return VARIANTS[self.config.family][0]

    @property
    def a_copies(self) -> int:
        """A-tile copies one thread issues per chunk: 4-byte gathers, or 16-byte pieces in the NHWC and 1×1
        variants."""
        c = self.config
        return c.tile_k * c.tile_m // (1 if self.config.family == "igemm" else 4) // c.threads

    @property
    def b_copies(self) -> int:
        """16-byte B-tile copies one thread issues per chunk."""
        c = self.config
        return -(-c.tile_k * c.tile_n // 4 // c.threads)

    def template_args(self) -> tuple[int, ...]:
        c = self.config
        tile = (c.tile_m, c.tile_n, c.tile_k, c.warps_m, c.warps_n, c.stages)
        return tile if c.family == "igemm" else (*tile, int(self.pipelined))

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        entry, body = VARIANTS[self.config.family]
        return _family_source() + _WRAPPER.format(threads=self.config.threads, min_blocks=self.min_blocks,
                                                  targs=", ".join(str(a) for a in self.template_args()),
                                                  entry=entry, body=body)


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
{entry}(const float* __restrict__ x, const float* __restrict__ filt, float* __restrict__ y, int N, int C, int H,
          int W, int K, int P, int Q, int SH, int SW, int PH, int PW, int KR, int KRp, int NB8, int chunks_per_split) {{
  convtune::{body}<{targs}>(x, filt, y, N, C, H, W, K, P, Q, SH, SW, PH, PW, KR, KRp, NB8, chunks_per_split);
}}
"""


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def regs_estimate(config: IgemmFwdConfig, pipelined: bool = True) -> int:
    """Registers per thread, at most 255 (:func:`raw_regs_estimate` capped)."""
    return min(255, raw_regs_estimate(config, pipelined))


def raw_regs_estimate(config: IgemmFwdConfig, pipelined: bool = True) -> int:
    """Registers per thread the kernel needs, uncapped (the space refuses the configs whose pipelined loop is
    estimated far past 255: they spill).

    NCHW kernel ≈ accumulators + fragments (4·MI + 2·NI) + 3 per pixel column + 48 (addresses, loop) + 4 per A copy
    beyond 8 (the unrolled gathers' addresses stay live); fitted to ptxas on sm_90 (CUDA 13) over the corners:
    128×128 2×2 warps 222 (estimate 211), 128×32 k32 4×1 229 (195), 64×64 k32 2×2 126 (131).

    NHWC and 1×1 variants, pipelined main loop (tile_k ≥ 16) ≈ accumulators + 2 × fragments (double-buffered)
    + 4 per 16-byte A copy + 16 per k8 step of a chunk (the unrolled steps' addresses and hoisted loads) + 32; fitted
    to ptxas over 90 sampled configs of each (a 3×3 and a 1×1 256-channel layer): it is at or above the count on
    all but 5 and 1 of them (by at most 15 and 2), and above 255 on every sampled config that spilled but two
    (whose ``__launch_bounds__`` came from the former, lower estimate). The plain loop (and tile_k = 8):
    accumulators + fragments + 4 per A copy + 48 (NHWC), + 8 per k8 step + 48 (1×1: one pixel group per thread); at
    or above ptxas on every config the H200 variant run timed (benchmarks/igemm_variants.py)."""
    mi, ni = config.mma_tiles
    fragments = 4 * mi + 2 * ni
    if config.family in (CHANNELS_LAST_FAMILY, POINTWISE_FAMILY):
        copies = config.tile_k * config.tile_m // 4 // config.threads
        steps = config.tile_k // 8
        if pipelined and steps % 2 == 0:
            return config.accumulators + 2 * fragments + 4 * copies + 16 * steps + 32
        if config.family == CHANNELS_LAST_FAMILY:
            return config.accumulators + fragments + 4 * copies + 48
        return config.accumulators + fragments + 8 * steps + 48
    columns = max(1, config.tile_m // config.threads)
    a_copies = config.tile_k * config.tile_m // config.threads
    return config.accumulators + fragments + 3 * columns + 48 + 4 * max(0, a_copies - 8)


def _resident_by_regs(threads: int, smem_bytes: int, regs: int, machine: MachineModel | None) -> int:
    if machine is None:
        return max(1, REGISTER_FILE_WORDS // (threads * round_regs(regs)))
    return resident_blocks(threads, smem_bytes, regs, machine)


def launch_min_blocks(threads: int, smem_bytes: int, regs: int, machine: MachineModel) -> int:
    """``__launch_bounds__``' min_blocks: the blocks per SM the register estimate lets reside, 1..4."""
    return max(1, min(resident_blocks(threads, smem_bytes, regs, machine), 4))


def choose_main_loop(config: IgemmFwdConfig, smem_bytes: int, machine: MachineModel | None) -> bool:
    """Whether the NHWC / 1×1 kernel runs the pipelined main loop: for NHWC where the plain loop's lower register
    need would not let more blocks reside (more warps beat the overlap: on the H200 the plain loop took 0.65–0.8×
    the pipelined time at 2 → 3 blocks per SM, the pipelined 0.75–1.0× the plain one at equal residency); never
    for 1×1 (the plain loop was as fast or faster on every timed config, up to 1.19×). Measured in
    ``benchmarks/results/igemm_h200/v4_pipelined/variants``."""
    if config.family != CHANNELS_LAST_FAMILY or (config.tile_k // 8) % 2:
        return False
    pipe = _resident_by_regs(config.threads, smem_bytes, regs_estimate(config, True), machine)
    plain = _resident_by_regs(config.threads, smem_bytes, regs_estimate(config, False), machine)
    return pipe >= min(plain, 4)


def derive_plan(problem: ConvProblem, config: IgemmFwdConfig, machine: MachineModel | None = None) -> IgemmFwdPlan:
    """The launch plan of a config that keeps the space's rules (:func:`plan` checks them first); refuses what
    breaks ``machine``'s limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    chunks = -(-reduction_length(p) // c.tile_k)
    per_split = -(-chunks // c.splits)
    m = p.N * p.P * p.Q
    m_tiles, n_tiles = -(-m // c.tile_m), -(-p.K // c.tile_n)
    if m_tiles > 2**31 - 1 or n_tiles > 65535 or c.splits > 65535:
        raise InvalidConfig("tile_m", f"grid ({m_tiles}, {n_tiles}, {c.splits}) exceeds the CUDA grid limits")
    a_row = c.tile_m + (SMEM_PAD_1X1 if c.family == POINTWISE_FAMILY else 0)
    smem_bytes = 4 * c.stages * c.tile_k * (a_row + c.tile_n)
    pipelined = choose_main_loop(c, smem_bytes, machine)
    regs = regs_estimate(c, pipelined)
    min_blocks = 1
    if machine is not None:
        if machine.compute_capability < MIN_COMPUTE_CAPABILITY:
            raise InvalidConfig("problem", f"TF32 mma.sync needs compute capability 8.0, {machine.name} has "
                                           f"{machine.compute_capability}")
        if smem_bytes > machine.smem_per_block_bytes:
            raise InvalidConfig("stages", f"{smem_bytes} B of shared memory exceed the "
                                          f"{machine.smem_per_block_bytes} B per block of {machine.name}")
        if regs > machine.max_regs_per_thread:
            raise InvalidConfig("tile_m", f"~{regs} registers per thread exceed {machine.max_regs_per_thread}")
        min_blocks = launch_min_blocks(c.threads, smem_bytes, regs, machine)
    return IgemmFwdPlan(p, c, padded_channels(p), padded_reduction(p), m_tiles, n_tiles, per_split, smem_bytes, regs,
                        min_blocks, pipelined)


# ---- analytic traffic ---------------------------------------------------------------------------------
def traffic_words(pl: IgemmFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernel per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    out = p.output_elements
    rows = pl.chunks * c.tile_k
    weight_cols = sum(min(c.tile_n, pl.kp8 - nt * c.tile_n) for nt in range(pl.n_tiles))
    return {
        "input": pl.n_tiles * (p.macs_nonpad // p.K),
        "weight": pl.m_tiles * rows * weight_cols,
        "table": pl.m_tiles * pl.n_tiles * rows * 4,
        "output": out * c.splits + (out if c.splits > 1 else 0),
    }


def total_traffic_words(pl: IgemmFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: IgemmFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: IgemmFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), pl.entry, dynamic_smem_bytes=pl.smem_bytes)


def pack_layout(plan: Any, device: int, name: str, key: tuple[Any, ...], words: int, entry: str,
                args: tuple[int, ...], source: str | None = None) -> FilterLayout:
    """A filter operand of ``words`` float32 words made by one launch of the pack kernel ``entry`` of ``source``
    (default: this family's, igemm_fwd.cu; one thread per word, scalar ``args`` after (w, filters)): the TF32 and
    the 16-bit layouts."""
    def make_prep() -> PreparedLaunch:
        with driver().use_device(device):
            pack = load_kernel(source or _family_source(), entry)
        step = Launch(pack, grid3(-(-words // PACK_THREADS)), (PACK_THREADS, 1, 1), 0, pointers(0, 1), args)
        return PreparedLaunch(plan=plan, device=device, operands=("w", "filters"), steps=[step], kernels=pack,
                              output_shape=(words,), kind=entry)

    return FilterLayout(name, key, words, make_prep)


def run_pack(layout: FilterLayout, w: Any) -> Any:
    """The layout's filter operand made from w (CuPy) on the current device and stream."""
    cp = cupy_module()
    out = cp.empty(layout.words, dtype=cp.float32)
    src = cp.ascontiguousarray(w)
    prep = layout.prep
    assert prep is not None  # a pack layout always has its launch
    prep((data_pointer(src), data_pointer(out)), cp.cuda.get_current_stream().ptr)
    return out


def filter_layout(pl: IgemmFwdPlan, device: int) -> FilterLayout:
    """The filter operand (packed TF32 B tiles + gather table, module docstring) and its ``igemm_pack`` launch:
    operands (w, filters). The table depends on the map (H·W, W) and the dilation, so they are part of the key."""
    order = "(r, s, c)" if pl.channels_last else "(c, r, s)"
    return pack_layout(pl, device, f"igemm TF32 tiles (KRp={pl.krp}, Kp8={pl.kp8}, reduction {order}) + gather table",
                       layout_key(pl), filter_words(pl.problem), PACK_ENTRY, pack_arguments(pl))


def pack_arguments(pl: IgemmFwdPlan) -> tuple[int, ...]:
    """The scalar arguments of ``igemm_pack`` after (w, filt), in its order (the last: the reduction order,
    1 for the NHWC variant's (r, s, c))."""
    p = pl.problem
    return (p.K, reduction_length(p), pl.krp, pl.kp8 // K_ALIGN, p.R * p.S, p.S, p.H * p.W, p.W, p.dil_h, p.dil_w,
            p.C, int(pl.channels_last))


def kernel_arguments(pl: IgemmFwdPlan) -> tuple[int, ...]:
    """The scalar arguments after (x, filt, y), in the entry's order."""
    p = pl.problem
    return (p.N, p.C, p.H, p.W, p.K, p.P, p.Q, p.stride_h, p.stride_w, p.pad_h, p.pad_w, reduction_length(p),
            pl.krp, pl.kp8 // K_ALIGN, pl.chunks_per_split)


def prepare_plan(pl: IgemmFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, filters, y); split reductions zero y first (atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = []
    if c.splits > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                        kernel_arguments(pl)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=steps, kernels=kernels,
                          filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: IgemmFwdPlan, kernel: LoadedKernel, x: Any, filt: Any, y: Any, stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays (``filt`` from :func:`prepare_filters`); allocates nothing
    (zeroes y first when split).

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(filt), data_pointer(y)), stream_pointer(stream))


# ---- the launcher protocol every family provides (registry.KernelSpec.launcher) ------------------------
#: Relative error (‖y − y64‖₂ / ‖y64‖₂) a config must meet to be measured or served. TF32 rounds each operand to
#: 11 significant bits (unit roundoff u = 2⁻¹¹ ≈ 4.9e-4); on random data the products' relative errors add in
#: quadrature like the values, so the norm-wise error is ≈ √2·u ≈ 7e-4, independent of the reduction length. The
#: gate leaves 4× headroom; the GPU tests compare each case with cuDNN TF32 on the same inputs (≤ 2× its error).
TOLERANCE = 3e-3


def prepare_filters(pl: IgemmFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes, from w (K, C, R, S) float32 CuPy on the current device and stream."""
    return run_pack(filter_layout(pl, cupy_module().cuda.Device().id), w)


def layout_key(pl: IgemmFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one filter operand: same reduction order, map and dilation (the table)."""
    p = pl.problem
    return ("igemm", int(pl.channels_last), p.H * p.W, p.W, p.dil_h, p.dil_w)


def filters_key(pl: IgemmFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result."""
    return layout_key(pl)


def tolerance(pl: IgemmFwdPlan) -> float:
    return TOLERANCE
