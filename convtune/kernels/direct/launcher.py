"""Direct convolution forward: config, resources, analytic traffic, and the raw launcher.

Shapes (fp32, contiguous): x (N, C, H, W); packed weights wpk (C, R, S, Kp) with Kp = ⌈K/4⌉·4 (see
:func:`pack_weights`); y (N, K, P, Q). Grid: (⌈K/TK⌉, tiles_p·tiles_q, N·splits), tiles_p = ⌈P/TH⌉,
tiles_q = ⌈Q/TW⌉; one block per output tile (TH×TW pixels × TK channels) and reduction slice.

Global-memory traffic of the dataflow, in words, exactly what the kernel requests (zero-filled
halo/padding/tail copies read nothing); the weight pre-pack is a one-time cost per weight tensor and
is not included::

    input  = ⌈K/TK⌉ · N · C · Σ_tp rows(tp) · Σ_tq cols(tq)
             rows(tp) = |[tp·TH·SH − pad_h, … + IH) ∩ [0, H)|,  IH = (TH−1)·SH + (R−1)·DH + 1
             cols(tq) = |[tq·TW·SW − pad_w, … + IW) ∩ [0, W)|,  IW = (TW−1)·SW + (S−1)·DW + 1
                        (vec=4: 4 × the 16-byte segments of the aligned-down span inside [0, W))
    weight = N · tiles_p · tiles_q · C · R · S · Σ_kt min(TK, Kp − kt·TK)
    output = splits · N·K·P·Q stores (atomic adds when splits > 1) + N·K·P·Q for zeroing y first

``tests/kernels/direct/test_direct_traffic.py`` checks this against a simulation of the kernel's copy loops.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.launch_geometry import checked_min_blocks, spans_inside, tiles_sum
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

SOURCE = "direct_fwd.cu"
ENTRY = "direct_fwd"
PACK_ENTRY = "direct_pack_weights"
WARP = 32
SMEM_BANKS = 32


@dataclass(frozen=True, slots=True)
class DirectFwdConfig(KernelConfig):
    """Tunable parameters of the direct forward kernel (see the module docstring)."""

    family = "direct"
    direction = "fwd"

    tile_h: int = 4        # TH: output rows per block
    tile_w: int = 32       # TW: output cols per block
    tile_k: int = 64       # TK: output channels per block
    chunk_c: int = 8       # CB: input channels per shared-memory stage
    thread_h: int = 1      # PY: output rows per thread
    thread_w: int = 4      # PX: output cols per thread
    thread_k: int = 8      # KX: output channels per thread (multiple of 4)
    stages: int = 2        # shared-memory pipeline depth (1 = no double buffering)
    vec: int = 1           # input copy width in floats: 1, or 4 (16-byte copies; needs W % 4 == 0)
    splits: int = 1        # input-channel reduction split across blocks (atomic adds when > 1)

    @property
    def threads(self) -> int:
        return (self.tile_h // self.thread_h) * (self.tile_w // self.thread_w) * (self.tile_k // self.thread_k)

    @property
    def accumulators(self) -> int:
        return self.thread_h * self.thread_w * self.thread_k


@dataclass(frozen=True, slots=True)
class DirectFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: DirectFwdConfig
    patch_h: int
    patch_w: int
    patch_pitch: int
    window: int
    kp: int
    tiles_p: int
    tiles_q: int
    k_tiles: int
    chunks_per_split: int
    smem_bytes: int
    regs_estimate: int
    min_blocks: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (self.k_tiles, self.tiles_p * self.tiles_q, self.problem.N * self.config.splits)

    @property
    def blocks(self) -> int:
        gx, gy, gz = self.grid
        return gx * gy * gz

    def template_args(self) -> tuple[int | str, ...]:
        p, c = self.problem, self.config
        return (c.tile_h, c.tile_w, c.tile_k, c.chunk_c, c.thread_h, c.thread_w, c.thread_k, p.R, p.S,
                p.stride_h, p.stride_w, p.dil_h, p.dil_w, c.stages, c.vec, self.patch_pitch,
                "true" if c.splits > 1 else "false")

    def source(self) -> str:
        """Self-contained CUDA text: the family source plus an ``extern "C"`` entry for this plan."""
        return _family_source() + _WRAPPER.format(
            threads=self.config.threads, min_blocks=self.min_blocks,
            targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, {min_blocks})
direct_fwd(const float* __restrict__ x, const float* __restrict__ wpk, float* __restrict__ y, int C, int H, int W,
           int K, int Kp, int P, int Q, int pad_h, int pad_w, int tiles_q, int chunks_per_split, int splits) {{
  convtune::direct_fwd_body<{targs}>(x, wpk, y, C, H, W, K, Kp, P, Q, pad_h, pad_w, tiles_q,
                                     chunks_per_split, splits);
}}
"""


