"""Fused Winograd F(m×m, 3×3) forward: config, resources, analytic traffic, filter transform, launcher.

Shapes (fp32, contiguous): x (N, C, H, W); pre-transformed filters U (α², Cp, Kp), α = m + 2,
Cp = ⌈C/BC⌉·BC, Kp = ⌈K/BK⌉·BK, zero-padded (:func:`transform_filters`, once per weight tensor);
y (N, K, P, Q). Stride 1, dilation 1, R = S = 3, any padding. Tiles: T = N·tiles_p·tiles_q with
tiles_p = ⌈P/m⌉, tiles_q = ⌈Q/m⌉. Grid: (⌈T/BN⌉, Kp/BK); one block per BN tiles × BK channels.

Global-memory traffic of the dataflow, in words, exactly what the kernel requests (zero-filled
windows outside the image and channels past C read nothing)::

    input  = (Kp/BK) · N · C · Σ_tp rows(tp) · Σ_tq cols(tq)
             rows(tp) = |[tp·m − pad_h, … + α) ∩ [0, H)|,  cols(tq) = |[tq·m − pad_w, … + α) ∩ [0, W)|
    U      = ⌈T/BN⌉ · α² · Cp · Kp
    output = N·K·P·Q stores

The filter transform (K·C·9 reads, α²·Cp·Kp writes) is a one-time cost per weight tensor and is not
included. ``tests/kernels/test_winograd_traffic.py`` checks this against a simulation of the loads.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, cupy_module, kernel_text, load_kernel
from convtune.kernels.config import KernelConfig
from convtune.kernels.launch_geometry import round_regs, spans_inside
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
from convtune.kernels.winograd.transforms import device_code, matrices
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "winograd_fwd.cu"
ENTRY = "winograd_fwd"
WARP = 32
MAX_REGS = 255


@dataclass(frozen=True, slots=True)
class WinogradFwdConfig(KernelConfig):
    """Tunable parameters of the fused Winograd forward kernel (see the module docstring)."""

    family = "winograd"
    direction = "fwd"

    m: int = 2             # output tile m×m: F(2×2,3×3) or F(4×4,3×3)
    tile_n: int = 32       # BN: output tiles per block
    tile_k: int = 64       # BK: output channels per block (multiple of 4)
    chunk_c: int = 8       # BC: input channels per shared-memory stage
    thread_n: int = 2      # TN: tiles per thread
    thread_k: int = 4      # TK: output channels per thread
    stages: int = 2        # 1, or 2 (double-buffered shared memory, next chunk loaded during the multiply)

    @property
    def alpha(self) -> int:
        return self.m + 2

    @property
    def threads(self) -> int:
        return (self.tile_n // self.thread_n) * (self.tile_k // self.thread_k)

    @property
    def accumulators(self) -> int:
        return self.alpha ** 2 * self.thread_n * self.thread_k


@dataclass(frozen=True, slots=True)
class WinogradFwdPlan:
    """Everything derived from (problem, config): template arguments, launch geometry, resources."""

    problem: ConvProblem
    config: WinogradFwdConfig
    tiles_p: int
    tiles_q: int
    tiles: int
    cp: int
    kp: int
    windows_per_thread: int
    smem_bytes: int
    regs_estimate: int

    @property
    def grid(self) -> tuple[int, int, int]:
        return (-(-self.tiles // self.config.tile_n), self.kp // self.config.tile_k, 1)

    @property
    def blocks(self) -> int:
        gx, gy, _ = self.grid
        return gx * gy

    @property
    def chunks(self) -> int:
        return self.cp // self.config.chunk_c

    def template_args(self) -> tuple[int, ...]:
        c = self.config
        return (c.m, c.tile_n, c.tile_k, c.chunk_c, c.thread_n, c.thread_k, c.stages)

    def source(self) -> str:
        """Self-contained CUDA text: the F(m) transforms, the family source and this plan's entry."""
        return _family_source(self.config.m) + _WRAPPER.format(
            threads=self.config.threads, targs=", ".join(str(a) for a in self.template_args()))


