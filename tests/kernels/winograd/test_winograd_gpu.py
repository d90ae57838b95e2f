"""GPU correctness of the fused Winograd kernel and the unfused path against float64 (needs a CUDA device).

Per path and m ∈ {2, 4}: 6 configurations (fused: stages 1/2, thread tiles, BN/BK/BC variants; unfused:
GEMM block/thread tiles, chunk, pipeline depth) × 36 random 3×3 stride-1 problems = 216 cases per m,
with random batch (1..3, sometimes 32), odd channel counts and sizes (down to 1×1 images with padding),
padding 0..3. Outputs are poisoned with NaN before each launch; inputs are fresh
normal draws; the filters are transformed in float64 on the GPU. Tolerance per m (F(4,3) amplifies
rounding): relative error ≤ 1e-4 for m = 2, ≤ 1e-3 for m = 4.
"""

from __future__ import annotations

import zlib

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.config import KernelConfig
from convtune.kernels.registry import get_spec
from convtune.kernels.winograd.launcher import WinogradFwdConfig
from convtune.kernels.winograd.unfused import WinogradUnfusedConfig
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
UNFUSED = {
    m: {
        "k64t128c8": WinogradUnfusedConfig(m, 64, 128, 8, 8, 8, 3),
        "k32t64c16": WinogradUnfusedConfig(m, 32, 64, 16, 4, 4, 2),
        "k128t32c8": WinogradUnfusedConfig(m, 128, 32, 8, 8, 4, 4),
        "k32t32c8": WinogradUnfusedConfig(m, 32, 32, 8, 4, 4, 2),
        "k64t64c16": WinogradUnfusedConfig(m, 64, 64, 16, 8, 8, 3),
        "k128t128c8": WinogradUnfusedConfig(m, 128, 128, 8, 8, 8, 2),
    } for m in (2, 4)
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
    for path, table in (("fused", CONFIGS), ("unfused", UNFUSED)):
        for m, configs in table.items():
            for name, config in configs.items():
                for i in range(PROBLEMS_PER_KERNEL):
                    problem = _random_problem(rng)
                    if problem.P < 1 or problem.Q < 1:
                        continue
                    try:
                        _plan(problem, config, h200)
                    except InvalidConfig:
                        continue
                    cases.append(pytest.param(problem, config, id=f"{path}-f{m}-{name}-{i}"))
    return cases


def _plan(problem: ConvProblem, config: KernelConfig, machine):
    return get_spec(config.family).plan(problem, config, machine)


CASES = _cases()


@pytest.fixture(scope="module", autouse=True)
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first test."""
    cubin_cache(_plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.mark.parametrize("family", ["winograd", "winograd_unfused"])
@pytest.mark.parametrize("m", sorted(CONFIGS))
def test_case_count(family: str, m: int) -> None:
    assert sum(1 for p in CASES if p.values[1].m == m and p.values[1].family == family) >= 200


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_winograd_fwd_matches_float64(problem: ConvProblem, config: KernelConfig, machine) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    launcher = get_spec(config.family).launcher
    pl = _plan(problem, config, machine)
    kernel = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, 3, 3), dtype=cp.float32)
    filters = launcher.prepare_filters(pl, w)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernel, x, filters, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = conv2d_reference_gpu(x, w, padding=(problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= TOLERANCE[config.m], f"relative error {err:.3e} for {problem.key()} / {config.key()}"
