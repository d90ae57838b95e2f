"""GPU correctness of the 16-bit wgmma forward (``igemm_wgmma_half``: bfloat16 and float16 on wgmma m64nNk16)
against float64 and against cuDNN in the same dtype (needs an sm_90 device and torch; the case list is checked
without one).

Per dtype, random problems (:mod:`wgmma_cases`: odd sizes and channel counts, strides, dilation, padding-dominated
maps, batch 1 mostly) × the space's corners (tile_n 64/128/256, m_blocks 1/2, warpgroups 1/2, stages 4/6, splits
1..8, chunks of 64/32/16 channels; folded taps on stems with C ≤ 8: 4-, 8- and 16-byte copies), fresh normal
inputs rounded to the dtype, outputs poisoned with NaN before the
launch. The reference is the float64 convolution of the rounded inputs. Each case's error must meet the family's
tolerance and be at most twice cuDNN's error in the same dtype on the same inputs (+1e-6).
"""

from __future__ import annotations

from functools import partial
from typing import Any

import numpy as np
import pytest
from half_gpu_case import errors_16bit
from wgmma_cases import drawn, precompile_cases, random_fold, random_problem

from convtune.errors import InvalidConfig
from convtune.kernels.igemm_wgmma import half
from convtune.kernels.igemm_wgmma.half import IgemmWgmmaHalfFwdConfig
from convtune.kernels.igemm_wgmma.half_1x1 import IgemmWgmmaHalf1x1FwdConfig
from convtune.kernels.igemm_wgmma.half_1x1_pingpong import IgemmWgmmaHalf1x1PingpongFwdConfig as PingpongConfig
from convtune.kernels.igemm_wgmma.half_1x1_resident import IgemmWgmmaHalf1x1ResidentFwdConfig as ResidentConfig
from convtune.kernels.igemm_wgmma.half_1x1_tma import IgemmWgmmaHalf1x1TmaFwdConfig as Tma1x1Config
from convtune.kernels.igemm_wgmma.launcher import fold_channels
from convtune.kernels.igemm_wgmma.space import plan
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu

