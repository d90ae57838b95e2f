"""convtune: auto-tuning of GPU convolution kernels driven by I/O lower bounds.

``import convtune`` works without CUDA: CuPy is imported lazily by the kernel modules, and
:func:`convtune.conv2d` (:func:`convtune.ops.conv2d.conv2d`) is looked up on first access.

Configs reach the ops through :mod:`convtune.ops.resolver`: :func:`set_config_lookup` turns database lookups off
(or ``CONVTUNE_LOOKUP=off``), :func:`use_config_database` picks the database (or ``CONVTUNE_DATABASE_URL``).
"""

from __future__ import annotations

from typing import Any

from convtune.errors import ConvtuneError, InvalidConfig, InvalidInput, InvalidProblem
from convtune.machine import MachineModel
from convtune.ops.resolver import set_lookup as set_config_lookup
from convtune.ops.resolver import use_database as use_config_database
from convtune.problem import ConvProblem

__all__ = ["ConvProblem", "ConvtuneError", "InvalidConfig", "InvalidInput", "InvalidProblem", "MachineModel",
           "conv2d", "set_config_lookup", "use_config_database"]


#: the installed distribution's version, read on first access (:func:`_version`; importlib.metadata costs ~20 ms)
__version__: str


def __getattr__(name: str) -> Any:
    if name == "__version__":
        globals()["__version__"] = version = _version()
        return version
    # conv2d is the operator API's own function (no wrapper frame on the hot path), imported on first use
    if name == "conv2d":
        from convtune.ops.conv2d import conv2d

        globals()["conv2d"] = conv2d
        return conv2d
    raise AttributeError(f"module 'convtune' has no attribute {name!r}")


def _version() -> str:
    """The installed distribution's version (``version`` in pyproject.toml is the only place it is written); from
    a source tree that was never installed, the pyproject.toml beside the package, else ``"0+unknown"``."""
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version("convtune")
    except PackageNotFoundError:
        import tomllib
        from pathlib import Path

        try:
            project = tomllib.loads((Path(__file__).resolve().parents[1] / "pyproject.toml").read_text("utf-8"))
            return str(project["project"]["version"])
        except (OSError, KeyError, tomllib.TOMLDecodeError):
            return "0+unknown"

