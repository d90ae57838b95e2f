"""GPU correctness of the direct forward kernel against the float64 reference (needs a CUDA device).

Over 300 random problem/config pairs: 8 filter geometries (1×1, 3×3, 3×3/2, 5×5, 7×7/2, 11×11/4, 3×3
dilation 2, 3×5 with mixed strides) × 6 configurations (vec 1/4, stages 1/2/3, split-C, thread tiles
1..8 × 4/8) × 8 problems each with random batch (1..3, sometimes 64), odd channel counts and sizes,
padding 0..3. Outputs are poisoned with NaN before each launch; inputs are fresh normal draws.
All kernels are compiled up front by nvcc in parallel (the cubin cache of ``load_kernel``).
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.direct import space as direct_space
from convtune.kernels.direct.launcher import DirectFwdConfig
from convtune.kernels.direct.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

GEOMETRIES = {  # name: (R, S, stride_h, stride_w, dil_h, dil_w)
    "1x1": (1, 1, 1, 1, 1, 1),
    "3x3": (3, 3, 1, 1, 1, 1),
    "3x3s2": (3, 3, 2, 2, 1, 1),
    "5x5": (5, 5, 1, 1, 1, 1),
    "7x7s2": (7, 7, 2, 2, 1, 1),
    "11x11s4": (11, 11, 4, 4, 1, 1),
    "3x3d2": (3, 3, 1, 1, 2, 2),
    "3x5s1x2": (3, 5, 1, 2, 1, 1),
}
CONFIGS = {
    "t4x32k64": DirectFwdConfig(4, 32, 64, 8, 1, 4, 8, 2, 1, 1),
    "t8x8k128": DirectFwdConfig(8, 8, 128, 16, 1, 8, 8, 1, 1, 1),
    "t2x16k32v4": DirectFwdConfig(2, 16, 32, 4, 2, 4, 4, 3, 4, 1),
    "t4x16k16s4": DirectFwdConfig(4, 16, 16, 3, 1, 2, 4, 2, 1, 4),
    "t16x8k64s2": DirectFwdConfig(16, 8, 64, 2, 2, 8, 4, 3, 1, 2),
    "t1x64k16": DirectFwdConfig(1, 64, 16, 1, 1, 4, 4, 2, 1, 1),
}
PROBLEMS_PER_KERNEL = 8


def _random_problem(rng: np.random.Generator, geometry: tuple[int, ...], config: DirectFwdConfig) -> ConvProblem:
    R, S, sh, sw, dh, dw = geometry
    n = int(rng.choice([1, 1, 2, 3, 64]))
    min_c = config.chunk_c * config.splits
    c = int(rng.integers(min_c, min_c + 37))
    k = int(rng.integers(1, 71))
    pad_h, pad_w = int(rng.integers(0, min(3, (R - 1) * dh) + 1)), int(rng.integers(0, min(3, (S - 1) * dw) + 1))
    span_h, span_w = (R - 1) * dh + 1, (S - 1) * dw + 1
    h = int(rng.integers(max(1, span_h - 2 * pad_h), span_h + 40))
    w = int(rng.integers(max(1, span_w - 2 * pad_w), span_w + 40))
    if n == 64:  # keep the big-batch cases small in C, H, W
        c, h, w = min(c, max(min_c, 12)), min(h, span_h + 9), min(w, span_w + 9)
    if config.vec == 4:
        w = max(4, w + (-w) % 4)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=R, S=S, stride_h=sh, stride_w=sw, pad_h=pad_h, pad_w=pad_w,
                       dil_h=dh, dil_w=dw)


def _cases() -> list:
    rng = np.random.default_rng(20261129)
    h200 = MachineModel.preset("h200")
    cases = []
    for gname, geometry in GEOMETRIES.items():
        for cname, config in CONFIGS.items():
            for i in range(PROBLEMS_PER_KERNEL):
                problem = _random_problem(rng, geometry, config)
                try:
                    plan(problem, config, h200)
                except InvalidConfig:  # e.g. an 11×11/4 patch of a 16-row tile overflows shared memory
                    continue
                cases.append(pytest.param(problem, config, id=f"{gname}-{cname}-{i}"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


def test_case_count() -> None:
    assert len(CASES) >= 300


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_direct_fwd_matches_float64(problem: ConvProblem, config: DirectFwdConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.direct import launcher
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    pl = direct_space.plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)  # spills are a speed matter, checked by the nvcc test, not here
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, launcher.pack_weights(w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, stride=(problem.stride_h, problem.stride_w),
                               padding=(problem.pad_h, problem.pad_w), dilation=(problem.dil_h, problem.dil_w))
    err = relative_error(y, ref)
    assert err <= 1e-5, f"relative error {err:.3e} for {problem.key()} / {config.key()}"


def test_operator_cupy_and_torch_inputs() -> None:
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    x = cp.random.standard_normal((2, 19, 23, 29), dtype=cp.float32)
    w = cp.random.standard_normal((37, 19, 3, 3), dtype=cp.float32)
    ref = conv2d_reference_gpu(x, w, stride=(2, 1), padding=(1, 2))
    y = convtune.conv2d(x, w, stride=(2, 1), padding=(1, 2))
    assert isinstance(y, cp.ndarray)
    assert relative_error(y, ref) <= 1e-5
    torch = pytest.importorskip("torch")
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    yt = convtune.conv2d(xt, wt, stride=(2, 1), padding=(1, 2))
    assert isinstance(yt, torch.Tensor) and yt.is_cuda
    assert relative_error(cp.from_dlpack(yt), ref) <= 1e-5
    expected = torch.nn.functional.conv2d(xt.double(), wt.double(), stride=(2, 1), padding=(1, 2))
    assert float((yt.double() - expected).norm() / expected.norm()) <= 1e-5


def test_operator_rejects_bad_inputs() -> None:
    import cupy as cp

    import convtune
    from convtune.errors import InvalidInput, InvalidProblem

    x = cp.zeros((1, 4, 8, 8), dtype=cp.float32)
    w = cp.zeros((2, 4, 3, 3), dtype=cp.float32)
    with pytest.raises(InvalidInput, match="dtype"):
        convtune.conv2d(x.astype(cp.float64), w)
    with pytest.raises(InvalidInput, match="contiguous"):
        convtune.conv2d(cp.zeros((1, 4, 8, 16), dtype=cp.float32)[..., ::2], w)
    with pytest.raises(InvalidInput, match="channels"):
        convtune.conv2d(x, cp.zeros((2, 3, 3, 3), dtype=cp.float32))
    with pytest.raises(InvalidInput, match="4-D"):
        convtune.conv2d(x[0], w)
    with pytest.raises(InvalidProblem, match="H"):
        convtune.conv2d(x, cp.zeros((2, 4, 11, 3), dtype=cp.float32))
    torch = pytest.importorskip("torch")
    with pytest.raises(InvalidInput, match="CUDA"):
        convtune.conv2d(torch.zeros(1, 4, 8, 8), torch.zeros(2, 4, 3, 3))
