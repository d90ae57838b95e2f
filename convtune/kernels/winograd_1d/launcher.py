"""Unfused 1-D Winograd F(m, r) along one axis for 1×r and r×1 filters (family ``winograd_unfused_1d``): stride 1,
dilation 1, fp32 — the 2-D unfused path's dataflow with tiles of 1×m (a 1×r filter) or m×1 outputs (an r×1 filter)
and α = m + r − 1 transform points: input transform, α batched GEMMs (the same tuned SGEMM), output transform.

Why: Inception's 1×7 / 7×1 layers have 7 multiply-adds per output and channel; F(4, 7) needs α / m = 2.5 (2.8×
fewer), F(2, 7) 4. A 1×3 layer: F(6, 3) 1.33 instead of 3. No 2-D family fits these filters (the square Winograd
families need R = S), and the direct and implicit-GEMM families ran Inception-v3's 1×7 / 7×1 layers at 0.85–1.04×
cuDNN fp32 (``benchmarks/results/wide_h100/tuned_two_passes``).

Config: the 2-D unfused path's fields (m, the GEMM's tiles and pipeline), ``r`` (the filter's length, the problem's)
and ``along_w`` (1: a 1×r filter, tiles along W; 0: r×1, along H), both set by the problem (rules). Shapes (fp32,
contiguous): x (N, C, H, W); w (K, C, 1, r) or (K, C, r, 1) -> U (α, Cp, Kp) (:func:`transform_filters`, or the filter
kernel); workspace V (α, Cp, Tp) and M (α, Kp, Tp); y (N, K, P, Q). Tiles T = N·⌈P/m_h⌉·⌈Q/m_w⌉ with (m_h, m_w) =
(1, m) or (m, 1). Traffic in words, exactly what the kernels request: :func:`convtune.kernels.winograd.unfused.
traffic_words` with α² → α and the per-axis tile (its formula reads the config's ``points``, ``m_h``, ``m_w``,
``alpha_h``, ``alpha_w``). Kernels: ``winograd_unfused_1d.cu`` (the transforms; the GEMM is ``winograd_unfused.cu``'s,
included, so the 2-D families' sources and versions are untouched).

Accuracy (relative error ‖y − y64‖₂ / ‖y64‖₂): an fp32 emulation of this dataflow (C = K = 64, normal inputs) gives
1.3e-7–2.0e-6 over the F(m, r) provided (:data:`~convtune.kernels.winograd.transforms.POINTS_1D`); :data:`TOLERANCE`
keeps the 2-D families' margin (≥ 25× the emulated error).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field
from functools import cache
from typing import Any, cast

from convtune.kernels.compile import cupy_module, kernel_text, load_kernel
from convtune.kernels.prepared import FilterLayout, Launch, PreparedLaunch, driver, grid3, pointers
from convtune.kernels.search_space import Rule, SearchSpace
from convtune.kernels.winograd import space as _wino_space
from convtune.kernels.winograd import unfused as _fp32
from convtune.kernels.winograd.transforms import POINTS_1D, device_code_1d, matrices_1d
from convtune.kernels.winograd.unfused import (  # the 2-D path's workspace, launches and traffic serve unchanged
    UnfusedFilters,
    UnfusedKernels,
    WinogradUnfusedConfig,
    WinogradUnfusedPlan,
    compile_plan,
    launch,
    m_offset_bytes,
    onchip_words,
    prepare_plan,
    total_traffic_words,
    traffic_words,
    workspace,
)
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = [
    "FAMILY",
    "SOURCE",
    "TOLERANCE",
    "UnfusedFilters",
    "UnfusedKernels",
    "Winograd1dConfig",
    "Winograd1dPlan",
    "applies",
    "compile_plan",
    "derive_plan",
    "enumerate_plans",
    "filter_layout",
    "filters_key",
    "grid_size",
    "launch",
    "m_offset_bytes",
    "onchip_words",
    "plan",
    "prepare_filters",
    "prepare_plan",
    "space",
    "supports",
    "tolerance",
    "total_traffic_words",
    "traffic_words",
    "transform_filters",
    "workspace",
]

FAMILY = "winograd_unfused_1d"
SOURCE = "winograd_unfused_1d.cu"
ENTRY = "winograd_gemm"
FILTER_ENTRY = "winograd_filter"
FILTER_THREADS = 256
#: relative error against float64 a config must meet to be measured or served (module docstring)
TOLERANCE = 5e-5


@dataclass(frozen=True, slots=True)
class Winograd1dConfig(WinogradUnfusedConfig):
    """The 2-D unfused path's tunable parameters (m, the GEMM's tiles and pipeline), the filter length r and its
    axis (``along_w`` = 1: a 1×r filter; 0: r×1), both the problem's (not searched)."""

    family = FAMILY
    direction = "fwd"

    r: int = 7
    along_w: int = field(default=1, metadata={"min": 0})

    @property
    def alpha(self) -> int:
        return self.m + self.r - 1

    @property
    def m_h(self) -> int:
        return 1 if self.along_w else self.m

    @property
    def m_w(self) -> int:
        return self.m if self.along_w else 1

    @property
    def alpha_h(self) -> int:
        return 1 if self.along_w else self.alpha

    @property
    def alpha_w(self) -> int:
        return self.alpha if self.along_w else 1


