"""The direct kernel's analytic traffic (``launcher.traffic_words``) against a simulation of its copy loops.

The simulation below is written from ``direct_fwd.cu``, not from the launcher's formula: for every
block of the grid (k-tile, spatial tile, image, split) it replays the software pipeline (which chunk
is loaded when), and inside ``load_stage`` every thread's input copy duties (plane positions
``pos = tid + i·THREADS`` of the IH×IWL patch, for each channel ``cc`` of the chunk) and weight copy
duties (16-byte segment ``wseg`` of rows ``crs = wrow0 + j·WROW_STEP``), counting only the copies whose
``ok`` is true, times their width in floats. The epilogue's stores are replayed per thread (float4
stores when the kernel takes that path), plus the memset of y when the reduction is split.

The only things taken from the plan are the kernel's launch arguments (grid, tiles_q, Kp,
chunks_per_split, the patch pitch template argument): exactly what the launcher hands the kernel.
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from convtune.bounds import direct_lower_bound
from convtune.errors import InvalidConfig
from convtune.kernels.direct.launcher import DirectFwdConfig, DirectFwdPlan, total_traffic_words, traffic_words
from convtune.kernels.direct.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
#: S for the lower bound: what one block can hold on chip (shared memory + its share of the registers)
S_BLOCK = H200.fast_memory_words("block")
PUBLIC_SUITE = Path(__file__).resolve().parents[3] / "benchmarks" / "suites" / "public.json"


# ---- the simulation ------------------------------------------------------------------------------------
@dataclass
class Simulated:
    input: int = 0
    weight: int = 0
    output: int = 0
    memset: int = 0
    empty_split_blocks: int = 0

    def words(self) -> dict[str, int]:
        return {"input": self.input, "weight": self.weight, "output": self.output + self.memset}


def _div_trunc(a: int, b: int) -> int:
    q = abs(a) // abs(b)
    return q if (a >= 0) == (b > 0) else -q


def _pipeline_loads(nchunks: int, stages: int) -> list[int]:
    """The chunks ``load_stage`` is called for, in order, by the kernel's software pipeline."""
    loads: list[int] = []
    if stages == 1:
        for chunk in range(nchunks):
            loads.append(chunk)
        return loads
    for s in range(stages - 1):
        if s < nchunks:
            loads.append(s)
    for chunk in range(nchunks):
        nxt = chunk + stages - 1
        if nxt < nchunks:
            loads.append(nxt)
    return loads


