"""GPU correctness of the pointwise (1×1) forward kernel against the float64 reference (needs a CUDA device).

Random problems (batch 1..64, odd channel counts and map sizes, strides 1..3, so both copy widths) × the
configurations of the space's corners (tile 32..128 × 32..128, chunk 8/16, stages 2..4, split-C 1..8), the
outputs poisoned with NaN before each launch, fresh normal inputs; then the operator API and the prepared
launch by data pointers on torch tensors, sharing the direct family's packed filters.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.pointwise import space as pointwise_space
from convtune.kernels.pointwise.launcher import PointwiseFwdConfig
from convtune.kernels.pointwise.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

CONFIGS = {
    "128x128k8s3": PointwiseFwdConfig(128, 128, 8, 3, 1),
    "64x128k16s4": PointwiseFwdConfig(64, 128, 16, 4, 1),
    "128x64k16s2": PointwiseFwdConfig(128, 64, 16, 2, 1),
    "32x128k16s2x4": PointwiseFwdConfig(32, 128, 16, 2, 4),
    "64x64k8s3x2": PointwiseFwdConfig(64, 64, 8, 3, 2),
    "128x32k8s4": PointwiseFwdConfig(128, 32, 8, 4, 1),
    "32x64k8s2x8": PointwiseFwdConfig(32, 64, 8, 2, 8),
}
PROBLEMS_PER_CONFIG = 12


def _cases() -> list:
    rng = np.random.default_rng(20261201)
    h200 = MachineModel.preset("h200")
    cases = []
    for name, config in CONFIGS.items():
        for i in range(PROBLEMS_PER_CONFIG):
            n = int(rng.choice([1, 2, 3, 8, 64]))
            c = int(rng.integers(config.chunk_c * config.splits, config.chunk_c * config.splits + 70))
            k = int(rng.integers(1, 300))
            stride = int(rng.choice([1, 1, 2, 3]))
            h, w = int(rng.integers(1, 30)), int(rng.integers(1, 30))
            if i % 3 == 0:  # 16-byte copies: stride 1 and H·W % 4 == 0
                stride, w = 1, 4 * max(1, w // 4)
            if n == 64:
                h, w = min(h, 8), min(w, 8)
            problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=1, stride_h=stride, stride_w=stride)
            try:
                plan(problem, config, h200)
            except InvalidConfig:
                continue
            cases.append(pytest.param(problem, config, id=f"{name}-{i}"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


def test_case_count() -> None:
    assert len(CASES) >= 60


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_pointwise_fwd_matches_float64(problem: ConvProblem, config: PointwiseFwdConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.pointwise import launcher
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    pl = pointwise_space.plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, 1, 1), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, launcher.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, stride=(problem.stride_h, problem.stride_w))
    err = relative_error(y, ref)
    assert err <= launcher.TOLERANCE, f"relative error {err:.3e} for {problem.key()} / {config.key()}"


def test_operator_api_runs_a_pointwise_config_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    x = torch.randn(4, 96, 14, 14, device="cuda")
    w = torch.randn(200, 96, 1, 1, device="cuda")
    for key in ("pointwise.fwd tile_m=64 tile_n=128 chunk_c=16 stages=4 splits=1",
                "pointwise.fwd tile_m=32 tile_n=64 chunk_c=8 stages=2 splits=4"):
        y = convtune.conv2d(x, w, config=key)
        y2 = convtune.conv2d(x, w, config=key)  # the cache hit: same prepared launch, cached filters
        expected = torch.nn.functional.conv2d(x.double(), w.double())
        for out in (y, y2):
            assert float((out.double() - expected).norm() / expected.norm()) <= 1e-5, key
    strided = convtune.conv2d(x, w, stride=2, config="pointwise.fwd tile_m=32 tile_n=128 chunk_c=8 stages=3 splits=1")
    expected = torch.nn.functional.conv2d(x.double(), w.double(), stride=2)
    assert float((strided.double() - expected).norm() / expected.norm()) <= 1e-5