@dataclass(frozen=True, slots=True)
class Winograd1dPlan(WinogradUnfusedPlan):
    """The unfused plan's geometry with the 1-D F(m, r) transforms' entries and filter transform."""

    def filter_layout(self, device: int) -> FilterLayout:
        return filter_layout(self, device)

    def source(self) -> str:
        """Self-contained CUDA text: the F(m, r) transforms, the family source and the three entries."""
        c = cast(Winograd1dConfig, self.config)
        gemm = _fp32.GEMM_ENTRY.format(threads=c.threads, targs=", ".join(str(a) for a in self.template_args()))
        return _family_source(c.m, c.r) + ENTRIES_AROUND.format(
            transform_threads=_fp32.TRANSFORM_THREADS, targs=f"{c.m}, {c.r}, {'true' if c.along_w else 'false'}",
            gemm=gemm)


ENTRIES_AROUND = """
extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_input(const float* __restrict__ x, float* __restrict__ V, int C, int H, int W, int pad_h, int pad_w,
               int tiles_p, int tiles_q, int tiles, int Cp, int Tp) {{
  convtune::winograd_input_body_1d<{targs}>(x, V, C, H, W, pad_h, pad_w, tiles_p, tiles_q, tiles, Cp, Tp);
}}
{gemm}extern "C" __global__ void __launch_bounds__({transform_threads})
winograd_output(const float* __restrict__ Mi, float* __restrict__ y, int K, int P, int Q, int tiles_p, int tiles_q,
                int tiles, int Kp, int Tp) {{
  convtune::winograd_output_body_1d<{targs}>(Mi, y, K, P, Q, tiles_p, tiles_q, tiles, Kp, Tp);
}}
"""


@cache
def _family_source(m: int, r: int) -> str:
    return device_code_1d(m, r) + kernel_text(SOURCE)


def filter_axis(problem: ConvProblem) -> tuple[int, int] | None:
    """(r, along_w) of a 1×r (along_w = 1) or r×1 (0) filter with r > 1; None for any other filter."""
    p = problem
    if p.R == 1 and p.S > 1:
        return p.S, 1
    if p.S == 1 and p.R > 1:
        return p.R, 0
    return None


def applies(problem: ConvProblem) -> str | None:
    """Why the family cannot run ``problem`` (None when it can)."""
    p = problem
    if p.groups != 1 or p.causal:
        return "groups=1 2-D convolutions only"
    if p.dtype != "float32":
        return f"float32 only, got {p.dtype}"
    axis = filter_axis(p)
    if axis is None or axis[0] not in POINTS_1D:
        lengths = " or ".join(str(r) for r in POINTS_1D)
        return f"1×r or r×1 filters with r = {lengths} only, got {p.R}×{p.S}"
    if (p.stride_h, p.stride_w) != (1, 1) or (p.dil_h, p.dil_w) != (1, 1):
        return "stride 1 and dilation 1 only"
    return None


def supports(problem: ConvProblem) -> bool:
    return applies(problem) is None


def derive_plan(problem: ConvProblem, config: Winograd1dConfig, machine: MachineModel | None = None) -> Winograd1dPlan:
    """The plan of a config that keeps the space's rules; refuses what breaks the register limit, ``machine``'s
    limits or the grid's.

    Raises:
        InvalidConfig: naming the field whose derived geometry breaks a limit.
    """
    return cast(Winograd1dPlan, _fp32.derive_plan(problem, config, machine, Winograd1dPlan))


@cache
def space(problem: ConvProblem) -> SearchSpace:
    """The 2-D unfused path's GEMM space under this family's rules: the problem (1×r or r×1, stride 1), m (the tiles
    provided for r), r and along_w (the problem's)."""
    p = problem
    r, along_w = filter_axis(p) or (0, 1)
    rules = (*_wino_space.problem_rules(p, applies(p), POINTS_1D.get(r, {}), f"1-D F(m,{r})"),
             Rule("r", ("r",), lambda v: v["r"] == r, f"r={{r}}: the filter is {p.R}×{p.S}"),
             Rule("along_w", ("along_w",), lambda v: v["along_w"] == along_w,
                  f"along_w={{along_w}}: the filter is {p.R}×{p.S}"))
    tiles = tuple(sorted(POINTS_1D.get(r, {2: ()})))
    return _wino_space.unfused_space_with(p, rules, {"m": tiles, "r": (r,), "along_w": (along_w,)})


