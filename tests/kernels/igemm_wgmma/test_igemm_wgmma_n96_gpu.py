"""GPU correctness of the column tiles of 96 and 192 (``igemm_wgmma_n96``: TF32; ``igemm_wgmma_half_n96``: bfloat16
and float16) against float64 and cuDNN in the same class (needs an sm_90 device and torch; the case list is checked
without one).

Random problems (:mod:`wgmma_cases`: odd sizes, channel counts past and short of a chunk, strides, dilation, padding,
padding-dominated maps, batch 1 mostly; K from 1 to 300, so one, two and partial column tiles) × both tiles, one and
two m-blocks and warpgroups, 3/4/6 stages, splits, every chunk, copying and TMA-fed; and AlexNet conv2 (K = 192, the
layer the family is for). Outputs poisoned with NaN, fresh normal inputs. TF32: error ≤ the family's tolerance and
≤ 2× cuDNN TF32's (or the TF32 floor where cuDNN ran fp32) + 1e-6; 16-bit: ≤ the dtype's tolerance and ≤ 2× cuDNN's
in the dtype + 1e-6.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from half_gpu_case import errors_16bit
from tf32_gpu_case import errors_tf32
from wgmma_cases import drawn, precompile_cases, random_problem

from convtune.kernels.igemm_wgmma import half, launcher
from convtune.kernels.igemm_wgmma.n96 import HALF_FAMILY, IgemmWgmmaHalfN96FwdConfig, IgemmWgmmaN96FwdConfig
from convtune.kernels.igemm_wgmma.space import plan
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
H200 = MachineModel.preset("h200")
#: (tile_n, m_blocks, warpgroups, stages, splits, chunk index (0: 128-byte rows, 1: 64, 2: 32), tma)
CORNERS = {
    "n192_mi1_wg2_s4_c0_tma": (192, 1, 2, 4, 1, 0, 1),
    "n192_mi1_wg2_s3_c0": (192, 1, 2, 3, 1, 0, 0),
    "n192_mi1_wg1_s6_x2_c1_tma": (192, 1, 1, 6, 2, 1, 1),
    "n96_mi2_wg2_s4_c0_tma": (96, 2, 2, 4, 1, 0, 1),
    "n96_mi2_wg1_s4_x3_c1": (96, 2, 1, 4, 3, 1, 0),
    "n96_mi1_wg2_s6_c2": (96, 1, 2, 6, 1, 2, 0),
    "n96_mi1_wg1_s3_x8_c2_tma": (96, 1, 1, 3, 8, 2, 1),
    "n192_mi1_wg2_s4_x4_c2": (192, 1, 2, 4, 4, 2, 0),
}
PROBLEMS_PER_CORNER = 8    # a class: 64 TF32, 64 bf16, 64 fp16 random cases
ALEXNET_CONV2 = "N=64 C=64 H=27 W=27 K=192 R=5 S=5 pad=2"


def _config(kind: str, corner: tuple[int, ...]) -> IgemmWgmmaN96FwdConfig | IgemmWgmmaHalfN96FwdConfig:
    tile_n, m_blocks, warpgroups, stages, splits, chunk, tma = corner
    if kind == "tf32":
        return IgemmWgmmaN96FwdConfig(tile_n, m_blocks, warpgroups, stages, splits, launcher.CHUNKS[chunk], tma=tma)
    return IgemmWgmmaHalfN96FwdConfig(tile_n, m_blocks, warpgroups, stages, splits, half.CHUNKS[chunk], tma=tma)


def _draw(rng: np.random.Generator, config: Any, kind: str) -> tuple[ConvProblem, Any] | None:
    extra = {"math": "tf32"} if kind == "tf32" else {"dtype": kind}
    problem = random_problem(rng, config, lambda p, c: plan(p, c, H200), config.chunk, **extra)
    return None if problem is None else (problem, config)


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261208)
    cases = []
    for kind in ("tf32", *half.DTYPES):
        for name, corner in CORNERS.items():
            cases += drawn(f"{kind}-{name}", PROBLEMS_PER_CORNER, partial(_draw, rng, _config(kind, corner), kind), gpu)
        extra = "math=tf32" if kind == "tf32" else f"dtype={kind}"
        for name in ("n192_mi1_wg2_s4_c0_tma", "n192_mi1_wg2_s3_c0"):
            cases.append(pytest.param(ConvProblem.parse(f"{ALEXNET_CONV2} {extra}"), _config(kind, CORNERS[name]),
                                      id=f"{kind}-alexnet_conv2-{name}", marks=gpu))
    return cases


CASES = _cases()


def test_case_count() -> None:
    for kind in ("tf32", *half.DTYPES):
        values = [c.values for c in CASES if kind in (c.values[0].dtype, c.values[0].math)]
        assert len(values) == len(CORNERS) * PROBLEMS_PER_CORNER + 2
        problems = [p for p, _ in values]
        assert {cfg.tile_n for _, cfg in values} == {96, 192} and {cfg.tma for _, cfg in values} == {0, 1}
        assert {cfg.splits for _, cfg in values} >= {1, 2, 3, 4, 8} and {cfg.stages for _, cfg in values} == {3, 4, 6}
        assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_h for p in problems} >= {1, 2}
        assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)          # padding-dominated maps
        assert sum(p.N == 1 for p in problems) >= len(problems) // 4
        plans = [plan(p, cfg, H200) for p, cfg in values]
        assert any(pl.n_tiles >= 2 and p.K % pl.config.tile_n for (p, _), pl in zip(values, plans, strict=True))
        assert any(pl.config.tile_n > p.K for (p, _), pl in zip(values, plans, strict=True))


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc (sm_90a) in parallel before the first GPU test."""
    precompile_cases(machine, cubin_cache, CASES)


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_n96_tiles_match_float64_and_cudnn(problem: ConvProblem, config: Any, machine, precompiled) -> None:
    pytest.importorskip("torch")
    pl = plan(problem, config, machine)
    family = get_spec(config.family).launcher
    if config.family == HALF_FAMILY:
        ours, bar = errors_16bit(problem, pl, family)
        tolerance = half.TOLERANCES[problem.dtype]
    else:
        ours, bar = errors_tf32(problem, pl, family)
        tolerance = launcher.TOLERANCE
    assert ours <= tolerance, f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * bar + 1e-6, f"ours {ours:.3e} vs cuDNN {bar:.3e} for {problem.key()} / {config.key()}"
