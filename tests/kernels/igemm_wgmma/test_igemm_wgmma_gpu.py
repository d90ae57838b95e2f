"""GPU correctness of the wgmma TF32 forward against float64 and against cuDNN's TF32 (needs an sm_90 device; the case
list itself is checked without one).

Random problems (batch 1 mostly, up to 32 on small maps; odd map sizes; channels 1..100, rarely a multiple of 8;
filters 1..7, non-square; strides and dilations 1..3, padding 0..3, padding-dominated maps) × the space's corners
(tile_n 64/128/256, m_blocks 1/2, warpgroups 1/2, stages 3/4/6, splits 1..8, chunks of 32/16/8 channels: the
128/64/32-byte swizzles), and stems with folded taps (C ≤ 4: 4-, 8- and 16-byte copies of 1, 2, 4 channels); the 1×1
family (``igemm_wgmma_1x1``: x from NCHW into registers) on random 1×1 problems (H·W a multiple of 4, channel counts
past and short of a chunk, splits); outputs poisoned with NaN before each launch, fresh normal inputs. Each case's
error against float64 must meet ``launcher.TOLERANCE`` and be at most twice cuDNN's TF32 error on the same inputs
(+1e-6), or twice the TF32 floor (exact TF32 operands, exact sums) where cuDNN ran the shape on an fp32 algorithm.
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from tf32_gpu_case import errors_tf32
from wgmma_cases import drawn, precompile_cases, random_fold, random_problem

from convtune.errors import InvalidConfig
from convtune.kernels.igemm_wgmma import launcher
from convtune.kernels.igemm_wgmma.launcher import IgemmWgmmaFwdConfig, fold_channels
from convtune.kernels.igemm_wgmma.space import plan
from convtune.kernels.igemm_wgmma.tf32_1x1 import IgemmWgmma1x1FwdConfig
from convtune.kernels.igemm_wgmma.tf32_1x1_resident import IgemmWgmma1x1ResidentFwdConfig
from convtune.kernels.igemm_wgmma.tf32_1x1_tma import IgemmWgmma1x1TmaFwdConfig
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu

CONFIGS = {   # every chunk (32, 16, 8 channels: the 128 / 64 / 32-byte swizzles), 3 stages
    "n128_mi2_wg1_s4_c32": IgemmWgmmaFwdConfig(128, 2, 1, 4, 1, 32),
    "n256_mi1_wg2_s4_c32": IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32),
    "n128_mi2_wg2_s4_x2_c16": IgemmWgmmaFwdConfig(128, 2, 2, 4, 2, 16),
    "n64_mi1_wg1_s6_x8_c8": IgemmWgmmaFwdConfig(64, 1, 1, 6, 8, 8),
    "n64_mi2_wg2_s3_c16": IgemmWgmmaFwdConfig(64, 2, 2, 3, 1, 16),
    "n256_mi1_wg1_s4_x4_c32": IgemmWgmmaFwdConfig(256, 1, 1, 4, 4, 32),
    "n128_mi1_wg2_s6_c8": IgemmWgmmaFwdConfig(128, 1, 2, 6, 1, 8),
    "n64_mi1_wg2_s4_x3_c32": IgemmWgmmaFwdConfig(64, 1, 2, 4, 3, 32),
}
#: folded taps (row_taps = the problem's S, set per problem): C ≤ 4, chunks holding S·Cq columns
CONFIGS_FOLD = {
    "fold_n64_mi1_wg1_s4_c8": IgemmWgmmaFwdConfig(64, 1, 1, 4, 1, 8),
    "fold_n128_mi2_wg2_s6_c16": IgemmWgmmaFwdConfig(128, 2, 2, 6, 1, 16),
    "fold_n64_mi2_wg2_s4_x2_c32": IgemmWgmmaFwdConfig(64, 2, 2, 4, 2, 32),
    "fold_n256_mi1_wg1_s3_c16": IgemmWgmmaFwdConfig(256, 1, 1, 3, 1, 16),
    "fold_n64_mi1_wg2_s4_x3_c32": IgemmWgmmaFwdConfig(64, 1, 2, 4, 3, 32),
}
#: the 1×1 family (x read from NCHW into registers): 1×1, stride 1, no padding, H·W a multiple of 4
CONFIGS_1X1 = {
    "1x1_n64_mi1_wg1_s4": IgemmWgmma1x1FwdConfig(64, 1, 1, 4, 1),
    "1x1_n256_mi1_wg2_s4": IgemmWgmma1x1FwdConfig(256, 1, 2, 4, 1),
    "1x1_n128_mi2_wg2_s4_x2": IgemmWgmma1x1FwdConfig(128, 2, 2, 4, 2),
    "1x1_n64_mi2_wg1_s6_x3": IgemmWgmma1x1FwdConfig(64, 2, 1, 6, 3),
    "1x1_n128_mi1_wg1_s6": IgemmWgmma1x1FwdConfig(128, 1, 1, 6, 1),
}
#: the persistent 1×1 family (filter rows resident in shared memory, two A register sets): every tile_n, m_blocks and
#: warpgroups, 3/4/6 stages, odd and even chunk counts
CONFIGS_1X1_RESIDENT = {
    "res_n128_mi1_wg1_s4": IgemmWgmma1x1ResidentFwdConfig(128, 1, 1, 4, 1),
    "res_n64_mi2_wg1_s4": IgemmWgmma1x1ResidentFwdConfig(64, 2, 1, 4, 1),
    "res_n128_mi1_wg2_s3": IgemmWgmma1x1ResidentFwdConfig(128, 1, 2, 3, 1),
    "res_n256_mi1_wg1_s4": IgemmWgmma1x1ResidentFwdConfig(256, 1, 1, 4, 1),
    "res_n64_mi2_wg2_s3": IgemmWgmma1x1ResidentFwdConfig(64, 2, 2, 3, 1),
    "res_n64_mi1_wg1_s6": IgemmWgmma1x1ResidentFwdConfig(64, 1, 1, 6, 1),
}
#: long walks of the persistent 1×1 family: many pixel tiles per block, a partial last tile, images straddling tiles
RESIDENT_WALKS = [
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32", IgemmWgmma1x1ResidentFwdConfig(128, 1, 1, 4, 1)),
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32", IgemmWgmma1x1ResidentFwdConfig(64, 1, 2, 3, 1)),
    ("N=32 C=96 H=28 W=28 K=256 R=1 S=1 math=tf32", IgemmWgmma1x1ResidentFwdConfig(256, 1, 1, 4, 1)),
    ("N=7 C=200 H=30 W=34 K=70 R=1 S=1 math=tf32", IgemmWgmma1x1ResidentFwdConfig(64, 2, 1, 4, 1)),
]
#: the TMA-fed persistent 1×1 family (a producer warpgroup, 32 × 32 boxes, stores from the accumulators): every
#: tile_n, one and two m_blocks and consumer warpgroups, 4 and 6 stages, odd and even chunk counts
CONFIGS_1X1_TMA = {
    "tma1x1_n128_mi1_wg2_s4": IgemmWgmma1x1TmaFwdConfig(128, 1, 2, 4, 1),
    "tma1x1_n64_mi2_wg1_s6": IgemmWgmma1x1TmaFwdConfig(64, 2, 1, 6, 1),
    "tma1x1_n256_mi1_wg1_s4": IgemmWgmma1x1TmaFwdConfig(256, 1, 1, 4, 1),
    "tma1x1_n64_mi2_wg2_s4": IgemmWgmma1x1TmaFwdConfig(64, 2, 2, 4, 1),
    "tma1x1_n128_mi1_wg1_s6": IgemmWgmma1x1TmaFwdConfig(128, 1, 1, 6, 1),
}
#: its long walks: the yolov3 head (2 column tiles, 22 tiles an image, a partial last one), many tiles a block
TMA_1X1_WALKS = [
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32", IgemmWgmma1x1TmaFwdConfig(128, 1, 2, 4, 1)),
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1 math=tf32", IgemmWgmma1x1TmaFwdConfig(128, 1, 1, 6, 1)),
    ("N=32 C=96 H=28 W=28 K=256 R=1 S=1 math=tf32", IgemmWgmma1x1TmaFwdConfig(256, 1, 1, 4, 1)),
    ("N=7 C=224 H=30 W=34 K=70 R=1 S=1 math=tf32", IgemmWgmma1x1TmaFwdConfig(64, 1, 2, 6, 1)),
]
#: both operands by TMA (warp-specialised: a producer warpgroup, im2col and tile maps): every chunk, 3 stages, one and
#: two consumer warpgroups, splits
CONFIGS_TMA = {
    "tma_n256_mi1_wg2_s4_c32": IgemmWgmmaFwdConfig(256, 1, 2, 4, 1, 32, tma=1),
    "tma_n128_mi2_wg2_s4_x2_c16": IgemmWgmmaFwdConfig(128, 2, 2, 4, 2, 16, tma=1),
    "tma_n64_mi1_wg1_s6_x3_c8": IgemmWgmmaFwdConfig(64, 1, 1, 6, 3, 8, tma=1),
    "tma_n128_mi1_wg2_s3_c32": IgemmWgmmaFwdConfig(128, 1, 2, 3, 1, 32, tma=1),
    "tma_n64_mi2_wg1_s4_x8_c16": IgemmWgmmaFwdConfig(64, 2, 1, 4, 8, 16, tma=1),
}
PROBLEMS_PER_CONFIG = 26
PROBLEMS_PER_FOLD_CONFIG = 12
PROBLEMS_PER_1X1_CONFIG = 12
PROBLEMS_PER_TMA_CONFIG = 12
PROBLEMS_PER_RESIDENT_CONFIG = 12
PROBLEMS_PER_TMA_1X1_CONFIG = 12
H200 = MachineModel.preset("h200")


def _plan(problem: ConvProblem, config: IgemmWgmmaFwdConfig) -> Any:
    return plan(problem, config, H200)


def _general(rng: np.random.Generator, config: IgemmWgmmaFwdConfig) -> tuple[ConvProblem, IgemmWgmmaFwdConfig] | None:
    problem = random_problem(rng, config, _plan, config.chunk, math="tf32")
    return None if problem is None else (problem, config)


#: the 1×1 families' channel counts: past and short of a 32-channel chunk; the TMA family's whole chunks (1 to 10)
CHANNELS_1X1 = (1, 3, 13, 35, 64, 100, 200, 300)
CHANNELS_TMA_1X1 = (32, 64, 96, 160, 256, 320)


def _one(rng: np.random.Generator, config: Any, channels: tuple[int, ...] = CHANNELS_1X1
         ) -> tuple[ConvProblem, Any] | None:
    """A random 1×1 problem (H·W a multiple of 4; C one of ``channels``) ``config`` takes."""
    n = int(rng.choice([1, 1, 1, 2, 3, 8, 32]))
    h, w = int(rng.integers(1, 30 if n < 8 else 12)), int(rng.integers(1, 30 if n < 8 else 12))
    while (h * w) % 4:
        w += 1
    problem = ConvProblem(N=n, C=int(rng.choice(channels)), H=h, W=w,
                          K=int(rng.choice([1, 3, 17, 64, 77, 130, 300])), R=1, S=1, math="tf32")
    try:
        plan(problem, config, H200)
    except InvalidConfig:
        return None
    return problem, config


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261203)
    cases = []
    for name, config in CONFIGS.items():
        cases += drawn(name, PROBLEMS_PER_CONFIG, partial(_general, rng, config), gpu)
    for name, config in CONFIGS_FOLD.items():
        cases += drawn(name, PROBLEMS_PER_FOLD_CONFIG, partial(random_fold, rng, config, _plan, math="tf32"), gpu)
    for name, config in CONFIGS_1X1.items():
        cases += drawn(name, PROBLEMS_PER_1X1_CONFIG, partial(_one, rng, config), gpu)
    rng_tma = np.random.default_rng(20261205)   # its own draws: the cases above stay as they were
    for name, config in CONFIGS_TMA.items():
        cases += drawn(name, PROBLEMS_PER_TMA_CONFIG, partial(_general, rng_tma, config), gpu)
    rng_res = np.random.default_rng(20261206)
    for name, config in CONFIGS_1X1_RESIDENT.items():
        cases += drawn(name, PROBLEMS_PER_RESIDENT_CONFIG, partial(_one, rng_res, config), gpu)
    cases += [pytest.param(ConvProblem.parse(text), config, id=f"res_walk{i}", marks=gpu)
              for i, (text, config) in enumerate(RESIDENT_WALKS)]
    rng_tma1x1 = np.random.default_rng(20261207)
    for name, config in CONFIGS_1X1_TMA.items():
        cases += drawn(name, PROBLEMS_PER_TMA_1X1_CONFIG, partial(_one, rng_tma1x1, config, CHANNELS_TMA_1X1), gpu)
    cases += [pytest.param(ConvProblem.parse(text), config, id=f"tma1x1_walk{i}", marks=gpu)
              for i, (text, config) in enumerate(TMA_1X1_WALKS)]
    return cases


CASES = _cases()
GENERAL = [c for c in CASES if c.values[1].family == IgemmWgmmaFwdConfig.family]


def test_case_count() -> None:
    ones = [c.values for c in CASES if c.values[1].family == IgemmWgmma1x1FwdConfig.family]
    assert len(ones) == 5 * PROBLEMS_PER_1X1_CONFIG and {p.C for p, _ in ones} >= {1, 3, 35, 200}
    assert {cfg.splits for _, cfg in ones} >= {1, 2, 3} and any(p.N * p.H * p.W % 64 for p, _ in ones)
    problems = [c.values[0] for c in GENERAL]
    assert len(GENERAL) >= 200 + 5 * PROBLEMS_PER_FOLD_CONFIG
    assert {c.values[1].chunk for c in GENERAL} == {32, 16, 8} and {c.values[1].stages for c in GENERAL} == {3, 4, 6}
    folds = [c.values for c in GENERAL if c.values[1].row_taps > 1]
    assert len(folds) == 5 * PROBLEMS_PER_FOLD_CONFIG
    assert {fold_channels(p) for p, _ in folds} == {1, 2, 4} and {p.S for p, _ in folds} >= {2, 3, 5, 7}
    assert {cfg.splits for _, cfg in folds} >= {1, 2, 3} and any(p.stride_w > 1 for p, _ in folds)
    assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_h for p in problems} >= {1, 2, 3}
    assert {p.pad_h for p in problems} >= {0, 1, 2, 3} and any(p.R != p.S for p in problems)
    assert {3, 13, 35, 50} <= {p.C for p in problems} and sum(p.N == 1 for p in problems) >= len(problems) // 3
    assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)   # padding-dominated maps
    assert {c.values[1].splits for c in GENERAL} >= {1, 2, 3, 4, 8}
    tma = [c.values for c in GENERAL if c.values[1].tma]
    assert len(tma) == 5 * PROBLEMS_PER_TMA_CONFIG and {p.stride_w for p, _ in tma} >= {1, 2, 3}
    assert {p.dil_h for p, _ in tma} >= {1, 2} and any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p, _ in tma)
    res = [c.values for c in CASES if c.values[1].family == IgemmWgmma1x1ResidentFwdConfig.family]
    assert len(res) == 6 * PROBLEMS_PER_RESIDENT_CONFIG + len(RESIDENT_WALKS)
    assert {p.C for p, _ in res} >= {1, 3, 35, 200} and any(-(-p.C // 32) % 2 for p, _ in res)   # odd chunk counts
    walks = [plan(p, cfg, H200) for p, cfg in res]
    assert max(pl.tiles_per_block for pl in walks) >= 6 and any(pl.n_tiles > 1 for pl in walks)
    tma1x1 = [c.values for c in CASES if c.values[1].family == IgemmWgmma1x1TmaFwdConfig.family]
    assert len(tma1x1) == 5 * PROBLEMS_PER_TMA_1X1_CONFIG + len(TMA_1X1_WALKS)
    assert {p.C // 32 % 2 for p, _ in tma1x1} == {0, 1} and {p.N for p, _ in tma1x1} >= {1, 8}   # odd chunk counts
    walks = [plan(p, cfg, H200) for p, cfg in tma1x1]
    assert max(pl.tiles_per_block for pl in walks) >= 6 and any(pl.n_tiles > 1 for pl in walks)
    assert any(p.H * p.W % cfg.tile_m for p, cfg in tma1x1)   # a partial last tile of an image


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc (sm_90a) in parallel before the first GPU test."""
    precompile_cases(machine, cubin_cache, CASES)


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_igemm_wgmma_matches_float64_and_cudnn_tf32(problem: ConvProblem, config: IgemmWgmmaFwdConfig, machine,
                                                    precompiled) -> None:
    family = get_spec(config.family).launcher     # the general kernel's or the 1×1 family's launcher
    ours, bar = errors_tf32(problem, plan(problem, config, machine), family)
    assert ours <= launcher.TOLERANCE, f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * bar + 1e-6, f"ours {ours:.3e} vs cuDNN TF32 (or the TF32 floor) {bar:.3e} for " \
                                   f"{problem.key()} / {config.key()}"