def grid_size(problem: ConvProblem) -> int:
    return space(problem).grid_size()


def enumerate_plans(problem: ConvProblem, machine: MachineModel) -> Iterator[Winograd1dPlan]:
    """Every valid (config, plan) of the family for ``problem`` on ``machine``."""
    return _fp32.enumerate_valid(problem, machine, space(problem), Winograd1dConfig, derive_plan)


def plan(problem: ConvProblem, config: Winograd1dConfig, machine: MachineModel | None = None) -> Winograd1dPlan:
    """Validate ``config`` for ``problem`` (the rules of :func:`space`, then the derived geometry's limits) and
    derive the plan.

    Raises:
        InvalidConfig: naming the field that breaks a rule.
    """
    space(problem).check(config)
    return derive_plan(problem, config, machine)


# ---- the filter operand --------------------------------------------------------------------------------
def transform_filters(w: Any, m: int, r: int, cp_: int, kp: int) -> Any:
    """w (K, C, 1, r) or (K, C, r, 1) CuPy array -> U (α, cp_, kp) float32, U[ξ, c, k] = (G g_kc)[ξ], computed in
    float64, zero for c ≥ C or k ≥ K."""
    cp = cupy_module()
    k, c = w.shape[0], w.shape[1]
    g = cp.asarray(matrices_1d(m, r)[1])
    u = cp.einsum("ar,kcr->ack", g, w.reshape(k, c, r).astype(cp.float64))
    out = cp.zeros((m + r - 1, cp_, kp), dtype=cp.float32)
    out[:, :c, :k] = u
    return out


@cache
def filter_source(m: int, r: int) -> str:
    """Self-contained CUDA text of F(m, r)'s 1-D filter transform: the body plus a wrapper holding G as doubles."""
    g = matrices_1d(m, r)[1]
    alpha = m + r - 1
    rows = ", ".join("{" + ", ".join(repr(float(v)) for v in row) + "}" for row in g)
    return kernel_text(SOURCE) + f"""
extern "C" __global__ void __launch_bounds__({FILTER_THREADS})
{FILTER_ENTRY}(const float* __restrict__ w, float* __restrict__ U, int C, int K, int Cp, int Kp) {{
  const double G[{alpha}][{r}] = {{{rows}}};
  convtune::winograd_filter_body_1d<{alpha}, {r}>(w, U, C, K, Cp, Kp, G);
}}
"""


def filter_layout(pl: Winograd1dPlan, device: int, kernel: Any = None) -> FilterLayout:
    """The U layout of a plan and (built on first use) its transform launch: operands (w, filters)."""
    p, c = pl.problem, cast(Winograd1dConfig, pl.config)
    words = c.points * pl.cp * pl.kp

    def make_prep() -> PreparedLaunch:
        transform = kernel
        if transform is None:
            with driver().use_device(device):
                transform = load_kernel(filter_source(c.m, c.r), FILTER_ENTRY)
        step = Launch(transform, grid3(-(-pl.cp * pl.kp // FILTER_THREADS)), (FILTER_THREADS, 1, 1), 0,
                      pointers(0, 1), (p.C, p.K, pl.cp, pl.kp))
        return PreparedLaunch(plan=pl, device=device, operands=("w", "filters"), steps=[step], kernels=transform,
                              output_shape=(c.points, pl.cp, pl.kp), kind=f"winograd_filter_1d.m{c.m}r{c.r}")

    key = ("winograd_1d", c.m, c.r, pl.cp, pl.kp)
    return FilterLayout(f"U = G g (α={c.points}, Cp={pl.cp}, Kp={pl.kp})", key, words, make_prep)


def prepare_filters(pl: Winograd1dPlan, w: Any) -> UnfusedFilters:
    c = cast(Winograd1dConfig, pl.config)
    return UnfusedFilters(transform_filters(w, c.m, c.r, pl.cp, pl.kp), workspace(pl))


def filters_key(pl: Winograd1dPlan) -> tuple[object, ...]:
    """Plans with equal keys share one :func:`prepare_filters` result (the workspace depends on Tp)."""
    c = cast(Winograd1dConfig, pl.config)
    return (FAMILY, c.m, c.r, pl.cp, pl.kp, pl.tp)


def tolerance(pl: Winograd1dPlan) -> float:
    return TOLERANCE


