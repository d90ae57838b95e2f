"""Which depthwise plan an operator call runs: the tuning database's best, else the model's best (no torch).

:mod:`convtune.torch` calls :func:`choose_plan` once per (problem, device, path); the answer is cached for
the life of the process, so the hot path never touches the database:

* forward: the stored best configuration of the problem on this device (``convtune tune`` writes it), read
  only when a database exists — ``$CONVTUNE_DATABASE_URL``, or the default SQLite file when it is already
  there (nothing is created) — and only if it is a depthwise configuration this problem's kernels accept;
* otherwise, and for dgrad and wgrad (the tuner measures forward problems), the configuration the time
  model predicts fastest (:mod:`convtune.kernels.depthwise.model`; 2-D gradients:
  :mod:`convtune.kernels.depthwise.model2d_bwd`). Weight gradients use the deterministic mode: bitwise
  repeatable training steps.

float16 / bfloat16 problems run the kernels with 16-bit storage (:mod:`convtune.kernels.depthwise.dtypes`):
the configuration spaces (:mod:`~convtune.kernels.depthwise.space`) enumerate float32 problems, so a 16-bit
problem takes the configurations of its float32 twin that its own plans accept (:data:`REPLAN`).
"""

from __future__ import annotations

import os
from dataclasses import replace
from functools import lru_cache
from pathlib import Path
from typing import Any

from convtune.errors import InvalidConfig
from convtune.kernels.depthwise import (
    model,
    model2d_bwd,
    plan1d,
    plan2d_dgrad,
    plan2d_fast,
    plan2d_packed,
    plan2d_wgrad,
    space,
)
from convtune.kernels.depthwise.configs import MODE_DETERMINISTIC, PATHS, VARIANTS_1D
from convtune.machine import MachineModel
from convtune.problem import ConvProblem

DATABASE_URL_ENV = "CONVTUNE_DATABASE_URL"
#: The plan functions that re-validate a float32 twin's configuration for a 16-bit problem: the kernels with
#: 16-bit storage (1-D: the fast variant accepts it, the others refuse with InvalidConfig on ``dtype``).
REPLAN = {plan1d.Depthwise1dPlan: plan1d.plan, plan2d_dgrad.Dw2dDgradPlan: plan2d_dgrad.plan,
          plan2d_wgrad.Dw2dWgradPlan: plan2d_wgrad.plan, plan2d_fast.Dw2dFastPlan: plan2d_fast.plan,
          plan2d_packed.Dw2dPackedPlan: plan2d_packed.plan}
FAMILIES_2D = ("depthwise2d_tiled", "depthwise2d_fast", "depthwise2d_packed")


def database_url() -> str | None:
    """``$CONVTUNE_DATABASE_URL``, else the default SQLite file if it exists (never created here), else None."""
    url = os.environ.get(DATABASE_URL_ENV)
    if url:
        return url
    data_home = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    path = Path(data_home) / "convtune" / "convtune.db"
    return f"sqlite:///{path}" if path.is_file() else None


@lru_cache(maxsize=256)
def database_config(problem_key: str, device_name: str, url: str) -> str | None:
    """The stored best config key of a problem on a device; None when absent or the database is unreadable."""
    try:
        from convtune.storage import repository as repo
        from convtune.storage.session import make_engine, session_scope

        engine = make_engine(url)
        try:
            with session_scope(engine) as session:
                view = repo.find_best_config(session, problem_key=problem_key, device_name=device_name)
                return None if view is None else view.config_key
        finally:
            engine.dispose()
    except Exception:  # no schema yet, a locked file, an unreachable server: fall back to the model
        return None


def _accepts(problem: ConvProblem, family: str, direction: str) -> bool:
    if direction != "fwd":
        return False
    return family.startswith("depthwise1d_") if problem.causal else family in FAMILIES_2D


def stored_plan(problem: ConvProblem, machine: MachineModel) -> Any | None:
    """The database's best forward plan of ``problem`` on ``machine`` (None when there is none that fits)."""
    url = database_url()
    if url is None:
        return None
    key = database_config(problem.key(), machine.name, url)
    if key is None:
        return None
    from convtune.kernels.config import parse_config_key
    from convtune.kernels.registry import get_spec

    try:
        config = parse_config_key(key)
        if not _accepts(problem, config.family, config.direction):
            return None
        return get_spec(config.family, config.direction).plan(problem, config, machine)
    except (InvalidConfig, ValueError):
        return None


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
        plans = []
        for twin in _space(replace(problem, dtype="float32"), machine, path):
            replan = REPLAN.get(type(twin))
            try:
                if replan is not None:
                    plans.append(replan(problem, twin.config, machine))
            except InvalidConfig:
                continue
    if not plans:
        raise InvalidConfig("problem", f"no valid depthwise {path} configuration for {problem.key()}")
    return min(plans, key=lambda pl: (predict(pl, machine).time_s, pl.config.key()))


def _space(problem: ConvProblem, machine: MachineModel, path: str) -> list[Any]:
    """Every plan of the path's kernels for ``problem`` (wgrad: deterministic mode only)."""
    if problem.causal:
        plans = [pl for v in VARIANTS_1D for pl in space.enumerate_plans(problem, machine, v, path)
                 if path != "wgrad" or pl.config.mode == MODE_DETERMINISTIC]
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
    """Forget every cached choice (e.g. after tuning more problems in this process)."""
    for cached in (database_config, model_plan, choose_plan):
        if hasattr(cached, "cache_clear"):  # tests may have replaced one with a plain function
            cached.cache_clear()
