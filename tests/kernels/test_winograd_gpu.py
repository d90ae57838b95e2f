"""GPU correctness of the fused Winograd kernel against the float64 reference (needs a CUDA device).

Per m ∈ {2, 4}: 6 configurations (stages 1/2, thread tiles, BN/BK/BC variants) × 36 random 3×3 stride-1
problems = 216 cases per m, with random batch (1..3, sometimes 32), odd channel counts and sizes (down to
1×1 images with padding), padding 0..3. Outputs are poisoned with NaN before each launch; inputs are fresh
normal draws; the filters are transformed in float64 on the GPU. Tolerance per m (F(4,3) amplifies
rounding): relative error ≤ 1e-4 for m = 2, ≤ 1e-3 for m = 4.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.winograd.launcher import WinogradFwdConfig, plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

pytestmark = pytest.mark.gpu

TOLERANCE = {2: 1e-4, 4: 1e-3}
CONFIGS = {
    2: {
        "n32k64c8": WinogradFwdConfig(2, 32, 64, 8, 2, 4, 2),
        "n32k64c8s1": WinogradFwdConfig(2, 32, 64, 8, 2, 4, 1),
        "n64k32c4": WinogradFwdConfig(2, 64, 32, 4, 2, 4, 2),
        "n32k32c8": WinogradFwdConfig(2, 32, 32, 8, 1, 4, 2),
        "n16k64c16": WinogradFwdConfig(2, 16, 64, 16, 1, 4, 1),
        "n64k16c2": WinogradFwdConfig(2, 64, 16, 2, 2, 4, 2),
    },
    4: {
        "n32k32c8": WinogradFwdConfig(4, 32, 32, 8, 2, 2, 2),
        "n32k32c8t14": WinogradFwdConfig(4, 32, 32, 8, 1, 4, 2),
        "n32k32c8s1": WinogradFwdConfig(4, 32, 32, 8, 1, 4, 1),
        "n16k32c8": WinogradFwdConfig(4, 16, 32, 8, 1, 4, 1),
        "n32k16c4": WinogradFwdConfig(4, 32, 16, 4, 1, 4, 2),
        "n64k8c2": WinogradFwdConfig(4, 64, 8, 2, 2, 2, 2),
    },
}
PROBLEMS_PER_KERNEL = 36


def _random_problem(rng: np.random.Generator) -> ConvProblem:
    n = int(rng.choice([1, 1, 2, 3, 32]))
    c = int(rng.integers(1, 70))
    k = int(rng.integers(1, 90))
    pad = int(rng.integers(0, 4))
    h = int(rng.integers(max(1, 3 - 2 * pad), 45))
    w = int(rng.integers(max(1, 3 - 2 * pad), 45))
    if n == 32:  # keep the big-batch cases small
        c, h, w = min(c, 12), min(h, 12), min(w, 12)
    return ConvProblem(N=n, C=c, H=h, W=w, K=k, R=3, S=3, pad_h=pad, pad_w=int(rng.integers(0, 4)) if w > 2 else pad)


def _cases() -> list:
    rng = np.random.default_rng(20261130)
    h200 = MachineModel.preset("h200")
    cases = []
    for m, configs in CONFIGS.items():
        for name, config in configs.items():
            for i in range(PROBLEMS_PER_KERNEL):
                problem = _random_problem(rng)
                if problem.P < 1 or problem.Q < 1:
                    continue
                try:
                    plan(problem, config, h200)
                except InvalidConfig:
                    continue
                cases.append(pytest.param(problem, config, id=f"f{m}-{name}-{i}"))
    return cases


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.mark.parametrize("m", sorted(CONFIGS))
def test_case_count(m: int) -> None:
    assert sum(1 for p in CASES if p.values[1].m == m) >= 200


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_winograd_fwd_matches_float64(problem: ConvProblem, config: WinogradFwdConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error
    from convtune.kernels.winograd import launcher

    pl = launcher.plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, 3, 3), dtype=cp.float32)
    u = launcher.transform_filters(w, config.m, pl.cp, pl.kp)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, u, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= TOLERANCE[config.m], f"relative error {err:.3e} for {problem.key()} / {config.key()}"
