"""The fused Winograd kernel's plan (validation, resources), its traffic formula against a simulation of
the kernel's loads and stores, traffic ≥ the Winograd lower bound, and nvcc compile checks."""

from __future__ import annotations

import shutil

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from convtune.bounds.winograd import winograd_cdag_bound
from convtune.errors import InvalidConfig
from convtune.kernels.winograd.launcher import (
    WinogradFwdConfig,
    WinogradFwdPlan,
    onchip_words,
    total_traffic_words,
    traffic_words,
)
from convtune.kernels.winograd.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

H200 = MachineModel.preset("h200")
SMALL = [WinogradFwdConfig(m=2, tile_n=32, tile_k=8, chunk_c=2, thread_n=2, thread_k=4, stages=s) for s in (1, 2)] + [
    WinogradFwdConfig(m=4, tile_n=16, tile_k=16, chunk_c=4, thread_n=1, thread_k=4, stages=2),
    WinogradFwdConfig(m=2, tile_n=64, tile_k=4, chunk_c=1, thread_n=2, thread_k=4, stages=1),
]


def simulate(pl: WinogradFwdPlan) -> dict[str, int]:
    """Replay winograd_fwd.cu's loads and stores block by block, thread by thread (not the formula)."""
    p, c = pl.problem, pl.config
    a, threads = c.alpha, c.threads
    words = {"input": 0, "filter": 0, "output": 0}
    gx, gy, _ = pl.grid
    for bx in range(gx):
        n0 = bx * c.tile_n
        for by in range(gy):
            k0 = by * c.tile_k
            for chunk in range(pl.cp // c.chunk_c):         # each chunk is loaded once, whatever the stages
                for tid in range(threads):
                    for w in range(pl.windows_per_thread):
                        cc, nn = divmod(tid + w * threads, c.tile_n)
                        n, ch = n0 + nn, chunk * c.chunk_c + cc
                        if n >= pl.tiles or ch >= p.C:
                            continue
                        tq, tp = n % pl.tiles_q, (n // pl.tiles_q) % pl.tiles_p
                        h0, w0 = tp * c.m - p.pad_h, tq * c.m - p.pad_w
                        words["input"] += sum(1 for i in range(a) for j in range(a)
                                              if 0 <= h0 + i < p.H and 0 <= w0 + j < p.W)
                words["filter"] += 4 * len(range(0, a * a * c.chunk_c * c.tile_k // 4))   # 16-byte copies
            for tid in range(threads):
                tn_idx, tk_idx = tid % (c.tile_n // c.thread_n), tid // (c.tile_n // c.thread_n)
                for b in range(c.thread_n):
                    n = n0 + tn_idx * c.thread_n + b
                    if n >= pl.tiles:
                        continue
                    tq, tp = n % pl.tiles_q, (n // pl.tiles_q) % pl.tiles_p
                    for kk in range(c.thread_k):
                        if k0 + tk_idx * c.thread_k + kk >= p.K:
                            continue
                        words["output"] += sum(1 for i in range(c.m) for j in range(c.m)
                                               if tp * c.m + i < p.P and tq * c.m + j < p.Q)
    return words


@settings(max_examples=40, deadline=None)
@given(cfg=st.sampled_from(SMALL), n=st.integers(1, 2), ch=st.integers(1, 9), k=st.integers(1, 20),
       h=st.integers(1, 13), w=st.integers(1, 13), pad=st.integers(0, 2))
def test_traffic_formula_equals_simulation(cfg: WinogradFwdConfig, n: int, ch: int, k: int, h: int, w: int,
                                           pad: int) -> None:
    if h + 2 * pad < 3 or w + 2 * pad < 3:
        return
    problem = ConvProblem(N=n, C=ch, H=h, W=w, K=k, R=3, S=3, pad_h=pad, pad_w=pad)
    pl = plan(problem, cfg, H200)
    assert traffic_words(pl) == simulate(pl)


@pytest.mark.parametrize("key", [
    "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1", "N=1 C=64 H=224 W=224 K=64 R=3 S=3 pad=1",
    "N=1 C=512 H=14 W=14 K=512 R=3 S=3 pad=1", "N=32 C=64 H=56 W=56 K=64 R=3 S=3 pad=1",
    "N=3 C=5 H=9 W=11 K=7 R=3 S=3 pad=2", "N=2 C=17 H=7 W=7 K=33 R=3 S=3 pad=0"])
@pytest.mark.parametrize("cfg", [*SMALL, WinogradFwdConfig(),
                                 WinogradFwdConfig(m=4, tile_n=32, tile_k=32, thread_n=1, thread_k=4)])
def test_traffic_is_at_least_the_winograd_lower_bound(key: str, cfg: WinogradFwdConfig) -> None:
    """Every config moves at least the CDAG bound of F(m) at its own on-chip size (pre-transformed U)."""
    problem = ConvProblem.parse(key)
    pl = plan(problem, cfg, H200)
    bound = winograd_cdag_bound(problem, onchip_words(pl), cfg.m, pretransformed_filters=True)
    assert total_traffic_words(pl) >= bound.words


@pytest.mark.parametrize(("field", "cfg", "key"), [
    ("problem", WinogradFwdConfig(), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 stride=2 pad=1"),
    ("problem", WinogradFwdConfig(), "N=1 C=8 H=9 W=9 K=8 R=5 S=5 pad=2"),
    ("problem", WinogradFwdConfig(), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1 dilation=2"),
    ("m", WinogradFwdConfig(m=3), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("thread_n", WinogradFwdConfig(thread_n=3), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("tile_k", WinogradFwdConfig(tile_k=6, thread_k=2), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("threads", WinogradFwdConfig(tile_n=2, thread_n=2, tile_k=4, thread_k=4), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("chunk_c", WinogradFwdConfig(chunk_c=1), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("stages", WinogradFwdConfig(stages=3), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("thread_k", WinogradFwdConfig(m=4, thread_n=2, thread_k=8, tile_k=128), "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("chunk_c", WinogradFwdConfig(m=4, tile_n=64, tile_k=64, chunk_c=16, thread_n=4, thread_k=1),
     "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
    ("threads", WinogradFwdConfig(m=2, tile_n=64, tile_k=64, chunk_c=16, thread_n=2, thread_k=2, stages=1),
     "N=1 C=8 H=9 W=9 K=8 R=3 S=3 pad=1"),
])
def test_invalid_configs_name_the_field(field: str, cfg: WinogradFwdConfig, key: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(ConvProblem.parse(key), cfg, H200)
    assert info.value.field == field


def test_plan_geometry() -> None:
    pl = plan(ConvProblem.parse("N=2 C=5 H=9 W=11 K=7 R=3 S=3 pad=1"), WinogradFwdConfig(), H200)
    assert (pl.tiles_p, pl.tiles_q, pl.tiles) == (5, 6, 60)
    assert (pl.cp, pl.kp, pl.grid) == (8, 64, (2, 1, 1))
    assert pl.smem_bytes == 4 * 2 * 16 * 8 * (32 + 64)


@pytest.mark.skipif(shutil.which("nvcc") is None, reason="needs nvcc on PATH")
@pytest.mark.parametrize("cfg", [
    WinogradFwdConfig(),
    WinogradFwdConfig(stages=1),
    WinogradFwdConfig(m=2, tile_n=64, tile_k=32, chunk_c=4, thread_n=2, thread_k=4, stages=1),
    WinogradFwdConfig(m=4, tile_n=32, tile_k=32, chunk_c=8, thread_n=2, thread_k=2),
    WinogradFwdConfig(m=4, tile_n=32, tile_k=32, chunk_c=8, thread_n=1, thread_k=4, stages=1),
])
def test_nvcc_compiles_without_spills(cfg: WinogradFwdConfig) -> None:
    from convtune.kernels.compile import nvcc_compile

    pl = plan(ConvProblem.parse("N=4 C=64 H=28 W=28 K=64 R=3 S=3 pad=1"), cfg, H200)
    result = nvcc_compile(pl.source())
    res = result.resources["winograd_fwd"]
    assert res.local_bytes == 0 and not res.spills, result.log
    assert res.num_regs <= 255
