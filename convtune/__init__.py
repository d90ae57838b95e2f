"""convtune: auto-tuning of GPU convolution kernels driven by I/O lower bounds.

``import convtune`` works without CUDA: CuPy is imported lazily by the kernel modules.
"""

from __future__ import annotations

from typing import Any

from convtune.errors import ConvtuneError, InvalidConfig, InvalidInput, InvalidProblem
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["ConvProblem", "ConvtuneError", "InvalidConfig", "InvalidInput", "InvalidProblem", "MachineModel",
           "conv2d"]


def conv2d(x: Any, w: Any, stride: Any = 1, padding: Any = 0, dilation: Any = 1, config: Any = None,
           algorithm: str = "auto", cache_filters: bool = False) -> Any:
    """GPU conv2d forward (fp32 NCHW); see :func:`convtune.kernels.ops.conv2d`. Imports CuPy on first call."""
    from convtune.kernels.ops import conv2d as _conv2d

    return _conv2d(x, w, stride=stride, padding=padding, dilation=dilation, config=config, algorithm=algorithm,
                   cache_filters=cache_filters)
__version__ = "0.1.0"
