"""GPU correctness of the 3xTF32 Winograd family (``winograd_unfused_3xtf32``) against float64 and the fp32 unfused
family of the same r on the same inputs (3×3: ``winograd_unfused``; 5×5, 7×7: ``winograd_unfused_large``; needs a
CUDA device; the case list is checked without one).

Per F(m, r) ∈ {F(2,3), F(4,3), F(2,5), F(4,5), F(2,7)}: 6 GEMM blocks (warp layouts 1×2..4×2, chunks 8..32, 2..4
stages, up to 128 × 256) × 40 random r×r stride-1 problems (≥ 200 cases each after invalid ones drop, 1200 in all),
and the fused path (``fuse = 1``: GEMMs and output transform in one kernel) on the blocks within its output-register
cap — 32 × 64 (2 × 4 warps) and 32 × 32 (2 × 2) for every F(m, r), 64 × 64 (2 × 2, MI·NI = 8) for F(2×2) — × 24
problems of their own draw (the unfused cases keep their problems; 312 fused cases):
batch 1..3, sometimes 32; channel counts and sizes odd, down to 1×1 maps with padding; padding 0..r − 1 per axis
(0..2 for 3×3). Outputs are poisoned with NaN before each
launch; inputs are fresh normal draws. Each case's relative L2 error must meet the family's gate (:data:`TOLERANCE`:
the fp32 unfused families' gates) and — the strict-fp32 claim: 3xTF32 stays at fp32's order — at most 4× the error
of the fp32 unfused family of the same r on the same inputs with the same block where that family has it (its
space's BK, BT ≤ 128, BC ≤ 16 and stages; clamped otherwise) (+1e-7). Every case's errors go to
``$CONVTUNE_ERROR_TABLE_WINOGRAD_3XTF32`` (JSON) when set. Then ``convtune.conv2d`` with a 3xTF32 config (3×3, 5×5,
7×7), and with a fused config (AlexNet conv2, F(4×4,5×5)): within the gate.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from error_tables import write_error_table
from winograd_gpu_run import run_poisoned

from convtune.errors import InvalidConfig
from convtune.kernels import experimental
from convtune.kernels.winograd import unfused as wino_unfused
from convtune.kernels.winograd.space import plan_unfused
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
from convtune.kernels.winograd_3xtf32 import launcher as x3
from convtune.kernels.winograd_3xtf32.launcher import Winograd3xTf32Config as Config
from convtune.kernels.winograd_large import launcher as large
from convtune.kernels.winograd_large.launcher import WinogradLargeConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
ERROR_TABLE_ENV = "CONVTUNE_ERROR_TABLE_WINOGRAD_3XTF32"
#: the 3×3 points are drawn last, so the 5×5 and 7×7 cases keep their problems
MR = ((2, 5), (4, 5), (2, 7), (2, 3), (4, 3))
TILES = {   # tile_k, tile_t, chunk_c, warps_k, warps_t, stages
    "k64t128c16_2x4": (64, 128, 16, 2, 4, 3),
    "k128t256c16_2x4": (128, 256, 16, 2, 4, 3),
    "k128t64c16_4x2_s2": (128, 64, 16, 4, 2, 2),
    "k64t64c32_2x2_s4": (64, 64, 32, 2, 2, 4),
    "k32t128c8_1x4": (32, 128, 8, 1, 4, 3),
    "k32t64c8_1x2_s2": (32, 64, 8, 1, 2, 2),
}
PROBLEMS_PER_CONFIG = 40
#: fused blocks (fuse = 1) and the F(m) each fits: 4·MI·NI·m² ≤ MAX_FUSED_OUTPUTS (MI·NI ≤ 2 at F(4×4), ≤ 8 at F(2×2))
FUSED_TILES = {
    "k32t64c16_2x4_fused": ((32, 64, 16, 2, 4, 3), (2, 4)),
    "k32t32c8_2x2_s2_fused": ((32, 32, 8, 2, 2, 2), (2, 4)),
    "k64t64c16_2x2_s4_fused": ((64, 64, 16, 2, 2, 4), (2,)),
}
FUSED_PROBLEMS_PER_CONFIG = 24
#: the fp32 error's floor in the comparison (a tiny problem's fp32 error can sit near fp32's unit roundoff)
FP32_FLOOR = 1e-7
RECORDS: list[dict[str, Any]] = []


def _random_problem(rng: np.random.Generator, r: int) -> ConvProblem:
    n = int(rng.choice([1, 1, 2, 3, 32]))
    c, k = int(rng.integers(1, 70)), int(rng.integers(1, 90))
    pad_h, pad_w = int(rng.integers(0, r)), int(rng.integers(0, r))
    h = int(rng.integers(max(1, r - 2 * pad_h), 45))
    w = int(rng.integers(max(1, r - 2 * pad_w), 45))
    if n == 32:   # keep the big-batch cases small
        c, h, w = min(c, 12), max(min(h, 12), r - 2 * pad_h), max(min(w, 12), r - 2 * pad_w)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=r, pad_h=pad_h, pad_w=pad_w)


Fp32Config = WinogradUnfusedConfig | WinogradLargeConfig


def _fp32_family(r: int) -> tuple[Any, Any]:
    """(launcher module, plan function) of the fp32 unfused family of filter size r, whose U this family shares."""
    return (wino_unfused, plan_unfused) if r == 3 else (large, large.plan)


def _fp32_make(m: int, r: int, *fields: int) -> Fp32Config:
    """The fp32 unfused family's config of F(m, r) with GEMM ``fields`` (tile_k, tile_t, chunk_c, thread_k,
    thread_t, stages): ``winograd_unfused`` (no r field) for 3×3, ``winograd_unfused_large`` otherwise."""
    return WinogradUnfusedConfig(m, *fields) if r == 3 else WinogradLargeConfig(m, *fields, r)


def _fp32_config(problem: ConvProblem, config: Config, machine: MachineModel) -> Fp32Config:
    """The fp32 unfused family's config (of the same r) with the same m, block (BK × BT, BT ≤ 128, BC ≤ 16: its
    space's values) and stages, where it has one; else its 64 × 64 block."""
    chunk, tile_t = min(config.chunk_c, 16), min(config.tile_t, 128)
    _, plan = _fp32_family(config.r)
    for thread_k, thread_t in ((8, 8), (4, 8), (8, 4), (4, 4)):
        candidate = _fp32_make(config.m, config.r, config.tile_k, tile_t, chunk, thread_k, thread_t, config.stages)
        try:
            plan(problem, candidate, machine)
        except InvalidConfig:
            continue
        return candidate
    return _fp32_make(config.m, config.r, 64, 64, 16, 8, 8, 3)


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261206)
    h200 = MachineModel.preset("h200")
    cases = []
    for m, r in MR:
        for name, tile in TILES.items():
            config = Config(m, *tile, r)
            for i in range(PROBLEMS_PER_CONFIG):
                problem = _random_problem(rng, r)
                try:
                    x3.plan(problem, config, h200)
                except InvalidConfig:
                    continue
                fp32 = _fp32_config(problem, config, h200)
                cases.append(pytest.param(problem, config, fp32, id=f"f{m}r{r}-{name}-{i}", marks=[gpu]))
    fused_rng = np.random.default_rng(20261207)   # the fused cases' own draw: the unfused ones keep their problems
    for m, r in MR:
        for name, (tile, points) in FUSED_TILES.items():
            if m not in points:
                continue
            config = Config(m, *tile, r, fuse=1)
            for i in range(FUSED_PROBLEMS_PER_CONFIG):
                problem = _random_problem(fused_rng, r)
                try:
                    x3.plan(problem, config, h200)
                except InvalidConfig:
                    continue
                fp32 = _fp32_config(problem, config, h200)
                cases.append(pytest.param(problem, config, fp32, id=f"f{m}r{r}-{name}-{i}", marks=[gpu]))
    return cases


