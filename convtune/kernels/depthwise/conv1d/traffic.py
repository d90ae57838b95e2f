"""Counter-free traffic model of the depthwise 1-D kernels: compulsory words, the words each variant's
dataflow requests from global memory, and FLOP counts.

Notation: NR = B·C rows of L elements, KE = min(K, L) taps that meet data, N = B·C·L,
S_c = Σ_{t<L} min(KE, t+1) = L·KE − KE(KE−1)/2 (causal tap count per row). Words are elements: bytes are
the problem's itemsize per tensor element (4 for float32, 2 for float16 / bfloat16) and 4 per fp32 partial,
atomic or workspace word (:func:`~convtune.kernels.depthwise.dtypes.stream_bytes`).

Compulsory (every used element read once, every result written once):

- fwd, dgrad: N (x or dy) + C·KE (w) + N (y or dx)
- wgrad: 2N (x, dy) + C·K (dw: taps j ≥ L are written as zeros)
- fused backward (x, dy → dx, dw; no kernel yet, for comparison): 3N + C·KE + C·K

FLOPs per path: causal 2·NR·S_c (the taps that meet data), dense 2·NR·L·K (every tap).

Requested words per variant (what the kernel's loads and stores ask for; halo re-reads and weight
re-loads included, zero-filled copies read nothing; caches may serve part of it):

- naive, coalesced: every tap loads x (dy) and w: fwd/dgrad 2·NR·S_c + N stores; wgrad thread (b,c,j)
  loads dy[t] and x[t−j] for t ∈ [j, L): 2·NR·S_c, then NR·KE partials (or atomics).
- shared: per block (channel, RB batch rows, tile of T): the rows' window of T + KE − 1 inside [0, L)
  (left halo fwd / x of wgrad, right halo dgrad), w[c] (KE) per block; wgrad also the tile of dy, one
  partial (or atomic) per (block, j).
- warp, register design (fwd/dgrad, KE ≤ 64): every input once (N), KE taps per lane whose first row is
  real (lanes_per_row · min(NR, grid · rows_per_block) · KE), every output once.
- warp wgrad, register design (design 2): x and dy once each, one partial slot of KE per row group of the
  grid (grid · rows_per_block slots; idle ones write zeros) or one atomic per real row group and tap.
- warp, shared-memory design: per row and chunk of CH = 32·V outputs the window of CH + KE − 1 inside
  [0, L); w[c] (KE) each time a warp's channel changes (every row unless gridDim·warps is a multiple of
  C); wgrad: per row x windows + dy chunks, one partial (or atomic) per (block, j).
- fast: per item (RB rows × segment of SEG) the window [seg0 − HP, seg0 + SEG) inside [0, L) for every
  real row (and the segment of dy in wgrad); KE taps once per thread with a real first row; wgrad:
  grid·RB·KE partial stores (idle slots write zeros) or one atomic per (real row slot, j).
- deterministic wgrad adds the reduction: slots·KE reads + C·K stores; atomic wgrad adds the C·K
  zeroing of dw (16-bit storage: the C·K zeroing of the fp32 workspace its atomics go to, then C·K reads
  of it and C·K stores of dw by the reduction kernel).

L1 sectors (:func:`warp_sector_bytes`, float32 warp register design, fwd/dgrad): a warp's load or store
instruction serves RPW = 32/G rows, G lanes a row, each lane E = 4 (float4) or 1 consecutive elements at
offset g·V + u of its segment; the instruction costs the distinct 32-byte sectors it touches. With few lanes
a row (G·V·4 bytes spread over G sectors or more) a warp touches up to 32 sectors for 128 useful bytes.
L1 lines (:func:`warp_line_wavefronts`, what the model prices): the same instructions' distinct 128-byte lines,
one L1 tag lookup (wavefront) each; ≥ sectors / 4, and up to 32 an instruction on short odd rows.

Shared-memory wavefronts of the fast kernel (:func:`fast_smem_wavefronts`): per item, each thread's float4
window reads and result writes at rb·PITCH + tp·TL, a quarter-warp's access costing its worst bank-group
conflict (:func:`float4_block_wavefronts`), plus conflict-free copies in and out at 128 bytes a wavefront.

``tests/kernels/depthwise/test_depthwise_traffic.py`` checks each formula against a replay of the kernel's loops.
"""

from __future__ import annotations

from functools import cache

import numpy as np

from convtune.kernels.depthwise.conv1d.plan import Depthwise1dPlan, float4_block_wavefronts
from convtune.kernels.depthwise.dtypes import stream_bytes
from convtune.kernels.launch_geometry import span_inside
from convtune.problem import ConvProblem


