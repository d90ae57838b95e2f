"""The packed 2-D depthwise forward (small images): plan rules (every invalid config names its field), the
traffic model and the kernel's dataflow replayed on the CPU against the float64 reference, the space, nvcc
compiles without spills, and (GPU) the kernel against float64 with NaN-poisoned outputs."""

from __future__ import annotations

import random
import sys
import zlib
from pathlib import Path

import numpy as np
import pytest

from convtune.errors import InvalidConfig
from convtune.kernels.compile import expand_includes, nvcc_available, nvcc_compile
from convtune.kernels.config import parse_config_key
from convtune.kernels.depthwise.configs import Dw2dFastFwdConfig as Fast
from convtune.kernels.depthwise.configs import Dw2dPackedFwdConfig as Packed
from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
from convtune.kernels.depthwise.conv2d import packed as plan2d_packed
from convtune.kernels.depthwise.conv2d.packed import plan, traffic_words
from convtune.kernels.depthwise.reference import dw2d_fwd_reference
from convtune.kernels.depthwise.space import enumerate_plans_2d_packed
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.ops.depthwise import model_plan
from convtune.problem import ConvProblem

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from depthwise2d_packed_sim import emulate_dw2d_packed
from dw2d_problems import dw

H200 = MachineModel.preset("h200")


CASES = [
    (dw(2, 5, 7, 7, 3, 3, 1, 1), Packed(4, 1, 32)),            # 7×7, 16-byte copies (4·49 % 4 = 0), tail group
    (dw(1, 6, 7, 7, 3, 3, 1, 1), Packed(3, 7, 32)),            # 4-byte copies (3·49 % 4 ≠ 0), whole plane per item
    (dw(2, 3, 14, 14, 3, 3, 1, 1), Packed(2, 4, 32)),          # row groups with a tail (14 = 3·4 + 2)
    (dw(1, 3, 13, 11, 5, 5, 2, 2), Packed(2, 2, 32)),          # stride 2, odd sizes
    (dw(2, 2, 9, 24, 1, 7, 1, 0, 3), Packed(3, 2, 32)),        # 1×7, row-group tail
    (dw(1, 4, 16, 16, 7, 7, 1, 3), Packed(4, 1, 64)),          # 7×7 taps, pad 3
    (dw(3, 1, 5, 8, 1, 1, 1, 0), Packed(2, 5, 32)),            # 1×1, C = 1
    (dw(1, 2, 20, 20, 3, 3, 2, 0), Packed(1, 3, 32)),          # stride 2 no padding
    (dw(1, 3, 6, 6, 3, 3, 1, 3), Packed(2, 2, 32)),            # padding ≥ R: rows and columns of pure padding
]


@pytest.mark.parametrize(("problem", "config"), CASES, ids=lambda v: v.key() if hasattr(v, "key") else str(v))
def test_dataflow_computes_the_reference_and_the_traffic_model(problem: ConvProblem, config: Packed) -> None:
    pl = plan(problem, config, H200)
    rng = np.random.default_rng(5)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W))
    w = rng.standard_normal((problem.C, 1, problem.R, problem.S))
    ref = dw2d_fwd_reference(x, w, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w))
    for aligned in (True, False):  # a misaligned x takes the 4-byte copies
        counts, y = emulate_dw2d_packed(pl, x, w, x_aligned=aligned)
        assert y is not None and not np.isnan(y).any(), "some outputs were never written"
        np.testing.assert_allclose(y, ref, rtol=1e-12, atol=1e-12)
        assert dict(counts) == traffic_words(pl)
    assert traffic_words(pl)["x"] == problem.input_elements
    assert traffic_words(pl)["y"] == problem.output_elements


INVALID = [
    (dw(1, 2, 7, 7, 3, 3, 1, 1), Packed(4, 8, 32), "rows_per_thread"),          # > P
    (dw(1, 2, 30, 30, 3, 3, 1, 1), Packed(4, 3, 32), "rows_per_thread"),        # 3·30 accumulators
    (dw(1, 2, 7, 7, 3, 3, 1, 1), Packed(4, 1, 48), "threads"),
    (dw(1, 2, 7, 7, 3, 3, 1, 1), Packed(1, 7, 64), "threads"),                  # 1 item, 64 threads
    (dw(1, 2, 32, 32, 3, 3, 1, 1), Packed(4096, 1, 256), "planes"),             # shared memory
    (dw(1, 2, 40, 40, 3, 3, 1, 1), Packed(), "problem"),                        # W > 32
    (ConvProblem.parse("N=1 C=8 H=12 W=12 K=16 R=3 S=3 pad=1 groups=8"), Packed(), "problem"),
]


