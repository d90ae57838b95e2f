"""GPU correctness of the TF32 unfused Winograd family (``winograd_unfused_tf32``) against float64 and cuDNN TF32 on
the same inputs (needs a CUDA device; the case list is checked without one).

F(2×2) (the family's only m): 6 GEMM tiles (warp layouts 1×2..4×2, chunks 8..32, 2..4 stages) × random 3×3 stride-1
problems (batch 1..3, sometimes 32; channel counts and sizes odd, down to 1×1 images with padding; padding 0..3) — at
least 200. Outputs are poisoned with NaN before the launch; inputs are fresh normal draws. Each case's relative L2
error must meet the family's tolerance and, the issue's acceptance, at most twice cuDNN TF32's error on the same
inputs (+1e-6; where cuDNN ran an fp32 algorithm despite ``allow_tf32``, the TF32 floor — exact TF32 operands, exact
accumulation — stands in). Every case's errors go to ``$CONVTUNE_ERROR_TABLE_WINOGRAD_TF32`` (JSON) when set.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest
from error_tables import write_error_table
from tf32_gpu_case import round_tf32

from convtune.errors import InvalidConfig
from convtune.kernels.winograd_tf32 import launcher as tc
from convtune.kernels.winograd_tf32.launcher import WinogradUnfusedTf32Config as Config
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
ERROR_TABLE_ENV = "CONVTUNE_ERROR_TABLE_WINOGRAD_TF32"
TILES = {
    "k64t128c16_2x4": (64, 128, 16, 2, 4, 3),
    "k128t128c16_2x4": (128, 128, 16, 2, 4, 3),
    "k128t64c16_4x2_s2": (128, 64, 16, 4, 2, 2),
    "k64t64c32_2x2_s4": (64, 64, 32, 2, 2, 4),
    "k32t128c8_1x4": (32, 128, 8, 1, 4, 3),
    "k32t64c8_1x2_s2": (32, 64, 8, 1, 2, 2),
}
PROBLEMS_PER_CONFIG = 48
RECORDS: list[dict[str, Any]] = []


def _random_problem(rng: np.random.Generator) -> ConvProblem:
    n = int(rng.choice([1, 1, 2, 3, 32]))
    c, k = int(rng.integers(1, 70)), int(rng.integers(1, 90))
    pad = int(rng.integers(0, 4))
    h, w = int(rng.integers(max(1, 3 - 2 * pad), 45)), int(rng.integers(max(1, 3 - 2 * pad), 45))
    if n == 32:   # keep the big-batch cases small
        c, h, w = min(c, 12), min(h, 12), min(w, 12)
    if rng.random() < 0.15:   # padding-dominated: the family's smallest input map (tc.MIN_MAP), padded by 3
        h = w = tc.MIN_MAP
        pad = 3
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=3, S=3, pad_h=pad, pad_w=pad, math="tf32")


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261204)
    h200 = MachineModel.preset("h200")
    cases = []
    for m in tc.M:
        for name, tile in TILES.items():
            config = Config(m, *tile)
            for i in range(PROBLEMS_PER_CONFIG):
                problem = _random_problem(rng)
                try:
                    tc.plan(problem, config, h200)
                except InvalidConfig:
                    continue
                cases.append(pytest.param(problem, config, id=f"f{m}-{name}-{i}", marks=[gpu]))
    return cases


CASES = _cases()


@pytest.mark.parametrize("m", tc.M)
def test_case_count(m: int) -> None:
    problems = [c.values[0] for c in CASES if c.values[1].m == m]
    assert len(problems) >= 200
    assert {p.pad_h for p in problems} >= {0, 1, 2, 3}
    assert any(p.H == p.W == tc.MIN_MAP and p.pad_h == 3 for p in problems)
    assert min(min(p.H, p.W, p.P, p.Q) for p in problems) == tc.MIN_MAP
    assert any(p.C % 8 for p in problems) and any(p.N == 32 for p in problems)


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    cubin_cache(tc.plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.fixture(scope="module")
def error_table():
    from convtune.kernels.registry import get_spec

    yield RECORDS
    write_error_table(ERROR_TABLE_ENV, RECORDS, f"{tc.FAMILY}.fwd", get_spec(tc.FAMILY).source_sha256(),
                      {"tolerances": tc.TOLERANCE,
                       "acceptance": "ours <= 2 * cudnn_tf32 + 1e-6 (relative L2 errors against float64)"})


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_matches_float64_and_cudnn_tf32(problem: ConvProblem, config: Config, machine, precompiled, error_table,
                                        request) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    torch = pytest.importorskip("torch")
    pl = tc.plan(problem, config, machine)
    kernels = tc.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, 3, 3), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    tc.launch(pl, kernels, x, tc.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    padding = (problem.pad_h, problem.pad_w)
    ref = conv2d_reference_gpu(x, w, padding=padding)
    ours = relative_error(y, ref)
    tf32_floor = relative_error(conv2d_reference_gpu(round_tf32(cp, x), round_tf32(cp, w), padding=padding), ref)
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        yt = torch.nn.functional.conv2d(torch.from_dlpack(x), torch.from_dlpack(w), None, padding=padding)
        torch.cuda.synchronize()
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    cudnn = relative_error(cp.from_dlpack(yt.contiguous()), ref)
    cudnn_tf32 = cudnn >= 0.1 * tf32_floor   # else cuDNN ran an fp32 algorithm: the TF32 floor is the bar
    error_table.append({"id": request.node.callspec.id, "problem": problem.key(), "config": config.key(),
                        "ours": ours, "tf32_floor": tf32_floor, "cudnn": cudnn, "cudnn_tf32": cudnn_tf32})
    assert ours <= tc.TOLERANCE[config.m], f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    bar = cudnn if cudnn_tf32 else tf32_floor
    assert ours <= 2 * bar + 1e-6, (f"ours {ours:.3e} vs cuDNN TF32 {cudnn:.3e} (TF32 floor {tf32_floor:.3e}) for "
                                    f"{problem.key()} / {config.key()}")