def causal_taps_per_row(L: int, K: int) -> int:
    """S_c = Σ_{t<L} min(K, t+1): multiply-adds of one row that meet data (= Σ_{j<min(K,L)} (L − j))."""
    ke = min(K, L)
    return L * ke - ke * (ke - 1) // 2


def flops(problem: ConvProblem, count: str = "causal") -> int:
    """FLOPs of one path (fwd, dgrad or wgrad): ``"causal"`` counts the taps that meet data, ``"dense"``
    every tap (2·B·C·L·K)."""
    p = problem
    if count == "dense":
        return 2 * p.N * p.C * p.W * p.S
    if count == "causal":
        return 2 * p.N * p.C * causal_taps_per_row(p.W, p.S)
    raise ValueError(f"count={count!r}: allowed 'causal' or 'dense'")


def compulsory_words(problem: ConvProblem, path: str) -> int:
    """Words any kernel of ``path`` must move (module docstring); ``path`` also accepts ``"bwd"`` (fused)."""
    p = problem
    n, ke = p.N * p.C * p.W, min(p.S, p.W)
    table = {"fwd": 2 * n + p.C * ke, "dgrad": 2 * n + p.C * ke, "wgrad": 2 * n + p.C * p.S,
             "bwd": 3 * n + p.C * ke + p.C * p.S}
    try:
        return table[path]
    except KeyError:
        raise ValueError(f"path={path!r}: allowed {', '.join(table)}") from None


def compulsory_bytes(problem: ConvProblem, path: str) -> int:
    """:func:`compulsory_words` at the problem's itemsize (every compulsory word is a tensor element)."""
    return problem.itemsize_bytes * compulsory_words(problem, path)


def _reduction_terms(pl: Depthwise1dPlan, partial_stores: int, atomics: int) -> dict[str, int]:
    if pl.atomic_workspace:
        return {"atomics": atomics, "ws_zero": pl.C * pl.K, "reduce_read": pl.C * pl.K, "dw": pl.C * pl.K}
    if pl.atomic:
        return {"atomics": atomics, "dw_zero": pl.C * pl.K}
    return {"partials": partial_stores, "reduce_read": pl.slots * pl.ke, "dw": pl.C * pl.K}


def _tiles_words(L: int, tile: int, before: int, after: int) -> int:
    """Σ over tiles l0 = 0, tile, … < L of |[l0 − before, l0 + tile + after) ∩ [0, L)|."""
    return sum(span_inside(l0 - before, before + tile + after, L) for l0 in range(0, L, tile))


def traffic_words(pl: Depthwise1dPlan) -> dict[str, int]:
    """Requested global-memory words of one launch, per stream (module docstring)."""
    B, C, L, ke = pl.B, pl.C, pl.L, pl.ke
    nr, n = pl.rows, pl.rows * pl.L
    path, v = pl.path, pl.variant
    src = "dy" if path == "dgrad" else "x"
    dst = {"fwd": "y", "dgrad": "dx"}.get(path, "")
    if v in ("naive", "coalesced"):
        sc = causal_taps_per_row(L, ke)
        if path == "wgrad":
            return {"x": nr * sc, "dy": nr * sc, **_reduction_terms(pl, nr * ke, nr * ke)}
        return {src: nr * sc, "w": nr * sc, dst: n}
    if v == "shared":
        c = pl.config
        ntl, nbg = pl.geometry["ntl"], pl.geometry["nbg"]
        t = c.tile_l  # type: ignore[attr-defined]
        if path == "wgrad":
            blocks = ntl * nbg * C
            return {"x": C * B * _tiles_words(L, t, ke - 1, 0), "dy": n,
                    **_reduction_terms(pl, blocks * ke, blocks * ke)}
        window = _tiles_words(L, t, ke - 1, 0) if path == "fwd" else _tiles_words(L, t, 0, ke - 1)
        return {src: C * B * window, "w": ntl * nbg * C * ke, dst: n}
    if v == "warp" and path == "wgrad" and pl.geometry.get("register"):
        real = min(nr, pl.slots)
        return {"x": n, "dy": n, **_reduction_terms(pl, pl.slots * ke, real * ke)}
    if v == "warp" and pl.geometry.get("register"):
        lanes = pl.config.lanes_per_row  # type: ignore[attr-defined]
        return {src: n, "w": lanes * min(nr, pl.grid * pl.geometry["rows_per_block"]) * ke, dst: n}
    if v == "warp":
        ch = pl.geometry["chunk"]
        if path == "wgrad":
            blocks = pl.geometry["nbg"] * C
            return {"x": nr * _tiles_words(L, ch, ke - 1, 0), "dy": n,
                    **_reduction_terms(pl, blocks * ke, blocks * ke)}
        window = _tiles_words(L, ch, ke - 1, 0) if path == "fwd" else _tiles_words(L, ch, 0, ke - 1)
        warps_total = pl.grid * pl.config.warps  # type: ignore[attr-defined]
        reloads = min(warps_total, nr) if warps_total % C == 0 else nr
        return {src: nr * window, "w": reloads * ke, dst: n}
    # fast
    g = pl.geometry
    seg, hp = g["seg"], g["hp"]
    window = sum(span_inside(s0 - hp, hp + seg, L) for s0 in range(0, L, seg))
    tpr = pl.config.lanes_per_row  # type: ignore[attr-defined]
    real_slots = min(nr, pl.slots if path == "wgrad" else pl.grid * pl.config.rows)  # type: ignore[attr-defined]
    if path == "wgrad":
        return {"x": nr * window, "dy": n, **_reduction_terms(pl, pl.slots * ke, real_slots * ke)}
    return {src: nr * window, "w": real_slots * tpr * ke, dst: n}


