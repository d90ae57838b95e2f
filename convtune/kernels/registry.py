"""One table of kernel families: (family, direction) -> KernelSpec.

A spec names the CUDA source (beside its launcher), the ``extern "C"`` entry, the config class, and
the functions the tuner needs to treat every family alike:

* ``enumerate_plans(problem, machine)`` — every valid plan (config + derived launch geometry);
* ``plan(problem, config, machine)`` — validate one config (raises ``InvalidConfig``);
* ``predict_s(plan, machine)`` — the analytic model's time, for ranking only;
* ``traffic_words(plan)`` — modelled global-memory words (loads + stores) of one launch;
* ``supports(problem)`` — whether the family can run the problem at all.

Adding a family adds a folder under ``kernels/`` and one row here.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass
from typing import Any

from convtune.bounds.direct import direct_lower_bound
from convtune.errors import InvalidConfig
from convtune.kernels.compile import KERNELS_DIR, expand_includes, source_hash
from convtune.kernels.config import KernelConfig
from convtune.kernels.direct import launcher as _direct
from convtune.kernels.direct import model as _direct_model
from convtune.kernels.direct import space as _direct_space
from convtune.machine import MachineModel
from convtune.problem import ConvProblem


@dataclass(frozen=True, slots=True)
class KernelSpec:
    family: str
    direction: str
    source: str                   # path under convtune/kernels
    entry: str                    # extern "C" entry of the generated wrapper
    config_class: type[KernelConfig]
    supports: Callable[[ConvProblem], bool]
    enumerate_plans: Callable[[ConvProblem, MachineModel], Iterable[Any]]
    plan: Callable[[ConvProblem, KernelConfig, MachineModel], Any]
    predict_s: Callable[[Any, MachineModel], float]
    traffic_words: Callable[[Any], int]
    onchip_words: Callable[[Any], int]                  # fast memory one block holds (smem + accumulators)
    bound_words: Callable[[ConvProblem, int], float]    # the family's I/O lower bound for fast memory S words
    grid_size: Callable[[ConvProblem], int]             # size of the raw parameter grid before validity checks
    description: str = ""

    @property
    def kind(self) -> str:
        return f"{self.family}.{self.direction}"

    def source_sha256(self) -> str:
        """Kernel version: SHA-256 of the family's source with its includes expanded."""
        return source_hash(expand_includes((KERNELS_DIR / self.source).read_text()))


def _direct_supports(problem: ConvProblem) -> bool:
    return problem.groups == 1 and problem.dtype == "float32" and not problem.causal


REGISTRY: dict[tuple[str, str], KernelSpec] = {
    ("direct", "fwd"): KernelSpec(
        family="direct", direction="fwd", source=_direct.SOURCE, entry=_direct.ENTRY,
        config_class=_direct.DirectFwdConfig, supports=_direct_supports,
        enumerate_plans=_direct_space.enumerate_plans, plan=_direct.plan,
        predict_s=lambda pl, machine: _direct_model.predict(pl, machine).time_s,
        traffic_words=_direct.total_traffic_words,
        onchip_words=_direct.onchip_words,
        bound_words=lambda problem, s_words: direct_lower_bound(problem, s_words).words,
        grid_size=_direct_space.grid_size,
        description="output-stationary direct convolution, fp32 NCHW, any stride/padding/dilation, split-C",
    ),
}


def get_spec(family: str, direction: str = "fwd") -> KernelSpec:
    """The registered spec; raises InvalidConfig naming the allowed families."""
    try:
        return REGISTRY[(family, direction)]
    except KeyError:
        allowed = ", ".join(f"{f}.{d}" for f, d in REGISTRY)
        raise InvalidConfig("family", f"{family}.{direction} is not registered: allowed {allowed}") from None


def specs_for(problem: ConvProblem, families: Iterable[str] | None = None) -> list[KernelSpec]:
    """Forward specs that can run ``problem`` (optionally restricted to ``families``)."""
    wanted = set(families) if families is not None else None
    return [spec for (family, direction), spec in REGISTRY.items()
            if direction == "fwd" and (wanted is None or family in wanted) and spec.supports(problem)]