@pytest.mark.parametrize(("problem", "config", "field"), INVALID, ids=lambda v: v.key() if hasattr(v, "key") else v)
def test_invalid_config_names_its_field(problem: ConvProblem, config: Packed, field: str) -> None:
    with pytest.raises(InvalidConfig) as info:
        plan(problem, config, H200)
    assert info.value.field == field


SMALL = ["N=32 C=384 H=14 W=14 K=384 R=3 S=3 pad=1 groups=384", "N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960",
         "N=8 C=96 H=28 W=28 K=96 R=7 S=7 pad=3 groups=96", "N=8 C=64 H=32 W=32 K=64 R=3 S=3 stride=2 pad=1 groups=64"]


@pytest.mark.parametrize("text", SMALL)
def test_space_is_valid_registered_and_keys_round_trip(text: str) -> None:
    problem = ConvProblem.parse(text)
    plans = list(enumerate_plans_2d_packed(problem, H200))
    assert len(plans) >= 40
    spec = get_spec("depthwise2d_packed")
    assert spec.supports(problem)
    for pl in plans:
        assert parse_config_key(pl.config.key()) == pl.config
        assert pl.smem_bytes <= H200.smem_per_block_bytes
        assert spec.predict_s(pl, H200) > 0
    assert not spec.supports(ConvProblem.parse("N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144"))


