"""2-D depthwise forward plans and launcher (family ``depthwise2d_tiled``, source ``dw2d_fwd.cu``).

Shapes (fp32, contiguous): x (N, C, H, W), w (C, 1, R, S), y (N, C, P, Q); groups = C, one filter per
channel (channel multiplier 1), any R×S, any stride, any padding, dilation 1::

    y[n,c,p,q] = Σ_{r<R, s<S} w[c,0,r,s] · x[n, c, p·stride_h − pad_h + r, q·stride_w − pad_w + s]

Grid: ⌈N·C / planes⌉ · tiles_p · tiles_q blocks (tile fastest), tiles_p = ⌈P/tile_h⌉, tiles_q = ⌈Q/tile_w⌉;
threads = planes · tile_h · tile_w / outputs_per_thread. Shared memory: planes · IH · pitch floats,
IH = (tile_h−1)·stride_h + R, IW = (tile_w−1)·stride_w + S, pitch ≥ IW.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.compile import LoadedKernel, kernel_text, load_kernel
from convtune.kernels.depthwise import family as _shared
from convtune.kernels.depthwise.arrays import check_array
from convtune.kernels.depthwise.configs import Dw2dTiledFwdConfig
from convtune.kernels.depthwise.dtypes import FP32_ONLY, check_dtype
from convtune.kernels.depthwise.values import PLANES_2D, TILE_2D, VW_2D
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
from convtune.kernels.search_space import Rule, SearchSpace, Values
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

SOURCE = "dw2d_fwd.cu"
ENTRY = "dw2d_tiled_fwd"
WARP = 32
MAX_TAPS = 81          # R·S taps live in registers (9×9)
MAX_WINDOW = 64        # register window of (VW−1)·stride_w + S inputs


@dataclass(frozen=True, slots=True)
class Dw2dPlan:
    problem: ConvProblem
    config: Dw2dTiledFwdConfig
    patch_h: int
    patch_w: int
    pitch: int
    tiles_p: int
    tiles_q: int
    grid: int
    smem_bytes: int
    regs_estimate: int

    @property
    def threads(self) -> int:
        return self.config.threads

    @property
    def planes_total(self) -> int:
        return self.problem.N * self.problem.C

    @property
    def entry(self) -> str:
        return ENTRY

    def template_args(self) -> tuple[int, ...]:
        p, c = self.problem, self.config
        return (p.R, p.S, p.stride_h, p.stride_w, c.tile_h, c.tile_w, c.outputs_per_thread, c.planes, self.pitch)

    def wrapper(self, entry: str | None = None) -> str:
        targs = ", ".join(str(a) for a in self.template_args())
        return f"""
