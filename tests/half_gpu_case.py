"""One 16-bit GPU correctness case, shared by the 16-bit tensor-core families' GPU tests (igemm_half, the wgmma
families): fresh normal inputs rounded to the problem's dtype (seeded by the problem key), y poisoned with NaN, the
plan launched through its family's launcher, errors against the float64 convolution of the rounded inputs — ours and
cuDNN's in the same dtype on the same inputs. Needs torch and CuPy on a CUDA device."""

from __future__ import annotations

import zlib
from typing import Any

from convtune.problem import ConvProblem


def as_cupy_bits(cp: Any, t: Any) -> Any:
    """A 16-bit torch tensor as the CuPy array the launchers take (float16, or the bits of bfloat16)."""
    import torch

    return cp.from_dlpack(t.view(torch.int16) if t.dtype == torch.bfloat16 else t)


def errors_16bit(problem: ConvProblem, pl: Any, launcher: Any) -> tuple[float, float]:
    """(ours, cuDNN's) relative L2 errors of ``pl`` on ``problem`` (module docstring); asserts every output written."""
    import cupy as cp
    import torch

    from convtune.kernels.reference import conv2d_reference_gpu, relative_error

    dtype = {"bfloat16": torch.bfloat16, "float16": torch.float16}[problem.dtype]
    kernels = launcher.compile_plan(pl)
    g = torch.Generator(device="cuda").manual_seed(zlib.crc32(problem.key().encode()))
    x = torch.randn(problem.N, problem.C, problem.H, problem.W, device="cuda", generator=g).to(dtype)
    w = torch.randn(problem.K, problem.C, problem.R, problem.S, device="cuda", generator=g).to(dtype)
    y = torch.full((problem.N, problem.K, problem.P, problem.Q), float("nan"), device="cuda", dtype=dtype)
    launcher.launch(pl, kernels, as_cupy_bits(cp, x), launcher.prepare_filters(pl, as_cupy_bits(cp, w)),
                    as_cupy_bits(cp, y))
    torch.cuda.synchronize()
    assert not bool(torch.isnan(y).any()), "some outputs were never written"
    geometry = {"stride": (problem.stride_h, problem.stride_w), "padding": (problem.pad_h, problem.pad_w),
                "dilation": (problem.dil_h, problem.dil_w)}
    ref = conv2d_reference_gpu(cp.from_dlpack(x.float()), cp.from_dlpack(w.float()), **geometry)
    ours = relative_error(cp.from_dlpack(y.float()), ref)
    yt = torch.nn.functional.conv2d(x, w, None, **geometry)
    torch.cuda.synchronize()
    return ours, relative_error(cp.from_dlpack(yt.float().contiguous()), ref)
