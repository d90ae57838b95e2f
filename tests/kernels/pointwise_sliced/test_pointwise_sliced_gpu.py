"""GPU correctness of the sliced pointwise family against float64 (needs a CUDA device; the case list is checked
without one).

Per dtype (float32, bfloat16, float16), random 1×1 problems (batch 1 mostly, channel counts not multiples of 8,
odd maps, strides 1–3) × configs covering every slices, thread tile and chunk value; fresh normal inputs (rounded
to the dtype), y poisoned with NaN before the launch. float32 must meet the family's tolerance; 16-bit the
tolerance and at most twice cuDNN's error on the same inputs (+1e-6). Then the operator API on torch tensors.
"""

from __future__ import annotations

import zlib
from typing import Any

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.pointwise_sliced import launcher
from convtune.kernels.pointwise_sliced.launcher import PointwiseSlicedFwdConfig as Config
from convtune.kernels.pointwise_sliced.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
H200 = MachineModel.preset("h200")
CONFIGS = {
    "16x16k8s4t2x2": Config(16, 16, 8, 4, 2, 2),
    "32x32k4s8t4x4": Config(32, 32, 4, 8, 4, 4),
    "64x32k8s2t4x2": Config(64, 32, 8, 2, 4, 2),
    "32x64k16s1t2x4": Config(32, 64, 16, 1, 2, 4),
    "128x64k8s1t4x4": Config(128, 64, 8, 1, 4, 4),
    "16x32k8s2t2x2": Config(16, 32, 8, 2, 2, 2),
}
PROBLEMS_PER_CONFIG = 12


def _random_problem(rng: np.random.Generator, config: Config, dtype: str) -> ConvProblem | None:
    n = int(rng.choice([1, 1, 1, 2, 3, 8]))
    c = int(rng.choice([3, 13, 37, 64, 125, 256, 1024]))
    k = int(rng.choice([1, 5, 13, 33, 125, 255]))
    sh, sw = (int(v) for v in rng.choice([1, 1, 2, 3], size=2))
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=1, stride_h=sh, stride_w=sw, dtype=dtype)
    try:
        plan(problem, config, H200)
    except InvalidConfig:
        return None
    return problem


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261206)
    cases = []
    for dtype in launcher.CUDA_TYPES:
        for name, config in CONFIGS.items():
            drawn = 0
            for _ in range(100 * PROBLEMS_PER_CONFIG):   # a config no problem takes fails test_case_count
                if drawn == PROBLEMS_PER_CONFIG:
                    break
                problem = _random_problem(rng, config, dtype)
                if problem is not None:
                    cases.append(pytest.param(problem, config, id=f"{dtype}-{name}-{drawn}", marks=gpu))
                    drawn += 1
        for text in ("N=1 C=1024 H=13 W=13 K=125 R=1 S=1", "N=32 C=576 H=7 W=7 K=160 R=1 S=1"):
            problem = ConvProblem.parse(f"{text} dtype={dtype}")   # the YOLOv2 head b1, a MobileNetV2 7×7 layer
            cases.append(pytest.param(problem, CONFIGS["16x16k8s4t2x2"], id=f"{dtype}-{problem.N}-{problem.K}",
                                      marks=gpu))
    return cases


CASES = _cases()


def test_case_count() -> None:
    for dtype in launcher.CUDA_TYPES:
        problems = [c.values[0] for c in CASES if c.values[0].dtype == dtype]
        assert len(problems) >= 70
        assert {p.stride_h for p in problems} >= {1, 2, 3} and sum(p.N == 1 for p in problems) >= len(problems) // 3
        assert {p.C % 8 for p in problems} > {0} and {p.K % 4 for p in problems} >= {0, 1, 3}
        assert {c.values[1].slices for c in CASES} == {1, 2, 4, 8}


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first GPU test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


def _float32_error(problem: ConvProblem, pl: Any) -> float:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, 1, 1), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, launcher.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    return relative_error(y, conv2d_reference_gpu(x, w, stride=(problem.stride_h, problem.stride_w)))


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_pointwise_sliced_matches_float64(problem: ConvProblem, config: Config, machine, precompiled) -> None:
    pl = plan(problem, config, machine)
    if problem.dtype == "float32":
        err = _float32_error(problem, pl)
        assert err <= launcher.TOLERANCES["float32"], f"relative error {err:.3e} for {problem.key()} / {config.key()}"
        return
    pytest.importorskip("torch")
    from half_gpu_case import errors_16bit

    ours, cudnn = errors_16bit(problem, pl, launcher)
    assert ours <= launcher.TOLERANCES[problem.dtype], f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * cudnn + 1e-6, f"ours {ours:.3e} vs cuDNN {cudnn:.3e} for {problem.key()} / {config.key()}"


@gpu
def test_operator_api_runs_the_family_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    key = "pointwise_sliced.fwd tile_m=16 tile_n=16 chunk_c=8 slices=4 thread_m=2 thread_n=2"
    for dtype, tol in ((torch.float32, 1e-5), (torch.bfloat16, 4e-3), (torch.float16, 6e-4)):
        x = torch.randn(1, 1024, 13, 13, device="cuda").to(dtype)
        w = torch.randn(125, 1024, 1, 1, device="cuda").to(dtype)
        y, y2 = (convtune.conv2d(x, w, config=key) for _ in range(2))   # the second: a cache hit
        expected = torch.nn.functional.conv2d(x.double(), w.double())
        for out in (y, y2):
            assert out.dtype == dtype and out.shape == expected.shape
            assert float((out.double() - expected).norm() / expected.norm()) <= tol, dtype