extern "C" __global__ void __launch_bounds__({self.threads})
{entry or ENTRY}(const float* __restrict__ x, const float* __restrict__ w, float* __restrict__ y, int NC, int C,
                 int H, int W, int P, int Q, int pad_h, int pad_w, int tiles_q, int ntiles) {{
  convtune::dw::dw2d_fwd_body<{targs}>(x, w, y, NC, C, H, W, P, Q, pad_h, pad_w, tiles_q, ntiles);
}}
"""

    def source(self) -> str:
        return _family_source() + self.wrapper()


@cache
def _family_source() -> str:
    return kernel_text(SOURCE)


def applies(problem: ConvProblem, dtypes: tuple[str, ...] = FP32_ONLY) -> str | None:
    """Why a 2-D kernel taking ``dtypes`` cannot run ``problem`` (None when it can)."""
    p = problem
    if p.causal:
        return "causal 1-D problems use the depthwise1d kernels"
    if p.groups != p.C or p.K != p.C:
        return f"depthwise with channel multiplier 1 only (groups = C = K), got C={p.C} K={p.K} groups={p.groups}"
    if p.dtype not in dtypes:
        return f"{', '.join(dtypes)} only, got {p.dtype}"
    if (p.dil_h, p.dil_w) != (1, 1):
        return "dilation 1 only"
    if p.R * p.S > MAX_TAPS:
        return f"R·S = {p.R * p.S} taps exceed {MAX_TAPS}"
    return None


def pitch_for(patch_w: int, tile_w: int, vw: int, stride_w: int) -> int:
    """Smallest pitch ≥ patch_w that puts consecutive tile rows of a warp on different banks: lanes of one
    row read words ow·stride_w apart, the next row starts a pitch later; an odd pitch spreads rows."""
    pitch = patch_w
    if (tile_w // vw) < WARP and pitch % 2 == 0:
        pitch += 1
    return pitch


def _threads(v: Values) -> int:
    return v["planes"] * v["tile_h"] * (v["tile_w"] // v["outputs_per_thread"])


@cache
def spaces(problem: ConvProblem) -> tuple[SearchSpace, ...]:
    """The 2-D tiled forward's space: one space per tile of :data:`~convtune.kernels.depthwise.values.TILE_2D`
    (in order) × outputs per thread × planes; several planes only for small images (two tiles cover the plane).
    :func:`plan` enforces the rules (every space has the same)."""
    p = problem
    rules = (
        Rule("vw_divides_tile_w", ("tile_w", "outputs_per_thread"),
             lambda v: v["tile_w"] % v["outputs_per_thread"] == 0,
             "outputs_per_thread={outputs_per_thread} must divide tile_w={tile_w}"),
        Rule("threads", ("tile_h", "tile_w", "outputs_per_thread", "planes"),
             lambda v: WARP <= _threads(v) <= 1024 and _threads(v) % WARP == 0,
             lambda v: f"planes·tile_h·tile_w/outputs_per_thread = {_threads(v)} threads: must be a multiple of 32 "
                       "in [32, 1024]", field="tile_w"),
        Rule("register_window", ("outputs_per_thread",),
             lambda v: (v["outputs_per_thread"] - 1) * p.stride_w + p.S <= MAX_WINDOW,
             lambda v: f"register window (VW−1)·stride_w + S = {(v['outputs_per_thread'] - 1) * p.stride_w + p.S} "
                       f"exceeds {MAX_WINDOW}"),
    )
    small_images = Rule("planes_small_images", ("tile_h", "tile_w", "planes"),
                        lambda v: v["planes"] == 1 or 2 * v["tile_h"] * v["tile_w"] >= p.P * p.Q,
                        f"planes={{planes}}: several planes per block only when 2·tile_h·tile_w ≥ P·Q={p.P * p.Q}",
                        field="planes")
    return tuple(SearchSpace({"tile_h": (th,), "tile_w": (tw,), "outputs_per_thread": VW_2D, "planes": PLANES_2D},
                             rules=rules, prune=(small_images,)) for th, tw in TILE_2D)


def plan(problem: ConvProblem, config: Dw2dTiledFwdConfig, machine: MachineModel | None = None) -> Dw2dPlan:
    """Validate ``config`` for ``problem`` and derive the launch plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule, with the allowed range.
    """
    p, c = problem, config
    check_dtype(p, FP32_ONLY, "depthwise2d_tiled")
    why = applies(p)
    if why:
        raise InvalidConfig("problem", f"depthwise2d_tiled: {why}")
    spaces(p)[0].check(c)  # the rules: outputs per thread divide the tile, 32..1024 threads, register window
    window = (c.outputs_per_thread - 1) * p.stride_w + p.S
    patch_h = (c.tile_h - 1) * p.stride_h + p.R
    patch_w = (c.tile_w - 1) * p.stride_w + p.S
    pitch = pitch_for(patch_w, c.tile_w, c.outputs_per_thread, p.stride_w)
    smem_bytes = 4 * c.planes * patch_h * pitch
    limit = machine.smem_per_block_bytes if machine is not None else 232_448
    if smem_bytes > limit:
        raise InvalidConfig("tile_h", f"{smem_bytes} B of shared memory exceed the {limit} B per block")
    tiles_p, tiles_q = -(-p.P // c.tile_h), -(-p.Q // c.tile_w)
    grid = -(-p.N * p.C // c.planes) * tiles_p * tiles_q
    if grid > 2**31 - 1:
        raise InvalidConfig("tile_w", f"{grid} blocks exceed the grid limit")
    regs = p.R * p.S + window + c.outputs_per_thread + 24
    if regs > 255:
        raise InvalidConfig("outputs_per_thread", f"~{regs} registers per thread exceed 255")
    return Dw2dPlan(p, c, patch_h, patch_w, pitch, tiles_p, tiles_q, grid, smem_bytes, regs)


def traffic_words(pl: Dw2dPlan) -> dict[str, int]:
    """Words the kernel requests: each block reads its planes' patches inside the image (zero fill reads
    nothing), each thread of a real plane its plane's R·S taps, and every output is stored once::

        x = N·C · Σ_tp rows(tp) · Σ_tq cols(tq),  rows(tp) = |[tp·TH·SH − pad_h, … + IH) ∩ [0, H)|
        w = N·C · tiles_p·tiles_q · threads_per_plane · R·S
        y = N·C·P·Q
    """
    from convtune.kernels.launch_geometry import spans_inside

    p, c = pl.problem, pl.config
    rows = spans_inside(pl.tiles_p, c.tile_h * p.stride_h, -p.pad_h, pl.patch_h, p.H)
    cols = spans_inside(pl.tiles_q, c.tile_w * p.stride_w, -p.pad_w, pl.patch_w, p.W)
    planes = p.N * p.C
    per_plane_threads = c.threads // c.planes
    return {"x": planes * rows * cols, "w": planes * pl.tiles_p * pl.tiles_q * per_plane_threads * p.R * p.S,
            "y": planes * p.P * p.Q}


def compile_plan(pl: Dw2dPlan) -> LoadedKernel:
    return load_kernel(pl.source(), ENTRY, dynamic_smem_bytes=pl.smem_bytes)


def prepare_plan(pl: Dw2dPlan, device: int = 0, kernel: LoadedKernel | None = None) -> PreparedLaunch:
    """The plan as a prepared launch: operands (x, w, y), the weights as they are (C, 1, R, S)."""
    p = pl.problem
    if kernel is None:
        with driver().use_device(device):
            kernel = compile_plan(pl)
    step = Launch(kernel, grid3(pl.grid), (pl.threads, 1, 1), pl.smem_bytes, pointers(0, 1, 2),
                  (p.N * p.C, p.C, p.H, p.W, p.P, p.Q, p.pad_h, p.pad_w, pl.tiles_q, pl.tiles_p * pl.tiles_q))
    return PreparedLaunch(plan=pl, device=device, operands=("x", "w", "y"), steps=[step], kernels=kernel,
                          filters=FilterLayout("w (C, 1, R, S)", ("depthwise2d",)), output_shape=(p.N, p.C, p.P, p.Q))


def launch(pl: Dw2dPlan, kernel: LoadedKernel, x: Any, w: Any, y: Any, stream: Any | None = None) -> None:
    """Run on contiguous float32 CuPy arrays x (N, C, H, W), w (C, 1, R, S), y (N, C, P, Q); allocates nothing.

    Raises:
        InvalidInput: an array of the wrong shape, dtype or layout.
        LaunchError: the launch failed.
    """
    p = pl.problem
    for name, array, shape in (("x", x, (p.N, p.C, p.H, p.W)), ("w", w, (p.C, 1, p.R, p.S)),
                               ("y", y, (p.N, p.C, p.P, p.Q))):
        check_array(name, array, shape)
    prepared = cached_prepared(pl, kernel, prepare_plan)
    prepared((data_pointer(x), data_pointer(w), data_pointer(y)), stream_pointer(stream))


# ---- the registry row's callables and the launcher protocol (convtune.kernels.protocols.Launcher) -----------
def supports(problem: ConvProblem) -> bool:
    """Whether the kernel runs ``problem`` at all (:func:`applies`)."""
    return applies(problem) is None


def total_traffic_words(pl: Dw2dPlan) -> int:
    """Modelled global-memory words of one launch (loads + stores)."""
    return sum(traffic_words(pl).values())


def onchip_words(pl: Dw2dPlan) -> int:
    """Fast memory one block holds: shared memory plus each thread's taps, window and outputs."""
    p, c = pl.problem, pl.config
    per_thread = p.R * p.S + (c.outputs_per_thread - 1) * p.stride_w + p.S + c.outputs_per_thread
    return pl.smem_bytes // 4 + pl.threads * per_thread


def prepare_filters(pl: Dw2dPlan, w: Any) -> Any:
    """The filter operand :func:`launch` takes: w (C, 1, R, S) as it is."""
    return _shared.prepare_filters_2d(w, pl.problem.dtype)


def filters_key(pl: Dw2dPlan) -> tuple[str, ...]:
    """Every 2-D forward plan shares one filter operand."""
    return _shared.FILTERS_KEY_2D


def tolerance(pl: Dw2dPlan) -> float:
    return _shared.tolerance(pl)
