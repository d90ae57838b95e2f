"""GPU correctness of the implicit-GEMM CUDA-core forward kernel against the float64 reference (needs a CUDA device).

Random problems (batch 1..64, odd channel counts and map sizes, filters 1..11 incl. 1×n / n×1, strides 1..4,
padding up to past the filter's extent, dilation 1..6) × the configurations of the space's corners (tiles 32..256 ×
32..128, chunk 4/8/16, stages 2..4, splits 1..8, one and several pixels per thread), the outputs poisoned with NaN
before each launch, fresh normal inputs; then the operator API on torch tensors by config key.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig, InvalidProblem
from convtune.kernels.igemm_simt.launcher import IgemmSimtFwdConfig
from convtune.kernels.igemm_simt.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

CONFIGS = {
    "128x128k8s3": IgemmSimtFwdConfig(128, 128, 8, 3, 1),
    "256x64k8s2": IgemmSimtFwdConfig(256, 64, 8, 2, 1),
    "64x128k16s4": IgemmSimtFwdConfig(64, 128, 16, 4, 1),
    "64x64k8s3x4": IgemmSimtFwdConfig(64, 64, 8, 3, 4),
    "128x32k4s2": IgemmSimtFwdConfig(128, 32, 4, 2, 1),        # 64 threads over 128 pixels: two per thread
    "32x64k4s4x8": IgemmSimtFwdConfig(32, 64, 4, 4, 8),
    "256x128k16s2x2": IgemmSimtFwdConfig(256, 128, 16, 2, 2),
}
PROBLEMS_PER_CONFIG = 14


def _random_problem(rng: np.random.Generator, i: int, config: IgemmSimtFwdConfig) -> ConvProblem:
    n = int(rng.choice([1, 2, 3, 8, 64]))
    r, s = (int(v) for v in rng.choice([1, 2, 3, 5, 7, 11], size=2))
    if i % 4 == 1:  # 1×n / n×1
        r, s = (1, s) if rng.random() < 0.5 else (r, 1)
    stride = int(rng.choice([1, 1, 2, 3, 4]))
    dil = int(rng.choice([1, 1, 1, 2, 6]))
    pad_h, pad_w = int(rng.integers(0, dil * (r - 1) + 2)), int(rng.integers(0, dil * (s - 1) + 2))
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    if n == 64:
        h, w = min(h, 10), min(w, 10)
    c = int(rng.integers(1, 40)) if i % 3 else int(rng.integers(1, 4))     # stems: C = 1..3
    return ConvProblem(N=n, C=c, H=h, W=w, K=int(rng.integers(1, 200)), R=r, S=s, stride_h=stride, stride_w=stride,
                       pad_h=pad_h, pad_w=pad_w, dil_h=dil, dil_w=dil)


def _cases() -> list:
    rng = np.random.default_rng(20261203)
    h200 = MachineModel.preset("h200")
    cases = []
    for name, config in CONFIGS.items():
        for i in range(PROBLEMS_PER_CONFIG):
            try:
                problem = _random_problem(rng, i, config)
                plan(problem, config, h200)
            except (InvalidProblem, InvalidConfig):
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
def test_igemm_simt_fwd_matches_float64(problem: ConvProblem, config: IgemmSimtFwdConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.igemm_simt import launcher
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    pl = plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, launcher.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, stride=(problem.stride_h, problem.stride_w),
                               padding=(problem.pad_h, problem.pad_w), dilation=(problem.dil_h, problem.dil_w))
    err = relative_error(y, ref)
    assert err <= launcher.TOLERANCE, f"relative error {err:.3e} for {problem.key()} / {config.key()}"


def test_operator_api_runs_an_igemm_simt_config_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    x = torch.randn(4, 35, 29, 31, device="cuda")
    w = torch.randn(70, 35, 7, 3, device="cuda")
    for key, kwargs in (("igemm_simt.fwd tile_m=128 tile_n=64 chunk_crs=8 stages=3 splits=1",
                         {"stride": 2, "padding": (3, 1)}),
                        ("igemm_simt.fwd tile_m=64 tile_n=64 chunk_crs=4 stages=2 splits=4",
                         {"stride": 1, "padding": 2, "dilation": 2})):
        y = convtune.conv2d(x, w, config=key, **kwargs)
        y2 = convtune.conv2d(x, w, config=key, **kwargs)  # the cache hit: same prepared launch, cached filters
        expected = torch.nn.functional.conv2d(x.double(), w.double(), **kwargs)
        for out in (y, y2):
            assert float((out.double() - expected).norm() / expected.norm()) <= 1e-5, key
