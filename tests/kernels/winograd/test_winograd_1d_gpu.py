"""GPU correctness of the 1-D Winograd family (``winograd_unfused_1d``: 1×r and r×1 filters) against float64 (needs a
CUDA device).

Per 1-D F(m, r) ∈ {F(2,3), F(4,3), F(6,3), F(2,5), F(4,5), F(2,7), F(4,7)} and axis (1×r, r×1): 3 GEMM configurations
× 18 random stride-1 problems (≥ 200 cases per filter length), random batch (1..3, sometimes 32), odd channel
counts and sizes down to 1×1 maps, padding 0..r along the filter's axis and 0..2 across it. Outputs are poisoned with
NaN before each launch, inputs are fresh normal draws, the filters are transformed in float64 on the GPU; the family's
gate (its ``tolerance``) is asserted. Then the prepared path: the filter kernel's U equals the CuPy transform's, and
``convtune.conv2d`` with a 1×7 and a 7×1 config runs all four launches on the caller's stream.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd.transforms import POINTS_1D
from convtune.kernels.winograd_1d.launcher import FAMILY, Winograd1dConfig, filter_layout, transform_filters
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

GEMMS = {"k64t128c8": (64, 128, 8, 8, 8, 3), "k32t64c16": (32, 64, 16, 4, 4, 2), "k128t32c8": (128, 32, 8, 8, 4, 4)}
MRA = [(m, r, a) for r in sorted(POINTS_1D) for m in sorted(POINTS_1D[r]) for a in (1, 0)]
PROBLEMS_PER_KERNEL = 18


def _config(m: int, r: int, along_w: int, gemm: tuple[int, ...]) -> Winograd1dConfig:
    return Winograd1dConfig(m, *gemm, r=r, along_w=along_w)


def _random_problem(rng: np.random.Generator, r: int, along_w: int) -> ConvProblem:
    n = int(rng.choice([1, 1, 2, 3, 32]))
    c, k = int(rng.integers(1, 70)), int(rng.integers(1, 90))
    pad, across = int(rng.integers(0, r + 1)), int(rng.integers(0, 3))
    along, other = int(rng.integers(max(1, r - 2 * pad), 45)), int(rng.integers(1, 45))
    if n == 32:  # keep the big-batch cases small
        c, along, other = min(c, 12), max(min(along, 12), r - 2 * pad), min(other, 12)
    if along_w:
        return ConvProblem(N=n, C=c, H=other, W=along, K=k, R=1, S=r, pad_h=across, pad_w=pad)
    return ConvProblem(N=n, C=c, H=along, W=other, K=k, R=r, S=1, pad_h=pad, pad_w=across)


def _plan(problem: ConvProblem, config: Winograd1dConfig, machine):
    return get_spec(FAMILY).plan(problem, config, machine)


def _cases() -> list:
    rng = np.random.default_rng(20261207)
    h200 = MachineModel.preset("h200")
    cases = []
    for m, r, a in MRA:
        for name, gemm in GEMMS.items():
            config = _config(m, r, a, gemm)
            for i in range(PROBLEMS_PER_KERNEL):
                problem = _random_problem(rng, r, a)
                try:
                    _plan(problem, config, h200)
                except InvalidConfig:
                    continue
                cases.append(pytest.param(problem, config, id=f"f{m}r{r}{'w' if a else 'h'}-{name}-{i}"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(_plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.mark.parametrize("r", sorted(POINTS_1D))
def test_case_count(r: int) -> None:
    assert sum(1 for p in CASES if p.values[1].r == r) >= 200


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_winograd_1d_matches_float64(problem: ConvProblem, config: Winograd1dConfig, machine) -> None:
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


@pytest.mark.parametrize(("m", "r", "along_w"), MRA)
def test_filter_kernel_equals_the_cupy_transform(m: int, r: int, along_w: int, machine) -> None:
    import cupy as cp

    shape = (1, r) if along_w else (r, 1)
    problem = ConvProblem(N=2, C=13, H=17, W=19, K=37, R=shape[0], S=shape[1], pad_h=shape[0] // 2,
                          pad_w=shape[1] // 2)
    pl = _plan(problem, _config(m, r, along_w, GEMMS["k32t64c16"]), machine)
    w = cp.random.default_rng(m).standard_normal((problem.K, problem.C, *shape), dtype=cp.float32)
    layout = filter_layout(pl, 0)
    u = cp.full(layout.words, cp.nan, dtype=cp.float32)
    layout.prep((w.data.ptr, u.data.ptr), cp.cuda.get_current_stream().ptr)
    expected = transform_filters(w, m, r, pl.cp, pl.kp).ravel()
    cp.cuda.get_current_stream().synchronize()
    assert bool(cp.array_equal(u, expected)), float(cp.abs(u - expected).max())


@pytest.mark.parametrize("key", ["N=16 C=160 H=17 W=17 K=160 R=1 S=7 pad_h=0 pad_w=3",
                                 "N=8 C=128 H=17 W=17 K=192 R=7 S=1 pad_h=3 pad_w=0",
                                 "N=8 C=384 H=8 W=8 K=384 R=1 S=3 pad_h=0 pad_w=1"])
def test_conv2d_op_runs_a_1d_config(key: str) -> None:
    import cupy as cp

    import convtune
    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    problem = ConvProblem.parse(key)
    r, along_w = (problem.S, 1) if problem.R == 1 else (problem.R, 0)
    config = _config(4, r, along_w, GEMMS["k64t128c8"])
    rng = cp.random.default_rng(7)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = convtune.conv2d(x, w, padding=(problem.pad_h, problem.pad_w), config=config)
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    assert relative_error(y, ref) <= 5e-5
