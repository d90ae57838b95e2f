"""Storage dtypes of the depthwise kernels: fp32, or fp16 / bf16 storage with fp32 accumulation.

The tensors a kernel reads and writes (x, w, y, dy, dx, dw) are stored in the problem's dtype
(``ConvProblem.dtype``); every tap, sum and accumulator is fp32 and each output is rounded to the storage
type once (``include/storage.cuh``). Weight-gradient partials and atomics stay fp32 whatever the storage
(:data:`FP32_STREAMS`): a 16-bit atomic weight gradient adds into an fp32 workspace that the reduction
kernel converts.

=====================================================  ==================================================
kernels                                                dtypes
=====================================================  ==================================================
1-D ``fast`` (fwd, dgrad, wgrad), fused 1-D backward,  float32, float16, bfloat16 (:data:`STORAGE_DTYPES`)
2-D ``fast`` and ``packed`` forwards, 2-D input and
weight gradients
every other depthwise kernel                           float32
=====================================================  ==================================================

CuPy has no bfloat16 dtype: launchers take a bfloat16 tensor as a ``uint16`` array of its bits.
"""

from __future__ import annotations

from convtune.errors import InvalidConfig
from convtune.problem import ConvProblem

FP32_ONLY: tuple[str, ...] = ("float32",)
STORAGE_DTYPES: tuple[str, ...] = ("float32", "float16", "bfloat16")
#: C++ storage type of each dtype (``include/storage.cuh``).
CUDA_TYPES = {"float32": "float", "float16": "convtune::half16", "bfloat16": "convtune::bfloat16"}
#: CuPy dtype names a launcher accepts for each storage dtype.
ARRAY_DTYPES = {"float32": ("float32",), "float16": ("float16",), "bfloat16": ("bfloat16", "uint16")}
#: Bytes of the fp32 partials, atomics and workspaces of the weight gradients.
ACCUM_BYTES = 4
#: Traffic streams kept in fp32 whatever the storage dtype (partials, atomics, their workspace and reads).
FP32_STREAMS = frozenset({"partials", "reduce_read", "atomics", "ws_zero"})


def check_dtype(problem: ConvProblem, supported: tuple[str, ...], kernel: str) -> None:
    """Raise :class:`InvalidConfig` on ``dtype`` unless ``problem.dtype`` is one of ``supported``.

    Raises:
        InvalidConfig: naming ``dtype`` and the dtypes ``kernel`` supports.
    """
    if problem.dtype not in supported:
        raise InvalidConfig("dtype", f"{kernel} supports {', '.join(supported)}; got {problem.dtype}")


def cuda_type(problem: ConvProblem) -> str:
    """The C++ storage type of the problem's dtype."""
    return CUDA_TYPES[problem.dtype]


def stream_bytes(words: dict[str, int], itemsize: int) -> int:
    """Bytes of a per-stream word count: fp32 streams (:data:`FP32_STREAMS`) at 4 bytes, tensors at
    ``itemsize``."""
    return sum(n * (ACCUM_BYTES if name in FP32_STREAMS else itemsize) for name, n in words.items())
