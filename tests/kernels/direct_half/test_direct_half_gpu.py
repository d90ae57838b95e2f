"""GPU correctness of the 16-bit direct family (``direct_half``: bfloat16 and float16 on the CUDA cores, fp32
accumulation) against float64 and against cuDNN in the same dtype (needs a CUDA device and torch; the case list is
checked without one).

Per dtype, random few-channel problems (C 1–16, C·R·S ≤ 64, filters 1–7 non-square, strides and dilations 1–3,
padding 0–3, padding-dominated maps, batch 1 mostly) × configs covering every k_block and pixels value; fresh normal
inputs rounded to the dtype, y poisoned with NaN before the launch; the reference is the float64 convolution of the
rounded inputs. Each case's error must meet the family's tolerance and be at most twice cuDNN's on the same inputs
(+1e-6).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from half_gpu_case import errors_16bit

from convtune.errors import InvalidConfig
from convtune.kernels.direct_half import launcher
from convtune.kernels.direct_half.launcher import DirectHalfFwdConfig as Config
from convtune.kernels.direct_half.space import plan
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
H200 = MachineModel.preset("h200")
CONFIGS = {
    "k4_p1_32x1": Config(4, 1, 32, 1),
    "k8_p2_8x4": Config(8, 2, 8, 4),
    "k16_p4_16x4": Config(16, 4, 16, 4),
    "k32_p2_32x2": Config(32, 2, 32, 2),
    "k16_p1_8x8": Config(16, 1, 8, 8),
    "k4_p4_16x8": Config(4, 4, 16, 8),
}
PROBLEMS_PER_CONFIG = 36
MAX_MACS = 60_000_000


def _random_problem(rng: np.random.Generator, config: Config, dtype: str) -> ConvProblem | None:
    r, s = (int(v) for v in rng.choice([1, 2, 3, 3, 5, 7], size=2))
    sh, sw = (int(v) for v in rng.choice([1, 1, 2, 3], size=2))
    dh, dw = (int(v) for v in rng.choice([1, 1, 1, 2, 3], size=2))
    ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    n = int(rng.choice([1, 1, 1, 2, 3, 8]))
    c = int(rng.choice([1, 2, 3, 4, 7, 13, 16]))
    k = int(rng.choice([1, 3, 5, 13, 20, 32, 33, 64]))
    low_h, low_w = max(1, dh * (r - 1) + 1 - 2 * ph), max(1, dw * (s - 1) + 1 - 2 * pw)
    if rng.random() < 0.2:   # padding-dominated: the map about the size of the padding
        h, w = low_h + int(rng.integers(0, 2)), low_w + int(rng.integers(0, 2))
    else:
        h, w = low_h + int(rng.integers(0, 60)), low_w + int(rng.integers(0, 60))
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                          dil_h=dh, dil_w=dw, dtype=dtype)
    if problem.macs > MAX_MACS:
        return None
    try:
        plan(problem, config, H200)
    except InvalidConfig:
        return None
    return problem


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261205)
    cases = []
    for dtype in launcher.CUDA_TYPES:
        for name, config in CONFIGS.items():
            drawn = 0
            while drawn < PROBLEMS_PER_CONFIG:
                problem = _random_problem(rng, config, dtype)
                if problem is not None:
                    cases.append(pytest.param(problem, config, id=f"{dtype}-{name}-{drawn}", marks=gpu))
                    drawn += 1
        for text in ("N=64 C=1 H=28 W=28 K=20 R=5 S=5", "N=4 C=3 H=64 W=96 K=13 R=3 S=3 stride=2 pad=1"):
            problem = ConvProblem.parse(f"{text} dtype={dtype}")   # LeNet conv1, an ENet-like stem
            cases.append(pytest.param(problem, CONFIGS["k16_p4_16x4"], id=f"{dtype}-stem-{problem.C}", marks=gpu))
    return cases


CASES = _cases()


def test_case_count() -> None:
    for dtype in launcher.CUDA_TYPES:
        problems = [c.values[0] for c in CASES if c.values[0].dtype == dtype]
        assert len(problems) >= 200
        assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_w for p in problems} >= {1, 2, 3}
        assert {p.pad_h for p in problems} >= {0, 1, 2, 3} and any(p.R != p.S for p in problems)
        assert {1, 3, 13, 16} <= {p.C for p in problems} and sum(p.N == 1 for p in problems) >= len(problems) // 3
        assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)   # padding-dominated maps
        assert {p.K % 4 for p in problems} >= {0, 1, 3}                      # channel tiles past K


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first GPU test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_direct_half_matches_float64_and_cudnn(problem: ConvProblem, config: Config, machine, precompiled) -> None:
    pytest.importorskip("torch")
    ours, cudnn = errors_16bit(problem, plan(problem, config, machine), launcher)
    assert ours <= launcher.TOLERANCES[problem.dtype], f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * cudnn + 1e-6, f"ours {ours:.3e} vs cuDNN {cudnn:.3e} for {problem.key()} / {config.key()}"


@gpu
def test_operator_api_runs_the_family_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(8, 3, 57, 61, device="cuda").to(dtype)
        w = torch.randn(24, 3, 5, 3, device="cuda").to(dtype)     # C·R·S = 45
        key = "direct_half.fwd k_block=8 pixels=2 threads_x=16 threads_y=4"
        kwargs = {"stride": 2, "padding": (3, 2)}
        y, y2 = (convtune.conv2d(x, w, config=key, **kwargs) for _ in range(2))   # the second: a cache hit
        expected = torch.nn.functional.conv2d(x.double(), w.double(), **kwargs)
        for out in (y, y2):
            assert out.dtype == dtype
            err = float((out.double() - expected).norm() / expected.norm())
            assert err <= launcher.TOLERANCES[str(dtype).removeprefix("torch.")], (key, err)
