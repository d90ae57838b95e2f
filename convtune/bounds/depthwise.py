"""Depthwise convolution traffic: the lower bound and the achievable halo-tiled traffic (words).

Covers 2-D depthwise (groups = C, K = multiplier·C) and the 1-D causal depthwise convolution of
S4ConvD/Mamba (``problem.causal``: H = R = 1, left padding dil·(S−1)). Words throughout; S is an
argument in words (per block, per SM or L2: the caller's choice).

There is no reduction over channels: each output reads one input channel's window (L = R·S MACs), so
the only reuse is the sliding window and every reuse-based bound collapses to (about) compulsory:

- lower bound: max(|In_used| + |W_used| + |Out|, the X-partition reuse term of
  :mod:`convtune.bounds.pebble` with L = (used row taps)·(used column taps)), i.e. compulsory in
  practice; |In_used| excludes the padding (the causal left pad included) and stride-skipped pixels,
  |W_used| the taps that only ever meet padding: a causal decode step with L < K meets only the last
  ⌊(L−1)/dil⌋ + 1 taps of each channel, a 5×5 pad-2 layer on a 2×2 map only its 3×3 centre.
- achievable, for an output tile of ``tile_h`` rows × ``tile_w`` columns of one channel: every tile
  loads the real input pixels its windows read (halo included, clipped at the borders), the
  channel's used taps once per channel (``weights_per_tile=True``: once per tile), and writes its
  outputs: N·K·Σ_tiles rows·cols + |W_used| + |Out| words. For a 1-D causal problem with tile T this is
  B·C·⌈L/T⌉·(T + S − 1) less the causal padding of the first tile. Gap to the bound = the halo factor,
  e.g. (34·34)/(32·32) = 1.13 for a 32×32 tile of a 3×3 stride-1 layer.
"""

from __future__ import annotations

from convtune.bounds.direct import direct_safe_bound
from convtune.bounds.result import BoundResult, NotApplicable, check_fast_memory, combine
from convtune.bounds.tiled import input_positions_per_tile
from convtune.problem import ConvProblem


def _check_depthwise(problem: ConvProblem) -> None:
    # groups == C, one channel included: C = K = groups = 1 is depthwise and dense at once (the 2-D depthwise
    # kernels run it), and the bound below is the dense safe bound, valid for it either way
    if problem.groups != problem.C:
        raise NotApplicable("groups", f"groups={problem.groups}, C={problem.C}: depthwise needs groups == C")


def _name(problem: ConvProblem) -> str:
    return "depthwise1d_causal" if problem.causal else "depthwise2d"


def depthwise_lower_bound(problem: ConvProblem, fast_memory_words: int) -> BoundResult:
    """max(compulsory, X-partition reuse term): the words any depthwise schedule moves.

    Raises:
        NotApplicable: ``problem`` is not depthwise (groups ≠ C).
    """
    _check_depthwise(problem)
    safe = direct_safe_bound(problem, fast_memory_words)
    return combine(_name(problem), {k: (v, True) for k, v in safe.terms.items()},
                   word_bytes=problem.itemsize_bytes, fast_memory_words=safe.fast_memory_words)


def depthwise_tile_footprint_words(problem: ConvProblem, tile_h: int, tile_w: int) -> int:
    """Fast memory one tile needs: its input patch (with halo) + R·S taps + its outputs."""
    p = problem
    th, tw = min(tile_h, p.P), min(tile_w, p.Q)
    patch_h = min(p.H, (th - 1) * p.stride_h + p.dil_h * (p.R - 1) + 1)
    patch_w = min(p.W, (tw - 1) * p.stride_w + p.dil_w * (p.S - 1) + 1)
    return patch_h * patch_w + p.R * p.S + th * tw


def depthwise_tiled_traffic(problem: ConvProblem, tile_w: int, tile_h: int = 1, *,
                            weights_per_tile: bool = False) -> BoundResult:
    """Achievable traffic of the halo-tiled schedule with ``tile_h`` × ``tile_w`` output tiles.

    Args:
        problem: a depthwise problem.
        tile_w: output columns per tile (clamped to Q; the sequence tile T for 1-D problems).
        tile_h: output rows per tile (clamped to P).
        weights_per_tile: charge the used taps to every tile instead of once per channel.

    Returns:
        ``kind="achievable"``; ``fast_memory_words`` is the tile's footprint.

    Example:
        >>> p = ConvProblem.depthwise1d(B=2, C=4, L=64, K=4)
        >>> depthwise_tiled_traffic(p, tile_w=32).terms["input_halo"] == 2 * 4 * (32 + 35)
        True
    """
    _check_depthwise(problem)
    p = problem
    if tile_w < 1 or tile_h < 1:
        raise ValueError(f"tile_h={tile_h}, tile_w={tile_w} must be >= 1")
    th, tw = min(tile_h, p.P), min(tile_w, p.Q)
    rows = input_positions_per_tile(p.H, p.P, p.R, th, p.R, p.stride_h, p.pad_h, p.dil_h).sum()
    cols = input_positions_per_tile(p.W, p.Q, p.S, tw, p.S, p.stride_w, p.pad_w, p.dil_w).sum()
    tiles = -(-p.P // th) * -(-p.Q // tw)
    input_halo = p.N * p.K * int(rows) * int(cols)
    # taps that only meet padding are never loaded (a tile that needs none of them skips them too)
    weights = p.weight_elements_used * (p.N * tiles if weights_per_tile else 1)
    total = input_halo + weights + p.output_elements
    footprint = check_fast_memory(depthwise_tile_footprint_words(p, th, tw))
    return BoundResult(name=f"{_name(p)}.tiled_{th}x{tw}", words=float(total), word_bytes=p.itemsize_bytes,
                       terms={"total": float(total), "input_halo": float(input_halo), "weights": float(weights),
                              "output": float(p.output_elements)},
                       binding_term="total", fast_memory_words=footprint, kind="achievable")
