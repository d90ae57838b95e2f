"""Typed protocols of what the tuner, the benchmarker and the ops rely on in every family.

* :class:`Plan` — a validated configuration for one problem with its derived launch geometry: the fields every
  plan class has (direct, pointwise, Winograd fused/unfused, depthwise 1-D and 2-D);
* :class:`Launcher` — the module a :class:`~convtune.kernels.spec.KernelSpec` row names as ``launcher``: compile
  a plan, prepare its filter operand, launch it on CuPy arrays, its tolerance, and its prepared launch.

Modules satisfy a protocol structurally (mypy checks a module against a Protocol), so no family imports these.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

from convtune.kernels.config import KernelConfig
from convtune.problem import ConvProblem

if TYPE_CHECKING:
    from convtune.kernels.prepared import PreparedLaunch


class Plan(Protocol):
    """What every plan has: the problem and config it validates, and the block shape the benchmarker and the
    resource checks read."""

    @property
    def problem(self) -> ConvProblem: ...

    @property
    def config(self) -> KernelConfig: ...

    @property
    def threads(self) -> int: ...

    @property
    def smem_bytes(self) -> int: ...

    @property
    def regs_estimate(self) -> int: ...


class PlanPreparer(Protocol):
    """A module that turns a validated plan into its prepared launch (every launcher; the gradients' modules)."""

    def prepare_plan(self, pl: Any, device: int = 0, kernels: Any = None, /) -> PreparedLaunch:
        """The plan's prepared launch (``kernels``: its compiled kernels, else compiled)."""
        ...


class Launcher(PlanPreparer, Protocol):
    """The launcher protocol (functions of a module; plans and kernels are each family's own types)."""

    def compile_plan(self, pl: Any, /) -> Any:
        """The plan's compiled kernel(s) for the current device (cached)."""
        ...

    def prepare_filters(self, pl: Any, w: Any, /) -> Any:
        """The filter operand ``launch`` takes, made from the weights ``w`` (CuPy)."""
        ...

    def filters_key(self, pl: Any, /) -> tuple[Any, ...]:
        """Plans with equal keys share one :meth:`prepare_filters` result."""
        ...

    def launch(self, pl: Any, kernel: Any, x: Any, filters: Any, y: Any, stream: Any | None = None, /) -> None:
        """Run the plan on CuPy arrays x, filters into y; allocates nothing."""
        ...

    def tolerance(self, pl: Any, /) -> float:
        """Relative error against float64 the plan must meet to be measured or served."""
        ...
