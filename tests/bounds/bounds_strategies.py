"""Hypothesis strategies and settings shared by the tests of convtune.bounds (small problems only)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from convtune.bounds import LOOPS
from convtune.bounds.tiled import loop_extents
from convtune.problem import ConvProblem

#: ≥ 500 examples, fixed seed (derandomized), no deadline: the property tests' common settings.
PROPERTY = settings(max_examples=500, derandomize=True, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])


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
