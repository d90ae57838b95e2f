"""GPU correctness of the implicit-GEMM TF32 forward kernel against float64 and against cuDNN's TF32 (needs a CUDA
device; the case list itself is checked without one).

Random problems (batch 1 mostly, some up to 32 on small maps; odd map sizes; channels 1..100, rarely a multiple of
8; filters 1..7, non-square; strides 1..3, dilations 1..3, padding 0..3, padding-dominated maps) × the space's corner
configurations (tiles 32..256 × 32..256, tile_k 8/16/32, 1..4 warps per axis, 2..5 stages, splits 1..8), outputs
poisoned with NaN before each launch, fresh normal inputs. Each case's error against float64 must meet
``launcher.TOLERANCE`` and, with torch, be at most twice cuDNN's TF32 error on the same inputs (+1e-6), the issue's
acceptance. Both errors of every case go to ``$CONVTUNE_ERROR_TABLE`` (JSON) when that is set. The filter operand
(TF32-rounded fragment-ordered weights and the gather table) is made by the family's own pack kernel on the GPU.
"""

from __future__ import annotations

import dataclasses
import inspect
import zlib
from typing import Any

import numpy as np
import pytest
from error_tables import write_error_table
from tf32_gpu_case import round_tf32

from convtune.errors import InvalidConfig
from convtune.kernels.igemm import launcher
from convtune.kernels.igemm.launcher import IgemmFwdConfig
from convtune.kernels.igemm.nhwc import IgemmNhwcFwdConfig
from convtune.kernels.igemm.pointwise import IgemmPointwiseFwdConfig
from convtune.kernels.igemm.space import plan
from convtune.kernels.registry import get_spec
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

gpu = pytest.mark.gpu
ERROR_TABLE_ENV = "CONVTUNE_ERROR_TABLE"

#: the space's corners (igemm/space.py): block tiles, warp layouts, chunk depths, pipeline depths and splits
CONFIGS = {
    "128x128k16s3_2x2": IgemmFwdConfig(128, 128, 16, 2, 2, 3, 1),
    "256x128k16s3_4x2": IgemmFwdConfig(256, 128, 16, 4, 2, 3, 1),
    "64x64k32s5_2x2": IgemmFwdConfig(64, 64, 32, 2, 2, 5, 1),
    "32x256k16s3_1x4": IgemmFwdConfig(32, 256, 16, 1, 4, 3, 1),
    "128x32k16s3_4x1_x4": IgemmFwdConfig(128, 32, 16, 4, 1, 3, 4),
    "256x64k8s4_4x1": IgemmFwdConfig(256, 64, 8, 4, 1, 4, 1),
    "32x32k8s2_2x1": IgemmFwdConfig(32, 32, 8, 2, 1, 2, 1),          # 64 threads, 32 pixels: 2 rows per step
    "256x32k8s2_2x1": IgemmFwdConfig(256, 32, 8, 2, 1, 2, 1),        # 64 threads, 4 pixel columns each
    "128x64k32s2_2x2_x8": IgemmFwdConfig(128, 64, 32, 2, 2, 2, 8),
    "64x128k8s4_1x2_x2": IgemmFwdConfig(64, 128, 8, 1, 2, 4, 2),
    "32x64k16s5_1x2": IgemmFwdConfig(32, 64, 16, 1, 2, 5, 1),
    "64x32k8s3_4x1": IgemmFwdConfig(64, 32, 8, 4, 1, 3, 1),          # 128 threads, 64 pixels
    # the NHWC variant (layout change into the workspace, 16-byte A copies; problems get C rounded up to 4·j)
    "nhwc_128x128k16s3_2x2": IgemmNhwcFwdConfig(128, 128, 16, 2, 2, 3, 1),
    "nhwc_64x128k8s2_1x2": IgemmNhwcFwdConfig(64, 128, 8, 1, 2, 2, 1),
    "nhwc_64x64k32s5_2x2_x4": IgemmNhwcFwdConfig(64, 64, 32, 2, 2, 5, 4),
    "nhwc_32x64k8s2_1x2": IgemmNhwcFwdConfig(32, 64, 8, 1, 2, 2, 1),
    "nhwc_256x64k16s3_4x2": IgemmNhwcFwdConfig(256, 64, 16, 4, 2, 3, 1),
    "nhwc_64x64k64s2_2x2_x2": IgemmNhwcFwdConfig(64, 64, 64, 2, 2, 2, 2),
    # the 1×1 variant (problems: 1×1, stride 1, no padding, H·W a multiple of 4)
    "1x1_128x64k16s3_2x2": IgemmPointwiseFwdConfig(128, 64, 16, 2, 2, 3, 1),
    "1x1_32x64k8s2_1x2": IgemmPointwiseFwdConfig(32, 64, 8, 1, 2, 2, 1),
    "1x1_256x128k8s4_4x2_x2": IgemmPointwiseFwdConfig(256, 128, 8, 4, 2, 4, 2),
    "1x1_64x64k32s5_2x2": IgemmPointwiseFwdConfig(64, 64, 32, 2, 2, 5, 1),
}
PROBLEMS_PER_CONFIG = 24
#: work per case (float64 im2col columns and MACs): the file runs in well under 90 s on the H200
MAX_COLUMNS = 3_000_000
MAX_MACS = 150_000_000
H200 = MachineModel.preset("h200")