CONFIGS = {   # every chunk (64, 32, 16 channels: the 128 / 64 / 32-byte swizzles), B copies that do not fill a pass
    "n128_mi2_wg1_s4_c64": IgemmWgmmaHalfFwdConfig(128, 2, 1, 4, 1, 64),
    "n256_mi1_wg2_s4_c64": IgemmWgmmaHalfFwdConfig(256, 1, 2, 4, 1, 64),
    "n128_mi2_wg2_s4_x2_c32": IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 2, 32),
    "n64_mi1_wg1_s6_x8_c16": IgemmWgmmaHalfFwdConfig(64, 1, 1, 6, 8, 16),
    "n64_mi2_wg2_s4_c32": IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 1, 32),
    "n256_mi1_wg1_s4_x4_c64": IgemmWgmmaHalfFwdConfig(256, 1, 1, 4, 4, 64),
    "n128_mi1_wg2_s6_c16": IgemmWgmmaHalfFwdConfig(128, 1, 2, 6, 1, 16),
    "n64_mi1_wg2_s4_x3_c16": IgemmWgmmaHalfFwdConfig(64, 1, 2, 4, 3, 16),   # 128 B copies for 256 threads
}
#: the 1×1 sibling (x read N-major from NCHW): problems 1×1, stride 1, no padding, H·W a multiple of 4 (8: 16-byte
#: copies, else 8-byte ones)
CONFIGS_1X1 = {
    "1x1_n64_mi1_wg1_s4": IgemmWgmmaHalf1x1FwdConfig(64, 1, 1, 4, 1),
    "1x1_n256_mi1_wg1_s4": IgemmWgmmaHalf1x1FwdConfig(256, 1, 1, 4, 1),
    "1x1_n128_mi2_wg2_s4_x2": IgemmWgmmaHalf1x1FwdConfig(128, 2, 2, 4, 2),
    "1x1_n64_mi1_wg2_s6_x3": IgemmWgmmaHalf1x1FwdConfig(64, 1, 2, 6, 3),
    "1x1_n128_mi1_wg1_s6": IgemmWgmmaHalf1x1FwdConfig(128, 1, 1, 6, 1),
}
#: the persistent 1×1 kernel (filters resident in shared memory, pixel tiles walked by about one block per SM): tiles
#: of 64..256 rows and pixels, 4 and 6 stages, problems from one chunk (C ≤ 64) to several, several tiles a block
CONFIGS_RESIDENT = {
    "res_n64_mi2_wg2_s4": ResidentConfig(64, 2, 2, 4, 1),
    "res_n128_mi1_wg2_s6": ResidentConfig(128, 1, 2, 6, 1),
    "res_n256_mi1_wg1_s4": ResidentConfig(256, 1, 1, 4, 1),
    "res_n64_mi1_wg1_s6": ResidentConfig(64, 1, 1, 6, 1),
    "res_n128_mi2_wg1_s4": ResidentConfig(128, 2, 1, 4, 1),
}
#: the ping-pong 1×1 kernel (two or three warpgroups taking turns over a block's tiles, each covering all 64·MI rows,
#: stores from registers): 64..256 rows, 64 and 128 pixels, 4 and 6 stages
CONFIGS_PINGPONG = {
    "pp_n64_mi4_wg2_s6": PingpongConfig(64, 4, 2, 6, 1),
    "pp_n64_mi2_wg3_s6": PingpongConfig(64, 2, 3, 6, 1),
    "pp_n128_mi2_wg2_s4": PingpongConfig(128, 2, 2, 4, 1),
    "pp_n64_mi1_wg2_s4": PingpongConfig(64, 1, 2, 4, 1),
    "pp_n128_mi1_wg3_s4": PingpongConfig(128, 1, 3, 4, 1),
}
#: the TMA-fed persistent 1×1 kernel (a producer warpgroup, boxes of one image, C a multiple of 64): 1, 2, 4 boxes a
#: stage, one and two consumer warpgroups, 64..256 rows
CONFIGS_TMA_1X1 = {
    "tma1x1_n64_mi2_wg2_s6": Tma1x1Config(64, 2, 2, 6, 1),
    "tma1x1_n128_mi1_wg2_s4": Tma1x1Config(128, 1, 2, 4, 1),
    "tma1x1_n256_mi1_wg1_s4": Tma1x1Config(256, 1, 1, 4, 1),
    "tma1x1_n128_mi2_wg1_s6": Tma1x1Config(128, 2, 1, 6, 1),
}
#: folded taps (row_taps = the problem's S, set per problem): C ≤ 8, chunks holding S·Cq columns
CONFIGS_FOLD = {
    "fold_n64_mi1_wg1_s4_c16": IgemmWgmmaHalfFwdConfig(64, 1, 1, 4, 1, 16),
    "fold_n128_mi2_wg2_s6_c32": IgemmWgmmaHalfFwdConfig(128, 2, 2, 6, 1, 32),
    "fold_n64_mi2_wg2_s4_x2_c64": IgemmWgmmaHalfFwdConfig(64, 2, 2, 4, 2, 64),
    "fold_n256_mi1_wg1_s3_c32": IgemmWgmmaHalfFwdConfig(256, 1, 1, 3, 1, 32),
    "fold_n64_mi1_wg2_s4_x3_c64": IgemmWgmmaHalfFwdConfig(64, 1, 2, 4, 3, 64),
}
#: both operands by TMA (warp-specialised: a producer warpgroup, im2col and tile maps): every chunk, 3 stages, one and
#: two consumer warpgroups, splits (the fp32 workspace)
CONFIGS_TMA = {
    "tma_n256_mi1_wg2_s4_c64": IgemmWgmmaHalfFwdConfig(256, 1, 2, 4, 1, 64, tma=1),
    "tma_n128_mi2_wg2_s4_x2_c32": IgemmWgmmaHalfFwdConfig(128, 2, 2, 4, 2, 32, tma=1),
    "tma_n64_mi1_wg1_s6_x3_c16": IgemmWgmmaHalfFwdConfig(64, 1, 1, 6, 3, 16, tma=1),
    "tma_n128_mi1_wg2_s3_c64": IgemmWgmmaHalfFwdConfig(128, 1, 2, 3, 1, 64, tma=1),
    "tma_n64_mi2_wg1_s4_x8_c32": IgemmWgmmaHalfFwdConfig(64, 2, 1, 4, 8, 32, tma=1),
}
PROBLEMS_PER_CONFIG = 26
PROBLEMS_PER_FOLD_CONFIG = 12
PROBLEMS_PER_1X1_CONFIG = 12
PROBLEMS_PER_TMA_CONFIG = 6   # a dtype
PROBLEMS_PER_RESIDENT_CONFIG = 12
PROBLEMS_PER_PINGPONG_CONFIG = 12
PROBLEMS_PER_TMA_1X1_CONFIG = 12
#: the resident kernel on problems large enough that blocks walk several pixel tiles (the random ones fit one wave)
RESIDENT_WALKS = (
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1", "res_n64_mi2_wg2_s4"),     # the yolov3 head: 3 tiles a block, 4 chunks
    ("N=32 C=100 H=20 W=20 K=77 R=1 S=1", "res_n64_mi1_wg1_s6"),     # 2 row tiles, 4 tiles a block
    ("N=16 C=13 H=30 W=30 K=300 R=1 S=1", "res_n128_mi2_wg1_s4"),    # one chunk per tile, 2 row tiles
    ("N=64 C=200 H=14 W=14 K=130 R=1 S=1", "res_n256_mi1_wg1_s4"),   # 8-byte copies, 3 row tiles
)
#: the ping-pong kernel's walks: the last warpgroup of a block with fewer tiles than warpgroups idles, the others run 2+
PINGPONG_WALKS = (
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1", "pp_n64_mi4_wg2_s6"),     # the yolov3 head: 3 tiles a block, 2 / 1 a wg
    ("N=32 C=100 H=20 W=20 K=77 R=1 S=1", "pp_n64_mi2_wg3_s6"),     # 2 tiles a block of 3 warpgroups
    ("N=16 C=13 H=30 W=30 K=300 R=1 S=1", "pp_n128_mi2_wg2_s4"),    # one chunk per tile, 3 row tiles
    ("N=64 C=200 H=14 W=14 K=130 R=1 S=1", "pp_n128_mi1_wg3_s4"),   # 8-byte copies, 3 row tiles, 3 tiles a block
)
#: the TMA 1×1 kernel's walks: partial last tiles of every image, several row tiles, several tiles a block
TMA_1X1_WALKS = (
    ("N=8 C=256 H=52 W=52 K=255 R=1 S=1", "tma1x1_n64_mi2_wg2_s6"),      # the yolov3 head: 344 tiles, 3 a block
    ("N=32 C=128 H=20 W=20 K=77 R=1 S=1", "tma1x1_n128_mi1_wg2_s4"),     # 4 tiles an image (last 16 pixels), 2 rows
    ("N=16 C=64 H=30 W=32 K=300 R=1 S=1", "tma1x1_n256_mi1_wg1_s4"),     # one chunk per tile, 3 row tiles
)
H200 = MachineModel.preset("h200")
CHUNK_CHANNELS = 64


