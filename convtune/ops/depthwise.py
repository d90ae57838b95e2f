"""Which depthwise plan an operator call runs: the tuning database's best, else the model's best (no torch).

:mod:`convtune.ops.torch` calls :func:`choose_plan` once per (problem, device, path); the answer is cached for
the life of the process, so the hot path never touches the database:

* forward: the config :mod:`convtune.ops.resolver` finds for the problem on this device — the service's answer
  (``convtune.ops.torch.tune(..., url=...)``), else the fastest best row *measured on a GPU* with the current
  kernel source (``convtune tune`` writes it; replay and model rows never serve), read only when lookups are
  on and a database exists — if it is a depthwise configuration this problem's kernels accept;
* otherwise, and for dgrad and wgrad (the tuner measures forward problems), the configuration the time
  model predicts fastest (:mod:`convtune.kernels.depthwise.model`; 2-D gradients:
  :mod:`convtune.kernels.depthwise.conv2d.model_bwd`). Weight gradients use the deterministic mode: bitwise
  repeatable training steps.

float16 / bfloat16 problems run the kernels with 16-bit storage (:mod:`convtune.kernels.depthwise.dtypes`):
the configuration spaces (:mod:`~convtune.kernels.depthwise.space`) enumerate float32 problems, so a 16-bit
problem takes the configurations of its float32 twin that its own plans accept (:data:`REPLAN`).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace
from functools import lru_cache
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise import model, space
from convtune.kernels.depthwise.configs import MODE_DETERMINISTIC, PATHS, VARIANTS_1D
from convtune.kernels.depthwise.conv1d import plan as plan1d
from convtune.kernels.depthwise.conv2d import dgrad as plan2d_dgrad
from convtune.kernels.depthwise.conv2d import fast as plan2d_fast
from convtune.kernels.depthwise.conv2d import model_bwd as model2d_bwd
from convtune.kernels.depthwise.conv2d import packed as plan2d_packed
from convtune.kernels.depthwise.conv2d import wgrad as plan2d_wgrad
from convtune.machine import MachineModel
from convtune.ops import resolver
from convtune.problem import ConvProblem

DATABASE_URL_ENV = resolver.DATABASE_URL_ENV
#: The plan functions that re-validate a float32 twin's configuration for a 16-bit problem: the kernels with
#: 16-bit storage (1-D: the fast variant accepts it, the others refuse with InvalidConfig on ``dtype``).
REPLAN: dict[type, Callable[..., Any]] = {
    plan1d.Depthwise1dPlan: plan1d.plan, plan2d_dgrad.Dw2dDgradPlan: plan2d_dgrad.plan,
    plan2d_wgrad.Dw2dWgradPlan: plan2d_wgrad.plan, plan2d_fast.Dw2dFastPlan: plan2d_fast.plan,
    plan2d_packed.Dw2dPackedPlan: plan2d_packed.plan}
FAMILIES_1D = tuple(f"depthwise1d_{v}" for v in VARIANTS_1D)
FAMILIES_2D = ("depthwise2d_tiled", "depthwise2d_fast", "depthwise2d_packed")


def database_url() -> str | None:
    """The database the resolver reads (:func:`convtune.ops.resolver.database_url`; never created here)."""
    return resolver.database_url()


def database_config(problem_key: str, device_name: str, url: str) -> str | None:
    """The best measured depthwise forward config key of a problem on a device (current kernel versions, GPU
    measurements only); None when absent or the database is unreadable."""
    return resolver.measured_config_key(problem_key, device_name, url, FAMILIES_1D + FAMILIES_2D)


def _plan_of(problem: ConvProblem, config: Any, machine: MachineModel) -> Any:
    from convtune.kernels.registry import get_spec

    return get_spec(config.family, config.direction).plan(problem, config, machine)


def stored_plan(problem: ConvProblem, machine: MachineModel) -> Any | None:
    """The resolver's stored forward plan of ``problem`` on ``machine`` (None when nothing stored fits)."""
    found = resolver.stored(problem, machine, FAMILIES_1D if problem.causal else FAMILIES_2D, validate=_plan_of)
    return None if found is None else _plan_of(problem, found.config, machine)


@lru_cache(maxsize=256)
def model_plan(problem: ConvProblem, machine: MachineModel, path: str = "fwd") -> Any:
    """The plan the time model predicts fastest (1-D: every variant; 2-D: the forward kernels, the input and
    the weight gradient; wgrad: deterministic mode only; 16-bit problems: the module docstring).

    Raises:
        InvalidConfig: an unknown path, or no valid plan.
    """
    if path not in PATHS:
        raise InvalidConfig("path", f"{path!r}: allowed {', '.join(PATHS)}")
    if problem.dtype == "float32":
        plans = _space(problem, machine, path)
    else:
        plans = list(space.replanned(problem, machine, _space(replace(problem, dtype="float32"), machine, path),
                                     lambda twin: REPLAN.get(type(twin))))
    if not plans:
        raise InvalidConfig("problem", f"no valid depthwise {path} configuration for {problem.key()}")
    return min(plans, key=lambda pl: (predict(pl, machine).time_s, pl.config.key()))


def _space(problem: ConvProblem, machine: MachineModel, path: str) -> list[Any]:
    """Every plan of the path's kernels for ``problem`` (wgrad: deterministic mode only)."""
    plans: list[Any]
    if problem.causal:
        plans = [pl for v in VARIANTS_1D for pl in space.enumerate_plans(problem, machine, v, path)
                 if path != "wgrad" or pl.config.mode == MODE_DETERMINISTIC]  # type: ignore[attr-defined]  # wgrad configs
    elif path == "fwd":
        plans = [*space.enumerate_plans_2d(problem, machine), *space.enumerate_plans_2d_fast(problem, machine),
                 *space.enumerate_plans_2d_packed(problem, machine)]
    elif path == "dgrad":
        plans = list(space.enumerate_plans_2d_dgrad(problem, machine))
    else:
        plans = [pl for pl in space.enumerate_plans_2d_wgrad(problem, machine) if pl.config.mode == MODE_DETERMINISTIC]
    return plans


def predict(pl: Any, machine: MachineModel) -> Any:
    """The time model's prediction for any depthwise plan (2-D gradients: :mod:`~convtune.kernels.depthwise.
    model2d_bwd`, the rest :func:`convtune.kernels.depthwise.model.predict`)."""
    if isinstance(pl, model2d_bwd.Dw2dDgradPlan | model2d_bwd.Dw2dWgradPlan):
        return model2d_bwd.predict(pl, machine)
    return model.predict(pl, machine)


@lru_cache(maxsize=256)
def choose_plan(problem: ConvProblem, machine: MachineModel, path: str = "fwd") -> Any:
    """The plan an operator call runs (module docstring); cached per (problem, machine, path)."""
    if path == "fwd":
        stored = stored_plan(problem, machine)
        if stored is not None:
            return stored
    return model_plan(problem, machine, path)


def clear_cache() -> None:
    """Forget every cached choice (e.g. after tuning more problems in this process), the resolver's too."""
    for cached in (model_plan, choose_plan):
        if hasattr(cached, "cache_clear"):  # tests may have replaced one with a plain function
            cached.cache_clear()
    resolver.clear_cache()


resolver.on_clear(lambda: choose_plan.cache_clear() if hasattr(choose_plan, "cache_clear") else None)