@gpu
def test_operator_api_runs_a_wgmma_config_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    x = torch.randn(4, 35, 29, 31, device="cuda")
    w = torch.randn(70, 35, 7, 3, device="cuda")
    for key, kwargs in (("igemm_wgmma.fwd tile_n=128 m_blocks=2 warpgroups=1 stages=4 splits=1",
                         {"stride": 2, "padding": (3, 1)}),
                        ("igemm_wgmma.fwd tile_n=64 m_blocks=1 warpgroups=2 stages=6 splits=4",
                         {"stride": 1, "padding": 2, "dilation": 2}),
                        ("igemm_wgmma.fwd tile_n=128 m_blocks=1 warpgroups=2 stages=3 splits=1 chunk=16 row_taps=1",
                         {"stride": 1, "padding": 1}),
                        # TMA: the maps encoded at the first call, kept at the cache hit (the same workspace pointer
                        # or not: a moved operand is encoded again)
                        ("igemm_wgmma.fwd tile_n=128 m_blocks=1 warpgroups=2 stages=4 splits=1 tma=1",
                         {"stride": 2, "padding": (3, 1)}),
                        ("igemm_wgmma.fwd tile_n=64 m_blocks=2 warpgroups=1 stages=4 splits=3 chunk=16 tma=1",
                         {"stride": 1, "padding": 2, "dilation": 2})):
        y = convtune.conv2d(x, w, config=key, math="tf32", **kwargs)
        y2 = convtune.conv2d(x, w, config=key, math="tf32", **kwargs)   # the cache hit: prepared launch and filters
        expected = torch.nn.functional.conv2d(x.double(), w.double(), **kwargs)
        for out in (y, y2):
            assert float((out.double() - expected).norm() / expected.norm()) <= launcher.TOLERANCE, key
    # the 1×1 family: x read from NCHW (H·W = 28·28), a split among them
    x1, w1 = torch.randn(3, 35, 28, 28, device="cuda"), torch.randn(70, 35, 1, 1, device="cuda")
    expected = torch.nn.functional.conv2d(x1.double(), w1.double())
    for key in ("igemm_wgmma_1x1.fwd tile_n=128 m_blocks=1 warpgroups=2 stages=4 splits=1",
                "igemm_wgmma_1x1.fwd tile_n=64 m_blocks=2 warpgroups=1 stages=4 splits=2"):
        for out in (convtune.conv2d(x1, w1, config=key, math="tf32"), convtune.conv2d(x1, w1, config=key, math="tf32")):
            assert float((out.double() - expected).norm() / expected.norm()) <= launcher.TOLERANCE, key
    # a stem with folded taps (C = 3: 4 channels a pixel, 7 taps in a 32-column chunk), and the model's choice
    xs = torch.randn(2, 3, 57, 61, device="cuda")
    ws = torch.randn(64, 3, 7, 7, device="cuda")
    expected = torch.nn.functional.conv2d(xs.double(), ws.double(), stride=2, padding=3)
    for key in ("igemm_wgmma.fwd tile_n=64 m_blocks=2 warpgroups=2 stages=4 splits=1 chunk=32 row_taps=7", None):
        out = convtune.conv2d(xs, ws, stride=2, padding=3, config=key, math="tf32")
        assert float((out.double() - expected).norm() / expected.norm()) <= launcher.TOLERANCE, key
