"""Exact word traffic of a tiled 7-loop direct-convolution schedule (an achievable upper bound).

The schedule: the loops n, k, p, q, c, r, s (batch, output channel, output row, output column, input
channel within the group, kernel row, kernel column) are tiled with tile sizes t_l and the tile loops
run in a given order (outermost first); one tile iteration computes every MAC of its index box.
Fast memory holds exactly the current tile of each array:

- input tile: the real (non-padding) input elements the tile's windows read, halo included:
  n-range × channels × rows × cols, where rows = |{p·μ_h − pad_h + r·d_h : p, r in the tile} ∩ [0, H)|
  (likewise cols), and channels = (groups spanned by the k-range) × c-range;
- weight tile: k-range × c-range × r-range × s-range;
- output tile: n-range × k-range × p-range × q-range (partial sums).

Boundary tiles are clipped. An input or weight tile is loaded in full whenever its identity (the tile
indices of the loops it depends on; for the input with groups > 1, the range of groups) differs from
the previous iteration's. An output tile is stored every time the schedule leaves it, and loaded
(partial sums) when it is entered again after its first visit, so a revisit costs a load and a store.

With ``skip_padding=True`` (the padding-aware schedule, the one the soundness tests hold the bounds
against) the same loop nest skips every MAC whose input is padding, as a kernel that checks its
bounds may:

- a tile iteration without a real MAC (its rows or its columns meet padding only) is skipped: it
  loads, holds and stores nothing, and the tiles in fast memory stay as they are;
- weight tile: k-range × c-range × (taps of the r-range that meet a real input row for some output row
  of the p-range) × (likewise for s and q); it is loaded whenever its identity (the k, c, r, s tile
  indices and those two tap sets) differs from the previous *executed* iteration's;
- input tile: as above (only real elements), loaded on a change of identity between executed iterations;
- output tile: only its *live* outputs (whose row and column each meet a real input for some tap);
  an output that no real MAC reaches is zero and is stored once, on its own (one word of fast memory);
- footprint: the largest executed iteration (1 word if only zero outputs are written).

The count is exact: every tile iteration is enumerated with NumPy (no per-element work), so it is
meant for small problems (at most :data:`MAX_ITERATIONS` tile iterations). All counts are in words.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

import numpy as np

from convtune.problem import ConvProblem, used_positions, used_taps

LOOPS = ("n", "k", "p", "q", "c", "r", "s")
#: Largest number of tile iterations :func:`tiled_traffic` enumerates.
MAX_ITERATIONS = 2_000_000


@dataclass(frozen=True, slots=True)
class TiledTraffic:
    """Words moved by one tiled schedule, and the fast memory it needs."""

    input_load_words: int
    weight_load_words: int
    output_load_words: int
    output_store_words: int
    footprint_words: int   # max over iterations of input + weight + output tile words
    iterations: int

    @property
    def load_words(self) -> int:
        return self.input_load_words + self.weight_load_words + self.output_load_words

    @property
    def total_words(self) -> int:
        """Loads + stores."""
        return self.load_words + self.output_store_words


def loop_extents(problem: ConvProblem) -> dict[str, int]:
    """Trip counts of the seven loops: N, K, P, Q, C/groups, R, S."""
    p = problem
    return {"n": p.N, "k": p.K, "p": p.P, "q": p.Q, "c": p.channels_per_group, "r": p.R, "s": p.S}


def _clipped(extent: int, tile: int) -> np.ndarray:
    """Sizes of the ⌈extent/tile⌉ tiles of one loop, the last one clipped."""
    starts = np.arange(0, extent, tile)
    return np.minimum(tile, extent - starts).astype(np.int64)


def input_positions_per_tile(extent: int, out: int, taps: int, out_tile: int, tap_tile: int, stride: int, pad: int,
                             dil: int) -> np.ndarray:
    """table[i, j] = real input positions read by output tile i with tap tile j along one axis."""
    n_out, n_tap = -(-out // out_tile), -(-taps // tap_tile)
    table = np.zeros((n_out, n_tap), dtype=np.int64)
    for i in range(n_out):
        for j in range(n_tap):
            table[i, j] = used_positions(extent, i * out_tile, min(out, (i + 1) * out_tile), j * tap_tile,
                                         min(taps, (j + 1) * tap_tile), stride, pad, dil)
    return table


def used_taps_per_tile(extent: int, out: int, taps: int, out_tile: int, tap_tile: int, stride: int, pad: int,
                       dil: int) -> tuple[np.ndarray, np.ndarray]:
    """(count[i, j], ident[i, j]): how many taps of tap tile j meet a real input position for some output
    of output tile i along one axis, and an integer that is equal for equal sets of such taps."""
    n_out, n_tap = -(-out // out_tile), -(-taps // tap_tile)
    count = np.zeros((n_out, n_tap), dtype=np.int64)
    ident = np.zeros((n_out, n_tap), dtype=np.int64)
    ids: dict[tuple[int, ...], int] = {}
    for i in range(n_out):
        o_lo, o_hi = i * out_tile, min(out, (i + 1) * out_tile)
        # windows o_lo..o_hi−1 are windows 0..o_hi−o_lo−1 of the same axis padded by pad − o_lo·stride
        used = used_taps(extent, o_hi - o_lo, taps, stride, pad - o_lo * stride, dil)
        for j in range(n_tap):
            subset = tuple(t for t in used if j * tap_tile <= t < (j + 1) * tap_tile)
            count[i, j] = len(subset)
            ident[i, j] = ids.setdefault(subset, len(ids))
    return count, ident


def live_outputs_per_tile(extent: int, out: int, taps: int, out_tile: int, stride: int, pad: int,
                          dil: int) -> np.ndarray:
    """live[i] = outputs of output tile i along one axis that some tap connects to a real input."""
    live = np.array([1 if used_taps(extent, 1, taps, stride, pad - o * stride, dil) else 0 for o in range(out)],
                    dtype=np.int64)
    return np.add.reduceat(live, np.arange(0, out, out_tile))


def _normalise(tiles: Mapping[str, int] | Sequence[int], order: str | Sequence[str],
               extents: Mapping[str, int]) -> tuple[dict[str, int], tuple[str, ...]]:
    if isinstance(tiles, Mapping):
        unknown = set(tiles) - set(LOOPS)
        if unknown:
            raise ValueError(f"tiles: unknown loops {sorted(unknown)}; allowed {LOOPS}")
        tile = {lp: int(tiles.get(lp, extents[lp])) for lp in LOOPS}
    else:
        if len(tiles) != len(LOOPS):
            raise ValueError(f"tiles: need {len(LOOPS)} sizes for {LOOPS}, got {len(tiles)}")
        tile = {lp: int(t) for lp, t in zip(LOOPS, tiles, strict=True)}
    for lp, t in tile.items():
        if t < 1:
            raise ValueError(f"tiles: {lp}={t} must be >= 1")
        tile[lp] = min(t, extents[lp])
    seq = tuple(order)
    if sorted(seq) != sorted(LOOPS):
        raise ValueError(f"order={order!r} must be a permutation of {''.join(LOOPS)}")
    return tile, seq


def _changes(key: np.ndarray) -> np.ndarray:
    """changed[i] = key[i] != key[i-1]; the first iteration always loads."""
    changed = np.empty(key.shape, dtype=bool)
    changed[0] = True
    np.not_equal(key[1:], key[:-1], out=changed[1:])
    return changed


def tiled_traffic(problem: ConvProblem, tiles: Mapping[str, int] | Sequence[int],
                  order: str | Sequence[str] = "nkpqcrs", *, skip_padding: bool = False) -> TiledTraffic:
    """Count the words the tiled schedule loads and stores, exactly.

    Args:
        problem: the convolution.
        tiles: tile size per loop, as a mapping over ``LOOPS`` (missing loops untiled) or a sequence in
            ``LOOPS`` order (n, k, p, q, c, r, s); sizes above the extent are clipped to it.
        order: the tile loops, outermost first, e.g. ``"nkpqcrs"``.
        skip_padding: count the padding-aware schedule (module docstring): no MAC with a padding
            input, no weight or input that only padding meets, zero outputs stored once. False: the
            dense schedule (whole weight tiles, every tile iteration), the model of kernels that
            multiply the padding.

    Raises:
        ValueError: bad tiles/order, or more than :data:`MAX_ITERATIONS` tile iterations.

    Example:
        >>> p = ConvProblem.parse("N=1 C=4 H=6 W=6 K=4 R=3 S=3 pad=1")
        >>> tiled_traffic(p, {"p": 3, "q": 3}, "nkpqcrs").output_store_words
        144
        >>> q = ConvProblem.parse("N=1 C=4 H=1 W=1 K=4 R=3 S=3 pad=1")   # only the centre tap meets x
        >>> tiled_traffic(q, {}, "nkpqcrs", skip_padding=True).weight_load_words
        16
    """
    pr = problem
    ext = loop_extents(pr)
    tile, seq = _normalise(tiles, order, ext)
    counts = {lp: -(-ext[lp] // tile[lp]) for lp in LOOPS}
    iterations = int(np.prod([counts[lp] for lp in seq], dtype=np.int64))
    if iterations > MAX_ITERATIONS:
        raise ValueError(f"{iterations} tile iterations exceed MAX_ITERATIONS={MAX_ITERATIONS}: use larger tiles")

    grid = np.indices([counts[lp] for lp in seq], dtype=np.int64).reshape(len(seq), -1)
    idx = {lp: grid[i] for i, lp in enumerate(seq)}
    size = {lp: _clipped(ext[lp], tile[lp]) for lp in LOOPS}

    rows = input_positions_per_tile(pr.H, pr.P, pr.R, tile["p"], tile["r"], pr.stride_h, pr.pad_h, pr.dil_h)
    cols = input_positions_per_tile(pr.W, pr.Q, pr.S, tile["q"], tile["s"], pr.stride_w, pr.pad_w, pr.dil_w)
    k_per_group = pr.K // pr.groups
    k_lo = np.arange(counts["k"], dtype=np.int64) * tile["k"]
    g_lo = k_lo // k_per_group
    g_hi = (np.minimum(k_lo + tile["k"], pr.K) - 1) // k_per_group
    g_span = g_hi - g_lo + 1
    g_key = g_lo * pr.groups + g_hi  # identity of the input channels a k-tile needs

    n, k, p, q, c, r, s = (idx[lp] for lp in LOOPS)
    in_words = size["n"][n] * size["c"][c] * g_span[k] * rows[p, r] * cols[q, s]
    dead_outputs = 0
    if skip_padding:
        taps_h, tap_id_h = used_taps_per_tile(pr.H, pr.P, pr.R, tile["p"], tile["r"], pr.stride_h, pr.pad_h, pr.dil_h)
        taps_w, tap_id_w = used_taps_per_tile(pr.W, pr.Q, pr.S, tile["q"], tile["s"], pr.stride_w, pr.pad_w, pr.dil_w)
        live_h = live_outputs_per_tile(pr.H, pr.P, pr.R, tile["p"], pr.stride_h, pr.pad_h, pr.dil_h)
        live_w = live_outputs_per_tile(pr.W, pr.Q, pr.S, tile["q"], pr.stride_w, pr.pad_w, pr.dil_w)
        w_words = size["k"][k] * size["c"][c] * taps_h[p, r] * taps_w[q, s]
        out_words = size["n"][n] * size["k"][k] * live_h[p] * live_w[q]
        dead_outputs = pr.output_elements - pr.N * pr.K * int(live_h.sum()) * int(live_w.sum())
        # an iteration runs iff it has a real MAC: some tap of its r-range meets a real row for some
        # output row of its p-range, and likewise for the columns
        active = (taps_h[p, r] > 0) & (taps_w[q, s] > 0)
        # two equal tap sets of one r-tile are one weight tile (interior tiles reuse the boundary's)
        w_extra: tuple[tuple[np.ndarray, int], ...] = ((tap_id_h[p, r], int(tap_id_h.max()) + 1),
                                                       (tap_id_w[q, s], int(tap_id_w.max()) + 1))
    else:
        w_words = size["k"][k] * size["c"][c] * size["r"][r] * size["s"][s]
        out_words = size["n"][n] * size["k"][k] * size["p"][p] * size["q"][q]
        active = np.ones(iterations, dtype=bool)
        w_extra = ()

    def mix(*parts: tuple[np.ndarray, int]) -> np.ndarray:
        key = np.zeros(iterations, dtype=np.int64)
        for values, radix in parts:
            key = key * radix + values
        return key

    in_key = mix((n, counts["n"]), (c, counts["c"]), (p, counts["p"]), (q, counts["q"]), (r, counts["r"]),
                 (s, counts["s"]), (g_key[k], pr.groups * pr.groups))
    w_key = mix((k, counts["k"]), (c, counts["c"]), (r, counts["r"]), (s, counts["s"]), *w_extra)
    out_key = mix((n, counts["n"]), (k, counts["k"]), (p, counts["p"]), (q, counts["q"]))

    # only the iterations that run: a skipped iteration leaves fast memory as it is
    in_words, w_words, out_words = in_words[active], w_words[active], out_words[active]
    in_key, w_key, out_key = in_key[active], w_key[active], out_key[active]
    executed = int(active.sum())
    zero_footprint = 1 if dead_outputs else 0
    if executed == 0:
        return TiledTraffic(input_load_words=0, weight_load_words=0, output_load_words=0,
                            output_store_words=dead_outputs, footprint_words=zero_footprint, iterations=iterations)

    out_start = _changes(out_key)
    out_end = np.empty_like(out_start)
    out_end[:-1] = out_start[1:]
    out_end[-1] = True
    _, first_index, inverse = np.unique(out_key, return_index=True, return_inverse=True)
    revisit = out_start & (first_index[inverse] != np.arange(executed))

    return TiledTraffic(
        input_load_words=int(in_words[_changes(in_key)].sum()),
        weight_load_words=int(w_words[_changes(w_key)].sum()),
        output_load_words=int(out_words[revisit].sum()),
        output_store_words=int(out_words[out_end].sum()) + dead_outputs,
        footprint_words=max(int((in_words + w_words + out_words).max()), zero_footprint),
        iterations=iterations,
    )