CASES = _cases()


@pytest.mark.parametrize("mr", MR)
def test_case_count(mr: tuple[int, int]) -> None:
    cases = [c.values for c in CASES if (c.values[1].m, c.values[1].r) == mr and not c.values[1].fuse]
    problems = [p for p, _, _ in cases]
    assert len(problems) >= 200
    assert all(p.R == p.S == mr[1] and x3.applies(p) is None for p in problems)
    assert {p.pad_h for p in problems} == {p.pad_w for p in problems} == set(range(mr[1]))
    assert any(p.N == 1 for p in problems) and any(p.N == 32 for p in problems)
    assert any(p.C % 8 for p in problems) and any(p.K % 8 for p in problems)
    assert any(p.H % 2 and p.W % 2 for p in problems) and min(min(p.P, p.Q) for p in problems) < mr[0]
    assert {c.tile_t for _, c, _ in cases} >= {64, 128, 256}
    # the fp32 comparison runs the same block for most cases
    same = [c for _, c, f in cases if (f.tile_k, f.tile_t, f.chunk_c, f.stages) == (c.tile_k, c.tile_t, c.chunk_c,
                                                                                     c.stages)]
    assert len(same) >= len(cases) // 2
    # the fp32 comparison runs the fp32 unfused family of the same r (3×3: winograd_unfused, whose U this one shares)
    fp32_class = WinogradUnfusedConfig if mr[1] == 3 else WinogradLargeConfig
    assert all(type(f) is fp32_class and f.m == mr[0] and f.alpha == c.alpha for _, c, f in cases)


def test_the_case_list() -> None:
    assert {(c.values[1].m, c.values[1].r) for c in CASES} == set(MR) == set(x3.TOLERANCE)
    assert len(CASES) >= 200 * len(MR)
    assert len(CASES) <= 1600
    assert len({c.id for c in CASES}) == len(CASES)


