"""Random convolution problems for the wgmma GPU tests (TF32 and 16-bit): batch 1 mostly, up to 32 on small maps;
odd map sizes; channels 1..100, rarely a multiple of 8; filters 1..7, non-square; strides and dilations 1..3,
padding 0..3, padding-dominated maps. A problem whose reduction has too few chunks for the config's split gets
``chunk_channels`` more channels until it has enough."""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.problem import ConvProblem

MAX_COLUMNS = 3_000_000
MAX_MACS = 150_000_000


def random_problem(rng: np.random.Generator, config: Any, plan: Callable[[ConvProblem, Any], Any],
                   chunk_channels: int, **kind: str) -> ConvProblem | None:
    """One random problem ``config`` takes (``plan(problem, config)`` raises for one it does not), of the
    ``kind`` (``math=``, ``dtype=``); None when the draw cannot be made to fit."""
    r, s = (int(v) for v in rng.choice([1, 2, 3, 3, 3, 4, 5, 7], size=2))
    if rng.random() < 0.4:
        s = r
    stride = int(rng.choice([1, 1, 2, 3]))
    sh, sw = (stride, stride) if rng.random() < 0.7 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dil = int(rng.choice([1, 1, 1, 2, 3]))
    dh, dw = (dil, dil) if rng.random() < 0.8 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    n = int(rng.choice([1, 1, 1, 1, 2, 3, 5, 8, 32]))
    c = int(rng.choice([1, 3, 5, 7, 13, 16, 21, 35, 50, 64, 100]))
    k = int(rng.choice([1, 3, 8, 17, 32, 50, 64, 77, 128, 130, 200, 300]))
    span_h, span_w = dh * (r - 1) + 1, dw * (s - 1) + 1
    low_h, low_w = max(1, span_h - 2 * ph), max(1, span_w - 2 * pw)
    if rng.random() < 0.2:   # padding-dominated: the map about the size of the padding
        h, w = low_h + int(rng.integers(0, 2)), low_w + int(rng.integers(0, 2))
    else:
        big = 6 if n >= 8 else 40
        h, w = low_h + int(rng.integers(0, big)), low_w + int(rng.integers(0, big))
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                          dil_h=dh, dil_w=dw, **kind)
    for _ in range(40):      # enough reduction chunks for every split
        try:
            plan(problem, config)
            break
        except InvalidConfig as exc:
            if exc.field != "splits":
                return None
            problem = dataclasses.replace(problem, C=problem.C + chunk_channels)
    else:
        return None
    m, kr = problem.N * problem.P * problem.Q, problem.C * problem.R * problem.S
    if m * kr > MAX_COLUMNS or m * kr * problem.K > MAX_MACS:
        return None
    return problem


def random_fold(rng: np.random.Generator, base: Any, plan: Callable[[ConvProblem, Any], Any],
                **kind: str) -> tuple[ConvProblem, Any] | None:
    """A stem-like problem of the ``kind`` (C ≤ 8, S ≥ 2; strides, dilation, padding-dominated maps) and ``base``
    folding its S taps; None when the fold does not take C (more than 16 bytes of channels), the chunk cannot hold
    S·Cq columns or the split has too few filter rows."""
    r, s = int(rng.choice([1, 2, 3, 5, 7])), int(rng.choice([2, 3, 5, 7]))
    sh, sw = int(rng.choice([1, 2, 2, 3])), int(rng.choice([1, 2, 2, 3]))
    dh, dw = int(rng.choice([1, 1, 2, 3])), int(rng.choice([1, 1, 2]))
    ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    n = int(rng.choice([1, 1, 2, 3, 8]))
    span_h, span_w = dh * (r - 1) + 1, dw * (s - 1) + 1
    h = max(1, span_h - 2 * ph) + int(rng.integers(0, 3 if rng.random() < 0.2 else 40))
    w = max(1, span_w - 2 * pw) + int(rng.integers(0, 3 if rng.random() < 0.2 else 40))
    problem = ConvProblem(N=n, C=int(rng.choice([1, 2, 3, 4, 5, 7, 8])), H=h, W=w,
                          K=int(rng.choice([1, 3, 16, 32, 64, 77, 130])), R=r, S=s, stride_h=sh, stride_w=sw,
                          pad_h=ph, pad_w=pw, dil_h=dh, dil_w=dw, **kind)
    config = dataclasses.replace(base, row_taps=s)
    try:
        plan(problem, config)
    except InvalidConfig:
        return None
    return problem, config


