"""PyTorch's own convolution of a problem, timed as the tuner times convtune's kernels: the baseline a result is read
against (``convtune tune``'s cuDNN line, the ``PyTorch ms`` column of :func:`convtune.ops.torch.tune`'s table).

:func:`pytorch_ms` runs ``F.conv2d`` (cuDNN on CUDA) on random tensors of the problem's shapes, dtype and groups
(dense 1, depthwise C), in the problem's precision class (TF32 allowed for a ``tf32`` problem, off for strict
float32), with ``cudnn.benchmark`` on (cuDNN's fastest algorithm for the shape: the strongest baseline), timed by
:func:`convtune.kernels.timing.time_launches` with the tuner's rotation of input and filter sets (and its L2 flush
where even the largest rotation fits in L2). PyTorch's flags are put back as they were. The median in ms.

torch is imported only when :func:`pytorch_ms` runs (the rest of convtune outside :mod:`convtune.ops.torch` never
imports it): without torch the answer is None.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

from convtune.problem import ConvProblem

_TORCH_DTYPES = ("float32", "bfloat16", "float16")


@contextlib.contextmanager
def cudnn_flags(torch: Any, tf32: bool) -> Iterator[None]:
    """``cudnn.benchmark`` on and cuDNN convolutions' TF32 allowed iff ``tf32``, inside the block; both as they were
    after it (on torch ≥ 2.9 through ``torch.backends.cudnn.conv.fp32_precision``, the flag ``allow_tf32`` sets:
    reading ``allow_tf32`` raises once a caller has mixed the two APIs)."""
    cudnn = torch.backends.cudnn
    conv: Any = getattr(cudnn, "conv", None)
    new_api = hasattr(conv, "fp32_precision")
    benchmark = cudnn.benchmark
    precision = conv.fp32_precision if new_api else cudnn.allow_tf32
    try:
        cudnn.benchmark = True
        if new_api:
            conv.fp32_precision = "tf32" if tf32 else "ieee"
        else:
            cudnn.allow_tf32 = tf32
        yield
    finally:
        cudnn.benchmark = benchmark
        if new_api:
            conv.fp32_precision = precision
        else:
            cudnn.allow_tf32 = precision


def pytorch_ms(problem: ConvProblem, device_index: int = 0, reps: int = 30) -> float | None:
    """Median ms of ``F.conv2d`` on ``problem`` on GPU ``device_index`` (module docstring); None without torch or a
    CUDA device, for a causal 1-D problem (no single PyTorch op computes it) or a dtype PyTorch's convolution is
    not timed in here."""
    try:
        import torch
    except ImportError:
        return None
    if not torch.cuda.is_available() or problem.causal or problem.dtype not in _TORCH_DTYPES:
        return None
    from convtune.kernels.timing import L2Flusher, rotation, time_launches

    dtype = getattr(torch, problem.dtype)
    with torch.cuda.device(device_index):
        l2_bytes = torch.cuda.get_device_properties(device_index).L2_cache_size
        rot = rotation(problem.operand_bytes, l2_bytes)   # as the tuner's GPU benchmarker rotates
        generator = torch.Generator(device="cuda").manual_seed(0)
        like: dict[str, Any] = {"device": "cuda", "dtype": dtype, "generator": generator}
        xs = [torch.randn(problem.N, problem.C, problem.H, problem.W, **like) for _ in range(rot.sets)]
        ws = [torch.randn(problem.K, problem.channels_per_group, problem.R, problem.S, **like)
              for _ in range(rot.sets)]   # the filters rotate too, as the tuner's do
        geometry: dict[str, Any] = {"stride": (problem.stride_h, problem.stride_w),
                                    "padding": (problem.pad_h, problem.pad_w),
                                    "dilation": (problem.dil_h, problem.dil_w), "groups": problem.groups}
        conv2d = torch.nn.functional.conv2d
        with cudnn_flags(torch, problem.math == "tf32"):
            conv2d(xs[0], ws[0], **geometry)   # cudnn.benchmark picks its algorithm here, outside the timing
            torch.cuda.synchronize()
            flush = L2Flusher(l2_bytes) if rot.flush else None
            timing = time_launches(lambda i: conv2d(xs[i], ws[i], **geometry), sets=rot.sets, warmup=5, reps=reps,
                                   flush=flush)
        return float(timing.median_ms)
