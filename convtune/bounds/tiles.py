"""Near-optimal output-stationary tiles for direct and Winograd convolution (Chen et al. HPCA'20 dataflow structure).

S (``fast_memory_words``) is the per-block on-chip budget in words (shared memory + the block's share
of registers); blocks share nothing on chip, so each block's loads count.

Direct: a block owns x output columns × y output rows × z output channels of one image, keeps the
x·y·z accumulators, and loops over the C/groups input channels in chunks of c_s, staging per chunk
the input patch ((x−1)μ_w + d_w(S−1) + 1)·((y−1)μ_h + d_h(R−1) + 1) (clipped to the image) and the
z·c_s·R·S weights. Footprint x·y·z + c_s·(patch + z·R·S) ≤ S. Traffic of this schedule, exactly:

    In  = N · Σ_{k-tiles} (groups spanned · C/groups) · Σ_{row tiles} rows · Σ_{col tiles} cols
    W   = N · ⌈P/y⌉ · ⌈Q/x⌉ · K · (C/groups) · R · S
    Out = N · K · P · Q

(rows/cols: real input positions the tile's windows read, halo included, padding excluded). It is
the count of :func:`convtune.bounds.tiled.tiled_traffic` for tiles (1, z, y, x, c_s, R, S) and order
``nkpqcrs`` whenever there are at least two channel chunks. Like the kernels it models, this
dataflow loads every filter tap (the dense count, ``skip_padding=False``), also taps that only meet
padding. Minimising W + In under the footprint gives the balance x·y ≈ R·z (R = sliding-window
reuse, ``problem.reuse_factor``): per input channel the patch (≈ μ²·x·y) and the weight slice
(z·R·S) cost the same. We search x, y, z over powers of two, even divisors and the full extents
(clamped to Q, P, K), take the least predicted traffic, then the largest c_s (a power of two ≤
``max_chunk``) that still fits.

Winograd F(m×m, r×r), fused: a block owns a × b tiles (a along the width) × z output channels,
accumulates a·b·z·α² transformed partial sums, and per input-channel chunk loads the raw patch
((b·m + r − 1) × (a·m + r − 1), clipped) and the z·f² filter words (f = α pre-transformed, f = r raw).
Balance a·b·m² ≈ z·f²; the same search applies.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from convtune.bounds.result import check_fast_memory
from convtune.bounds.tiled import used_positions
from convtune.bounds.winograd import winograd_shape
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class Tile:
    """An output tile and its predicted traffic (words) under the per-block budget ``fast_memory_words``.

    Direct: x = output columns, y = output rows, z = output channels. Winograd: x = tiles along the
    width (a), y = tiles along the height (b), z = output channels, ``m`` the output tile side.
    ``balance`` = x·y/(R·z) for direct, a·b·m²/(z·f²) for Winograd (1 = balanced).
    """

    algorithm: str
    x: int
    y: int
    z: int
    c_s: int
    footprint_words: int
    fast_memory_words: int
    predicted_words: float
    input_words: float
    weight_words: float
    output_words: float
    balance: float
    m: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {"algorithm": self.algorithm, "x": self.x, "y": self.y, "z": self.z, "c_s": self.c_s, "m": self.m,
                "footprint_words": self.footprint_words, "fast_memory_words": self.fast_memory_words,
                "predicted_words": float(self.predicted_words), "input_words": float(self.input_words),
                "weight_words": float(self.weight_words), "output_words": float(self.output_words),
                "balance": self.balance}


def tile_candidates(extent: int) -> list[int]:
    """Sizes a kernel can use along a loop of ``extent``: powers of two below it, its even divisors (no
    tail tile), and the extent itself; ascending."""
    out, v = {extent}, 1
    while v < extent:
        out.add(v)
        v *= 2
    out.update(d for d in range(2, extent, 2) if extent % d == 0)
    return sorted(out)


def _channel_sums(problem: ConvProblem, z: int) -> tuple[int, int]:
    """(Σ over k-tiles of the input channels each needs, the most any k-tile needs)."""
    kg = problem.K // problem.groups
    total = most = 0
    for k0 in range(0, problem.K, z):
        span = (min(k0 + z, problem.K) - 1) // kg - k0 // kg + 1
        total += span
        most = max(most, span)
    cg = problem.channels_per_group
    return total * cg, most * cg


def _axis_sum(extent: int, out: int, taps: int, tile: int, stride: int, pad: int, dil: int) -> int:
    """Σ over output tiles of ``tile`` positions of the real input positions each reads (all taps)."""
    return sum(used_positions(extent, o, min(out, o + tile), 0, taps, stride, pad, dil) for o in range(0, out, tile))


def _patch(extent: int, out_tile: int, stride: int, dil: int, taps: int) -> int:
    return min(extent, (out_tile - 1) * stride + dil * (taps - 1) + 1)


def _chunk(budget_left: int, per_chunk: int, channels: int, max_chunk: int) -> int:
    """Largest power of two c_s ≤ min(channels, max_chunk) with c_s·per_chunk ≤ budget_left (0 if none)."""
    c = 1
    while c * 2 <= min(channels, max_chunk) and c * 2 * per_chunk <= budget_left:
        c *= 2
    return c if per_chunk <= budget_left else 0


def direct_tile(problem: ConvProblem, fast_memory_words: int, *, max_chunk: int = 8) -> Tile:
    """The least-traffic direct output tile (x cols, y rows, z channels, c_s) that fits in S words.

    Raises:
        ValueError: not even a 1×1×1 tile with one channel fits in ``fast_memory_words``.

    Example:
        >>> t = direct_tile(ConvProblem.parse("N=1 C=64 H=56 W=56 K=64 R=3 S=3 pad=1"), 12288)
        >>> 0.3 <= t.balance <= 2
        True
    """
    p = problem
    s = check_fast_memory(fast_memory_words)
    rs = p.R * p.S
    rows = {y: _axis_sum(p.H, p.P, p.R, y, p.stride_h, p.pad_h, p.dil_h) for y in tile_candidates(p.P)}
    cols = {x: _axis_sum(p.W, p.Q, p.S, x, p.stride_w, p.pad_w, p.dil_w) for x in tile_candidates(p.Q)}
    best: tuple[float, int, int, int, int, float, float] | None = None
    traffic: float
    in_words: float
    w_words: float
    for z in tile_candidates(p.K):
        chan_total, chan_most = _channel_sums(p, z)
        for y, rsum in rows.items():
            ph = _patch(p.H, y, p.stride_h, p.dil_h, p.R)
            for x, csum in cols.items():
                per_chunk = ph * _patch(p.W, x, p.stride_w, p.dil_w, p.S) * (chan_most // p.channels_per_group) \
                    + z * rs
                if x * y * z + per_chunk > s:
                    continue
                w_words = p.N * -(-p.P // y) * -(-p.Q // x) * p.weight_elements
                in_words = p.N * chan_total * rsum * csum
                traffic = in_words + w_words + p.output_elements
                key = (traffic, -x * y * z)
                if best is None or key < (best[0], -best[1] * best[2] * best[3]):
                    best = (traffic, x, y, z, per_chunk, in_words, w_words)
    if best is None:
        raise ValueError(f"fast_memory_words={s}: not even a 1×1×1 tile with one input channel fits")
    traffic, x, y, z, per_chunk, in_words, w_words = best
    c_s = _chunk(s - x * y * z, per_chunk, p.channels_per_group, max_chunk)
    return Tile(algorithm="direct", x=x, y=y, z=z, c_s=c_s, footprint_words=x * y * z + c_s * per_chunk,
                fast_memory_words=s, predicted_words=traffic, input_words=in_words, weight_words=w_words,
                output_words=p.output_elements, balance=x * y / (p.reuse_factor * z))


def winograd_tile(problem: ConvProblem, fast_memory_words: int, m: int = 2, *, pretransformed_filters: bool = True,
                  max_chunk: int = 8) -> Tile:
    """The least-traffic fused Winograd tile (a tiles × b tiles × z channels, c_s) that fits in S words.

    Raises:
        NotApplicable: F(m×m, r×r) does not apply (see :func:`convtune.bounds.winograd.check_winograd`).
        ValueError: nothing fits in ``fast_memory_words``.
    """
    p = problem
    s = check_fast_memory(fast_memory_words)
    sh = winograd_shape(p, m)
    a2 = sh.alpha * sh.alpha
    f2 = a2 if pretransformed_filters else sh.r * sh.r
    span = sh.r - 1
    rows = {b: _axis_sum(p.H, p.P, p.R, b * m, 1, p.pad_h, 1) for b in tile_candidates(sh.tiles_h)}
    cols = {a: _axis_sum(p.W, p.Q, p.S, a * m, 1, p.pad_w, 1) for a in tile_candidates(sh.tiles_w)}
    best: tuple[float, int, int, int, int, float, float] | None = None
    traffic: float
    in_words: float
    w_words: float
    for z in tile_candidates(p.K):
        chan_total, chan_most = _channel_sums(p, z)
        for b, rsum in rows.items():
            ph = min(p.H, b * m + span)
            for a, csum in cols.items():
                per_chunk = ph * min(p.W, a * m + span) * (chan_most // p.channels_per_group) + z * f2
                acc = a * b * z * a2
                if acc + per_chunk > s:
                    continue
                blocks = p.N * -(-sh.tiles_h // b) * -(-sh.tiles_w // a)
                w_words = blocks * p.K * p.channels_per_group * f2
                in_words = p.N * chan_total * rsum * csum
                traffic = in_words + w_words + p.output_elements
                if best is None or (traffic, -acc) < (best[0], -best[1] * best[2] * best[3] * a2):
                    best = (traffic, a, b, z, per_chunk, in_words, w_words)
    if best is None:
        raise ValueError(f"fast_memory_words={s}: no Winograd F({m}) tile fits")
    traffic, a, b, z, per_chunk, in_words, w_words = best
    acc = a * b * z * a2
    c_s = _chunk(s - acc, per_chunk, p.channels_per_group, max_chunk)
    return Tile(algorithm=f"winograd_f{m}", x=a, y=b, z=z, c_s=c_s, footprint_words=acc + c_s * per_chunk,
                fast_memory_words=s, predicted_words=traffic, input_words=in_words, weight_words=w_words,
                output_words=p.output_elements, balance=a * b * m * m / (z * f2), m=m)