def _random_1x1(rng: np.random.Generator, config: IgemmWgmmaHalf1x1FwdConfig | ResidentConfig | PingpongConfig,
                dtype: str) -> ConvProblem | None:
    n = int(rng.choice([1, 1, 1, 2, 3, 8, 32]))
    c = int(rng.choice([1, 3, 13, 35, 64, 100, 200, 300]))
    k = int(rng.choice([1, 3, 17, 64, 77, 130, 300]))
    h = int(rng.integers(1, 30 if n < 8 else 12))
    w = int(rng.integers(1, 30 if n < 8 else 12))
    if rng.random() < 0.5:   # H·W a multiple of 8 (16-byte copies)
        while (h * w) % 8:
            w += 1
    else:                    # H·W = 4 mod 8 (8-byte copies): both sides twice an odd number
        h, w = 2 * (h // 2 | 1), 2 * (w // 2 | 1)
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=1, dtype=dtype)
    try:
        plan(problem, config, H200)
    except InvalidConfig:
        return None
    return problem


def _random_tma_1x1(rng: np.random.Generator, config: Tma1x1Config,
                    dtype: str) -> tuple[ConvProblem, Tma1x1Config] | None:
    """A problem of the TMA 1×1 family: C a multiple of 64, H·W of 8, odd K, batch 1 mostly."""
    n = int(rng.choice([1, 1, 1, 2, 3, 8]))
    c = int(rng.choice([64, 128, 192, 256, 320]))
    k = int(rng.choice([1, 3, 17, 64, 77, 130, 255, 300]))
    h, w = int(rng.integers(1, 40)), int(rng.integers(1, 40))
    while (h * w) % 8:
        w += 1
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=1, S=1, dtype=dtype)
    try:
        plan(problem, config, H200)
    except InvalidConfig:
        return None
    return problem, config