def drawn(name: str, count: int, draw: Callable[[], tuple[ConvProblem, Any] | None], mark: Any) -> list[Any]:
    """``count`` test cases of ``draw`` (None: a draw no config takes, drawn again), named ``name``-i, marked."""
    cases: list[Any] = []
    tries = 0
    while len(cases) < count:
        tries += 1
        assert tries < 5000, f"{name}: no random problem fits"
        case = draw()
        if case is not None:
            cases.append(pytest.param(*case, id=f"{name}-{len(cases)}", marks=[mark]))
    return cases


def precompile_cases(machine: Any, cubin_cache: Callable[[Any], Any], cases: list[Any]) -> None:
    """The wgmma GPU modules' ``precompiled`` fixture body: skip off compute capability 9.0, else compile every
    distinct kernel of the (problem, config) ``cases`` with nvcc (sm_90a) in parallel before the first GPU test."""
    from convtune.kernels.igemm_wgmma.launcher import COMPUTE_CAPABILITY
    from convtune.kernels.igemm_wgmma.space import plan

    if tuple(machine.compute_capability) != COMPUTE_CAPABILITY:
        pytest.skip(f"wgmma needs compute capability 9.0; this GPU is {machine.arch}")
    cubin_cache(plan(c.values[0], c.values[1], machine).source() for c in cases)


def simulated_copies(pl: Any, chunk_channels: int) -> dict[str, int]:
    """What the general wgmma kernels' copy loops request, block by block (the .cu's load_stage and the layout
    change), in elements of the storage type: an A copy reads only when its pixel is inside M and its tap inside the
    map; every B copy of a tile counts. Folded taps (``row_taps`` > 1): a chunk is filter row r, each pixel's S
    taps one copy of Cp (= Cq) elements each. The output (family-specific) is left to the caller."""
    p, c = pl.problem, pl.config
    m_total = p.N * p.P * p.Q
    fold = getattr(c, "row_taps", 1) > 1
    cblocks = 1 if fold else pl.cp // chunk_channels
    elements = {"layout": p.N * p.C * p.H * p.W + p.N * p.H * p.W * pl.cp, "input": 0, "weight": 0}
    for bz in range(pl.splits_launched):
        first = bz * pl.chunks_per_split
        for chunk in range(first, min(pl.chunks, first + pl.chunks_per_split)):
            tap = chunk // cblocks
            taps = [(chunk, s) for s in range(p.S)] if fold else [(tap // p.S, tap % p.S)]
            reads = 0
            for r, s in taps:
                for m in range(m_total):
                    pq = m % (p.P * p.Q)
                    ih = (pq // p.Q) * p.stride_h - p.pad_h + r * p.dil_h
                    iw = (pq % p.Q) * p.stride_w - p.pad_w + s * p.dil_w
                    reads += 0 <= ih < p.H and 0 <= iw < p.W
            elements["input"] += pl.n_tiles * (pl.cp if fold else chunk_channels) * reads
            elements["weight"] += pl.m_tiles * pl.n_tiles * c.tile_n * chunk_channels
    return elements


# ---- nvcc compile units (no GPU needed) -----------------------------------------------------------------------------
def compile_unit(family_text: str, plans: list[tuple[str, Any]], entry: str, cut: str, *,
                 helpers_once: bool = False, prefix: str | None = None) -> tuple[Any, dict[str, tuple[str, Any]]]:
    """One sm_90a translation unit of several plans: the family's text once, then each plan's wrapper with its
    ``entry`` renamed ``{prefix or entry}_{i}`` and cut before the marker ``cut`` (what follows: the helper entries —
    every plan's, or with ``helpers_once`` all but the first's). Returns (the nvcc result, renamed entry → (name,
    plan)); fails on ptxas's "wgmma ... serialized" performance warning."""
    from convtune.kernels.compile import nvcc_compile

    text, entries = family_text, {}
    for i, (name, pl) in enumerate(plans):
        wrapper = pl.source()[len(family_text):]
        if i or not helpers_once:
            wrapper = wrapper[:wrapper.index(cut)]
        renamed = f"{prefix or entry}_{i}"
        text += re.sub(rf"\b{entry}\(", f"{renamed}(", wrapper)
        entries[renamed] = (name, pl)
    result = nvcc_compile(text, "sm_90a")
    assert "serialized" not in result.log, result.log[-2000:]
    return result, entries


def assert_within_launch_bounds(result: Any, entries: dict[str, tuple[str, Any]]) -> None:
    """No spills, and registers within what ``__launch_bounds__(threads, min_blocks)`` leaves each thread."""
    for entry, (name, pl) in entries.items():
        res = result.resources[entry]
        assert not res.spills, f"{name}: {res}"
        assert res.num_regs <= min(255, 65536 // (pl.config.threads * pl.min_blocks)), f"{name}: {res.num_regs}"