def simulate(pl: DirectFwdPlan, coverage: np.ndarray | None = None) -> Simulated:
    """Replay the kernel's global loads and stores for every block; count words actually moved.

    ``coverage`` (N, K, P, Q), if given, is incremented per element each time the epilogue stores it.
    """
    p, c = pl.problem, pl.config
    TH, TW, TK, CB, PY, PX, KX = c.tile_h, c.tile_w, c.tile_k, c.chunk_c, c.thread_h, c.thread_w, c.thread_k
    R, S, SH, SW, DH, DW = p.R, p.S, p.stride_h, p.stride_w, p.dil_h, p.dil_w
    STAGES, VEC, IWP = c.stages, c.vec, pl.patch_pitch
    ATOMIC = c.splits > 1
    # kernel arguments, as launch() passes them
    C, H, W, K, Kp, P, Q = p.C, p.H, p.W, p.K, pl.kp, p.P, p.Q
    pad_h, pad_w, tiles_q, chunks_per_split, splits = p.pad_h, p.pad_w, pl.tiles_q, pl.chunks_per_split, c.splits
    grid = pl.grid

    # DirectFwdTraits
    IH = (TH - 1) * SH + (R - 1) * DH + 1
    IW = (TW - 1) * SW + (S - 1) * DW + 1
    NPG = (TH // PY) * (TW // PX)
    THREADS = NPG * (TK // KX)
    IN_STAGE = (CB * IH * IWP + 3) // 4 * 4   # rounded up to 16 bytes: the weight slice stays aligned
    W_STAGE = CB * R * S * TK
    STAGE = IN_STAGE + W_STAGE
    assert pl.smem_bytes == 4 * STAGES * STAGE, "plan's dynamic shared memory differs from the kernel's layout"
    assert c.threads == THREADS
    assert IW + (3 if VEC == 4 else 0) <= IWP
    assert VEC == 1 or IWP % 4 == 0

    # per-thread copy duties (independent of the block except through ih0/iw0/k0)
    IWL = IWP // 4 if VEC == 4 else IW
    PLANE = IH * IWL
    NI = (PLANE + THREADS - 1) // THREADS
    tid = np.arange(THREADS)[:, None]
    pos = tid + np.arange(NI)[None, :] * THREADS          # (THREADS, NI)
    row = pos // IWL
    col = pos - row * IWL
    in_live = pos < PLANE
    present = np.ones_like(in_live) if NI * THREADS == PLANE else in_live  # the copy is issued at all
    in_soff = row * IWP + (4 * col if VEC == 4 else col)
    # every issued copy lands inside the stage's input area
    assert (in_soff[present] + (CB - 1) * IH * IWP + VEC <= IN_STAGE).all()

    WSEG = TK // 4
    assert THREADS % WSEG == 0
    WROW_STEP = THREADS // WSEG
    NW = (CB * R * S + WROW_STEP - 1) // WROW_STEP
    wseg = np.arange(THREADS) % WSEG
    wrow0 = np.arange(THREADS) // WSEG
    crs = wrow0[:, None] + np.arange(NW)[None, :] * WROW_STEP   # (THREADS, NW)
    w_present = np.ones_like(crs, dtype=bool) if (CB * R * S) % WROW_STEP == 0 else crs < CB * R * S
    w_soff = crs * TK + 4 * np.broadcast_to(wseg[:, None], crs.shape)
    assert (w_soff[w_present] + 4 <= W_STAGE).all()
    # 16-byte copies need 16-byte aligned shared destinations in every stage slot
    for slot in range(STAGES):
        assert ((slot * STAGE + IN_STAGE + w_soff[w_present]) % 4 == 0).all()
        if VEC == 4:
            assert ((slot * STAGE + in_soff[present]) % 4 == 0).all()

    # epilogue thread mapping
    pg = np.arange(THREADS) % NPG
    kg = np.arange(THREADS) // NPG
    gy = pg // (TW // PX)
    gx = pg - gy * (TW // PX)

    sim = Simulated()
    if ATOMIC:
        sim.memset = p.output_elements
    for bx in range(grid[0]):
        k0 = bx * TK
        w_kok = k0 + 4 * wseg < Kp                                  # (THREADS,)
        for by in range(grid[1]):
            tp = by // tiles_q
            tq = by - tp * tiles_q
            oy0, ox0 = tp * TH, tq * TW
            ih0 = oy0 * SH - pad_h
            iw0 = ox0 * SW - pad_w
            iw_base = (iw0 >> 2) << 2 if VEC == 4 else iw0
            ih = ih0 + row
            iw = iw_base + 4 * col if VEC == 4 else iw0 + col
            in_ok = in_live & (ih >= 0) & (ih < H) & (iw >= 0) & (iw < W)
            if VEC == 4:
                # 16-byte copies: aligned (W % 4 == 0) and wholly inside one row
                assert (iw[in_ok] % 4 == 0).all() and (iw[in_ok] + 3 < W).all()
            in_ok_count = int(np.count_nonzero(in_ok & present))
            for bz in range(grid[2]):
                n = bz // splits
                split = bz - n * splits
                c_begin = split * chunks_per_split * CB
                c_end = min(C, c_begin + chunks_per_split * CB)
                nchunks = _div_trunc(c_end - c_begin + CB - 1, CB)  # C++ '/' truncates toward zero
                if nchunks <= 0:
                    sim.empty_split_blocks += 1
                    continue
                for chunk in _pipeline_loads(nchunks, STAGES):
                    c0 = c_begin + chunk * CB
                    for cc in range(CB):
                        if c0 + cc < c_end:                          # c_ok
                            sim.input += VEC * in_ok_count
                    rows_valid = (c_end - c0) * R * S
                    ok = w_kok[:, None] & (crs < rows_valid) & w_present
                    sim.weight += 4 * int(np.count_nonzero(ok))
                # epilogue
                vec_store = not ATOMIC and PX % 4 == 0 and Q % 4 == 0
                for t in range(THREADS):
                    for py in range(PY):
                        oy = oy0 + gy[t] * PY + py
                        if oy >= P:
                            continue
                        for v in range(KX):
                            k = k0 + kg[t] * KX + v
                            if k >= K:
                                continue
                            for px in range(PX):
                                ox = ox0 + gx[t] * PX + px
                                if PX % 4 == 0:
                                    if vec_store and px % 4 == 0:
                                        if ox < Q:
                                            sim.output += 4
                                            if coverage is not None:
                                                coverage[n, k, oy, ox:ox + 4] += 1
                                        continue
                                    if vec_store:
                                        continue
                                if ox < Q:
                                    sim.output += 1
                                    if coverage is not None:
                                        coverage[n, k, oy, ox] += 1
    return sim


def nonempty_splits(pl: DirectFwdPlan) -> int:
    chunks = -(-pl.problem.C // pl.config.chunk_c)
    return sum(1 for s in range(pl.config.splits) if s * pl.chunks_per_split < chunks)


# ---- strategies --------------------------------------------------------------------------------------------
@st.composite
def problems(draw: st.DrawFn) -> ConvProblem:
    R = draw(st.sampled_from([1, 1, 2, 3, 3, 3, 5, 7]))
    S = draw(st.sampled_from([R, R, R, 1, 3, 5]))
    stride_h = draw(st.sampled_from([1, 1, 2, 3]))
    stride_w = draw(st.sampled_from([stride_h, stride_h, 1, 2, 3]))
    dil_h = draw(st.sampled_from([1, 1, 1, 2]))
    dil_w = draw(st.sampled_from([dil_h, dil_h, 1, 2]))
    pad_h = draw(st.integers(0, 3))
    pad_w = draw(st.sampled_from([pad_h, pad_h, 0, 1, 2, 3]))
    span_h, span_w = dil_h * (R - 1) + 1, dil_w * (S - 1) + 1
    H = draw(st.integers(max(1, span_h - 2 * pad_h), 19))
    W = draw(st.one_of(st.integers(max(1, span_w - 2 * pad_w), 19), st.sampled_from([4, 8, 12, 16, 20])))
    W = max(W, span_w - 2 * pad_w)
    return ConvProblem(N=draw(st.integers(1, 2)), C=draw(st.integers(1, 13)), H=H, W=W,
                       K=draw(st.integers(1, 41)), R=R, S=S, stride_h=stride_h, stride_w=stride_w,
                       pad_h=pad_h, pad_w=pad_w, dil_h=dil_h, dil_w=dil_w)


def _thread_shapes() -> list[tuple[int, int, int, int, int, int]]:
    """(thread_h, tile_h, thread_w, tile_w, thread_k, tile_k) with a thread count plan() accepts."""
    shapes = []
    for py, gh, px, gw, kx, gk in itertools.product((1, 2), (1, 2, 4), (1, 2, 4, 8), (1, 2, 4, 8, 16), (4, 8),
                                                   (1, 2, 4, 8, 16)):
        threads, tile_k = gh * gw * gk, kx * gk
        if 32 <= threads <= 512 and threads % 32 == 0 and threads % (tile_k // 4) == 0 and tile_k <= 64 \
                and px * gw <= 32:
            shapes.append((py, py * gh, px, px * gw, kx, tile_k))
    return shapes


THREAD_SHAPES = _thread_shapes()


@st.composite
def configs(draw: st.DrawFn, problem: ConvProblem) -> DirectFwdConfig:
    thread_h, tile_h, thread_w, tile_w, thread_k, tile_k = draw(st.sampled_from(THREAD_SHAPES))
    chunk_c = draw(st.sampled_from([1, 2, 3, 4, 8]))
    chunks = -(-problem.C // chunk_c)
    splits = draw(st.sampled_from(sorted({1, 2, 3, 4, min(chunks, 5), chunks})))
    vec = draw(st.sampled_from([1, 4])) if problem.W % 4 == 0 else 1
    return DirectFwdConfig(tile_h=tile_h, tile_w=tile_w, tile_k=tile_k, chunk_c=chunk_c, thread_h=thread_h,
                           thread_w=thread_w, thread_k=thread_k, stages=draw(st.sampled_from([1, 2, 3])),
                           vec=vec, splits=min(splits, chunks))


def _plan_or_reject(problem: ConvProblem, config: DirectFwdConfig) -> DirectFwdPlan:
    from hypothesis import reject

    try:
        return plan(problem, config, H200)
    except InvalidConfig:
        reject()


def _check_plan(pl: DirectFwdPlan) -> None:
    p = pl.problem
    coverage = np.zeros((p.N, p.K, p.P, p.Q), dtype=np.int64)
    sim = simulate(pl, coverage)
    live = nonempty_splits(pl)
    # every output element is stored exactly once per split that has channels
    assert (coverage == live).all(), f"{pl.config.key()}: outputs stored {np.unique(coverage)} times, want {live}"
    model = traffic_words(pl)
    assert model["input"] == sim.input, f"input traffic of {p.key()} / {pl.config.key()}"
    assert model["weight"] == sim.weight, f"weight traffic of {p.key()} / {pl.config.key()}"
    assert live == pl.config.splits, "plan() must reject splits without channels"
    assert model["output"] == sim.output + sim.memset, f"output traffic of {p.key()} / {pl.config.key()}"
    assert model == sim.words()
    # no schedule moves fewer words than the direct-convolution I/O lower bound
    bound = direct_lower_bound(p, S_BLOCK)
    assert bound.valid
    assert sim.input + sim.weight + sim.output + sim.memset >= bound.words, f"{p.key()} / {pl.config.key()}"


# ---- tests -------------------------------------------------------------------------------------------------
@settings(max_examples=300, derandomize=True, deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
@given(data=st.data())
def test_traffic_words_equals_simulated_copies(data: st.DataObject) -> None:
    problem = data.draw(problems(), label="problem")
    config = data.draw(configs(problem), label="config")
    _check_plan(_plan_or_reject(problem, config))


CASES = [
    # (problem, config): hand-picked corners the random search must not miss
    ("N=2 C=5 H=9 W=11 K=13 R=3 S=3 pad=1", dict(tile_h=2, tile_w=8, tile_k=16, chunk_c=2, thread_w=2, thread_k=4)),
    ("N=1 C=7 H=13 W=13 K=9 R=5 S=5 stride=2 pad=2",
     dict(tile_h=4, tile_w=8, tile_k=32, chunk_c=3, thread_h=2, thread_w=2, thread_k=8, splits=3, stages=3)),
    ("N=1 C=3 H=23 W=23 K=20 R=7 S=7 stride=2 pad=3", dict(tile_h=4, tile_w=8, tile_k=32, chunk_c=3, thread_w=4,
                                                          thread_k=8, stages=1)),
    ("N=1 C=6 H=16 W=16 K=12 R=3 S=3 pad=2 dilation=2",
     dict(tile_h=4, tile_w=8, tile_k=16, chunk_c=4, thread_w=4, thread_k=4, vec=4, splits=2)),
    ("N=2 C=9 H=12 W=20 K=5 R=1 S=1", dict(tile_h=8, tile_w=16, tile_k=8, chunk_c=4, thread_w=8, thread_k=4, vec=4)),
    ("N=1 C=4 H=8 W=12 K=8 R=3 S=3 stride=3 pad=3",
     dict(tile_h=2, tile_w=4, tile_k=16, chunk_c=1, thread_w=1, thread_k=4, vec=4, splits=4, stages=2)),
    ("N=1 C=10 H=11 W=8 K=33 R=3 S=1 pad_h=1 pad_w=0",
     dict(tile_h=4, tile_w=8, tile_k=64, chunk_c=4, thread_h=2, thread_w=4, thread_k=8, vec=4, stages=3)),
]


@pytest.mark.parametrize(("problem", "fields"), CASES, ids=[c[0] for c in CASES])
def test_traffic_words_equals_simulated_copies_examples(problem: str, fields: dict[str, int]) -> None:
    _check_plan(plan(ConvProblem.parse(problem), DirectFwdConfig(**fields), H200))


PUBLIC_CONV2D = json.loads(PUBLIC_SUITE.read_text())["conv2d"]
BOUND_CONFIGS = [
    DirectFwdConfig(),
    DirectFwdConfig(tile_h=8, tile_w=8, tile_k=128, chunk_c=8, thread_w=8, thread_k=8, stages=2),
    DirectFwdConfig(tile_h=16, tile_w=16, tile_k=32, chunk_c=8, thread_w=8, thread_k=8, stages=3, vec=4),
    DirectFwdConfig(tile_h=4, tile_w=4, tile_k=128, chunk_c=4, thread_w=4, thread_k=8, stages=3, splits=2),
    DirectFwdConfig(tile_h=16, tile_w=64, tile_k=16, chunk_c=1, thread_h=2, thread_w=8, thread_k=4, vec=4),
    DirectFwdConfig(tile_h=16, tile_w=16, tile_k=64, chunk_c=3, thread_w=8, thread_k=8, stages=2, vec=4),
]


@pytest.mark.parametrize("spec", PUBLIC_CONV2D, ids=[s["name"] for s in PUBLIC_CONV2D])
def test_public_suite_traffic_is_above_the_lower_bound(spec: dict[str, object]) -> None:
    problem = ConvProblem.from_mapping(spec)
    bound = direct_lower_bound(problem, S_BLOCK)
    assert bound.valid and bound.words >= problem.compulsory_elements
    checked = 0
    for config in BOUND_CONFIGS:
        try:
            pl = plan(problem, config, H200)
        except InvalidConfig:
            continue
        checked += 1
        total = total_traffic_words(pl)
        assert total >= bound.words, f"{config.key()}: {total} words < bound {bound.words:.0f} ({bound.binding_term})"
        # per tensor, the kernel moves at least the compulsory words
        words = traffic_words(pl)
        assert words["input"] >= problem.input_elements_used
        assert words["weight"] >= problem.weight_elements
        assert words["output"] >= problem.output_elements
    assert checked >= 2


def test_pipeline_loads_every_chunk_once() -> None:
    for stages in (1, 2, 3, 4):
        for nchunks in range(0, 9):
            assert sorted(_pipeline_loads(nchunks, stages)) == list(range(nchunks))


def test_simulation_detects_a_wrong_formula() -> None:
    """The comparison has teeth: off-by-one formulas and a shifted padding give different counts."""
    p = ConvProblem.parse("N=1 C=5 H=11 W=10 K=12 R=3 S=3 pad=1")
    config = DirectFwdConfig(tile_h=4, tile_w=4, tile_k=16, chunk_c=2, thread_w=2, thread_k=4)
    pl = plan(p, config, H200)
    sim = simulate(pl)
    assert traffic_words(pl) == sim.words()
    # the same config on the problem with the padding shifted by one moves a different amount
    shifted = plan(ConvProblem.parse("N=1 C=5 H=11 W=10 K=12 R=3 S=3 pad_h=2 pad_w=1"), config, H200)
    assert traffic_words(shifted)["input"] != sim.input
    assert simulate(shifted).input != sim.input
    # a hand-made formula whose row span is one too long (a halo off by one) is caught
    rows = sum(max(0, min(tp * 4 - 1 + pl.patch_h + 1, p.H) - max(tp * 4 - 1, 0)) for tp in range(pl.tiles_p))
    cols = sum(max(0, min(tq * 4 - 1 + pl.patch_w, p.W) - max(tq * 4 - 1, 0)) for tq in range(pl.tiles_q))
    assert pl.k_tiles * p.N * p.C * rows * cols != sim.input
    # and so is a weight formula that forgets the K tail is padded to Kp only (not to a whole tile)
    assert p.N * pl.tiles_p * pl.tiles_q * p.C * p.R * p.S * pl.k_tiles * config.tile_k != sim.weight


def test_plan_rejects_a_split_without_channels() -> None:
    """5 chunks in 4 splits of 2 would leave split 3 empty (its blocks store nothing): plan() refuses it."""
    problem = ConvProblem.parse("N=1 C=10 H=6 W=6 K=8 R=3 S=3 pad=1")
    with pytest.raises(InvalidConfig, match="splits=3"):
        plan(problem, DirectFwdConfig(tile_h=2, tile_w=4, tile_k=16, chunk_c=2, thread_w=1, thread_k=4, splits=4), H200)
