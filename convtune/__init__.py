"""convtune: auto-tuning of GPU convolution kernels driven by I/O lower bounds.

``import convtune`` works without CUDA: CuPy is imported lazily by the kernel modules.
"""

from __future__ import annotations

from convtune.errors import ConvtuneError, InvalidConfig, InvalidProblem
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

__all__ = ["ConvProblem", "ConvtuneError", "InvalidConfig", "InvalidProblem", "MachineModel"]
__version__ = "0.1.0"