_WRAPPER = """
extern "C" __global__ void __launch_bounds__({threads}, 1)
winograd_fwd(const float* __restrict__ x, const float* __restrict__ U, float* __restrict__ y, int C, int H, int W,
             int K, int P, int Q, int pad_h, int pad_w, int tiles_p, int tiles_q, int tiles, int Cp, int Kp) {{
  convtune::winograd_fwd_body<{targs}>(x, U, y, C, H, W, K, P, Q, pad_h, pad_w, tiles_p, tiles_q, tiles, Cp, Kp);
}}
"""


@cache
def _family_source(m: int) -> str:

    return device_code(m) + kernel_text(SOURCE)


def regs_estimate(config: WinogradFwdConfig) -> int:
    """Registers per thread ≈ accumulators + live input windows (stages = 2) + TK + TN + 40 for
    addresses and loop state. An estimate until ptxas counts measured on the GPU replace it."""
    c = config
    windows = (c.tile_n * c.chunk_c // c.threads) * c.alpha ** 2 if c.stages == 2 else 0
    return c.accumulators + windows + c.thread_k + c.thread_n + 40


def applies(problem: ConvProblem) -> str | None:
    """Why the family cannot run ``problem`` (None when it can)."""
    p = problem
    if p.groups != 1 or p.causal:
        return "groups=1 2-D convolutions only"
    if p.dtype != "float32":
        return f"float32 only, got {p.dtype}"
    if (p.R, p.S) != (3, 3):
        return f"3×3 filters only, got {p.R}×{p.S}"
    if (p.stride_h, p.stride_w) != (1, 1) or (p.dil_h, p.dil_w) != (1, 1):
        return "stride 1 and dilation 1 only"
    return None


def derive_plan(problem: ConvProblem, config: WinogradFwdConfig,
                machine: MachineModel | None = None) -> WinogradFwdPlan:
    """The plan of a config that keeps the space's rules (:func:`plan` checks them first; the enumeration
    yields only such configs); refuses what breaks the register limit, ``machine``'s limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    p, c = problem, config
    tiles_p, tiles_q = -(-p.P // c.m), -(-p.Q // c.m)
    tiles = p.N * tiles_p * tiles_q
    cp_, kp = -(-p.C // c.chunk_c) * c.chunk_c, -(-p.K // c.tile_k) * c.tile_k
    if -(-tiles // c.tile_n) > 2**31 - 1 or kp // c.tile_k > 65535:
        raise InvalidConfig("tile_k", "grid too large")
    alpha2 = c.alpha ** 2
    smem_bytes = 4 * c.stages * alpha2 * c.chunk_c * (c.tile_n + c.tile_k)
    regs = regs_estimate(c)
    if regs > MAX_REGS:
        raise InvalidConfig("thread_k", f"~{regs} registers per thread (accumulators α²·TN·TK = {c.accumulators}) "
                                        f"exceed {MAX_REGS}")
    if machine is not None:
        if smem_bytes > machine.smem_per_block_bytes:
            raise InvalidConfig("chunk_c", f"{smem_bytes} B of shared memory exceed the "
                                           f"{machine.smem_per_block_bytes} B per block of {machine.name}")
        if c.threads * round_regs(regs) > machine.regs_per_sm:
            raise InvalidConfig("threads", f"{c.threads} threads × ~{round_regs(regs)} registers exceed the "
                                           f"{machine.regs_per_sm} registers of an SM")
    return WinogradFwdPlan(p, c, tiles_p, tiles_q, tiles, cp_, kp, c.tile_n * c.chunk_c // c.threads, smem_bytes,
                           regs)


def traffic_words(pl: WinogradFwdPlan) -> dict[str, int]:
    """Words loaded/stored by the kernel per the formula in the module docstring."""
    p, c = pl.problem, pl.config
    rows = spans_inside(pl.tiles_p, c.m, -p.pad_h, c.alpha, p.H)
    cols = spans_inside(pl.tiles_q, c.m, -p.pad_w, c.alpha, p.W)
    return {
        "input": (pl.kp // c.tile_k) * p.N * p.C * rows * cols,
        "filter": pl.grid[0] * c.alpha ** 2 * pl.cp * pl.kp,
        "output": p.output_elements,
    }


def total_traffic_words(pl: WinogradFwdPlan) -> int:
    return sum(traffic_words(pl).values())


def onchip_words(pl: WinogradFwdPlan) -> int:
    """Fast memory one block holds: every shared-memory stage plus the accumulator registers."""
    return pl.smem_bytes // 4 + pl.config.accumulators * pl.config.threads


# ---- launching ----------------------------------------------------------------------------------------
def compile_plan(pl: WinogradFwdPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def transform_filters(w: Any, m: int, cp_: int, kp: int) -> Any:
    """w (K, C, r, r) CuPy array -> U (α², cp_, kp) float32 (α = m + r − 1), U[ξ, c, k] = (G g_kc Gᵀ)[ξ] computed
    in float64 (once per weight tensor: accuracy is free here), zero for c ≥ C or k ≥ K."""
    cp = cupy_module()
    k, c, r = w.shape[0], w.shape[1], w.shape[-1]
    g = cp.asarray(matrices(m, r)[1])
    alpha = m + r - 1
    u = cp.einsum("ar,kcrs,bs->abck", g, w.astype(cp.float64), g).reshape(alpha * alpha, c, k)
    out = cp.zeros((alpha * alpha, cp_, kp), dtype=cp.float32)
    out[:, :c, :k] = u
    return out


def prepare_plan(pl: WinogradFwdPlan, device: int = 0, kernels: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, filters = U, y); the filter layout's prep computes U."""
    from convtune.kernels.winograd import filters

    p, c = pl.problem, pl.config
    if kernels is None:
        with driver().use_device(device):
            kernels = compile_plan(pl)
    step = Launch(kernels, grid3(pl.grid), (c.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.C, p.H, p.W, p.K, p.P, p.Q, p.pad_h, p.pad_w, pl.tiles_p, pl.tiles_q, pl.tiles, pl.cp, pl.kp))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "filters", "y"), steps=[step], kernels=kernels,
                          filters=filters.layout(pl, device), output_shape=(p.N, p.K, p.P, p.Q))


