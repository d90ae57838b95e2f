"""Winograd F(m×m, r×r) traffic bounds and dataflow floors (Lavin & Gray stages, red-blue pebble game), in words.

S (``fast_memory_words``) is an argument in words: the per-block on-chip budget for L2↔SM traffic, the
L2 size for DRAM↔L2; the formulas do not care which.

Applies to stride 1, dilation 1, square r×r kernels (r ≥ 2) and m ∈ {2, 4, 6}; anything else raises
:class:`~convtune.bounds.result.NotApplicable`. Notation: α = m + r − 1; tiles
T = N·⌈P/m⌉·⌈Q/m⌉; g = groups, C_g = C/g. Stages (Lavin & Gray): filter transform U = G·g·Gᵀ
(r² → α² per (k, c)), input transform V = Bᵀ·d·B, α² batched GEMMs M(ξ,ν) = U(ξ,ν)·V(ξ,ν) of size
(K/g)×C_g times C_g×T per group, output transform Y = Aᵀ·M·A (α² → m²).

- multiplications: α²·K·C_g·T (versus the direct G = ``problem.macs``).
- The CDAG is the dense Winograd CDAG: every filter tap enters U = G·g·Gᵀ and every U value multiplies
  the V of every tile, so |filters| counts all K·C_g·r² taps (α² per pair pre-transformed) even where
  some taps only ever meet padding; that is what a Winograd schedule computes. The direct bound, which
  skips padding MACs and the weights only they use (:mod:`convtune.bounds.direct`), is the bound on the
  convolution itself; padding-dominated shapes (a 1×1 map under 3×3 pad 1) are where they differ.
  |In_used| counts real input pixels only; the per-frequency GEMM reduces over C_g channels, so its
  COSMA conditions do not depend on taps.
- CDAG bound [R]: max(|In_used| + |filters| + |Out|, 2α²·K·C_g·T/√S + |Out|), |filters| = K·C_g·r²
  (raw g) or K·C_g·α² (pre-transformed U). Its reuse term takes the transformed values V, U and the
  partial sums M as a segment's dominator (ρ = √S/2 per frequency, summed by Hölder): COSMA's argument
  per frequency. It is used only when (a) COSMA's conditions hold for one frequency's GEMM
  (S < min(T·K/g, T·C_g, K/g·C_g) and C_g ≥ 2√S, see :mod:`convtune.bounds.matmul`), and (b) the
  input transform cannot amplify: m divides P and Q (no tile-rounding waste) and 2·pad ≤ r − 1 (every
  output has its own real input pixel). Without (b) a fused schedule that transforms on chip undercuts
  it: N=64, C=K=32, 1×1 images with pad 1 under F(6×6, 3×3) and S = 100 (each tile computes 64
  transformed values per channel from 1 real pixel): a fused tile moves 6.6e5 words, the term claims
  8.4e5. That the term is a lower bound even under (a) and (b) is not proven.
- fused output-stationary floor [R]: a block owns a×b tiles × z output channels, accumulates M
  (a·b·z·α² words ≤ S) and per input channel loads its real input patch and the filter slice (z·α²
  pre-transformed, z·r² raw, f² words per channel pair). Over all blocks the patches cover |In_used| once
  per z-block of output channels and the filters cost T·K·C_g·f²/(a·b); minimising over a·b·z = S/α² gives
  2·K·f·α·√(|In_used|·C_g·T/(g·S)) + |Out| (≥ the box-segment form 2m·f·α·K·C_g·T/√S + |Out| when
  |In_used| ≥ C·T·m², i.e. under (b)), floored by this dataflow's own compulsory traffic. It is a floor
  of that dataflow (about m× the CDAG bound for pre-transformed filters), not a lower bound.
- unfused stage-by-stage floor [R]: FT reads K·C_g·r², writes K·C_g·α² (skipped when pre-transformed);
  IT reads |In_used|, writes α²·C·T; GEMM ≥ :func:`~convtune.bounds.matmul.matmul_lower_bound` of the
  α²·g products; OT reads α²·K·T, writes |Out|.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from convtune.bounds.matmul import cosma_assumptions, matmul_lower_bound
from convtune.bounds.result import Assumption, BoundResult, NotApplicable, check_fast_memory, combine
from convtune.problem import ConvProblem

SUPPORTED_M = (2, 4, 6)


@dataclass(frozen=True, slots=True)
class WinogradShape:
    """The tile arithmetic of F(m×m, r×r) on one problem."""

    m: int
    r: int
    alpha: int
    tiles_h: int
    tiles_w: int
    tiles: int             # T = N·tiles_h·tiles_w
    multiplications: int   # α²·K·C_g·T
    direct_multiplications: int

    def to_dict(self) -> dict[str, Any]:
        return {"m": self.m, "r": self.r, "alpha": self.alpha, "tiles_h": self.tiles_h, "tiles_w": self.tiles_w,
                "tiles": self.tiles, "multiplications": self.multiplications,
                "direct_multiplications": self.direct_multiplications}


def check_winograd(problem: ConvProblem, m: int) -> None:
    """Raise :class:`NotApplicable` unless F(m×m, r×r) applies to ``problem``."""
    p = problem
    if m not in SUPPORTED_M:
        raise NotApplicable("m", f"m={m} is not supported: allowed {list(SUPPORTED_M)}")
    for name in ("stride_h", "stride_w", "dil_h", "dil_w"):
        if getattr(p, name) != 1:
            raise NotApplicable(name, f"{name}={getattr(p, name)}: Winograd needs stride 1 and dilation 1")
    if p.R != p.S:
        raise NotApplicable("S", f"R={p.R}, S={p.S}: F(m×m, r×r) needs a square kernel")
    if p.R < 2:
        raise NotApplicable("R", f"R={p.R}: a 1×1 kernel has nothing to transform (it is a matrix multiply)")
    if p.causal:
        raise NotApplicable("causal", "causal 1-D problems are not supported by F(m×m, r×r)")


def winograd_shape(problem: ConvProblem, m: int) -> WinogradShape:
    """α, tile counts and multiplication counts of F(m×m, r×r)."""
    check_winograd(problem, m)
    p = problem
    r = p.R
    alpha = m + r - 1
    th, tw = -(-p.P // m), -(-p.Q // m)
    tiles = p.N * th * tw
    return WinogradShape(m=m, r=r, alpha=alpha, tiles_h=th, tiles_w=tw, tiles=tiles,
                         multiplications=alpha * alpha * p.K * p.channels_per_group * tiles,
                         direct_multiplications=p.macs)


def _filter_words(problem: ConvProblem, shape: WinogradShape, pretransformed: bool) -> int:
    side = shape.alpha if pretransformed else shape.r
    return problem.K * problem.channels_per_group * side * side


def winograd_cdag_bound(problem: ConvProblem, fast_memory_words: int, m: int, *,
                        pretransformed_filters: bool = False) -> BoundResult:
    """max(|In_used| + |filters| + |Out|, 2α²·K·C_g·T/√S + |Out| when COSMA's per-frequency conditions hold)."""
    s = check_fast_memory(fast_memory_words)
    p = problem
    sh = winograd_shape(p, m)
    compulsory = p.input_elements_used + _filter_words(p, sh, pretransformed_filters) + p.output_elements
    reuse = 2.0 * sh.multiplications / math.sqrt(s) + p.output_elements
    conditions = cdag_reuse_assumptions(p, sh, s)
    return combine(f"winograd_f{m}.cdag", {"compulsory": (compulsory, True),
                                           "reuse": (reuse, all(a.holds for a in conditions))},
                   word_bytes=p.itemsize_bytes, fast_memory_words=s)


def cdag_reuse_assumptions(problem: ConvProblem, shape: WinogradShape,
                           fast_memory_words: int) -> tuple[Assumption, ...]:
    """Conditions (a) and (b) of the module docstring for the CDAG reuse term."""
    p, m, r = problem, shape.m, shape.r
    return (*cosma_assumptions(shape.tiles, p.K // p.groups, p.channels_per_group, fast_memory_words),
            Assumption(f"m={m} divides P={p.P} and Q={p.Q} (no tile-rounding waste)", p.P % m == 0 and p.Q % m == 0),
            Assumption(f"2·pad ({p.pad_h}, {p.pad_w}) <= r−1={r - 1} (no transform amplification)",
                       2 * max(p.pad_h, p.pad_w) <= r - 1))


def winograd_fused_floor(problem: ConvProblem, fast_memory_words: int, m: int, *,
                         pretransformed_filters: bool = False) -> BoundResult:
    """Least traffic of the fused output-stationary dataflow over all tile shapes (module docstring)."""
    s = check_fast_memory(fast_memory_words)
    p = problem
    sh = winograd_shape(p, m)
    f = sh.alpha if pretransformed_filters else sh.r
    cover = p.input_elements_used * p.channels_per_group * sh.tiles / (p.groups * s)
    reuse = 2.0 * p.K * f * sh.alpha * math.sqrt(cover) + p.output_elements
    compulsory = p.input_elements_used + _filter_words(p, sh, pretransformed_filters) + p.output_elements
    return combine(f"winograd_f{m}.fused", {"compulsory": (compulsory, True), "reuse": (reuse, True)},
                   word_bytes=p.itemsize_bytes, fast_memory_words=s, kind="dataflow_floor")


def winograd_unfused_floor(problem: ConvProblem, fast_memory_words: int, m: int, *,
                           pretransformed_filters: bool = False) -> BoundResult:
    """Sum of the stage floors FT + IT + GEMM + OT of the unfused schedule (module docstring)."""
    s = check_fast_memory(fast_memory_words)
    p = problem
    sh = winograd_shape(p, m)
    a2 = sh.alpha * sh.alpha
    kc = p.K * p.channels_per_group
    ft = 0 if pretransformed_filters else kc * (sh.r * sh.r + a2)
    it = p.input_elements_used + a2 * p.C * sh.tiles
    gemm = matmul_lower_bound(sh.tiles, p.K // p.groups, p.channels_per_group, s, batch=a2 * p.groups,
                              word_bytes=p.itemsize_bytes).words
    ot = a2 * p.K * sh.tiles + p.output_elements
    total = ft + it + gemm + ot
    # the per-stage split stays visible next to the total (the total is the binding "term")
    return BoundResult(name=f"winograd_f{m}.unfused", words=total, word_bytes=p.itemsize_bytes,
                       terms={"sum_of_stages": total, "filter_transform": ft, "input_transform": it, "gemm": gemm,
                              "output_transform": ot},
                       binding_term="sum_of_stages", fast_memory_words=s, kind="dataflow_floor")


@dataclass(frozen=True, slots=True)
class WinogradBounds:
    """Everything about F(m×m, r×r) on one problem and one S."""

    shape: WinogradShape
    cdag: BoundResult
    fused: BoundResult
    unfused: BoundResult
    pretransformed_filters: bool

    def to_dict(self) -> dict[str, Any]:
        return {"shape": self.shape.to_dict(), "pretransformed_filters": self.pretransformed_filters,
                "cdag": self.cdag.to_dict(), "fused": self.fused.to_dict(), "unfused": self.unfused.to_dict()}


def winograd_bounds(problem: ConvProblem, fast_memory_words: int, m: int = 2, *,
                    pretransformed_filters: bool = False) -> WinogradBounds:
    """The CDAG lower bound and the fused/unfused dataflow floors of F(m×m, r×r).

    Raises:
        NotApplicable: stride or dilation ≠ 1, non-square or 1×1 kernel, causal, or m ∉ {2, 4, 6}.

    Example:
        >>> p = ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1")
        >>> b = winograd_bounds(p, 12288, m=4)
        >>> b.shape.multiplications < b.shape.direct_multiplications
        True
    """
    kw = {"pretransformed_filters": pretransformed_filters}
    return WinogradBounds(shape=winograd_shape(problem, m),
                          cdag=winograd_cdag_bound(problem, fast_memory_words, m, **kw),
                          fused=winograd_fused_floor(problem, fast_memory_words, m, **kw),
                          unfused=winograd_unfused_floor(problem, fast_memory_words, m, **kw),
                          pretransformed_filters=pretransformed_filters)