def total_traffic_words(pl: Depthwise1dPlan) -> int:
    return sum(traffic_words(pl).values())


def total_traffic_bytes(pl: Depthwise1dPlan) -> int:
    """Requested bytes: tensor words at the problem's itemsize, fp32 partials and atomics at 4."""
    return stream_bytes(traffic_words(pl), pl.problem.itemsize_bytes)


def fast_issued_macs(pl: Depthwise1dPlan) -> int:
    """Multiply-adds the fast kernel issues (zeros included): per row and active thread segment (tl0 < L),
    Σ_{t<TL} min(KE, t+1) on the peeled path (tl0 = 0, or no halo), TL·KE otherwise. Compare with the
    causal count flops(problem)/2: the excess is the causal zeros multiplied by threads that start inside
    the first KE−1 outputs, plus tails past L."""
    if pl.variant != "fast":
        raise ValueError(f"{pl.variant}: issued MACs are modelled for the fast variant only")
    c = pl.config
    tl, tpr, ke = c.tile_l, c.lanes_per_row, pl.ke  # type: ignore[attr-defined]
    peeled = sum(min(ke, t + 1) for t in range(tl))
    halo = bool(pl.geometry["halo"])
    per_row = 0
    for s0 in range(0, pl.L, pl.geometry["seg"]):
        for tp in range(tpr):
            tl0 = s0 + tp * tl
            if tl0 < pl.L:
                per_row += peeled if (tl0 == 0 or not halo) else tl * ke
    return pl.rows * per_row


def warp_issued_macs(pl: Depthwise1dPlan) -> int:
    """Multiply-adds the warp variant's register design issues (zeros and idle tail lanes included): per
    row, segment and lane Σ_{d ≤ DMAX} #{(u, v): 0 ≤ d·V + v − u < KE} (``warp_reg_body``); compare with
    the causal count flops(problem)/2."""
    if pl.variant != "warp" or not pl.geometry.get("register"):
        raise ValueError("issued MACs are modelled for the warp variant's register design only")
    c = pl.config
    g, v, ke = c.lanes_per_row, c.outputs_per_lane, pl.ke  # type: ignore[attr-defined]
    dfull = (ke + v - 2) // v
    dmax = dfull if pl.geometry["multi"] else min(dfull, g - 1)
    per_lane = sum(1 for d in range(dmax + 1) for u in range(v) for vv in range(v) if 0 <= d * v + vv - u < ke)
    return pl.rows * pl.geometry["nseg"] * g * per_lane


SECTOR_BYTES = 32
WARP_LANES = 32   # threads of a warp


def warp_sector_bytes(pl: Depthwise1dPlan) -> int:
    """Bytes of the 32-byte L1 sectors the warp register design's global loads and stores request (fwd/dgrad,
    float32). Per instruction u of segment s0, lane g of a row reads E elements (4 with float4, else 1) from
    t = s0 + g·V + u when t < L; the instruction costs the distinct sectors of its RPW = 32/G rows. Rows are
    taken as sector-aligned (exact when L·4 is a multiple of 32 bytes; then no two rows share a sector), so
    the total is rows × Σ over segments and u of one row's distinct sectors, × 2 (loads and stores) × 32 B."""
    if pl.variant != "warp" or not pl.geometry.get("register") or pl.path == "wgrad":
        raise ValueError("L1 sectors are modelled for the warp variant's register design, fwd/dgrad")
    c = pl.config
    g, v = c.lanes_per_row, c.outputs_per_lane  # type: ignore[attr-defined]
    e = 4 if pl.geometry.get("vec4") else 1
    item, L, seg = 4, pl.L, g * v
    counts: dict[tuple[int, int], int] = {}   # (segment start's byte offset in its sector, elements left) → sectors
    per_row = 0
    for s0 in range(0, pl.geometry["nseg"] * seg, seg):
        key = ((s0 * item) % SECTOR_BYTES, min(L - s0, seg))
        if key not in counts:
            off, left = key
            counts[key] = sum(len({(off + b) // SECTOR_BYTES for lane in range(g) if lane * v + u < left
                                   for b in ((lane * v + u) * item, (lane * v + u + e) * item - 1)})
                              for u in range(0, v, e))
        per_row += counts[key]
    return 2 * pl.rows * per_row * SECTOR_BYTES


