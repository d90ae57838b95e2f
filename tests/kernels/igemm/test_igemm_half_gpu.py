"""GPU correctness of the 16-bit implicit-GEMM forward (``igemm_half``: bfloat16 and float16 on mma.sync.m16n8k16)
against float64 and against cuDNN in the same dtype (needs a CUDA device and torch; the case list is checked
without one).

Random problems per dtype (batch 1 mostly, some up to 32 on small maps; odd map sizes; channels a multiple of 8 up to
200 and, for igemm_half, about a third not (1, 2, 3, 5, 13, 35, 50: the padded workspace); filters 1..7, non-square;
strides 1..3, dilations 1..3, padding 0..3, padding-dominated maps) × the space's corner configurations (tile_k in
words: 8..64, splits 1..8), fresh normal inputs rounded to the dtype, outputs poisoned with NaN before the launch.
The reference is the float64 convolution of the rounded inputs. Each case's error must meet the family's tolerance
and be at most twice cuDNN's error in the same dtype on the same inputs (+1e-6), the issue's acceptance; every case's
errors go to ``$CONVTUNE_ERROR_TABLE_HALF`` (JSON) when set.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np
import pytest
from error_tables import write_error_table
from half_gpu_case import errors_16bit

from convtune.errors import InvalidConfig
from convtune.kernels.igemm import half
from convtune.kernels.igemm.half import IgemmHalfFwdConfig, IgemmHalfPointwiseFwdConfig
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
ERROR_TABLE_ENV = "CONVTUNE_ERROR_TABLE_HALF"
H200 = MachineModel.preset("h200")
CONFIGS = {
    "128x128k16s3_2x2": IgemmHalfFwdConfig(128, 128, 16, 2, 2, 3, 1),
    "64x128k8s2_1x2": IgemmHalfFwdConfig(64, 128, 8, 1, 2, 2, 1),
    "64x64k32s5_2x2_x4": IgemmHalfFwdConfig(64, 64, 32, 2, 2, 5, 4),
    "32x64k8s2_1x2": IgemmHalfFwdConfig(32, 64, 8, 1, 2, 2, 1),
    "256x64k16s3_4x2": IgemmHalfFwdConfig(256, 64, 16, 4, 2, 3, 1),
    "64x64k64s2_2x2_x2": IgemmHalfFwdConfig(64, 64, 64, 2, 2, 2, 2),
    "128x64k32s2_4x1": IgemmHalfFwdConfig(128, 64, 32, 4, 1, 2, 1),     # the plain main loop (3 blocks per SM)
    "64x256k32s2_2x4_x8": IgemmHalfFwdConfig(64, 256, 32, 2, 4, 2, 8),
    # the 1×1 variant (problems: 1×1, stride 1, no padding, H·W a multiple of 8)
    "1x1_128x64k16s3_2x2": IgemmHalfPointwiseFwdConfig(128, 64, 16, 2, 2, 3, 1),
    "1x1_32x64k8s2_1x2": IgemmHalfPointwiseFwdConfig(32, 64, 8, 1, 2, 2, 1),
    "1x1_256x32k32s2_4x1_x4": IgemmHalfPointwiseFwdConfig(256, 32, 32, 4, 1, 2, 4),
}
PROBLEMS_PER_CONFIG = 14
MAX_MACS = 150_000_000


def _random_problem(rng: np.random.Generator, config: IgemmHalfFwdConfig, dtype: str) -> ConvProblem | None:
    r, s = (int(v) for v in rng.choice([1, 2, 3, 3, 3, 4, 5, 7], size=2))
    if rng.random() < 0.4:
        s = r
    stride = int(rng.choice([1, 1, 2, 3]))
    sh, sw = (stride, stride) if rng.random() < 0.7 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dil = int(rng.choice([1, 1, 1, 2, 3]))
    dh, dw = (dil, dil) if rng.random() < 0.8 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    n = int(rng.choice([1, 1, 1, 1, 2, 3, 5, 8, 32]))
    c = int(rng.choice([8, 16, 24, 40, 64, 72, 128, 200]))
    if config.family == "igemm_half" and rng.random() < 0.35:   # any C: the workspace pads to a multiple of 8
        c = int(rng.choice([1, 2, 3, 5, 13, 35, 50]))
    k = int(rng.choice([1, 3, 8, 17, 32, 50, 64, 77, 128, 130, 200, 300]))
    if config.family == "igemm_half_1x1":
        r = s = sh = sw = dh = dw = 1
        ph = pw = 0
    span_h, span_w = dh * (r - 1) + 1, dw * (s - 1) + 1
    low_h, low_w = max(1, span_h - 2 * ph), max(1, span_w - 2 * pw)
    if rng.random() < 0.2:   # padding-dominated: the map about the size of the padding
        h, w = low_h + int(rng.integers(0, 2)), low_w + int(rng.integers(0, 2))
    else:
        big = 6 if n >= 8 else 40
        h, w = low_h + int(rng.integers(0, big)), low_w + int(rng.integers(0, big))
    if config.family == "igemm_half_1x1" and (h * w) % 8:
        w += next(d for d in range(1, 9) if (h * (w + d)) % 8 == 0 or d == 8)
        h = h if (h * w) % 8 == 0 else 8 * -(-h // 8)
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                          dil_h=dh, dil_w=dw, dtype=dtype)
    for _ in range(40):      # enough reduction chunks for every split
        try:
            half.plan(problem, config, H200)
            break
        except InvalidConfig as exc:
            if exc.field != "splits":
                return None
            problem = dataclasses.replace(problem, C=problem.C + 16)
    else:
        return None
    if problem.macs > MAX_MACS:
        return None
    return problem


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261201)
    cases = []
    for dtype in half.DTYPES:
        for name, config in CONFIGS.items():
            made = tries = 0
            while made < PROBLEMS_PER_CONFIG:
                tries += 1
                assert tries < 5000, f"{name}: no random problem takes {config.key()}"
                problem = _random_problem(rng, config, dtype)
                if problem is None:
                    continue
                cases.append(pytest.param(problem, config, id=f"{dtype}-{name}-{made}", marks=[gpu]))
                made += 1
    return cases


CASES = _cases()
RECORDS: list[dict[str, Any]] = []


def test_case_count() -> None:
    for dtype in half.DTYPES:
        problems = [c.values[0] for c in CASES if c.values[0].dtype == dtype]
        assert len(problems) >= 100
        assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_h for p in problems} >= {1, 2, 3}
        assert {p.pad_h for p in problems} >= {0, 1, 2, 3} and any(p.R != p.S for p in problems)
        assert sum(p.N == 1 for p in problems) >= len(problems) // 3
        assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)   # padding-dominated maps
    assert len(CASES) >= 200
    assert {c.values[1].splits for c in CASES} >= {1, 2, 4, 8}
    assert sum(c.values[1].family == "igemm_half_1x1" for c in CASES) >= 60
    odd = {c.values[0].C for c in CASES if c.values[0].C % 8}
    assert {1, 3} <= odd and len(odd) >= 5 and sum(c.values[0].C % 8 > 0 for c in CASES) >= 40
    plans = [half.plan(c.values[0], c.values[1], H200) for c in CASES]
    assert {pl.pipelined for pl in plans} == {False, True}


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    cubin_cache(half.plan(p.values[0], p.values[1], machine).source() for p in CASES)


def _write_error_table() -> None:
    from convtune.kernels.registry import get_spec

    write_error_table(ERROR_TABLE_ENV, RECORDS, "igemm_half.fwd", get_spec(half.HALF_FAMILY).source_sha256(),
                      {"tolerances": half.TOLERANCES,
                       "acceptance": "ours <= 2 * cudnn + 1e-6 (relative L2 errors against float64, same dtype)"})


@pytest.fixture(scope="module")
def error_table():
    yield RECORDS
    _write_error_table()


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_igemm_half_matches_float64_and_cudnn(problem: ConvProblem, config: IgemmHalfFwdConfig, machine,
                                              precompiled, error_table, request) -> None:
    pytest.importorskip("torch")
    ours, cudnn = errors_16bit(problem, half.plan(problem, config, machine), half)
    error_table.append({"id": request.node.callspec.id, "problem": problem.key(), "config": config.key(),
                        "ours": ours, "cudnn": cudnn})
    assert ours <= half.TOLERANCES[problem.dtype], f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * cudnn + 1e-6, f"ours {ours:.3e} vs cuDNN {cudnn:.3e} for {problem.key()} / {config.key()}"