def _random_fold(rng: np.random.Generator, base: IgemmWgmmaHalfFwdConfig,
                 dtype: str) -> tuple[ConvProblem, IgemmWgmmaHalfFwdConfig] | None:
    return random_fold(rng, base, lambda p, c: plan(p, c, H200), dtype=dtype)


def _general(rng: np.random.Generator, config: IgemmWgmmaHalfFwdConfig,
             dtype: str) -> tuple[ConvProblem, IgemmWgmmaHalfFwdConfig] | None:
    problem = random_problem(rng, config, lambda p, c: plan(p, c, H200), CHUNK_CHANNELS, dtype=dtype)
    return None if problem is None else (problem, config)


def _one(rng: np.random.Generator, config: IgemmWgmmaHalf1x1FwdConfig | ResidentConfig,
         dtype: str) -> tuple[ConvProblem, IgemmWgmmaHalf1x1FwdConfig | ResidentConfig] | None:
    problem = _random_1x1(rng, config, dtype)
    return None if problem is None else (problem, config)


def _cases() -> list[Any]:
    rng = np.random.default_rng(20261204)
    cases = []
    for dtype in half.DTYPES:
        for draw, configs, count in ((_general, CONFIGS, PROBLEMS_PER_CONFIG),
                                     (_random_fold, CONFIGS_FOLD, PROBLEMS_PER_FOLD_CONFIG),
                                     (_one, CONFIGS_1X1, PROBLEMS_PER_1X1_CONFIG)):
            for name, config in configs.items():
                cases += drawn(f"{dtype}-{name}", count, partial(draw, rng, config, dtype), gpu)
    rng_tma = np.random.default_rng(20261206)   # its own draws: the cases above stay as they were
    for dtype in half.DTYPES:
        for name, config in CONFIGS_TMA.items():
            cases += drawn(f"{dtype}-{name}", PROBLEMS_PER_TMA_CONFIG, partial(_general, rng_tma, config, dtype), gpu)
    # the persistent 1×1 families: random problems from each family's own draws, then its long walks
    for seed, configs, count, walks in ((20261205, CONFIGS_RESIDENT, PROBLEMS_PER_RESIDENT_CONFIG, RESIDENT_WALKS),
                                        (20261207, CONFIGS_PINGPONG, PROBLEMS_PER_PINGPONG_CONFIG, PINGPONG_WALKS),
                                        (20261208, CONFIGS_TMA_1X1, PROBLEMS_PER_TMA_1X1_CONFIG, TMA_1X1_WALKS)):
        rng_walk = np.random.default_rng(seed)
        draw = _random_tma_1x1 if configs is CONFIGS_TMA_1X1 else _one
        for dtype in half.DTYPES:
            for name, config in configs.items():
                cases += drawn(f"{dtype}-{name}", count, partial(draw, rng_walk, config, dtype), gpu)
            for text, name in walks:
                problem = ConvProblem.parse(f"{text} dtype={dtype}")
                cases.append(pytest.param(problem, configs[name], id=f"{dtype}-{name}-walk-{problem.N}", marks=gpu))
    return cases