def launch(pl: WinogradFwdPlan, kernel: LoadedKernel, x: Any, u: Any, y: Any, stream: Any | None = None) -> None:
    """Run the kernel on contiguous float32 CuPy arrays (u from :func:`transform_filters` with the plan's
    cp, kp); allocates nothing.

    Raises:
        LaunchError: the launch failed.
    """
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(u), data_pointer(y)), stream_pointer(stream))


# ---- the launcher protocol every family provides (registry.KernelSpec.launcher) ------------------------
#: relative error against float64 a config must meet to be measured or served. F(4,3) amplifies rounding:
#: measured 1.1e-6–2.9e-6 for m = 4 and 2.6e-7–7e-7 for m = 2 on the public suite (C ≤ 512), so these
#: leave about 30× headroom for deeper reductions while still rejecting any indexing or transform bug.
TOLERANCE = {2: 2e-5, 4: 1e-4}


def prepare_filters(pl: WinogradFwdPlan, w: Any) -> Any:
    """The filter operand ``launch`` takes: U = G g Gᵀ, (α², Cp, Kp)."""
    return transform_filters(w, pl.config.m, pl.cp, pl.kp)


def filters_key(pl: WinogradFwdPlan) -> tuple[Any, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the fused and the unfused path alike)."""
    return ("winograd", pl.config.m, pl.cp, pl.kp)


def tolerance(pl: WinogradFwdPlan) -> float:
    return TOLERANCE[pl.config.m]