def test_the_fused_cases() -> None:
    """Every F(m, r) runs fused on each block that fits it (F(4×4): MI·NI ≤ 2), over problems of every padding."""
    fused = [c.values for c in CASES if c.values[1].fuse]
    assert 250 <= len(fused) <= 400
    for mr in MR:
        cases = [(p, c) for p, c, _ in fused if (c.m, c.r) == mr]
        blocks = {(c.tile_k, c.tile_t, c.warps_k, c.warps_t) for _, c in cases}
        expected = {(32, 64, 2, 4), (32, 32, 2, 2)} | ({(64, 64, 2, 2)} if mr[0] == 2 else set())
        assert blocks == expected, mr
        assert len(cases) >= 20 * len(expected), mr
        assert all(0 < c.output_registers <= x3.MAX_FUSED_OUTPUTS for _, c in cases)
        problems = [p for p, _ in cases]
        assert any(p.N == 32 for p in problems) and any(p.K % 32 for p in problems)
        assert len({p.pad_h for p in problems}) >= min(3, mr[1])
        assert min(min(p.P, p.Q) for p in problems) < 2 * mr[0]
    assert max(c.output_registers for _, c, _ in fused) == x3.MAX_FUSED_OUTPUTS


@pytest.fixture
def enabled(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv(experimental.ENV, x3.FAMILY)


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module (both families) with nvcc in parallel before the first case."""
    cubin_cache([x3.plan(p.values[0], p.values[1], machine).source() for p in CASES]
                + [_fp32_family(p.values[1].r)[1](p.values[0], p.values[2], machine).source() for p in CASES])


@pytest.fixture(scope="module")
def error_table():
    from convtune.kernels.registry import get_spec

    yield RECORDS
    write_error_table(ERROR_TABLE_ENV, RECORDS, f"{x3.FAMILY}.fwd", get_spec(x3.FAMILY).source_sha256(),
                      {"tolerances": {f"F({m},{r})": t for (m, r), t in x3.TOLERANCE.items()},
                       "acceptance": f"ours <= tolerance and ours <= 4 * fp32 + {FP32_FLOOR} (relative L2 errors "
                                     "against float64; fp32: winograd_unfused (3×3) or winograd_unfused_large "
                                     "(5×5, 7×7) on the same inputs)"})


@pytest.mark.parametrize(("problem", "config", "fp32_config"), CASES)
def test_matches_float64_at_fp32s_order(problem: ConvProblem, config: Config, fp32_config: Fp32Config,
                                        machine, precompiled, error_table, enabled, request) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    assert x3.supports(problem)
    pl = x3.plan(problem, config, machine)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = run_poisoned(x3, pl, x, w)
    fp32_launcher, fp32_plan = _fp32_family(problem.R)
    y32 = run_poisoned(fp32_launcher, fp32_plan(problem, fp32_config, machine), x, w)
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    ours, fp32 = relative_error(y, ref), relative_error(y32, ref)
    error_table.append({"id": request.node.callspec.id, "problem": problem.key(), "config": config.key(),
                        "fp32_config": fp32_config.key(), "ours": ours, "fp32": fp32})
    assert ours <= x3.tolerance(pl), f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 4 * fp32 + FP32_FLOOR, (f"ours {ours:.3e} vs fp32 {fp32:.3e} ({fp32_config.key()}) for "
                                           f"{problem.key()} / {config.key()}")


@gpu
@pytest.mark.parametrize("key", ["N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2", "N=3 C=5 H=9 W=11 K=7 R=5 S=5 pad=1",
                                 "N=4 C=128 H=46 W=46 K=128 R=7 S=7 pad=3", "N=32 C=256 H=14 W=14 K=256 R=3 S=3 pad=1",
                                 "N=3 C=5 H=9 W=11 K=7 R=3 S=3 pad=2"])
def test_conv2d_op_runs_a_3xtf32_config(key: str) -> None:
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    problem = ConvProblem.parse(key)
    m = max(x3.POINTS[problem.R])      # F(4×4,3×3), F(4×4,5×5), F(2×2,7×7)
    config = Config(m=m, tile_k=64, tile_t=128, chunk_c=16, warps_k=2, warps_t=4, stages=3, r=problem.R)
    rng = cp.random.default_rng(11)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = convtune.conv2d(x, w, padding=problem.pad_h, config=config)
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    assert relative_error(y, ref) <= x3.TOLERANCE[(m, problem.R)]


@gpu
def test_conv2d_op_runs_a_fused_3xtf32_config() -> None:
    """AlexNet conv2 through ``convtune.conv2d`` with the fused F(4×4,5×5) kernel (two launches, V alone as the
    workspace)."""
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    problem = ConvProblem.parse("N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2")
    config = Config(m=4, tile_k=32, tile_t=64, chunk_c=32, warps_k=2, warps_t=4, stages=4, r=5, fuse=1)
    assert x3.plan(problem, config).fused
    rng = cp.random.default_rng(12)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = convtune.conv2d(x, w, padding=problem.pad_h, config=config)
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    assert relative_error(y, ref) <= x3.TOLERANCE[(4, 5)]