@cache
def _family_source() -> str:

    return kernel_text(SOURCE)


def patch_pitch(problem: ConvProblem, config: DirectFwdConfig, patch_w: int) -> int:
    c = config
    return _patch_pitch(c.tile_h, c.tile_w, c.tile_k, c.thread_h, c.thread_w, c.thread_k, c.vec,
                        problem.stride_h, problem.stride_w, patch_w)


@cache
def _patch_pitch(tile_h: int, tile_w: int, tile_k: int, thread_h: int, thread_w: int, thread_k: int, vec: int,
                 stride_h: int, stride_w: int, patch_w: int) -> int:
    """Row pitch (floats) of the staged input patch that minimises shared-memory bank conflicts.

    Lanes of a warp read their register windows at ``gy·PY·SH·pitch + gx·PX·SW + t``; with several
    rows per warp the pitch decides whether rows land on distinct banks. We pick the smallest pitch
    ≥ the patch width (+3 and a multiple of 4 for 16-byte copies) minimising the summed conflict degree
    over window taps.
    """
    need = patch_w + (3 if vec == 4 else 0)
    if vec == 4:
        need = -(-need // 4) * 4
    best_pitch, best_cost = need, -1
    for pitch in range(need, need + 33, 4 if vec == 4 else 1):
        cost = _window_conflicts(tile_h, tile_w, tile_k, thread_h, thread_w, thread_k, stride_h, stride_w, pitch)
        if best_cost < 0 or cost < best_cost:
            best_pitch, best_cost = pitch, cost
    return best_pitch


@cache
def _window_conflicts(tile_h: int, tile_w: int, tile_k: int, thread_h: int, thread_w: int, thread_k: int,
                      stride_h: int, stride_w: int, pitch: int) -> int:
    """Σ over the warps that read distinct pixel groups of the bank-conflict degree of their window loads (lanes
    at ``gy·PY·SH·pitch + gx·PX·SW + t``; 1 per warp when conflict-free)."""
    npg = (tile_h // thread_h) * (tile_w // thread_w)
    threads = npg * (tile_k // thread_k)
    groups_per_row = tile_w // thread_w
    # distinct pixel groups per warp (lanes of other channel groups read the same words: broadcast)
    warps = [sorted({t % npg for t in range(w0, min(w0 + WARP, threads))}) for w0 in range(0, min(threads, npg), WARP)]
    cost = 0
    for lanes in warps:
        base = [(pg // groups_per_row) * thread_h * stride_h * pitch + (pg % groups_per_row) * thread_w * stride_w
                for pg in lanes]
        # the conflict degree is the same for every window tap t (a uniform shift of all addresses)
        per_bank: dict[int, int] = {}
        for b in base:
            per_bank[b % SMEM_BANKS] = per_bank.get(b % SMEM_BANKS, 0) + 1
        cost += max(per_bank.values())
    return cost


def window_conflict_degree(pl: DirectFwdPlan) -> float:
    """Mean bank-conflict degree of the window loads over the warps of a block (1.0: conflict-free): a warp's
    lanes read their register windows ``PX·SW`` floats apart along a row, so strided layers and wide thread tiles
    serialise shared-memory reads that the pitch (chosen per plan) cannot spread."""
    p, c = pl.problem, pl.config
    npg = (c.tile_h // c.thread_h) * (c.tile_w // c.thread_w)
    warps = len(range(0, min(c.threads, npg), WARP))
    return _window_conflicts(c.tile_h, c.tile_w, c.tile_k, c.thread_h, c.thread_w, c.thread_k, p.stride_h,
                             p.stride_w, pl.patch_pitch) / warps


def regs_estimate(problem: ConvProblem, config: DirectFwdConfig) -> int:
    """Registers per thread ≈ accumulators + 3·window + thread_k/2 + 52.

    Fitted (least squares, rounded) to the ptxas counts of 645 uncapped kernels measured on the H200
    (benchmarks/results/vs_cudnn.json): the compiler keeps several rows' windows and copy addresses live.
    """
    window = (config.thread_w - 1) * problem.stride_w + (problem.S - 1) * problem.dil_w + 1
    return config.accumulators + 3 * window + config.thread_k // 2 + 52


def derive_plan(problem: ConvProblem, config: DirectFwdConfig, machine: MachineModel | None = None) -> DirectFwdPlan:
    """The launch plan of a config that keeps the space's rules (:func:`plan` checks them first; the
    enumeration yields only such configs); refuses what breaks ``machine``'s limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    chunks = -(-p.C // c.chunk_c)
    patch_h = (c.tile_h - 1) * p.stride_h + (p.R - 1) * p.dil_h + 1
    patch_w = (c.tile_w - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1
    pitch = patch_pitch(p, c, patch_w)
    # the input patch is padded to 16 bytes so the weight slice behind it is float4-aligned (as in the .cu)
    stage_floats = -(-c.chunk_c * patch_h * pitch // 4) * 4 + c.chunk_c * p.R * p.S * c.tile_k
    smem_bytes = 4 * c.stages * stage_floats
    tiles_p, tiles_q = -(-p.P // c.tile_h), -(-p.Q // c.tile_w)
    if tiles_p * tiles_q > 65535:
        raise InvalidConfig("tile_w", f"{tiles_p * tiles_q} spatial tiles exceed the grid's y limit 65535")
    if p.N * c.splits > 65535:
        raise InvalidConfig("splits", f"N·splits={p.N * c.splits} exceeds the grid's z limit 65535")
    regs = regs_estimate(p, c)
    min_blocks = 1
    if machine is not None:
        min_blocks = checked_min_blocks(c.threads, smem_bytes, regs, machine, "chunk_c", "thread_k")
    return DirectFwdPlan(p, c, patch_h, patch_w, pitch,
                         (c.thread_w - 1) * p.stride_w + (p.S - 1) * p.dil_w + 1, -(-p.K // 4) * 4,
                         tiles_p, tiles_q, -(-p.K // c.tile_k), -(-chunks // c.splits), smem_bytes, regs, min_blocks)


# ---- analytic traffic ---------------------------------------------------------------------------------
def traffic_words(pl: DirectFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernel per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    # sums over tiles in closed form (spans_inside, tiles_sum): the prediction of a 46,000-row map must not
    # cost 46,000 steps per configuration
    rows = spans_inside(pl.tiles_p, c.tile_h * p.stride_h, -p.pad_h, pl.patch_h, p.H)
    step_w = c.tile_w * p.stride_w
    if c.vec == 4:
        vectors = pl.patch_pitch // 4

        def vector_words(tq: int) -> int:  # 4 × the aligned float4 loads of the patch that start inside the row
            base = ((tq * step_w - p.pad_w) // 4) * 4
            first, last = max(0, -(base // 4)), min(vectors - 1, (p.W - 1 - base) // 4)
            return 4 * max(0, last - first + 1)

        # a tile whose first column is inside and whose last float4 starts inside reads every float4
        cols = tiles_sum(pl.tiles_q, step_w, -p.pad_w, 4 * vectors - 3, p.W, vector_words)
    else:
        cols = spans_inside(pl.tiles_q, step_w, -p.pad_w, pl.patch_w, p.W)
    k_words = min(pl.kp, pl.k_tiles * c.tile_k)  # Σ_kt min(tile_k, kp - kt·tile_k): every term is positive
    out = p.output_elements
    return {
        "input": pl.k_tiles * p.N * p.C * rows * cols,
        "weight": p.N * pl.tiles_p * pl.tiles_q * p.C * p.R * p.S * k_words,
        "output": out * c.splits + (out if c.splits > 1 else 0),
    }


def total_traffic_words(pl: DirectFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: DirectFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: DirectFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


@cache
def _pack_kernel() -> Any:
    return load_kernel(_family_source(), PACK_ENTRY).function


PACK_THREADS = 256


def pack_weights(w: Any, out: Any | None = None) -> Any:
    """w (K, C, R, S) float32 CuPy array -> wpk (C, R, S, Kp), zero-padded to Kp = ⌈K/4⌉·4."""
    cp = cupy_module()
    K, C, R, S = w.shape
    kp = -(-K // 4) * 4
    if out is None:
        out = cp.empty((C, R, S, kp), dtype=cp.float32)
    total = C * R * S * kp
    _pack_kernel()((-(-total // PACK_THREADS),), (PACK_THREADS,),
                   (cp.ascontiguousarray(w), out, cp.int32(K), cp.int32(kp), cp.int32(C * R * S)))
    return out


def filter_layout(pl: DirectFwdPlan, device: int, kernel: LoadedKernel | None = None) -> FilterLayout:
    """The packed layout wpk (C, R, S, Kp) and (built on first use) its packing launch: operands (w, filters)."""
    p = pl.problem
    crs = p.C * p.R * p.S

    def make_prep() -> PreparedLaunch:
        pack = kernel
        if pack is None:
            with driver().use_device(device):
                pack = load_kernel(_family_source(), PACK_ENTRY)
        step = Launch(pack, grid3(-(-crs * pl.kp // PACK_THREADS)), (PACK_THREADS, 1, 1), 0, pointers(0, 1),
                      (p.K, pl.kp, crs))
        return PreparedLaunch(plan=pl, device=device, operands=("w", "filters"), steps=[step], kernels=pack,
                              output_shape=(p.C, p.R, p.S, pl.kp), kind="direct_pack_weights")

    return FilterLayout(f"packed (C, R, S, Kp={pl.kp})", ("direct",), crs * pl.kp, make_prep)


def prepare_plan(pl: DirectFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, filters, y); split-C zeroes y first (its atomic adds)."""
    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    steps: list[Any] = []
    if c.splits > 1:
        steps.append(Memset(2, 4 * p.output_elements))
    steps.append(Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                        (p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q, p.pad_h, p.pad_w, pl.tiles_q, pl.chunks_per_split,
                         c.splits)))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=steps, kernels=kernels,
                          filters=filter_layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: DirectFwdPlan, kernel: LoadedKernel, x: Any, wpk: Any, y: Any, stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays; allocates nothing (zeroes y first when split).

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(wpk), data_pointer(y)), stream_pointer(stream))


# ---- the launcher protocol every family provides (registry.KernelSpec.launcher) ------------------------
TOLERANCE = 1e-5   # relative error against float64 a direct config must meet to be measured or served


def prepare_filters(pl: DirectFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: w packed to (C, R, S, Kp); the same for every plan."""
    return pack_weights(w)


def filters_key(pl: DirectFwdPlan) -> tuple[str, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result."""
    return ("direct",)


def tolerance(pl: DirectFwdPlan) -> float:
    return TOLERANCE