LINE_BYTES = 128
#: Row groups whose line counts are replayed: a group's start byte modulo 128 repeats with a period dividing 32.
LINE_SAMPLE_GROUPS = 32


def warp_line_wavefronts(pl: Depthwise1dPlan) -> float:
    """L1 wavefronts of the warp register design's global loads and stores (fwd/dgrad): the distinct 128-byte lines
    each warp instruction touches, summed over instructions (the L1 takes one line's tag per clock, so an instruction
    whose 32 lanes sit in 32 lines costs 32 clocks however few sectors it uses). Lane g of row r reads E elements at
    byte (r·L + s0 + g·V + u)·4 (rows of a warp are consecutive, RPW = 32/G of them); exact for the first
    ``LINE_SAMPLE_GROUPS`` row groups (one period of their start bytes modulo 128), scaled to all of them; × 2 for
    the stores, which follow the same addresses."""
    if pl.variant != "warp" or not pl.geometry.get("register") or pl.path == "wgrad":
        raise ValueError("L1 wavefronts are modelled for the warp variant's register design, fwd/dgrad")
    c = pl.config
    return _line_wavefronts(pl.L, pl.rows, c.lanes_per_row, c.outputs_per_lane,  # type: ignore[attr-defined]
                            4 if pl.geometry.get("vec4") else 1, pl.geometry["nseg"])


@cache
def _line_wavefronts(L: int, rows: int, g: int, v: int, e: int, nseg: int) -> float:
    rpw = WARP_LANES // g
    groups = -(-rows // rpw)
    sampled = min(groups, LINE_SAMPLE_GROUPS)
    row = np.arange(sampled * rpw).reshape(sampled, 1, 1, rpw, 1)
    s0 = (np.arange(nseg) * g * v).reshape(1, nseg, 1, 1, 1)
    u = np.arange(0, v, e).reshape(1, 1, -1, 1, 1)
    t = s0 + u + (np.arange(g) * v).reshape(1, 1, 1, 1, g)
    real = (t < L) & (row < rows)
    first = (row * L + t) * 4
    lines = np.concatenate([first // LINE_BYTES, (first + 4 * e - 1) // LINE_BYTES], axis=-1)
    real = np.concatenate([real, real], axis=-1)
    shape = (*lines.shape[:3], -1)
    lines = np.where(real, lines, -1).reshape(shape)   # one instruction's lanes along the last axis
    lines.sort(axis=-1)
    distinct = (np.diff(lines, axis=-1) != 0) & (lines[..., 1:] >= 0)
    total = int(distinct.sum() + (lines[..., 0] >= 0).sum())
    return 2 * total * groups / sampled


#: Shared-memory banks × 4 bytes = 128 bytes a wavefront.
SMEM_WAVEFRONT_BYTES = 128


def fast_smem_wavefronts(pl: Depthwise1dPlan) -> int:
    """Shared-memory wavefronts of the fast kernel (float32; 0 for 16-bit storage, whose 8-byte window reads follow
    other bank rules). Per item, thread (rb, tp) of the block reads its window as ⌈(HP + TL) / 4⌉ float4s at
    rb·PITCH + tp·TL (+ 4i); fwd/dgrad write TL / 4 result float4s at the same pattern shifted by HP, wgrad reads
    TL / 4 dy float4s there instead. A float4 instruction costs, per quarter-warp, the most lanes whose 16-byte
    units fall in one bank group (unit mod 8). The copies (in: RB·(HP + SEG) elements; out, or wgrad's dy: RB·SEG)
    are conflict-free, 128 bytes a wavefront. Items: row groups × segments."""
    if pl.variant != "fast":
        raise ValueError("shared-memory wavefronts are modelled for the fast variant")
    if pl.problem.itemsize_bytes != 4:
        return 0
    c, g = pl.config, pl.geometry
    rb, tl, tpr = c.rows, c.tile_l, c.lanes_per_row  # type: ignore[attr-defined]
    hp = g["hp"]
    per_instruction = float4_block_wavefronts(rb, tpr, tl, g["pitch"])
    vector_reads = -(-(hp + tl) // 4) + tl // 4
    copied_bytes = 4 * rb * (hp + 2 * g["seg"])
    per_item = vector_reads * per_instruction + -(-copied_bytes // SMEM_WAVEFRONT_BYTES)
    return per_item * g["ngroups"] * g["nseg"]