CASES = _cases()


def test_case_count() -> None:
    for dtype in half.DTYPES:
        problems = [c.values[0] for c in CASES
                    if c.values[0].dtype == dtype and c.values[1].family == "igemm_wgmma_half"]
        assert len(problems) >= 200
        assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_h for p in problems} >= {1, 2, 3}
        assert {p.pad_h for p in problems} >= {0, 1, 2, 3} and any(p.R != p.S for p in problems)
        assert {3, 13, 35, 50} <= {p.C for p in problems} and sum(p.N == 1 for p in problems) >= len(problems) // 3
        assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)   # padding-dominated maps
    assert {c.values[1].splits for c in CASES} >= {1, 2, 3, 4, 8}
    assert {c.values[1].chunk for c in CASES if c.values[1].family == "igemm_wgmma_half"} == {64, 32, 16}
    folds = [c.values for c in CASES if getattr(c.values[1], "row_taps", 1) > 1]
    assert len(folds) == 2 * 5 * PROBLEMS_PER_FOLD_CONFIG
    assert {fold_channels(p) for p, _ in folds} == {2, 4, 8} and {p.S for p, _ in folds} >= {2, 3, 5, 7}
    assert {cfg.splits for _, cfg in folds} >= {1, 2, 3} and any(p.stride_w > 1 for p, _ in folds)
    ones = [c.values for c in CASES if c.values[1].family == "igemm_wgmma_half_1x1"]
    assert len(ones) == 2 * 5 * PROBLEMS_PER_1X1_CONFIG and {p.C for p, _ in ones} >= {1, 3, 13, 200}
    assert {cfg.splits for _, cfg in ones} >= {1, 2, 3} and len(CASES) >= 2 * 200
    assert sum((p.H * p.W) % 8 == 4 for p, _ in ones) >= len(ones) // 4          # the 8-byte copies
    tma = [c.values for c in CASES if getattr(c.values[1], "tma", 0)]
    assert len(tma) == 2 * 5 * PROBLEMS_PER_TMA_CONFIG and {p.stride_w for p, _ in tma} >= {1, 2}
    assert {cfg.splits for _, cfg in tma} >= {1, 2, 3, 8}
    walks = [c.values for c in CASES if c.values[1].family == "igemm_wgmma_half_1x1_resident"]
    assert len(walks) == 2 * (5 * PROBLEMS_PER_RESIDENT_CONFIG + len(RESIDENT_WALKS))
    assert {p.C for p, _ in walks} >= {1, 13, 200}
    assert sum((p.H * p.W) % 8 == 4 for p, _ in walks) >= len(walks) // 4
    walked = [plan(p, c, H200) for p, c in walks]
    assert any(pl.tiles_per_block >= 3 and pl.chunks >= 4 for pl in walked)
    assert any(pl.tiles_per_block >= 2 and pl.m_tiles >= 2 for pl in walked)
    turns = [c.values for c in CASES if c.values[1].family == "igemm_wgmma_half_1x1_pingpong"]
    assert len(turns) == 2 * (5 * PROBLEMS_PER_PINGPONG_CONFIG + len(PINGPONG_WALKS))
    assert {p.C for p, _ in turns} >= {1, 13, 200} and sum((p.H * p.W) % 8 == 4 for p, _ in turns) >= len(turns) // 4
    turned = [plan(p, c, H200) for p, c in turns]
    assert any(pl.tiles_per_block > pl.config.warpgroups and pl.chunks >= 4 for pl in turned)   # 2+ tiles a wg
    assert any(pl.tiles_per_block < pl.config.warpgroups for pl in turned)                       # an idle wg
    boxes = [c.values for c in CASES if c.values[1].family == "igemm_wgmma_half_1x1_tma"]
    assert len(boxes) == 2 * (4 * PROBLEMS_PER_TMA_1X1_CONFIG + len(TMA_1X1_WALKS))
    assert {p.C for p, _ in boxes} >= {64, 256, 320} and sum(p.N == 1 for p, _ in boxes) >= len(boxes) // 4
    boxed = [plan(p, c, H200) for p, c in boxes]
    assert any((p.H * p.W) % pl.config.tile_n for (p, _), pl in zip(boxes, boxed, strict=True))   # partial tiles
    assert any(pl.tiles_per_block >= 3 and pl.chunks >= 4 for pl in boxed)
    assert any(pl.m_tiles >= 2 and pl.tiles_per_block >= 2 for pl in boxed)


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc (sm_90a) in parallel before the first GPU test."""
    precompile_cases(machine, cubin_cache, CASES)


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_igemm_wgmma_half_matches_float64_and_cudnn(problem: ConvProblem, config: IgemmWgmmaHalfFwdConfig, machine,
                                                    precompiled) -> None:
    """Both 16-bit wgmma families (the general kernel and its 1×1 sibling), each through its own launcher."""
    pytest.importorskip("torch")
    ours, cudnn = errors_16bit(problem, plan(problem, config, machine), get_spec(config.family).launcher)
    assert ours <= half.TOLERANCES[problem.dtype], f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    assert ours <= 2 * cudnn + 1e-6, f"ours {ours:.3e} vs cuDNN {cudnn:.3e} for {problem.key()} / {config.key()}"


@gpu
def test_operator_api_runs_a_wgmma_half_config_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    for dtype in (torch.bfloat16, torch.float16):
        x = torch.randn(4, 35, 29, 31, device="cuda").to(dtype)
        w = torch.randn(70, 35, 7, 3, device="cuda").to(dtype)
        for key, kwargs in (("igemm_wgmma_half.fwd tile_n=128 m_blocks=2 warpgroups=1 stages=4 splits=1",
                             {"stride": 2, "padding": (3, 1)}),
                            ("igemm_wgmma_half.fwd tile_n=64 m_blocks=1 warpgroups=2 stages=6 splits=4",
                             {"stride": 1, "padding": 2, "dilation": 2})):
            y = convtune.conv2d(x, w, config=key, **kwargs)
            y2 = convtune.conv2d(x, w, config=key, **kwargs)   # the cache hit: prepared launch and filters
            expected = torch.nn.functional.conv2d(x.double(), w.double(), **kwargs)
            for out in (y, y2):
                assert out.dtype == dtype
                err = float((out.double() - expected).norm() / expected.norm())
                assert err <= half.TOLERANCES[str(dtype).removeprefix("torch.")], (key, err)
        # a stem with folded taps (C = 3: 4 channels a pixel, 7 taps in a 32-column chunk), and the model's choice
        xs = torch.randn(2, 3, 57, 61, device="cuda").to(dtype)
        ws = torch.randn(64, 3, 7, 7, device="cuda").to(dtype)
        expected = torch.nn.functional.conv2d(xs.double(), ws.double(), stride=2, padding=3)
        for key in ("igemm_wgmma_half.fwd tile_n=64 m_blocks=2 warpgroups=2 stages=4 splits=1 chunk=32 row_taps=7",
                    None):
            out = convtune.conv2d(xs, ws, stride=2, padding=3, config=key)
            err = float((out.double() - expected).norm() / expected.norm())
            assert out.dtype == dtype and err <= half.TOLERANCES[str(dtype).removeprefix("torch.")], (key, err)