def _nvcc_cases() -> list:
    out = []
    for text in SMALL:
        problem = ConvProblem.parse(text)
        plans = list(enumerate_plans_2d_packed(problem, H200))
        worst = max(plans, key=lambda pl: (pl.regs_estimate, pl.config.key()))  # most registers per thread
        out += [pytest.param(problem, pl.config, id=f"{problem.H}x{problem.W}-{pl.config.key().split(' ', 1)[1]}")
                for pl in dict.fromkeys([plans[0], worst, plans[len(plans) // 2]])]
    return out


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: the compile check needs the CUDA toolkit")
@pytest.mark.parametrize(("problem", "config"), _nvcc_cases())
def test_compiles_without_spills(problem: ConvProblem, config: Packed) -> None:
    pl = plan(problem, config, H200)
    res = nvcc_compile(expand_includes(f'#include "{plan2d_packed.SOURCE}"\n') + pl.wrapper(), "sm_90").resources
    r = res[plan2d_packed.ENTRY]
    assert not r.spills, f"{config.key()}: {r.local_bytes} B stack, {r.spill_store_bytes} B spilled"
    assert r.num_regs <= min(255, 65536 // (pl.threads * pl.min_blocks))
    assert r.static_smem_bytes == 0


HALF_CASES = [("N=32 C=960 H=7 W=7 K=960 R=3 S=3 pad=1 groups=960", Packed(32, 7, 32)),
              ("N=32 C=384 H=14 W=14 K=384 R=3 S=3 pad=1 groups=384", Packed(8, 2, 64)),
              ("N=32 C=144 H=56 W=56 K=144 R=3 S=3 pad=1 groups=144", Fast(8, 2, 4, 1, 64)),
              ("N=32 C=96 H=56 W=56 K=96 R=7 S=7 pad=3 groups=96", Fast(8, 4, 8, 2, 32)),
              ("N=8 C=96 H=112 W=112 K=96 R=3 S=3 stride=2 pad=1 groups=96", Fast(8, 2, 4, 1, 64))]


@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_storage_plans_and_traffic(dtype: str) -> None:
    """The 2-D forwards take 16-bit storage: same plans and element counts, half the modelled bytes."""
    for text, config in HALF_CASES:
        p32 = ConvProblem.parse(text)
        p16 = p32.replace(dtype=dtype)
        module = plan2d_packed if isinstance(config, Packed) else plan2d_fast
        pl32, pl16 = module.plan(p32, config, H200), module.plan(p16, config, H200)
        assert module.traffic_words(pl16) == module.traffic_words(pl32)
        assert pl16.grid == pl32.grid and pl16.smem_bytes == pl32.smem_bytes  # shared memory stays fp32
        spec = get_spec(config.family)
        assert spec.predict_s(pl16, H200) <= spec.predict_s(pl32, H200)
        assert spec.supports(p16)  # the tuner measures 16-bit problems too
        # the row enumerates the 16-bit problem's plans from its float32 twin's configurations, as the op chooses
        plans16 = list(spec.enumerate_plans(p16, H200))
        assert plans16 and all(pl.problem == p16 for pl in plans16)
        assert {pl.config for pl in plans16} <= {pl.config for pl in spec.enumerate_plans(p32, H200)}
        assert f"const convtune::{'half16' if dtype == 'float16' else 'bfloat16'}* __restrict__ x" in pl16.source()
    chosen = model_plan(ConvProblem.parse(HALF_CASES[0][0]).replace(dtype=dtype), H200)  # the op's choice
    assert chosen.config.family == "depthwise2d_packed" and chosen.problem.dtype == dtype


@pytest.mark.skipif(not nvcc_available(), reason="nvcc is not on PATH: the compile check needs the CUDA toolkit")
@pytest.mark.parametrize("dtype", ["float16", "bfloat16"])
def test_16bit_instantiations_compile_without_spills(dtype: str) -> None:
    for text, config in HALF_CASES:
        module = plan2d_packed if isinstance(config, Packed) else plan2d_fast
        pl = module.plan(ConvProblem.parse(text).replace(dtype=dtype), config, H200)
        res = nvcc_compile(expand_includes(f'#include "{module.SOURCE}"\n') + pl.wrapper(), "sm_90").resources
        r = res[module.ENTRY]
        assert not r.spills, f"{dtype} {config.key()}: {r.local_bytes} B stack"
        assert r.num_regs <= min(255, 65536 // (pl.threads * pl.min_blocks))


def _gpu_cases() -> list:
    rng = random.Random(20261129)
    problems = [ConvProblem.parse(t) for t in SMALL]
    for _ in range(16):
        r, s, stride, pad = rng.choice([1, 3, 5, 7]), rng.choice([1, 3, 5, 7]), rng.choice([1, 2]), rng.randint(0, 3)
        h, w = rng.randint(max(1, r - 2 * pad), 32), rng.randint(max(1, s - 2 * pad), 32)
        c = rng.choice([1, 3, 8, 17])
        problems.append(dw(rng.choice([1, 2, 3]), c, h, w, r, s, stride, pad))
    cases = []
    for i, problem in enumerate(problems):
        plans = list(enumerate_plans_2d_packed(problem, H200))
        for j, pl in enumerate(dict.fromkeys([plans[0], plans[-1], *rng.sample(plans, min(len(plans), 2))])):
            cases.append(pytest.param(problem, pl.config, id=f"packed-{i}-{j}"))
    return cases


@pytest.mark.gpu
@pytest.mark.parametrize(("problem", "config"), _gpu_cases())
def test_packed_fwd_matches_float64(problem: ConvProblem, config: Packed, machine) -> None:
    import cupy as cp

    from convtune.kernels.reference import relative_error

    pl = plan(problem, config, machine)
    kernel = plan2d_packed.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()) + 7)
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.C, 1, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.C, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    plan2d_packed.launch(pl, kernel, x, w, y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    ref = dw2d_fwd_reference(x, w, (problem.stride_h, problem.stride_w), (problem.pad_h, problem.pad_w))
    err = relative_error(y, ref)
    assert err <= 1e-5, f"relative error {err:.3e} for {problem.key()} / {config.key()}"
    # an input at an odd offset inside its allocation takes the 4-byte copy path
    buf = cp.empty(x.size + 1, dtype=cp.float32)
    xo = buf[1:].reshape(x.shape)
    xo[...] = x
    y.fill(cp.nan)
    plan2d_packed.launch(pl, kernel, xo, w, y)
    cp.cuda.get_current_stream().synchronize()
    assert relative_error(y, ref) <= 1e-5
