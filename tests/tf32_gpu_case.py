"""One TF32 GPU correctness case, shared by the TF32 wgmma families' GPU tests: fresh normal float32 inputs (seeded by
the problem key), y poisoned with NaN, the plan launched through its family's launcher, errors against the float64
convolution — ours, and the bar it must keep: cuDNN's TF32 error on the same inputs, or the TF32 floor (exact TF32
operands, exact sums) where cuDNN ran the shape on an fp32 algorithm. Needs CuPy on a CUDA device and torch."""

from __future__ import annotations

import zlib
from typing import Any

import pytest

from convtune.problem import ConvProblem


def round_tf32(cp: Any, a: Any) -> Any:
    """float32 -> TF32 as cvt.rna.tf32.f32 rounds (nearest, ties away from zero; 10 mantissa bits kept)."""
    bits = a.view(cp.uint32)
    return ((bits + cp.uint32(0x1000)) & cp.uint32(0xFFFFE000)).view(cp.float32)


def errors_tf32(problem: ConvProblem, pl: Any, launcher: Any) -> tuple[float, float]:
    """(ours, bar) relative L2 errors of ``pl`` on ``problem`` (module docstring); asserts every output written."""
    import cupy as cp

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    kernels = launcher.compile_plan(pl)
    rng = cp.random.default_rng(zlib.crc32(problem.key().encode()))
    x = rng.standard_normal((problem.N, problem.C, problem.H, problem.W), dtype=cp.float32)
    w = rng.standard_normal((problem.K, problem.C, problem.R, problem.S), dtype=cp.float32)
    y = cp.full((problem.N, problem.K, problem.P, problem.Q), cp.nan, dtype=cp.float32)
    launcher.launch(pl, kernels, x, launcher.prepare_filters(pl, w), y)
    cp.cuda.get_current_stream().synchronize()
    assert not bool(cp.isnan(y).any()), "some outputs were never written"
    geometry = {"stride": (problem.stride_h, problem.stride_w), "padding": (problem.pad_h, problem.pad_w),
                "dilation": (problem.dil_h, problem.dil_w)}
    ref = conv2d_reference_gpu(x, w, **geometry)
    ours = relative_error(y, ref)
    tf32_floor = relative_error(conv2d_reference_gpu(round_tf32(cp, x), round_tf32(cp, w), **geometry), ref)
    torch = pytest.importorskip("torch")
    saved = torch.backends.cudnn.allow_tf32
    torch.backends.cudnn.allow_tf32 = True
    try:
        yt = torch.nn.functional.conv2d(torch.from_dlpack(x), torch.from_dlpack(w), None, **geometry)
        torch.cuda.synchronize()
    finally:
        torch.backends.cudnn.allow_tf32 = saved
    cudnn = relative_error(cp.from_dlpack(yt.contiguous()), ref)
    return ours, (cudnn if cudnn >= 0.1 * tf32_floor else tf32_floor)
