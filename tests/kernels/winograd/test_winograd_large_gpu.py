"""GPU correctness of the large-filter Winograd family (``winograd_unfused_large``) against float64 (needs a CUDA
device).

Per F(m, r) ∈ {F(2,5), F(4,5), F(2,7)}: 6 GEMM configurations (block and thread tiles, chunk, pipeline depth) × 40
random r×r stride-1 problems (≥ 200 cases each after invalid ones drop), random batch (1..3, sometimes 32), odd channel
counts and sizes down to 1×1 maps with padding, padding 0..r per axis. Outputs are poisoned with NaN before each
launch, inputs are fresh normal draws, the filters are transformed in float64 on the GPU; the family's own gate (its
``tolerance``) is asserted. Then the prepared path: the filter kernel's U equals the CuPy transform's, and
``convtune.conv2d`` with a 5×5 config runs all four launches on the caller's stream.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd_large.launcher import FAMILY, WinogradLargeConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

CONFIGS = {
    (m, r): {
        "k64t128c8": WinogradLargeConfig(m, 64, 128, 8, 8, 8, 3, r),
        "k32t64c16": WinogradLargeConfig(m, 32, 64, 16, 4, 4, 2, r),
        "k128t32c8": WinogradLargeConfig(m, 128, 32, 8, 8, 4, 4, r),
        "k32t32c8": WinogradLargeConfig(m, 32, 32, 8, 4, 4, 2, r),
        "k64t64c16": WinogradLargeConfig(m, 64, 64, 16, 8, 8, 3, r),
        "k128t128c8": WinogradLargeConfig(m, 128, 128, 8, 8, 8, 2, r),
    } for m, r in ((2, 5), (4, 5), (2, 7))
}
PROBLEMS_PER_KERNEL = 40


def _random_problem(rng: np.random.Generator, r: int) -> ConvProblem:
    n = int(rng.choice([1, 1, 2, 3, 32]))
    c = int(rng.integers(1, 70))
    k = int(rng.integers(1, 90))
    pad_h, pad_w = int(rng.integers(0, r + 1)), int(rng.integers(0, r + 1))
    h = int(rng.integers(max(1, r - 2 * pad_h), 45))
    w = int(rng.integers(max(1, r - 2 * pad_w), 45))
    if n == 32:  # keep the big-batch cases small
        c, h, w = min(c, 12), max(min(h, 12), r - 2 * pad_h), max(min(w, 12), r - 2 * pad_w)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=r, pad_h=pad_h, pad_w=pad_w)


def _cases() -> list:
    rng = np.random.default_rng(20261205)
    h200 = MachineModel.preset("h200")
    cases = []
    for (m, r), configs in CONFIGS.items():
        for name, config in configs.items():
            for i in range(PROBLEMS_PER_KERNEL):
                problem = _random_problem(rng, r)
                try:
                    _plan(problem, config, h200)
                except InvalidConfig:
                    continue
                cases.append(pytest.param(problem, config, id=f"f{m}r{r}-{name}-{i}"))
    return cases


def _plan(problem: ConvProblem, config: WinogradLargeConfig, machine):
    return get_spec(FAMILY).plan(problem, config, machine)


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(_plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.mark.parametrize("mr", sorted(CONFIGS))
def test_case_count(mr: tuple[int, int]) -> None:
    assert sum(1 for p in CASES if (p.values[1].m, p.values[1].r) == mr) >= 200


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_winograd_large_matches_float64(problem: ConvProblem, config: WinogradLargeConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    launcher = get_spec(FAMILY).launcher
    pl = _plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    filters = launcher.prepare_filters(pl, w)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, filters, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= launcher.tolerance(pl), f"relative error {err:.3e} for {problem.key()} / {config.key()}"


@pytest.mark.parametrize("mr", sorted(CONFIGS))
def test_filter_kernel_equals_the_cupy_transform(mr: tuple[int, int], machine) -> None:
    import cupy as cp

    from convtune.kernels.winograd import filters
    from convtune.kernels.winograd.launcher import transform_filters

    m, r = mr
    problem = ConvProblem(N=2, C=13, H=17, W=19, K=37, R=r, S=r, pad_h=r // 2, pad_w=r // 2)
    pl = _plan(problem, CONFIGS[mr]["k64t64c16"], machine)
    w = cp.random.default_rng(m).standard_normal((problem.K, problem.C, r, r), dtype=cp.float32)
    layout = filters.layout(pl, 0)
    u = cp.full(layout.words, cp.nan, dtype=cp.float32)
    layout.prep((w.data.ptr, u.data.ptr), cp.cuda.get_current_stream().ptr)
    expected = transform_filters(w, m, pl.cp, pl.kp).ravel()
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.array_equal(u, expected)), float(cp.abs(u - expected).max())


@pytest.mark.parametrize("key", ["N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2", "N=3 C=5 H=9 W=11 K=7 R=5 S=5 pad=1",
                                 "N=4 C=128 H=46 W=46 K=128 R=7 S=7 pad=3"])
def test_conv2d_op_runs_a_large_filter_config(key: str, machine) -> None:
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    problem = ConvProblem.parse(key)
    config = WinogradLargeConfig(m=4 if problem.R == 5 else 2, tile_k=64, tile_t=64, chunk_c=16, thread_k=8,
                                 thread_t=8, stages=3, r=problem.R)
    rng = cp.random.default_rng(7)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = convtune.conv2d(x, w, padding=problem.pad_h, config=config)
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    assert relative_error(y, ref) <= 2e-4
    # the untuned choice on AlexNet's conv2 is this family (the model: 6.25× fewer multiplications)
    if problem.N == 64:
        from convtune.ops.conv2d import model_choice

        assert model_choice(problem, machine).family == FAMILY
