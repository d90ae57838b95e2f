"""Hypothesis strategies and settings shared by the tests of convtune.bounds (small problems only).

Example counts: every property runs ``max(default, $CONVTUNE_BOUNDS_EXAMPLES)`` examples, so CI keeps the
defaults (a few hundred, fast on 2 cores) and the acceptance run asks for more, e.g.
``CONVTUNE_BOUNDS_EXAMPLES=2000 python -m pytest -n 0 tests/bounds`` (≥ 2000 examples per property).
"""

from __future__ import annotations

import os

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from convtune.bounds import LOOPS
from convtune.bounds.tiled import loop_extents
from convtune.problem import ConvProblem

#: Environment variable that raises every property's example count (see the module docstring).
EXAMPLES_ENV = "CONVTUNE_BOUNDS_EXAMPLES"


def property_settings(default: int) -> settings:
    """Fixed seed (derandomized), no deadline, ``max(default, $CONVTUNE_BOUNDS_EXAMPLES)`` examples."""
    return settings(max_examples=max(default, int(os.environ.get(EXAMPLES_ENV) or 0)), derandomize=True,
                    deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


#: ≥ 500 examples: the property tests' common settings.
PROPERTY = property_settings(500)
#: The padding-dominated properties: 300 by default (CI), ≥ 2000 in the acceptance run.
PADDING_PROPERTY = property_settings(300)


@st.composite
def conv_problems(draw, *, max_n: int = 2, max_c: int = 6, max_k: int = 6, max_taps: int = 3, max_stride: int = 3,
                  max_dil: int = 2, max_pad: int = 2, max_extra: int = 6, groups: tuple[int, ...] = (1, 1, 1, 2),
                  square_unit_stride: bool = False) -> ConvProblem:
    """Small valid convolutions: strides up to 3, dilation, padding, 1×1 kernels, groups."""
    g = draw(st.sampled_from(groups))
    c = g * draw(st.integers(1, max_c))
    k = g * draw(st.integers(1, max_k))
    if square_unit_stride:
        r = s = draw(st.integers(2, max_taps))
        sh = sw = dh = dw = 1
    else:
        r, s = draw(st.integers(1, max_taps)), draw(st.integers(1, max_taps))
        sh, sw = draw(st.integers(1, max_stride)), draw(st.integers(1, max_stride))
        dh, dw = draw(st.integers(1, max_dil)), draw(st.integers(1, max_dil))
    ph, pw = draw(st.integers(0, max_pad)), draw(st.integers(0, max_pad))
    h = max(1, dh * (r - 1) + 1 - 2 * ph + draw(st.integers(0, max_extra)))
    w = max(1, dw * (s - 1) + 1 - 2 * pw + draw(st.integers(0, max_extra)))
    return ConvProblem(N=draw(st.integers(1, max_n)), C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw,
                       pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, groups=g)


@st.composite
def tilings(draw, problem: ConvProblem) -> tuple[dict[str, int], str]:
    """Tile sizes (1..extent per loop) and a loop order (a permutation of LOOPS)."""
    ext = loop_extents(problem)
    tiles = {lp: draw(st.integers(1, ext[lp])) for lp in LOOPS}
    order = "".join(draw(st.permutations(LOOPS)))
    return tiles, order


@st.composite
def small_tilings(draw, problem: ConvProblem) -> tuple[dict[str, int], str]:
    """Tiles that keep the footprint small (1..3, or the whole extent), so S stays small next to the
    reduction length: where the literature form claims validity."""
    ext = loop_extents(problem)
    tiles = {lp: draw(st.one_of(st.integers(1, min(3, ext[lp])), st.just(ext[lp]))) for lp in LOOPS}
    order = "".join(draw(st.permutations(LOOPS)))
    return tiles, order


@st.composite
def problems_and_small_tilings(draw, **problem_kwargs) -> tuple[ConvProblem, dict[str, int], str]:
    problem = draw(conv_problems(**problem_kwargs))
    tiles, order = draw(small_tilings(problem))
    return problem, tiles, order


@st.composite
def problems_and_tilings(draw, **problem_kwargs) -> tuple[ConvProblem, dict[str, int], str]:
    problem = draw(conv_problems(**problem_kwargs))
    tiles, order = draw(tilings(problem))
    return problem, tiles, order


def swap_axes(p: ConvProblem) -> ConvProblem:
    """The same convolution with rows and columns exchanged."""
    return p.replace(H=p.W, W=p.H, R=p.S, S=p.R, stride_h=p.stride_w, stride_w=p.stride_h, pad_h=p.pad_w,
                     pad_w=p.pad_h, dil_h=p.dil_w, dil_w=p.dil_h)


@st.composite
def padding_dominated_problems(draw, *, max_n: int = 2, max_c: int = 5, max_k: int = 5) -> ConvProblem:
    """Shapes where many taps, inputs or outputs only ever meet padding: tiny maps (1–3 pixels), large
    kernels (up to 7 taps), dilation ≥ the map, stride ≥ the kernel extent, padding beyond the map,
    causal 1-D problems with L ≤ 3 (a decode step, L < K)."""
    kind = draw(st.sampled_from(["tiny_map", "large_kernel", "dilation_over_map", "stride_over_kernel",
                                 "causal_decode"]))
    if kind == "causal_decode":
        return ConvProblem.depthwise1d(B=draw(st.integers(1, max_n)), C=draw(st.integers(1, max_c)),
                                       L=draw(st.integers(1, 3)), K=draw(st.integers(1, 8)),
                                       dilation=draw(st.integers(1, 3)))
    g = draw(st.sampled_from([1, 1, 1, 2]))
    c, k = g * draw(st.integers(1, max_c)), g * draw(st.integers(1, max_k))

    def axis() -> tuple[int, int, int, int, int]:
        """(extent, taps, stride, dilation, pad) of one axis, output non-empty."""
        extent = draw(st.integers(1, 3 if kind != "large_kernel" else 4))
        taps = draw(st.integers(1, 7 if kind == "large_kernel" else 3))
        dil = draw(st.integers(extent, extent + 2)) if kind == "dilation_over_map" else draw(st.integers(1, 2))
        span = dil * (taps - 1) + 1
        stride = draw(st.integers(span, span + 2)) if kind == "stride_over_kernel" else draw(st.integers(1, 2))
        need = max(0, -(-(span - extent) // 2))        # the least pad with a non-empty output
        pad = need + draw(st.integers(0, 3))
        return extent, taps, stride, dil, pad

    h, r, sh, dh, ph = axis()
    w, s, sw, dw, pw = axis()
    return ConvProblem(N=draw(st.integers(1, max_n)), C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw,
                       pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, groups=g)


@st.composite
def padding_problems_and_tilings(draw, small: bool = False) -> tuple[ConvProblem, dict[str, int], str]:
    problem = draw(padding_dominated_problems())
    tiles, order = draw(small_tilings(problem) if small else tilings(problem))
    return problem, tiles, order
