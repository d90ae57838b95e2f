"""The convolution epilogue ``out = act(y + bias[k] (+ residual))`` as a prepared launch (``bias_act.cu``).

Shapes: y, residual, out (N, K, H, W) contiguous, float32 / bfloat16 / float16 (one dtype); bias (K,) float32.
One launch of ⌈N·K·H·W / V / 256⌉ blocks of 256 threads, V = 4 elements per thread where H·W % 4 == 0 and every
pointer is aligned to four elements, else V = 1. Operands ``("y", "bias", "residual", "out")``: ``out`` may be ``y``
(in place); without a residual pass any valid pointer (``y``'s): it is not read.

Traffic: (2 + residual) · N·K·H·W elements plus K bias words — one read and one write of the map, where PyTorch's
BatchNorm, add and ReLU each read and write it.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache

from convtune.errors import InvalidInput
from convtune.kernels.compile import kernel_text, load_kernel
from convtune.kernels.prepared import Launch, PreparedLaunch, driver, grid3, pointers

SOURCE = "bias_act.cu"
THREADS = 256
#: activation name -> the kernel's code
ACTIVATIONS = {"none": 0, "relu": 1, "relu6": 2, "silu": 3, "hardswish": 4, "hardsigmoid": 5, "sigmoid": 6}
DTYPES = ("float32", "bfloat16", "float16")
DTYPE_BYTES = {"float32": 4, "bfloat16": 2, "float16": 2}
MAX_ELEMENTS = 2**31 - 1
VECTOR = 4


@dataclass(frozen=True, slots=True)
class BiasActPlan:
    """What one epilogue launch is built from (the ``plan`` a :class:`PreparedLaunch` keeps)."""

    dtype: str
    N: int
    K: int
    hw: int
    activation: str
    residual: bool
    vector: int
    config: None = None
    problem: None = None

    @property
    def elements(self) -> int:
        return self.N * self.K * self.hw

    def traffic_bytes(self) -> int:
        """DRAM bytes of one call: y read, out written, the residual read, the bias read."""
        return (2 + self.residual) * self.elements * DTYPE_BYTES[self.dtype] + 4 * self.K


def vector_width(hw: int, *pointers_bytes: int, dtype: str) -> int:
    """4 when the map's rows of a channel split into 4-element vectors and every pointer is 4-element aligned."""
    align = VECTOR * DTYPE_BYTES[dtype]
    return VECTOR if hw % VECTOR == 0 and all(p % align == 0 for p in pointers_bytes) else 1


def make_plan(dtype: str, N: int, K: int, hw: int, activation: str, residual: bool, vector: int) -> BiasActPlan:
    """A checked :class:`BiasActPlan`.

    Raises:
        InvalidInput: an unknown dtype or activation, a non-positive size, more than 2³¹ − 1 elements, a vector
            width other than 1 or 4 (4 needs hw % 4 == 0).
    """
    if dtype not in DTYPES:
        raise InvalidInput("dtype", f"{dtype!r}: one of {', '.join(DTYPES)}")
    if activation not in ACTIVATIONS:
        raise InvalidInput("activation", f"{activation!r}: one of {', '.join(ACTIVATIONS)}")
    if min(N, K, hw) < 1 or N * K * hw > MAX_ELEMENTS:
        raise InvalidInput("y", f"N·K·H·W must be in [1, {MAX_ELEMENTS}], got N={N} K={K} H·W={hw}")
    if vector not in (1, VECTOR) or hw % vector:
        raise InvalidInput("vector", f"{vector}: 1, or {VECTOR} where H·W % {VECTOR} == 0 (H·W = {hw})")
    return BiasActPlan(dtype, N, K, hw, activation, bool(residual), vector)


@cache
def source() -> str:
    """The self-contained CUDA text (includes expanded)."""
    return kernel_text(SOURCE)


def entry(dtype: str, vector: int) -> str:
    return f"bias_act_{dtype}_v{vector}"


def prepare(plan: BiasActPlan, device: int) -> PreparedLaunch:
    """The prepared launch of ``plan`` on CUDA device ``device``: operands ``("y", "bias", "residual", "out")``."""
    with driver().use_device(device):
        kernel = load_kernel(source(), entry(plan.dtype, plan.vector))
    total_vec = plan.elements // plan.vector
    step = Launch(kernel, grid3(-(-total_vec // THREADS)), (THREADS, 1, 1), 0, pointers(0, 1, 2, 3),
                  (plan.hw, plan.K, total_vec, ACTIVATIONS[plan.activation], int(plan.residual)))
    return PreparedLaunch(plan=plan, device=device, operands=("y", "bias", "residual", "out"), steps=[step],
                          kernels=kernel, output_shape=(plan.N, plan.K, plan.hw),
                          kind=f"epilogue.bias_act.{plan.activation}" + (".residual" if plan.residual else ""))