def _random_problem(rng: np.random.Generator, config: IgemmFwdConfig) -> ConvProblem | None:
    r, s = (int(v) for v in rng.choice([1, 2, 3, 3, 3, 4, 5, 7], size=2))
    if rng.random() < 0.4:
        s = r
    stride = int(rng.choice([1, 1, 2, 3]))
    sh, sw = (stride, stride) if rng.random() < 0.7 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    dil = int(rng.choice([1, 1, 1, 2, 3]))
    dh, dw = (dil, dil) if rng.random() < 0.8 else (int(rng.integers(1, 4)), int(rng.integers(1, 4)))
    ph, pw = int(rng.integers(0, 4)), int(rng.integers(0, 4))
    n = int(rng.choice([1, 1, 1, 1, 2, 3, 5, 8, 32]))
    c = int(rng.choice([1, 3, 5, 7, 13, 16, 21, 35, 50, 64, 100]))
    if config.family == "igemm_nhwc":
        c = -(-c // 4) * 4
    k = int(rng.choice([1, 3, 8, 17, 32, 50, 64, 77, 128, 130, 200, 300]))
    if config.family == "igemm_1x1":
        r = s = sh = sw = dh = dw = 1
        ph = pw = 0
    span_h, span_w = dh * (r - 1) + 1, dw * (s - 1) + 1
    low_h, low_w = max(1, span_h - 2 * ph), max(1, span_w - 2 * pw)
    if rng.random() < 0.2:   # padding-dominated: the map about the size of the padding
        h, w = low_h + int(rng.integers(0, 2)), low_w + int(rng.integers(0, 2))
    else:
        big = 6 if n >= 8 else 40
        h, w = low_h + int(rng.integers(0, big)), low_w + int(rng.integers(0, big))
    if config.family == "igemm_1x1" and (h * w) % 4:
        w += 4 - (h * w) % 4 if h % 2 else 1   # H·W a multiple of 4 (odd h: w + 1..3; even h: w + 1 makes w even)
        if (h * w) % 4:
            h += 1 if h % 2 else 0
            w += 1 if w % 2 else 0
    problem = ConvProblem(N=n, C=c, H=h, W=w, K=k, R=r, S=s, stride_h=sh, stride_w=sw, pad_h=ph, pad_w=pw,
                          dil_h=dh, dil_w=dw, math="tf32")
    for _ in range(40):      # enough reduction chunks for every split
        try:
            plan(problem, config, H200)
            break
        except InvalidConfig as exc:
            if exc.field != "splits":
                return None
            problem = dataclasses.replace(problem, C=problem.C + 8)   # keeps C mod 4
    else:
        return None
    m, kr = problem.N * problem.P * problem.Q, problem.C * problem.R * problem.S
    if m * kr > MAX_COLUMNS or m * kr * problem.K > MAX_MACS:
        return None
    return problem


def _cases() -> list[Any]:
    rng = np.random.default_rng(20260715)
    cases = []
    for name, config in CONFIGS.items():
        made = tries = 0
        while made < PROBLEMS_PER_CONFIG:
            tries += 1
            assert tries < 5000, f"{name}: no random problem takes {config.key()}"
            problem = _random_problem(rng, config)
            if problem is None:
                continue
            cases.append(pytest.param(problem, config, id=f"{name}-{made}", marks=[gpu]))
            made += 1
    return cases


CASES = _cases()
#: one row per case run on this process: written to $CONVTUNE_ERROR_TABLE at the end of the module
RECORDS: list[dict[str, Any]] = []


def test_case_count() -> None:
    runnable = [c for c in CASES if not any(m.name == "xfail" for m in c.marks)]
    assert len(runnable) >= 200 and len(CASES) >= 250
    problems = [c.values[0] for c in runnable]
    assert {p.stride_h for p in problems} >= {1, 2, 3} and {p.dil_h for p in problems} >= {1, 2, 3}
    assert {p.pad_h for p in problems} >= {0, 1, 2, 3} and any(p.R != p.S for p in problems)
    assert {3, 13, 35, 50} <= {p.C for p in problems} and sum(p.N == 1 for p in problems) >= len(problems) // 3
    assert sum(c.values[1].family == "igemm_nhwc" for c in runnable) >= 100
    assert sum(c.values[1].family == "igemm_1x1" for c in runnable) >= 80
    assert any(p.N == 32 for p in problems)
    assert any(p.P * p.Q <= 4 and p.R * p.S >= 9 for p in problems)   # padding-dominated maps
    assert {c.values[1].splits for c in runnable} >= {1, 2, 4, 8}


@pytest.fixture(scope="module")
def precompiled(machine, cubin_cache) -> None:
    """Compile every distinct kernel of this module with nvcc in parallel before the first GPU test."""
    cubin_cache(plan(p.values[0], p.values[1], machine).source() for p in CASES)


@pytest.fixture
def tf32_cudnn():
    """torch (or None) with cuDNN allowed TF32 for the comparison, restored afterwards."""
    try:
        import torch
    except ImportError:
        yield None
        return
    if not torch.cuda.is_available():   # a CPU-only torch beside CuPy: no cuDNN to compare with
        yield None
        return
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    yield torch
    torch.backends.cudnn.allow_tf32 = saved


def _write_error_table() -> None:
    from convtune.kernels.registry import get_spec

    write_error_table(ERROR_TABLE_ENV, RECORDS, "igemm.fwd", get_spec("igemm").source_sha256(),
                      {"tolerance": launcher.TOLERANCE,
                       "acceptance": "ours <= 2 * cudnn_tf32 + 1e-6 (relative L2 errors against float64)"})


@pytest.fixture(scope="module")
def error_table():
    yield RECORDS
    _write_error_table()


@pytest.mark.parametrize(("problem", "config"), CASES)
def test_igemm_fwd_matches_float64_and_cudnn_tf32(problem: ConvProblem, config: IgemmFwdConfig, machine,
                                                  precompiled, tf32_cudnn, error_table, request) -> None:
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    pl = plan(problem, config, machine)
    family = get_spec(config.family).launcher
    kernel = family.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    family.launch(pl, kernel, x, family.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    geometry = {"stride": (problem.stride_h, problem.stride_w), "padding": (problem.pad_h, problem.pad_w),
                "dilation": (problem.dil_h, problem.dil_w)}
    ref = conv2d_reference_gpu(x, w, **geometry)
    ours = relative_error(y, ref)
    # what exact TF32 operands with exact accumulation give: the error floor of any TF32 kernel on these inputs
    tf32_model = relative_error(conv2d_reference_gpu(round_tf32(cp, x), round_tf32(cp, w), **geometry), ref)
    row: dict[str, Any] = {"id": request.node.callspec.id, "problem": problem.key(), "config": config.key(),
                           "ours": ours, "tf32_model": tf32_model, "cudnn": None, "cudnn_tf32": None}
    error_table.append(row)
    assert ours <= launcher.TOLERANCE, f"relative error {ours:.3e} for {problem.key()} / {config.key()}"
    torch = tf32_cudnn
    if torch is None:
        return
    xt, wt = torch.from_dlpack(x), torch.from_dlpack(w)
    yt = torch.nn.functional.conv2d(xt, wt, None, **geometry)
    torch.cuda.synchronize()
    cudnn = relative_error(cp.from_dlpack(yt.contiguous()), ref)
    # cuDNN may run a shape on an fp32 (non-tensor-core) algorithm despite allow_tf32: its error is then far
    # below TF32's and says nothing about TF32 accuracy; the comparison uses the TF32 floor instead
    cudnn_tf32 = cudnn >= 0.1 * tf32_model
    row.update(cudnn=cudnn, cudnn_tf32=cudnn_tf32)
    bar = cudnn if cudnn_tf32 else tf32_model
    assert ours <= 2 * bar + 1e-6, (f"ours {ours:.3e} vs cuDNN TF32 {cudnn:.3e} (TF32 floor {tf32_model:.3e}) for "
                                    f"{problem.key()} / {config.key()}")


@gpu
def test_operator_api_runs_an_igemm_config_on_torch_tensors() -> None:
    torch = pytest.importorskip("torch")
    import convtune

    if "math" not in inspect.signature(convtune.conv2d).parameters:
        pytest.skip("convtune.conv2d has no `math` argument yet: its problems are math='ieee', which the TF32 "
                    "igemm family does not run (conv2d's `math` is being added)")
    g = torch.Generator(device="cuda").manual_seed(7)
    x = torch.randn(3, 36, 15, 13, device="cuda", generator=g)   # C = 36: the NHWC variant takes it too
    w = torch.randn(50, 36, 3, 3, device="cuda", generator=g)
    for key, stride, padding in (
            ("igemm.fwd tile_m=64 tile_n=64 tile_k=32 warps_m=2 warps_n=2 stages=5 splits=1", 1, 1),
            ("igemm.fwd tile_m=128 tile_n=32 tile_k=16 warps_m=4 warps_n=1 stages=3 splits=4", 2, 1),
            ("igemm.fwd tile_m=32 tile_n=64 tile_k=8 warps_m=2 warps_n=1 stages=2 splits=1", 1, (2, 0)),
            ("igemm_nhwc.fwd tile_m=64 tile_n=64 tile_k=16 warps_m=2 warps_n=2 stages=3 splits=1", 1, 1),
            ("igemm_nhwc.fwd tile_m=128 tile_n=64 tile_k=32 warps_m=2 warps_n=2 stages=2 splits=2", 2, (0, 1))):
        expected = torch.nn.functional.conv2d(x.double(), w.double(), stride=stride, padding=padding)
        for _ in range(2):  # the miss, then the cache hit (same prepared launch, cached filters)
            y = convtune.conv2d(x, w, stride=stride, padding=padding, config=key, math="tf32")
            err = float((y.double() - expected).norm() / expected.norm())
            assert err <= launcher.TOLERANCE, f"{key}: {err:.3e}"


@gpu
def test_torch_op_under_pytorchs_tf32_flag_runs_the_tf32_class() -> None:
    """``convtune.ops.torch.conv2d`` with ``cudnn.allow_tf32`` on (PyTorch's default) serves a tf32 problem — the
    model's choice may be the tensor-core family — within the TF32 tolerance; with the flag off, strict fp32."""
    torch = pytest.importorskip("torch")
    ct = pytest.importorskip("convtune.ops.torch")
    g = torch.Generator(device="cuda").manual_seed(11)
    x = torch.randn(8, 64, 28, 28, device="cuda", generator=g)
    w = torch.randn(128, 64, 3, 3, device="cuda", generator=g)
    expected = torch.nn.functional.conv2d(x.double(), w.double(), padding=1)
    saved = torch.backends.cudnn.allow_tf32
    try:
        for flag, tol in ((True, launcher.TOLERANCE), (False, 1e-4)):
            torch.backends.cudnn.allow_tf32 = flag
            y = ct.conv2d(x, w, None, 1, 1)
            err = float((y.double() - expected).norm() / expected.norm())
            assert err <= tol, f"allow_tf32={flag}: {err:.3e}"
    finally:
        torch.backends.cudnn.allow_tf32 = saved
