"""GPU correctness of the unfused Winograd paths run in passes over the batch (``images_per_pass``; needs a CUDA
device, the case list is checked without one).

Each of the four unfused families — fp32 3×3 (``winograd_unfused``), fp32 5×5/7×7 (``winograd_unfused_large``), TF32
3×3 (``winograd_unfused_tf32``) and 3xTF32 (``winograd_unfused_3xtf32``) — runs a config with 1, 2 and 3 images a
pass (planned directly: the space offers only L2-sized passes) on random problems whose batch (2..7) leaves a short
last pass, and AlexNet conv2 at 8 images a pass (the space's choice). Outputs are NaN-poisoned first and must all be
written; each must equal, bit for bit, the same config run in one pass on the same inputs (a tile's GEMM and
transforms do not depend on the pass it falls in), and meet the family's gate against float64.
"""

from __future__ import annotations

import dataclasses
import zlib
from typing import Any

import numpy as np
import pytest
from winograd_gpu_run import run_poisoned

from convtune.kernels.winograd import unfused as fp32
from convtune.kernels.winograd_3xtf32 import launcher as x3
from convtune.kernels.winograd_large import launcher as large
from convtune.kernels.winograd_tf32 import launcher as tc
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
FAMILIES: dict[str, tuple[Any, Any, tuple[int, ...]]] = {   # launcher, config, filter sizes
    "winograd_unfused": (fp32, fp32.WinogradUnfusedConfig(m=4, tile_k=32, tile_t=64, chunk_c=8, thread_k=4,
                                                          thread_t=8, stages=3), (3,)),
    "winograd_unfused_large": (large, large.WinogradLargeConfig(m=2, tile_k=64, tile_t=32, chunk_c=16, thread_k=8,
                                                                thread_t=4, stages=2, r=5), (5, 7)),
    "winograd_unfused_tf32": (tc, tc.WinogradUnfusedTf32Config(m=2, tile_k=64, tile_t=64, chunk_c=16, warps_k=2,
                                                               warps_t=2, stages=3), (3,)),
    "winograd_unfused_3xtf32": (x3, x3.Winograd3xTf32Config(m=4, tile_k=64, tile_t=64, chunk_c=16, warps_k=1,
                                                            warps_t=2, stages=2, r=5), (3, 5)),
}
PROBLEMS_PER_FAMILY = 8
ALEXNET_CONV2 = ConvProblem.parse("N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2")


def _config(family: str, r: int, images: int) -> Any:
    config = FAMILIES[family][1]
    if hasattr(config, "r"):
        config = dataclasses.replace(config, r=r, m=2 if r == 7 else config.m)
    return dataclasses.replace(config, images_per_pass=images)


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261208)
    cases = []
    for family, (_, _, rs) in FAMILIES.items():
        for i in range(PROBLEMS_PER_FAMILY):
            r = rs[i % len(rs)]
            pad = int(rng.integers(0, r))
            h, w = int(rng.integers(max(1, r - 2 * pad), 30)), int(rng.integers(max(1, r - 2 * pad), 30))
            problem = ConvProblem(N=int(rng.integers(2, 8)), C=int(rng.integers(1, 40)), H=h, W=w,
                                  K=int(rng.integers(1, 70)), R=r, S=r, pad_h=pad, pad_w=pad,
                                  math="tf32" if family == "winograd_unfused_tf32" else "ieee")
            for images in (1, 2, 3):
                if images < problem.N:
                    cases.append(pytest.param(family, problem, images, id=f"{family}-{i}-p{images}", marks=[gpu]))
    for family in ("winograd_unfused_large", "winograd_unfused_3xtf32"):
        cases.append(pytest.param(family, ALEXNET_CONV2, 8, id=f"{family}-alexnet-p8", marks=[gpu]))
    return cases


CASES = _cases()


def test_the_case_list() -> None:
    assert len(CASES) >= 4 * PROBLEMS_PER_FAMILY * 2
    for family in FAMILIES:
        cases = [c.values for c in CASES if c.values[0] == family]
        assert {images for _, _, images in cases} >= {1, 2, 3}
        # a short last pass: the batch is not a multiple of the pass
        assert sum(p.N % images != 0 for _, p, images in cases) >= 3
        for _, p, images in cases:
            pl = FAMILIES[family][0].derive_plan(p, _config(family, p.R, images))
            assert len(pl.passes) == -(-p.N // images) > 1


@pytest.mark.parametrize(("family", "problem", "images"), CASES)
def test_passes_match_one_pass_bit_for_bit_and_float64(family: str, problem: ConvProblem, images: int,
                                                       machine) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    launcher = FAMILIES[family][0]
    config = _config(family, problem.R, images)
    passed = launcher.derive_plan(problem, config, machine)
    whole = launcher.derive_plan(problem, dataclasses.replace(config, images_per_pass=0), machine)
    assert len(passed.passes) > 1 and len(whole.passes) == 1
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = run_poisoned(launcher, passed, x, w)
    y_whole = run_poisoned(launcher, whole, x, w)
    assert bool(cp.array_equal(y, y_whole)), f"{config.key()} on {problem.key()}: passes differ from one pass"
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    error = relative_error(y, ref)
    assert error <= launcher.tolerance(passed), f"relative error {error:.3e} for {problem.key()} / {config.key()}"
