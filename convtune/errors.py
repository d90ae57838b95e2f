"""Typed errors of convtune: one small hierarchy, messages that say what to change."""

from __future__ import annotations


class ConvtuneError(Exception):
    """Base class of every error convtune raises on purpose."""


class InvalidProblem(ConvtuneError, ValueError):
    """A convolution problem is malformed; ``field`` names the offending field.

    The message states the field, the value given and the allowed range, e.g.
    ``"stride_h=0 is out of range: must be an integer >= 1"``.
    """

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class InvalidConfig(ConvtuneError, ValueError):
    """A kernel configuration is not valid for a problem or a machine."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class InvalidInput(ConvtuneError, ValueError):
    """An operator argument (tensor type, dtype, device, rank, layout) is not accepted; ``field`` names it."""

    def __init__(self, field: str, message: str) -> None:
        super().__init__(f"{field}: {message}")
        self.field = field
        self.detail = message


class UnknownMachine(ConvtuneError, KeyError):
    """A machine preset name is not known."""

    def __str__(self) -> str:  # KeyError quotes its argument; keep the message readable
        return str(self.args[0]) if self.args else "unknown machine"


class DeviceUnavailable(ConvtuneError, RuntimeError):
    """No CUDA device (or no CuPy) where one is needed."""


class CompileError(ConvtuneError, RuntimeError):
    """A kernel failed to compile (NVRTC or nvcc); the log is in the message."""


class LaunchError(ConvtuneError, RuntimeError):
    """A kernel launch failed or the kernel faulted."""


class VerificationError(ConvtuneError, RuntimeError):
    """A kernel's output differs from the reference by more than the tolerance."""


class NotFound(ConvtuneError, LookupError):
    """A stored object (problem, device, run, best configuration, ...) does not exist; ``get_*`` raises it."""


class StorageError(ConvtuneError, RuntimeError):
    """A database operation failed (connection, constraint, schema); the driver's error is the cause."""


class UnsupportedDevice(DeviceUnavailable):
    """A CUDA device convtune's kernels cannot run on (compute capability below sm_80: they use ``cp.async``);
    bounds and model predictions for it still work."""
